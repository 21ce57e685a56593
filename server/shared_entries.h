// The shared tier's keys and values, and the checks on every value read
// back: nothing in Redis is trusted, since any client of it (or a fault)
// can put any bytes under any key.
//
//   const std::string ns =
//       SharedNamespace(version, hw_sha256, node_sha256, fleet_secret);
//   const std::string key = SharedKey(ns, "plan", request_key);
//   store.PutAsync(key, SealResult(request_key, payload, fleet_secret), ttl);
//   ...
//   absl::StatusOr<absl::string_view> payload =
//       OpenResult(request_key, value, fleet_secret);
//
// Keys are "slackswap:<namespace>:<kind>:<id>": the namespace is a digest
// of the planner version and the hardware and node catalogs (and of the
// fleet secret, when there is one), so a new build, catalog or secret never
// reads an old answer; the id is a graph's digest, or the hex digest of a
// request's key. A key's mark ("being planned by a replica") is the key
// with ":planning" appended.
//
// A result's value is a magic, a 32-byte seal, then the payload:
//  - with a fleet secret (slackswapd --shared_store_secret_file): "ssm1",
//    HMAC-SHA-256 under the secret of the magic and the SHA-256 of the
//    request key and of the payload. A writer without the secret cannot
//    make a value that opens: a hostile client of the Redis can delete
//    answers or hold marks, not choose answers.
//  - without one: "ssr1", SHA-256 of the request key, SHA-256 of the
//    payload. A value under the wrong key, truncated or altered by a fault
//    is refused, but anyone who can write to the Redis can seal any answer.
// A value sealed the other way is refused: an "ssr1" value, which anyone
// can make, never opens where a secret is set.
//
// A graph's value is its canonical bytes, whose SHA-256 is its digest: no
// secret is needed to trust it.
#ifndef SLACKSWAP_SERVER_SHARED_ENTRIES_H_
#define SLACKSWAP_SERVER_SHARED_ENTRIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace slackswap {

// `fleet_secret`: empty when the fleet has none.
std::string SharedNamespace(absl::string_view planner_version,
                            absl::string_view hardware_catalog_sha256,
                            absl::string_view node_catalog_sha256,
                            absl::string_view fleet_secret);

// `id`: for graphs, the digest (hex); for results, the request key (any
// bytes), which is hashed.
std::string SharedKey(absl::string_view ns, absl::string_view kind,
                      absl::string_view id);
std::string SharedGraphKey(absl::string_view ns, absl::string_view digest);
std::string MarkKey(absl::string_view key);

// Fleet secrets shorter than this are refused (slackswapd's flag): the
// namespace is a function of the secret that anyone reading the keys sees.
inline constexpr size_t kMinFleetSecretBytes = 32;

// `fleet_secret` empty: sealed without one.
std::string SealResult(absl::string_view request_key, absl::string_view payload,
                       absl::string_view fleet_secret);

// The payload of `value`, which must have been sealed for `request_key`
// with the same `fleet_secret` (or both without); else DATA_LOSS saying
// what is wrong (not a sealed value, sealed the other way, another key's,
// altered or truncated, another secret's).
absl::StatusOr<absl::string_view> OpenResult(absl::string_view request_key,
                                             absl::string_view value,
                                             absl::string_view fleet_secret);

// A stream of messages (a sweep's) as one payload: each one's length (4
// bytes, big-endian), then its bytes.
void AppendPacked(absl::string_view message, std::string* packed);
// The messages of a packed payload, views into it; false when it is not one
// (a length past its end).
bool UnpackMessages(absl::string_view packed,
                    std::vector<absl::string_view>* messages);

// Whether `bytes` hash to `digest` (lower-case hex SHA-256).
bool GraphBytesMatch(absl::string_view bytes, absl::string_view digest);

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SHARED_ENTRIES_H_
