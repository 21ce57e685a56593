#include "server/redis_connection.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hiredis/hiredis.h"

namespace slackswap {
namespace {

using Clock = RedisConnection::Clock;

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

std::string TlsErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "no detail" : out;
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
}

RedisReply Flatten(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.integer = static_cast<int64_t>(r.elements);
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

absl::StatusOr<sockaddr_storage> ResolveRedisHost(const RedisEndpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(e.port);
  if (int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("shared store: cannot resolve ",
                                               e.host, ": ", gai_strerror(rc)));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr,
              std::min<size_t>(found->ai_addrlen, sizeof(addr)));
  freeaddrinfo(found);
  return addr;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> MakeRedisTlsContext(
    const std::string& ca_file) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("TLS: ", TlsErrors()));
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const int loaded =
      ca_file.empty()
          ? SSL_CTX_set_default_verify_paths(ctx.get())
          : SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shared_store_tls_ca_file: cannot load '", ca_file,
                     "': ", TlsErrors()));
  }
  return ctx;
}

RedisConnection::RedisConnection(int fd, std::shared_ptr<SSL_CTX> tls_context,
                                 int64_t max_reply_bytes)
    : fd_(fd),
      tls_context_(std::move(tls_context)),
      max_reply_bytes_(max_reply_bytes),
      reader_(redisReaderCreate()) {}

RedisConnection::~RedisConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (reader_ != nullptr) redisReaderFree(reader_);
  close(fd_);
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(
    const RedisEndpoint& endpoint, const sockaddr_storage& addr,
    std::shared_ptr<SSL_CTX> tls, Clock::time_point deadline,
    int64_t max_reply_bytes) {
  const int fd =
      socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("shared store: socket");
  std::unique_ptr<RedisConnection> c(
      new RedisConnection(fd, std::move(tls), max_reply_bytes));
  if (c->reader_ == nullptr) {
    return absl::ResourceExhaustedError("shared store: no memory for a reader");
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const socklen_t len =
      addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) return Errno("shared store: connect");
    if (absl::Status s = c->Wait(/*for_read=*/false, deadline); !s.ok()) {
      return s;
    }
    int err = 0;
    socklen_t err_len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) {
      errno = err;
      return Errno("shared store: connect");
    }
  }
  if (c->tls_context_ != nullptr) {
    if (absl::Status s = c->Handshake(endpoint.host, deadline); !s.ok()) {
      return s;
    }
  }
  if (!endpoint.password.empty()) {
    std::vector<absl::string_view> auth = {"AUTH"};
    if (!endpoint.user.empty()) auth.push_back(endpoint.user);
    auth.push_back(endpoint.password);
    absl::StatusOr<RedisReply> r = c->Command(auth, deadline);
    if (!r.ok()) return r.status();
    if (r->is_error()) {
      return absl::UnauthenticatedError(
          absl::StrCat("shared store: AUTH refused: ", r->str));
    }
  }
  if (endpoint.db != 0) {
    const std::string db = absl::StrCat(endpoint.db);
    absl::StatusOr<RedisReply> r = c->Command({"SELECT", db}, deadline);
    if (!r.ok()) return r.status();
    if (r->is_error()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shared store: SELECT ", endpoint.db, " refused: ", r->str));
    }
  }
  return c;
}

absl::Status RedisConnection::Handshake(const std::string& host,
                                        Clock::time_point deadline) {
  ssl_ = SSL_new(tls_context_.get());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    return absl::UnavailableError(absl::StrCat("TLS: ", TlsErrors()));
  }
  SSL_set_tlsext_host_name(ssl_, host.c_str());
  // The certificate must name the host (or its IP address) we dialled.
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
    X509_VERIFY_PARAM_set_hostflags(param,
                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return absl::OkStatus();
    const int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (absl::Status s = Wait(err == SSL_ERROR_WANT_READ, deadline);
          !s.ok()) {
        return s;
      }
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_);
    return absl::UnavailableError(
        absl::StrCat("shared store: TLS handshake failed: ",
                     verify != X509_V_OK ? X509_verify_cert_error_string(verify)
                                         : TlsErrors().c_str()));
  }
}

absl::Status RedisConnection::Wait(bool for_read, Clock::time_point deadline) {
  for (;;) {
    const int ms = RemainingMs(deadline);
    if (ms == 0) {
      return absl::DeadlineExceededError("shared store: call timed out");
    }
    pollfd p{fd_, static_cast<short>(for_read ? POLLIN : POLLOUT), 0};
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return Errno("shared store: poll");
  }
}

absl::Status RedisConnection::AwaitTls(int rc, absl::string_view what,
                                       Clock::time_point deadline) {
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_ZERO_RETURN) {
    return absl::UnavailableError("shared store: the server closed");
  }
  if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
    return absl::UnavailableError(
        absl::StrCat("shared store: ", what, ": ", TlsErrors()));
  }
  return Wait(err == SSL_ERROR_WANT_READ, deadline);
}

absl::Status RedisConnection::WriteAll(absl::string_view data,
                                       Clock::time_point deadline) {
  while (!data.empty()) {
    const int chunk = static_cast<int>(std::min<size_t>(data.size(), 1 << 20));
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int rc = SSL_write(ssl_, data.data(), chunk);
      if (rc > 0) {
        data.remove_prefix(static_cast<size_t>(rc));
        continue;
      }
      if (absl::Status s = AwaitTls(rc, "TLS write", deadline); !s.ok()) {
        return s;
      }
      continue;
    }
    const ssize_t n =
        send(fd_, data.data(), static_cast<size_t>(chunk), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = Wait(/*for_read=*/false, deadline); !s.ok()) {
        return s;
      }
      continue;
    }
    return Errno("shared store: send");
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> RedisConnection::ReadSome(char* buf, size_t size,
                                                 Clock::time_point deadline) {
  const int chunk = static_cast<int>(std::min<size_t>(size, 1 << 20));
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int rc = SSL_read(ssl_, buf, chunk);
      if (rc > 0) return static_cast<size_t>(rc);
      if (absl::Status s = AwaitTls(rc, "TLS read", deadline); !s.ok()) {
        return s;
      }
      continue;
    }
    const ssize_t n = recv(fd_, buf, static_cast<size_t>(chunk), 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0)
      return absl::UnavailableError("shared store: the server closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Errno("shared store: recv");
    if (absl::Status s = Wait(/*for_read=*/true, deadline); !s.ok()) return s;
  }
}

absl::StatusOr<RedisReply> RedisConnection::Command(
    const std::vector<absl::string_view>& args, Clock::time_point deadline) {
  if (broken_) {
    return absl::FailedPreconditionError("shared store: connection broken");
  }
  // Broken unless the exchange completes.
  broken_ = true;
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  argv.reserve(args.size());
  argvlen.reserve(args.size());
  for (absl::string_view a : args) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
  char* cmd = nullptr;
  const int cmd_len = redisFormatCommandArgv(
      &cmd, static_cast<int>(args.size()), argv.data(), argvlen.data());
  if (cmd_len < 0 || cmd == nullptr) {
    return absl::ResourceExhaustedError("shared store: cannot format command");
  }
  absl::Status written =
      WriteAll(absl::string_view(cmd, static_cast<size_t>(cmd_len)), deadline);
  redisFreeCommand(cmd);
  if (!written.ok()) return written;
  // A reply is its bytes plus a little framing.
  const int64_t max_bytes = max_reply_bytes_ + 64;
  int64_t read_bytes = 0;
  char buf[16 << 10];
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      return absl::UnavailableError(absl::StrCat(
          "shared store: unreadable reply: ", redisReaderGetError(reader_)));
    }
    if (raw != nullptr) {
      RedisReply out = Flatten(*static_cast<redisReply*>(raw));
      freeReplyObject(raw);
      broken_ = false;
      return out;
    }
    if (read_bytes > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shared store: a reply over ", max_reply_bytes_, " bytes"));
    }
    absl::StatusOr<size_t> n = ReadSome(buf, sizeof(buf), deadline);
    if (!n.ok()) return n.status();
    read_bytes += static_cast<int64_t>(*n);
    if (redisReaderFeed(reader_, buf, *n) != REDIS_OK) {
      return absl::UnavailableError(absl::StrCat(
          "shared store: unreadable reply: ", redisReaderGetError(reader_)));
    }
  }
}

}  // namespace slackswap
