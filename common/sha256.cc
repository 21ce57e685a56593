#include "common/sha256.h"

#include <openssl/evp.h>

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
