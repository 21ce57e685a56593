#include "model/budget.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/format.h"

namespace slackswap {

int64_t Budget::Resolve(int64_t peak) const {
  if (bytes > 0) return bytes;
  const double b = std::floor(fraction * static_cast<double>(peak));
  if (b >= 9.2e18) return INT64_MAX;
  return std::max<int64_t>(1, static_cast<int64_t>(b));
}

absl::StatusOr<Budget> ParseBudget(absl::string_view text) {
  // Echoed in errors: bounded, whatever the input.
  const std::string original = ShortName(text);
  text = absl::StripAsciiWhitespace(text);
  size_t split = text.size();
  while (split > 0 && absl::ascii_isalpha(text[split - 1])) --split;
  const std::string number(text.substr(0, split));
  const std::string unit = absl::AsciiStrToLower(text.substr(split));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget '", original,
        "': expected a fraction of the unconstrained peak (0.5) or bytes "
        "with a unit (20GB, 512MiB)"));
  }
  if (value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget '", original, "' must be > 0"));
  }
  if (unit.empty()) {
    if (value > kMaxBudgetFraction) {
      return absl::InvalidArgumentError(
          absl::StrCat("budget '", original,
                       "': a bare number is a fraction of the "
                       "unconstrained activation peak, at most ",
                       kMaxBudgetFraction, "; for bytes give a unit (",
                       original, "GB or ", original, "GiB)"));
    }
    return Budget::Fraction(value);
  }
  double scale = 0;
  if (unit == "b") scale = 1;
  if (unit == "kb") scale = 1e3;
  if (unit == "mb") scale = 1e6;
  if (unit == "gb") scale = 1e9;
  if (unit == "tb") scale = 1e12;
  if (unit == "kib") scale = 1024.0;
  if (unit == "mib") scale = 1024.0 * 1024;
  if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget '", original, "': unknown unit '", unit,
                     "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"));
  }
  const double bytes = std::floor(value * scale);
  if (bytes >= 9.2e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget '", original, "' is too large"));
  }
  if (bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget '", original, "' is less than one byte"));
  }
  return Budget::Bytes(static_cast<int64_t>(bytes));
}

}  // namespace slackswap
