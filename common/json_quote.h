// JSON string literals for hand-written JSON output (logs, traces, reports).
//
//   std::string line = "{\"msg\":" + JsonQuote(message) + "}";
#ifndef SLACKSWAP_COMMON_JSON_QUOTE_H_
#define SLACKSWAP_COMMON_JSON_QUOTE_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace slackswap {

// `s` quoted, with `"` and `\` escaped and control characters as \uXXXX.
inline std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_JSON_QUOTE_H_
