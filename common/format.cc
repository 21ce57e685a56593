#include "common/format.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace slackswap {

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e12) return absl::StrFormat("%.3g TB", b / 1e12);
  if (b >= 1e9) return absl::StrFormat("%.3g GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.3g MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.3g KB", b / 1e3);
  return absl::StrCat(bytes, " B");
}

std::string FormatMs(int64_t ns) {
  return absl::StrFormat("%.3f ms", static_cast<double>(ns) / 1e6);
}

std::string QuoteInput(absl::string_view text) {
  if (text.size() <= kMaxQuotedInput) {
    return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuotedInput)),
                      "\"... (", text.size(), " bytes)");
}

std::string ShortName(absl::string_view name) {
  constexpr size_t kMax = 100;
  if (name.size() <= kMax) return absl::CHexEscape(name);
  return absl::StrCat(absl::CHexEscape(name.substr(0, kMax)), "...(",
                      name.size(), " bytes)");
}

}  // namespace slackswap
