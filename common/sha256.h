// SHA-256 and HMAC-SHA-256 (OpenSSL's libcrypto), for content addresses
// (graphs stored by their digest, cache keys of a fixed size whatever the
// request's) and for sealing what other processes may tamper with.
//
//   Sha256 h;
//   h.Update("a");
//   h.Update("bc");
//   std::string hex = Sha256Hex(h.Finish());  // "ba7816bf..."
//   std::string once = Sha256::Of("abc");     // the 32 raw bytes
//   std::string mac = HmacSha256("key", "message");
#ifndef SLACKSWAP_COMMON_SHA256_H_
#define SLACKSWAP_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace slackswap {

class Sha256 {
 public:
  static constexpr size_t kBytes = 32;

  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // The digest, kBytes raw bytes. REQUIRES: called once.
  std::string Finish();

  static std::string Of(absl::string_view bytes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// HMAC-SHA-256 (RFC 2104) of `message` under `key`: kBytes raw bytes.
std::string HmacSha256(absl::string_view key, absl::string_view message);

// Whether two strings are equal, in time that depends only on their lengths
// (for comparing MACs: an early exit would tell an attacker how many leading
// bytes of a forged one are right).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Lower-case hexadecimal of raw digest bytes.
std::string Sha256Hex(absl::string_view digest);

// True for 64 lower-case hexadecimal digits (what Sha256Hex makes).
bool IsSha256Hex(absl::string_view text);

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_SHA256_H_
