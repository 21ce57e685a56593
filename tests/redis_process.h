// A real redis-server on loopback for the shared tier's tests: started on a
// free port with no persistence, stopped (or killed, and started again on
// the same port) by the test. Commands go through redis-cli.
//
//   RedisProcess redis;                 // GTEST_SKIP() if !redis.available()
//   ASSERT_TRUE(redis.Start()) << redis.error();
//   std::string url = redis.url();      // "redis://127.0.0.1:PORT/0"
//   redis.Cli({"SET", "k", "v"});
//   redis.Kill();                       // SIGKILL, as a crash
//   ASSERT_TRUE(redis.Start());         // the same port again
//
// Every wait is bounded; nothing sleeps for a fixed time. The server is
// killed with the test process (PR_SET_PDEATHSIG) and in the destructor.
#ifndef SLACKSWAP_TESTS_REDIS_PROCESS_H_
#define SLACKSWAP_TESTS_REDIS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace slackswap {
namespace testutil {

// A server that speaks TLS only (its plain port off), with these PEM files.
struct RedisTls {
  std::string cert_file;
  std::string key_file;
  // What redis-cli trusts.
  std::string ca_file;
};

class RedisProcess {
 public:
  // Extra redis-server arguments, e.g. {"--requirepass", "secret"}.
  explicit RedisProcess(std::vector<std::string> extra_args = {},
                        std::optional<RedisTls> tls = std::nullopt);
  ~RedisProcess();

  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Whether redis-server and redis-cli are on PATH.
  bool available() const { return !server_bin_.empty() && !cli_bin_.empty(); }

  // Starts the server (on the port of the last start, or a free one) and
  // waits until it answers PING; false with error() otherwise.
  bool Start(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGKILL, then waits for the process to go.
  void Kill();
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  // redis://127.0.0.1:PORT/0, or rediss:// with TLS.
  std::string url() const;
  const std::string& error() const { return error_; }

  // redis-cli -p PORT [-a password] ARGS...: its output, trailing newline
  // removed ("" when it failed; see error()).
  std::string Cli(const std::vector<std::string>& args);
  // SET key to `value`, which may hold any bytes (a NUL would cut an
  // argument short): redis-cli -x reads it from stdin. True on "OK".
  bool SetBytes(const std::string& key, const std::string& value);

 private:
  std::string RunCli(const std::vector<std::string>& args,
                     const std::string& input);

  std::vector<std::string> extra_args_;
  std::optional<RedisTls> tls_;
  std::string server_bin_;
  std::string cli_bin_;
  std::string password_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

}  // namespace testutil
}  // namespace slackswap

#endif  // SLACKSWAP_TESTS_REDIS_PROCESS_H_
