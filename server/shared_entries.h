// The shared tier's keys and values, and the checks on every value read
// back: nothing in Redis is trusted, since any client of it (or a fault)
// can put any bytes under any key.
//
//   const std::string ns = SharedNamespace(version, hw_sha256, node_sha256);
//   const std::string key = SharedKey(ns, "plan", request_key);
//   store.PutAsync(key, SealResult(request_key, response_bytes), ttl);
//   ...
//   absl::StatusOr<absl::string_view> payload = OpenResult(request_key, v);
//
// Keys are "slackswap:<namespace>:<kind>:<id>": the namespace is a digest
// of the planner version and the hardware and node catalogs, so a new build
// or catalog never reads an old answer; the id is a graph's digest, or the
// hex digest of a request's key. A key's mark ("being planned by a replica")
// is the key with ":planning" appended.
//
// A result's value is "ssr1", SHA-256 of the request key, SHA-256 of the
// payload, then the payload: a value under the wrong key, truncated or
// altered is refused. A graph's value is its canonical bytes, whose
// SHA-256 is its digest.
#ifndef SLACKSWAP_SERVER_SHARED_ENTRIES_H_
#define SLACKSWAP_SERVER_SHARED_ENTRIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace slackswap {

std::string SharedNamespace(absl::string_view planner_version,
                            absl::string_view hardware_catalog_sha256,
                            absl::string_view node_catalog_sha256);

// `id`: for graphs, the digest (hex); for results, the request key (any
// bytes), which is hashed.
std::string SharedKey(absl::string_view ns, absl::string_view kind,
                      absl::string_view id);
std::string SharedGraphKey(absl::string_view ns, absl::string_view digest);
std::string MarkKey(absl::string_view key);

std::string SealResult(absl::string_view request_key,
                       absl::string_view payload);

// The payload of `value`, which must have been sealed for `request_key`;
// else DATA_LOSS saying what is wrong (not a sealed value, another key's,
// altered or truncated).
absl::StatusOr<absl::string_view> OpenResult(absl::string_view request_key,
                                             absl::string_view value);

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
