// Human-readable figures for messages and reports: bytes in decimal units,
// nanoseconds as milliseconds, and input text quoted at a bounded length.
//
//   FormatBytes(7'050'000'000);      // "7.05 GB"
//   FormatMs(174'000);               // "0.174 ms"
//   FormatDecimal(4.567, 2);         // "4.57"
//   QuoteInput(name);                // "\"my_gpu\"" (at most ~200 chars)
#ifndef SLACKSWAP_COMMON_FORMAT_H_
#define SLACKSWAP_COMMON_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace slackswap {

// "7.05 GB": decimal units with three significant figures (the text of
// "%.3g" of the quotient).
std::string FormatBytes(int64_t bytes);

// "0.174 ms": nanoseconds as milliseconds with three decimals.
std::string FormatMs(int64_t ns);

// The text of absl::StrFormat("%.*f", decimals, value), without its cost
// where the value allows (a plan's reasons format a few per tensor).
// REQUIRES: 0 <= decimals <= 6.
std::string FormatDecimal(double value, int decimals);

// The most characters of any input an error message repeats: a message
// travels in a gRPC trailer, which has a size limit of its own.
inline constexpr size_t kMaxQuotedInput = 200;

// `text` in double quotes, with control characters and quotes escaped, cut
// to kMaxQuotedInput characters with "... (N bytes)" when longer.
std::string QuoteInput(absl::string_view text);

// A name from the input as messages show it, unquoted: control characters
// escaped, cut to 100 characters with "...(N bytes)" when longer, so a label
// such as "op 12 (NAME)" stays short whatever the input.
std::string ShortName(absl::string_view name);

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_FORMAT_H_
