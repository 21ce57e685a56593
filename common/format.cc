#include "common/format.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace slackswap {
namespace {

constexpr int64_t kPow10[] = {1, 10, 100, 1'000, 10'000, 100'000, 1'000'000};

// `n` with a decimal point before its last `decimals` digits (zero-padded),
// then `suffix`: written by hand, as StrCat's pieces cost more than the
// digits.
// REQUIRES: n >= 0.
std::string WithDecimals(int64_t n, int decimals, absl::string_view suffix) {
  char digits[32];  // 19 digits, the point and a leading zero at most
  char* const end = digits + sizeof(digits);
  char* first = end;
  for (int i = 0; i < decimals; ++i, n /= 10) {
    *--first = static_cast<char>('0' + n % 10);
  }
  if (decimals > 0) *--first = '.';
  do {
    *--first = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  std::string text(first, end);
  text.append(suffix.data(), suffix.size());
  return text;
}

}  // namespace

// Each fast path below prints the quotient rounded with integers, which is
// what StrFormat prints of the double quotient unless the exact quotient
// lies on a rounding tie or the double's error could carry it across one:
// those few go to StrFormat. format_test.cc compares the two on ties,
// carries and millions of random values.

std::string FormatBytes(int64_t bytes) {
  static constexpr struct {
    int64_t unit;
    const char* suffix;
  } kUnits[] = {{1'000'000'000'000, " TB"},
                {1'000'000'000, " GB"},
                {1'000'000, " MB"},
                {1'000, " KB"}};
  for (const auto& [unit, suffix] : kUnits) {
    if (bytes < unit) continue;
    // Three significant figures of bytes / unit, in [1, 1000): the digits
    // before the point, and `step` bytes per unit of the last figure. The
    // double bytes / unit is within 2^-43 of the exact quotient, well
    // inside the least distance from a tie, 1 / (2 * step) of the last
    // figure.
    if (bytes < 1000 * unit) {
      const int whole_digits = bytes < 10 * unit    ? 1
                               : bytes < 100 * unit ? 2
                                                    : 3;
      const int decimals = 3 - whole_digits;
      const int64_t step = unit / kPow10[decimals];
      int64_t figures = bytes / step;
      const int64_t twice_rest = 2 * (bytes % step);
      if (twice_rest > step) ++figures;
      // Not a tie, and no carry into a fourth figure ("10", "1e+03").
      if (twice_rest != step && figures < 1000) {
        int shown = decimals;  // "%g" drops trailing zeros, and the point
        while (shown > 0 && figures % 10 == 0) {
          figures /= 10;
          --shown;
        }
        return WithDecimals(figures, shown, suffix);
      }
    }
    return absl::StrCat(absl::StrFormat("%.3g", static_cast<double>(bytes) /
                                                    static_cast<double>(unit)),
                        suffix);
  }
  return absl::StrCat(bytes, " B");
}

std::string FormatMs(int64_t ns) {
  // Below 1e15 ns the double ns / 1e6 is within 6e-8 ms of the quotient,
  // which is at least 1e-6 ms from a tie unless ns ends in 500.
  if (ns >= 0 && ns < 1'000'000'000'000'000 && ns % 1000 != 500) {
    return WithDecimals((ns + 500) / 1000, 3, " ms");
  }
  return absl::StrFormat("%.3f ms", static_cast<double>(ns) / 1e6);
}

std::string FormatDecimal(double value, int decimals) {
  // Scaled below 2^40, the product is within 2^-13 of value * 10^decimals;
  // a fraction farther than 1e-3 from one half rounds as the exact one.
  const double scaled = value * static_cast<double>(kPow10[decimals]);
  if (!std::signbit(value) && scaled < 1099511627776.0) {
    const double whole = std::floor(scaled);
    const double fraction = scaled - whole;
    if (std::abs(fraction - 0.5) > 1e-3) {
      const int64_t rounded =
          static_cast<int64_t>(whole) + (fraction > 0.5 ? 1 : 0);
      return WithDecimals(rounded, decimals, "");
    }
  }
  return absl::StrFormat("%.*f", decimals, value);
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
