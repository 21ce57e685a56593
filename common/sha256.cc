#include "common/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>

#include "absl/strings/escaping.h"

namespace slackswap {

// An EVP digest context; OpenSSL fails these calls only when out of memory,
// which the rest of the process does not survive either.
struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (state_->ctx == nullptr ||
      EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    std::abort();
  }
}

Sha256::~Sha256() = default;

void Sha256::Update(absl::string_view bytes) {
  if (EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()) != 1) {
    std::abort();
  }
}

std::string Sha256::Finish() {
  std::string out(kBytes, '\0');
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(state_->ctx,
                         reinterpret_cast<unsigned char*>(out.data()),
                         &size) != 1 ||
      size != kBytes) {
    std::abort();
  }
  return out;
}

std::string Sha256::Of(absl::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Finish();
}

std::string HmacSha256(absl::string_view key, absl::string_view message) {
  std::string out(Sha256::kBytes, '\0');
  unsigned int size = 0;
  // A key of size 0 still needs a valid pointer.
  static const char kNoKey = 0;
  if (HMAC(EVP_sha256(), key.empty() ? &kNoKey : key.data(),
           static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), reinterpret_cast<unsigned char*>(out.data()),
           &size) == nullptr ||
      size != Sha256::kBytes) {
    std::abort();
  }
  return out;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() &&
         (a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0);
}

std::string Sha256Hex(absl::string_view digest) {
  return absl::BytesToHexString(digest);
}

bool IsSha256Hex(absl::string_view text) {
  if (text.size() != 2 * Sha256::kBytes) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace slackswap
