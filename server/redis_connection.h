// One connection to Redis: commands sent one at a time and answered in
// order, every step (connect, TLS handshake, AUTH, SELECT, each command)
// bounded by a deadline. hiredis formats the commands and parses the
// replies; the socket and TLS are ours, because Debian's hiredis (0.14) has
// no TLS and its blocking calls take a timeout per read, not a deadline for
// the whole exchange.
//
//   absl::StatusOr<sockaddr_storage> addr = ResolveRedisHost(endpoint);
//   absl::StatusOr<std::unique_ptr<RedisConnection>> c =
//       RedisConnection::Open(endpoint, *addr, tls_context, deadline);
//   absl::StatusOr<RedisReply> r = (*c)->Command({"PING"}, deadline);
//
// A connection whose command failed in transport (a timeout, a reset, a
// reply it could not parse or larger than allowed) is broken(): its stream
// may hold half a reply, so it must be dropped, never reused.
//
// Not thread-safe: one thread uses a connection at a time.
#ifndef SLACKSWAP_SERVER_REDIS_CONNECTION_H_
#define SLACKSWAP_SERVER_REDIS_CONNECTION_H_

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/redis_url.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
struct redisReader;

namespace slackswap {

// A reply, flattened: the commands the shared tier sends answer a string,
// a status, an integer, nil or an error, never an array.
struct RedisReply {
  enum class Type { kString, kStatus, kInteger, kNil, kError, kArray };
  Type type = Type::kNil;
  // kString, kStatus, kError.
  std::string str;
  // kInteger.
  int64_t integer = 0;

  bool is_error() const { return type == Type::kError; }
};

// The endpoint's address, resolved (getaddrinfo, which has no deadline:
// call it off any request's path). UNAVAILABLE when the name does not
// resolve.
absl::StatusOr<sockaddr_storage> ResolveRedisHost(const RedisEndpoint& e);

// A TLS client context that verifies the server against `ca_file` (PEM;
// empty: the system's authorities). INVALID_ARGUMENT when the file cannot be
// read.
absl::StatusOr<std::shared_ptr<SSL_CTX>> MakeRedisTlsContext(
    const std::string& ca_file);

class RedisConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to `addr`, with TLS when `tls` is set (verifying the server's
  // certificate against endpoint.host), then AUTH and SELECT as the
  // endpoint says, all before `deadline`. A reply larger than
  // `max_reply_bytes` breaks the connection. Errors: DEADLINE_EXCEEDED,
  // UNAVAILABLE (refused, reset, TLS failed), UNAUTHENTICATED (AUTH
  // refused), FAILED_PRECONDITION (SELECT refused).
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(
      const RedisEndpoint& endpoint, const sockaddr_storage& addr,
      std::shared_ptr<SSL_CTX> tls, Clock::time_point deadline,
      int64_t max_reply_bytes);

  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command and reads its reply. A Redis error reply is a reply
  // (is_error()), not a failed Status; a failed Status breaks the
  // connection.
  absl::StatusOr<RedisReply> Command(const std::vector<absl::string_view>& args,
                                     Clock::time_point deadline);

  bool broken() const { return broken_; }

 private:
  RedisConnection(int fd, std::shared_ptr<SSL_CTX> tls_context,
                  int64_t max_reply_bytes);

  absl::Status Handshake(const std::string& host, Clock::time_point deadline);
  // Writes all of `data`, or fails.
  absl::Status WriteAll(absl::string_view data, Clock::time_point deadline);
  // Reads what is there (at least one byte) into `buf`; returns the count.
  absl::StatusOr<size_t> ReadSome(char* buf, size_t size,
                                  Clock::time_point deadline);
  // After an SSL_read or SSL_write returned `rc` <= 0: waits for the
  // socket as TLS asks and returns OK (call again), or the failure.
  absl::Status AwaitTls(int rc, absl::string_view what,
                        Clock::time_point deadline);
  // Waits until the socket is readable (`for_read`) or writable.
  absl::Status Wait(bool for_read, Clock::time_point deadline);

  // Immutable after construction.
  const int fd_;
  const std::shared_ptr<SSL_CTX> tls_context_;
  const int64_t max_reply_bytes_;
  SSL* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
  bool broken_ = false;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_REDIS_CONNECTION_H_
