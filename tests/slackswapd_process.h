// Test helpers that run the real `slackswapd` on loopback: a process fixture
// that starts it on free ports and reads its JSON log lines, a blocking HTTP
// GET for its metrics port, a parser for the Prometheus text format, and a
// runner for other binaries (the `slackswap` CLI, promtool).
//
//   SlackswapdProcess server({"--threads=1"});
//   ASSERT_TRUE(server.started()) << server.error();
//   auto channel = grpc::CreateChannel(server.target(),
//                                      grpc::InsecureChannelCredentials());
//   ...
//   HttpResponse r = HttpGet(server.metrics_port(), "/metrics");
//   server.SendSignal(SIGTERM);
//   EXPECT_EQ(server.Wait(), 0);
//
// Every wait is bounded; nothing sleeps for a fixed time.
#ifndef SLACKSWAP_TESTS_SLACKSWAPD_PROCESS_H_
#define SLACKSWAP_TESTS_SLACKSWAPD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace slackswap {
namespace testutil {

using SteadyClock = std::chrono::steady_clock;

// One line the server wrote on stderr, and when this process read it.
struct LogLine {
  std::string text;
  SteadyClock::time_point read_at;
  // Its position in the log: the `from` that waits for the lines after it is
  // index + 1.
  size_t index = 0;
};

// A running slackswapd. Construction starts it with the given flags plus
// --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 --metrics_port=0 and
// waits (bounded) for its "serving" line; check started() before use.
// Destruction sends SIGTERM and waits (bounded), then SIGKILL. If the test
// failed, the server's log is printed.
//
// Thread-safe, except that the destructor, Wait and SendSignal must not race
// with each other. Create it on the test's main thread: the child is killed
// if the creating thread dies (PR_SET_PDEATHSIG), so no server outlives a
// crashed test.
class SlackswapdProcess {
 public:
  explicit SlackswapdProcess(
      const std::vector<std::string>& extra_flags,
      std::chrono::milliseconds startup_timeout = std::chrono::seconds(20));
  ~SlackswapdProcess();

  SlackswapdProcess(const SlackswapdProcess&) = delete;
  SlackswapdProcess& operator=(const SlackswapdProcess&) = delete;

  // True once the "serving" line arrived and gave both ports.
  bool started() const { return port_ > 0; }
  // Why it did not start (with the log so far); empty when started.
  const std::string& error() const { return error_; }

  pid_t pid() const { return pid_; }
  // The process's resident memory now (VmRSS) and its high-water mark
  // (VmHWM), in kB from /proc/PID/status; -1 once it is gone.
  int64_t ResidentKb() const;
  int64_t PeakResidentKb() const;
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // "127.0.0.1:<port>".
  std::string target() const;

  // A copy of every line read so far, in order.
  std::vector<LogLine> Lines() const;
  // The lines joined with newlines, for failure messages.
  std::string LogText() const;

  // Waits until a line at index >= `from` satisfies `match`, and returns it;
  // nullopt after `timeout` or once stderr closed without such a line.
  std::optional<LogLine> WaitForLine(
      const std::function<bool(const std::string&)>& match,
      std::chrono::milliseconds timeout, size_t from = 0) const;

  // Waits until `count` lines at index >= `from` satisfy `match`, and returns
  // them; fewer after `timeout` or once stderr closed. A call's log line
  // reaches the test a moment after the call is counted in the metrics.
  std::vector<LogLine> WaitForLines(
      const std::function<bool(const std::string&)>& match, size_t count,
      std::chrono::milliseconds timeout, size_t from = 0) const;

  // kill(pid, sig). False (and a test failure) if the process is gone.
  bool SendSignal(int sig);

  // Waits for the process to exit and returns its exit status (128 + signal
  // when a signal ended it). If it has not exited within `timeout`, records
  // a test failure, kills it with SIGKILL and returns -1. Returns the saved
  // status when called again. Once it returns, Lines() holds the whole log.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  void ReadLoop(int fd);
  // A "NAME:   N kB" line of /proc/PID/status, in kB; -1 if absent.
  int64_t StatusKb(const std::string& name) const;

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string error_;
  std::optional<int> exit_status_;
  std::thread reader_;

  mutable absl::Mutex mu_;
  std::vector<LogLine> lines_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

// The value of a JSON log line's string field, e.g. JsonField(line, "code");
// nullopt if absent. Handles the escapes RequestLog writes.
std::optional<std::string> JsonField(const std::string& line,
                                     const std::string& key);

struct HttpResponse {
  // 0 when no valid response arrived (see error).
  int status = 0;
  std::string body;
  std::string error;
};

// GET http://127.0.0.1:<port><path> over a plain blocking socket, HTTP/1.0,
// the whole exchange bounded by `timeout`.
HttpResponse HttpGet(
    int port, const std::string& path,
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

// One sample of the Prometheus text format.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample of a scrape (comments skipped).
std::vector<Sample> ParseMetrics(const std::string& text);

// The value of the sample named `name` whose labels are exactly `labels`;
// nullopt if there is none.
std::optional<double> MetricValue(
    const std::string& text, const std::string& name,
    const std::map<std::string, std::string>& labels = {});

struct CommandResult {
  // Exit status (128 + signal when killed), or -1 when it could not run or
  // was killed for running past the timeout.
  int exit_status = -1;
  // stdout and stderr together.
  std::string output;
};

// Runs argv[0] (a path) with `stdin_data` on its stdin, bounded by
// `timeout` (then SIGKILL).
CommandResult RunCommand(
    const std::vector<std::string>& argv, const std::string& stdin_data = "",
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The first executable `name` in a directory of $PATH; empty if none.
std::string FindOnPath(const std::string& name);

}  // namespace testutil
}  // namespace slackswap

#endif  // SLACKSWAP_TESTS_SLACKSWAPD_PROCESS_H_
