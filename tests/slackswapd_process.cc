#include "tests/slackswapd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#ifndef SLACKSWAPD_BIN
#error "SLACKSWAPD_BIN must name the slackswapd binary"
#endif

namespace slackswap {
namespace testutil {
namespace {

int MillisLeft(SteadyClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - SteadyClock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Waits up to `timeout` for `pid` to exit and reaps it; its decoded status,
// or nullopt if it is still running. Sleeps in poll() on a pidfd, or, where
// pidfds are not available, in short bounded steps.
std::optional<int> WaitPid(pid_t pid, std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (pidfd >= 0) close(pidfd);
      return DecodeWaitStatus(status);
    }
    if (r < 0 && errno != EINTR) {
      if (pidfd >= 0) close(pidfd);
      return -1;  // not our child, or already reaped
    }
    const int left = MillisLeft(deadline);
    if (left == 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, left);
    } else {
      pollfd none{-1, 0, 0};
      poll(&none, 0, std::min(left, 5));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return std::nullopt;
}

// argv as the char* array execv wants; the strings must outlive it.
std::vector<char*> Argv(const std::vector<std::string>& args) {
  std::vector<char*> out;
  for (const std::string& a : args) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the child after fork: only async-signal-safe calls until execv.
[[noreturn]] void ExecChild(char* const* argv, int stdin_fd, int stdout_fd,
                            int stderr_fd, pid_t parent) {
  // Die with the thread that started us (a crashed test leaves no server).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  sigaction(SIGINT, &dfl, nullptr);
  if (stdin_fd >= 0) dup2(stdin_fd, 0);
  if (stdout_fd >= 0) dup2(stdout_fd, 1);
  if (stderr_fd >= 0) dup2(stderr_fd, 2);
  execv(argv[0], argv);
  _exit(127);
}

int OpenDevNull() { return open("/dev/null", O_RDWR | O_CLOEXEC); }

}  // namespace

SlackswapdProcess::SlackswapdProcess(
    const std::vector<std::string>& extra_flags,
    std::chrono::milliseconds startup_timeout) {
  std::vector<std::string> args = {SLACKSWAPD_BIN};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  for (const char* flag : {"--host=127.0.0.1", "--port=0",
                           "--metrics_host=127.0.0.1", "--metrics_port=0"}) {
    args.push_back(flag);
  }
  std::vector<char*> argv = Argv(args);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    error_ = absl::StrCat("pipe2: ", std::strerror(errno));
    return;
  }
  const int devnull = OpenDevNull();
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) ExecChild(argv.data(), devnull, devnull, fds[1], parent);
  close(fds[1]);
  if (devnull >= 0) close(devnull);
  if (pid_ < 0) {
    error_ = absl::StrCat("fork: ", std::strerror(errno));
    close(fds[0]);
    return;
  }
  reader_ = std::thread([this, fd = fds[0]] { ReadLoop(fd); });

  std::optional<LogLine> serving = WaitForLine(
      [](const std::string& line) {
        return absl::StrContains(line, "\"msg\":\"serving\"");
      },
      startup_timeout);
  if (!serving.has_value()) {
    error_ = absl::StrCat(
        "slackswapd (", SLACKSWAPD_BIN, ") wrote no \"serving\" line within ",
        startup_timeout.count(), " ms; its log:\n", LogText());
    return;
  }
  int port = 0;
  int metrics_port = 0;
  const std::optional<std::string> p = JsonField(serving->text, "port");
  const std::optional<std::string> m = JsonField(serving->text, "metrics_port");
  if (!p.has_value() || !m.has_value() || !absl::SimpleAtoi(*p, &port) ||
      !absl::SimpleAtoi(*m, &metrics_port) || port <= 0 || metrics_port <= 0) {
    error_ = absl::StrCat("cannot read the ports from: ", serving->text);
    return;
  }
  metrics_port_ = metrics_port;
  port_ = port;
}

SlackswapdProcess::~SlackswapdProcess() {
  if (pid_ > 0 && !exit_status_.has_value()) {
    kill(pid_, SIGTERM);
    std::optional<int> status = WaitPid(pid_, std::chrono::seconds(20));
    if (!status.has_value()) {
      std::cerr << "slackswapd " << pid_
                << " ignored SIGTERM for 20 s; sending SIGKILL\n";
      kill(pid_, SIGKILL);
      status = WaitPid(pid_, std::chrono::seconds(20));
    }
    exit_status_ = status.value_or(-1);
  }
  if (reader_.joinable()) reader_.join();
  if (::testing::Test::HasFailure()) {
    std::cerr << "--- slackswapd log (pid " << pid_ << ") ---\n"
              << LogText() << "--- end of slackswapd log ---\n";
  }
}

int64_t SlackswapdProcess::StatusKb(const std::string& name) const {
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  const std::string prefix = name + ":";
  std::string line;
  while (std::getline(status, line)) {
    int64_t kb = 0;
    if (absl::StartsWith(line, prefix) &&
        absl::SimpleAtoi(absl::StripSuffix(
                             absl::StripAsciiWhitespace(
                                 absl::string_view(line).substr(prefix.size())),
                             " kB"),
                         &kb)) {
      return kb;
    }
  }
  return -1;
}

int64_t SlackswapdProcess::ResidentKb() const { return StatusKb("VmRSS"); }
int64_t SlackswapdProcess::PeakResidentKb() const { return StatusKb("VmHWM"); }

std::string SlackswapdProcess::target() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void SlackswapdProcess::ReadLoop(int fd) {
  std::string partial;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const SteadyClock::time_point now = SteadyClock::now();
    partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    std::vector<LogLine> complete;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      complete.push_back({partial.substr(start, nl - start), now});
    }
    partial.erase(0, start);
    if (!complete.empty()) {
      absl::MutexLock lock(&mu_);
      for (LogLine& l : complete) {
        l.index = lines_.size();
        lines_.push_back(std::move(l));
      }
    }
  }
  close(fd);
  absl::MutexLock lock(&mu_);
  if (!partial.empty()) {
    lines_.push_back({partial, SteadyClock::now(), lines_.size()});
  }
  eof_ = true;
}

std::vector<LogLine> SlackswapdProcess::Lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

std::string SlackswapdProcess::LogText() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const LogLine& l : lines_) absl::StrAppend(&out, l.text, "\n");
  return out;
}

std::optional<LogLine> SlackswapdProcess::WaitForLine(
    const std::function<bool(const std::string&)>& match,
    std::chrono::milliseconds timeout, size_t from) const {
  std::vector<LogLine> found = WaitForLines(match, 1, timeout, from);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<LogLine> SlackswapdProcess::WaitForLines(
    const std::function<bool(const std::string&)>& match, size_t count,
    std::chrono::milliseconds timeout, size_t from) const {
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  size_t next = from;
  std::vector<LogLine> found;
  auto ready = [&]() {
    for (; next < lines_.size() && found.size() < count; ++next) {
      if (match(lines_[next].text)) found.push_back(lines_[next]);
    }
    return found.size() >= count || eof_;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  return found;
}

bool SlackswapdProcess::SendSignal(int sig) {
  if (pid_ <= 0 || exit_status_.has_value() || kill(pid_, sig) != 0) {
    ADD_FAILURE() << "cannot signal slackswapd " << pid_ << ": "
                  << std::strerror(errno);
    return false;
  }
  return true;
}

int SlackswapdProcess::Wait(std::chrono::milliseconds timeout) {
  if (exit_status_.has_value()) return *exit_status_;
  if (pid_ <= 0) return -1;
  std::optional<int> status = WaitPid(pid_, timeout);
  if (!status.has_value()) {
    ADD_FAILURE() << "slackswapd " << pid_ << " did not exit within "
                  << timeout.count() << " ms; killing it";
    kill(pid_, SIGKILL);
    WaitPid(pid_, std::chrono::seconds(20));
    exit_status_ = -1;
    return -1;
  }
  exit_status_ = *status;
  // Its last lines may still be in the pipe: the log is whole once the
  // reader has seen the end of it.
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&eof_), absl::Seconds(10));
  return *status;
}

std::optional<std::string> JsonField(const std::string& line,
                                     const std::string& key) {
  const std::string needle = absl::StrCat("\"", key, "\":\"");
  size_t i = line.find(needle);
  if (i == std::string::npos) return std::nullopt;
  std::string out;
  for (i += needle.size(); i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= line.size()) return std::nullopt;
    switch (line[i]) {
      case 'n':
        out += '\n';
        break;
      case 'u': {
        int code = 0;
        if (i + 4 >= line.size() ||
            !absl::SimpleHexAtoi(line.substr(i + 1, 4), &code)) {
          return std::nullopt;
        }
        out += static_cast<char>(code);
        i += 4;
        break;
      }
      default:
        out += line[i];
    }
  }
  return std::nullopt;
}

HttpResponse HttpGet(int port, const std::string& path,
                     std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  HttpResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    out.error = absl::StrCat("socket: ", std::strerror(errno));
    return out;
  }
  auto fail = [&](const std::string& what) {
    out.error = absl::StrCat(what, ": ", std::strerror(errno));
    close(fd);
    return out;
  };
  auto await = [&](short events) {
    pollfd p{fd, events, 0};
    int left;
    while ((left = MillisLeft(deadline)) > 0) {
      const int r = poll(&p, 1, left);
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
    errno = ETIMEDOUT;
    return false;
  };
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return fail("connect");
    if (!await(POLLOUT)) return fail("connect");
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      return fail("connect");
    }
  }
  const std::string request = absl::StrCat(
      "GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
      "\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    if (!await(POLLOUT)) return fail("send");
    const ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return fail("send");
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  while (true) {
    if (!await(POLLIN)) return fail("recv");
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return fail("recv");
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);

  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    out.error = absl::StrCat("no complete header in: ", raw.substr(0, 200));
    return out;
  }
  const std::vector<absl::string_view> header_lines =
      absl::StrSplit(absl::string_view(raw).substr(0, header_end), "\r\n");
  const std::vector<absl::string_view> status_line =
      absl::StrSplit(header_lines[0], ' ');
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &out.status)) {
    out.error = absl::StrCat("bad status line: ", header_lines[0]);
    out.status = 0;
    return out;
  }
  bool chunked = false;
  for (size_t i = 1; i < header_lines.size(); ++i) {
    const std::string h = absl::AsciiStrToLower(header_lines[i]);
    if (absl::StartsWith(h, "transfer-encoding:") &&
        absl::StrContains(h, "chunked")) {
      chunked = true;
    }
  }
  std::string body = raw.substr(header_end + 4);
  if (chunked) {
    std::string decoded;
    size_t i = 0;
    while (i < body.size()) {
      const size_t eol = body.find("\r\n", i);
      if (eol == std::string::npos) break;
      const std::string size_hex =
          body.substr(i, body.find_first_of(";\r", i) - i);
      int64_t size = 0;
      if (!absl::SimpleHexAtoi(size_hex, &size) || size == 0) break;
      decoded.append(body, eol + 2, static_cast<size_t>(size));
      i = eol + 2 + static_cast<size_t>(size) + 2;
    }
    body = std::move(decoded);
  }
  out.body = std::move(body);
  return out;
}

namespace {

// Parses `{k="v",...}` at text[i] (i at '{'); advances i past '}'.
bool ParseLabels(absl::string_view text, size_t& i,
                 std::map<std::string, std::string>& labels) {
  ++i;  // '{'
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ',' || text[i] == ' ')) ++i;
    if (i < text.size() && text[i] == '}') {
      ++i;
      return true;
    }
    const size_t eq = text.find('=', i);
    if (eq == absl::string_view::npos || eq + 1 >= text.size() ||
        text[eq + 1] != '"') {
      return false;
    }
    std::string key(absl::StripAsciiWhitespace(text.substr(i, eq - i)));
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return false;
    labels[key] = value;
    i = j + 1;
  }
  return false;
}

}  // namespace

std::vector<Sample> ParseMetrics(const std::string& text) {
  std::vector<Sample> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    if (i == absl::string_view::npos) continue;
    s.name = std::string(line.substr(0, i));
    if (line[i] == '{' && !ParseLabels(line, i, s.labels)) continue;
    const std::vector<absl::string_view> rest =
        absl::StrSplit(line.substr(i), ' ', absl::SkipEmpty());
    if (rest.empty()) continue;
    if (rest[0] == "+Inf") {
      s.value = std::numeric_limits<double>::infinity();
    } else if (rest[0] == "NaN") {
      s.value = std::numeric_limits<double>::quiet_NaN();
    } else if (!absl::SimpleAtod(rest[0], &s.value)) {
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> MetricValue(
    const std::string& text, const std::string& name,
    const std::map<std::string, std::string>& labels) {
  for (const Sample& s : ParseMetrics(text)) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

CommandResult RunCommand(const std::vector<std::string>& argv_strings,
                         const std::string& stdin_data,
                         std::chrono::milliseconds timeout) {
  CommandResult result;
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  // stdin from an unlinked temporary file: no pipe to keep fed.
  std::string tmpl = ::testing::TempDir();
  if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
  tmpl += "slackswap_stdin.XXXXXX";
  const int in = mkostemp(tmpl.data(), O_CLOEXEC);
  if (in < 0) {
    result.output = absl::StrCat("mkostemp: ", std::strerror(errno));
    return result;
  }
  unlink(tmpl.c_str());
  for (size_t done = 0; done < stdin_data.size();) {
    const ssize_t n =
        write(in, stdin_data.data() + done, stdin_data.size() - done);
    if (n <= 0) {
      close(in);
      result.output = absl::StrCat("write stdin: ", std::strerror(errno));
      return result;
    }
    done += static_cast<size_t>(n);
  }
  lseek(in, 0, SEEK_SET);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in);
    result.output = absl::StrCat("pipe2: ", std::strerror(errno));
    return result;
  }
  std::vector<char*> argv = Argv(argv_strings);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(argv.data(), in, out[1], out[1], parent);
  close(in);
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    result.output = absl::StrCat("fork: ", std::strerror(errno));
    return result;
  }
  char buf[4096];
  bool timed_out = false;
  while (true) {
    pollfd p{out[0], POLLIN, 0};
    const int left = MillisLeft(deadline);
    if (left == 0) {
      timed_out = true;
      break;
    }
    const int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // the deadline check above ends this
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  std::optional<int> status =
      timed_out ? std::nullopt
                : WaitPid(pid, std::chrono::milliseconds(
                                   std::max(1, MillisLeft(deadline))));
  if (!status.has_value()) {
    kill(pid, SIGKILL);
    WaitPid(pid, std::chrono::seconds(20));
    absl::StrAppend(&result.output, "\n[killed after ", timeout.count(),
                    " ms]");
    result.exit_status = -1;
    return result;
  }
  result.exit_status = *status;
  return result;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

}  // namespace testutil
}  // namespace slackswap
