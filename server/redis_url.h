// Where the shared tier's Redis is: `--shared_store` parsed and checked once
// at start-up, so that a malformed URL fails start-up naming the flag rather
// than every request.
//
//   absl::StatusOr<RedisEndpoint> e =
//       ParseRedisUrl("rediss://:secret@redis.slackswap:6380/2");
//   // e->tls, e->host == "redis.slackswap", e->port == 6380, e->db == 2,
//   // e->password == "secret"
//
// Accepted: redis://[user[:password]@]host[:port][/db] and the same with
// rediss:// for TLS. The host is a name, an IPv4 address or an IPv6 address
// in brackets; the port defaults to 6379; the database to 0. Percent-escapes
// are decoded in the user and password. Anything else (another scheme, a
// query or fragment, a port outside 1..65535, a database outside 0..65535) is
// INVALID_ARGUMENT saying what is wrong.
#ifndef SLACKSWAP_SERVER_REDIS_URL_H_
#define SLACKSWAP_SERVER_REDIS_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace slackswap {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  int db = 0;
  // Redis 6 ACL user; empty: the default user (AUTH with the password only).
  // A user needs a password (in the URL or --shared_store_password_file).
  std::string user;
  // Empty: no AUTH.
  std::string password;
  bool tls = false;
  // PEM file of the certificate authorities that may sign the server's
  // certificate; empty: the system's.
  std::string tls_ca_file;

  // The URL again with the password hidden, for logs.
  std::string Redacted() const;
};

absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url);

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_REDIS_URL_H_
