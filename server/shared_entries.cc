#include "server/shared_entries.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace slackswap {
namespace {

constexpr absl::string_view kDigestMagic = "ssr1";  // sealed by digests
constexpr absl::string_view kMacMagic = "ssm1";     // by the fleet secret
constexpr size_t kMagicBytes = 4;
constexpr size_t kDigestBytes = 32;

// What an "ssm1" value's MAC covers.
std::string Mac(absl::string_view fleet_secret, absl::string_view request_key,
                absl::string_view payload) {
  return HmacSha256(
      fleet_secret,
      absl::StrCat(kMacMagic, Sha256::Of(request_key), Sha256::Of(payload)));
}

}  // namespace

std::string SharedNamespace(absl::string_view planner_version,
                            absl::string_view hardware_catalog_sha256,
                            absl::string_view node_catalog_sha256,
                            absl::string_view fleet_secret) {
  Sha256 h;
  // Length-prefixed, so that no two lists of parts hash the same bytes.
  auto part = [&h](absl::string_view bytes) {
    h.Update(absl::StrCat(bytes.size(), ":"));
    h.Update(bytes);
  };
  part(planner_version);
  part(hardware_catalog_sha256);
  part(node_catalog_sha256);
  // The secret itself never leaves the process, only a MAC made with it.
  if (!fleet_secret.empty()) {
    part(HmacSha256(fleet_secret, "slackswap shared namespace"));
  }
  return Sha256Hex(h.Finish()).substr(0, 16);
}

std::string SharedKey(absl::string_view ns, absl::string_view kind,
                      absl::string_view id) {
  return absl::StrCat("slackswap:", ns, ":", kind, ":",
                      Sha256Hex(Sha256::Of(id)));
}

std::string SharedGraphKey(absl::string_view ns, absl::string_view digest) {
  return absl::StrCat("slackswap:", ns, ":graph:", digest);
}

std::string MarkKey(absl::string_view key) {
  return absl::StrCat(key, ":planning");
}

std::string SealResult(absl::string_view request_key, absl::string_view payload,
                       absl::string_view fleet_secret) {
  if (fleet_secret.empty()) {
    return absl::StrCat(kDigestMagic, Sha256::Of(request_key),
                        Sha256::Of(payload), payload);
  }
  return absl::StrCat(kMacMagic, Mac(fleet_secret, request_key, payload),
                      payload);
}

absl::StatusOr<absl::string_view> OpenResult(absl::string_view request_key,
                                             absl::string_view value,
                                             absl::string_view fleet_secret) {
  const absl::string_view magic = value.substr(0, kMagicBytes);
  const absl::string_view want =
      fleet_secret.empty() ? kDigestMagic : kMacMagic;
  if (magic != want) {
    if (magic == kDigestMagic) {
      return absl::DataLossError(
          "sealed without the fleet secret, which anyone can do");
    }
    if (magic == kMacMagic) {
      return absl::DataLossError(
          "sealed with a fleet secret, and this replica has none");
    }
    return absl::DataLossError("not a sealed result");
  }
  if (fleet_secret.empty()) {
    const size_t header = kMagicBytes + 2 * kDigestBytes;
    if (value.size() < header) return absl::DataLossError("truncated");
    const absl::string_view key_digest =
        value.substr(kMagicBytes, kDigestBytes);
    const absl::string_view payload_digest =
        value.substr(kMagicBytes + kDigestBytes, kDigestBytes);
    const absl::string_view payload = value.substr(header);
    if (key_digest != Sha256::Of(request_key)) {
      return absl::DataLossError("sealed for another request");
    }
    if (payload_digest != Sha256::Of(payload)) {
      return absl::DataLossError("altered or truncated");
    }
    return payload;
  }
  const size_t header = kMagicBytes + kDigestBytes;
  if (value.size() < header) return absl::DataLossError("truncated");
  const absl::string_view payload = value.substr(header);
  if (!ConstantTimeEquals(value.substr(kMagicBytes, kDigestBytes),
                          Mac(fleet_secret, request_key, payload))) {
    // The MAC cannot say which: that is what makes it one.
    return absl::DataLossError(
        "altered, truncated, or sealed for another request or under another "
        "secret");
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
  return Sha256Hex(Sha256::Of(bytes)) == digest;
}

}  // namespace slackswap
