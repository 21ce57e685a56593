#include "tests/redis_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace testutil {
namespace {

// A port nothing listens on now (bound to port 0, then released). Redis
// cannot take port 0 itself.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

RedisProcess::RedisProcess(std::vector<std::string> extra_args,
                           std::optional<RedisTls> tls)
    : extra_args_(std::move(extra_args)),
      tls_(std::move(tls)),
      server_bin_(FindOnPath("redis-server")),
      cli_bin_(FindOnPath("redis-cli")) {
  for (size_t i = 0; i + 1 < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--requirepass") password_ = extra_args_[i + 1];
  }
}

RedisProcess::~RedisProcess() { Kill(); }

std::string RedisProcess::url() const {
  return absl::StrCat(tls_ ? "rediss" : "redis", "://127.0.0.1:", port_, "/0");
}

bool RedisProcess::Start(std::chrono::milliseconds timeout) {
  error_.clear();
  if (!available()) {
    error_ = "redis-server or redis-cli is not on PATH";
    return false;
  }
  if (pid_ > 0) return true;
  const bool fresh_port = port_ == 0;
  if (fresh_port) port_ = FreePort();
  std::vector<std::string> args = {server_bin_,
                                   "--port",
                                   absl::StrCat(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--loglevel",
                                   "warning"};
  if (tls_) {
    // The plain port off, TLS on the chosen one.
    args[2] = "0";
    for (const std::string& a :
         {std::string("--tls-port"), absl::StrCat(port_),
          std::string("--tls-cert-file"), tls_->cert_file,
          std::string("--tls-key-file"), tls_->key_file,
          std::string("--tls-ca-cert-file"), tls_->ca_file,
          std::string("--tls-auth-clients"), std::string("no")}) {
      args.push_back(a);
    }
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid_ < 0) {
    error_ = absl::StrCat("fork: ", std::strerror(errno));
    pid_ = -1;
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::chrono::milliseconds poll(5);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = absl::StrCat("redis-server exited at start on port ", port_);
      return false;
    }
    if (Cli({"PING"}) == "PONG") return true;
    std::this_thread::sleep_for(poll);
    poll = std::min(2 * poll, std::chrono::milliseconds(100));
  }
  error_ = absl::StrCat("redis-server did not answer PING on port ", port_,
                        " within ", timeout.count(), " ms");
  Kill();
  return false;
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::string RedisProcess::Cli(const std::vector<std::string>& args) {
  return RunCli(args, "");
}

bool RedisProcess::SetBytes(const std::string& key, const std::string& value) {
  return RunCli({"-x", "SET", key}, value) == "OK";
}

std::string RedisProcess::RunCli(const std::vector<std::string>& args,
                                 const std::string& input) {
  std::vector<std::string> argv = {cli_bin_, "-h", "127.0.0.1", "-p",
                                   absl::StrCat(port_)};
  if (tls_) {
    argv.push_back("--tls");
    argv.push_back("--cacert");
    argv.push_back(tls_->ca_file);
  }
  if (!password_.empty()) {
    argv.push_back("--no-auth-warning");
    argv.push_back("-a");
    argv.push_back(password_);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, input, std::chrono::seconds(10));
  if (r.exit_status != 0) {
    error_ = r.output;
    return "";
  }
  return std::string(absl::StripTrailingAsciiWhitespace(r.output));
}

}  // namespace testutil
}  // namespace slackswap
