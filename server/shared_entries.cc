#include "server/shared_entries.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace slackswap {
namespace {

constexpr absl::string_view kResultMagic = "ssr1";
constexpr size_t kDigestBytes = 32;

std::string Digest(absl::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Finish();
}

}  // namespace

std::string SharedNamespace(absl::string_view planner_version,
                            absl::string_view hardware_catalog_sha256,
                            absl::string_view node_catalog_sha256) {
  Sha256 h;
  // Length-prefixed, so that no two triples hash the same bytes.
  for (absl::string_view part :
       {planner_version, hardware_catalog_sha256, node_catalog_sha256}) {
    h.Update(absl::StrCat(part.size(), ":"));
    h.Update(part);
  }
  return Sha256Hex(h.Finish()).substr(0, 16);
}

std::string SharedKey(absl::string_view ns, absl::string_view kind,
                      absl::string_view id) {
  return absl::StrCat("slackswap:", ns, ":", kind, ":", Sha256Hex(Digest(id)));
}

std::string SharedGraphKey(absl::string_view ns, absl::string_view digest) {
  return absl::StrCat("slackswap:", ns, ":graph:", digest);
}

std::string MarkKey(absl::string_view key) {
  return absl::StrCat(key, ":planning");
}

std::string SealResult(absl::string_view request_key,
                       absl::string_view payload) {
  return absl::StrCat(kResultMagic, Digest(request_key), Digest(payload),
                      payload);
}

absl::StatusOr<absl::string_view> OpenResult(absl::string_view request_key,
                                             absl::string_view value) {
  const size_t header = kResultMagic.size() + 2 * kDigestBytes;
  if (value.size() < header ||
      value.substr(0, kResultMagic.size()) != kResultMagic) {
    return absl::DataLossError("not a sealed result");
  }
  absl::string_view key_digest =
      value.substr(kResultMagic.size(), kDigestBytes);
  absl::string_view payload_digest =
      value.substr(kResultMagic.size() + kDigestBytes, kDigestBytes);
  absl::string_view payload = value.substr(header);
  if (key_digest != Digest(request_key)) {
    return absl::DataLossError("sealed for another request");
  }
  if (payload_digest != Digest(payload)) {
    return absl::DataLossError("altered or truncated");
  }
  return payload;
}

void AppendPacked(absl::string_view message, std::string* packed) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  const char length[4] = {static_cast<char>(n >> 24),
                          static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                          static_cast<char>(n)};
  packed->append(length, sizeof(length));
  packed->append(message.data(), message.size());
}

bool UnpackMessages(absl::string_view packed,
                    std::vector<absl::string_view>* messages) {
  messages->clear();
  while (!packed.empty()) {
    if (packed.size() < 4) return false;
    const auto byte = [&packed](int i) {
      return static_cast<uint32_t>(static_cast<unsigned char>(packed[i]));
    };
    const uint32_t length =
        byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3);
    packed.remove_prefix(4);
    if (length > packed.size()) return false;
    messages->push_back(packed.substr(0, length));
    packed.remove_prefix(length);
  }
  return true;
}

bool GraphBytesMatch(absl::string_view bytes, absl::string_view digest) {
  return Sha256Hex(Digest(bytes)) == digest;
}

}  // namespace slackswap
