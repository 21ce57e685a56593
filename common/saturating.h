// int64 arithmetic on nanoseconds and bytes that saturates at the int64
// limits instead of overflowing: sums of input-given durations and sizes
// stay well-defined however large the input claims they are.
//
//   int64_t total = SaturatingAdd(a, b);   // INT64_MAX instead of wrapping
#ifndef SLACKSWAP_COMMON_SATURATING_H_
#define SLACKSWAP_COMMON_SATURATING_H_

#include <cstdint>
#include <limits>

namespace slackswap {

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}

inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_sub_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}

inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) == (b < 0) ? std::numeric_limits<int64_t>::max()
                            : std::numeric_limits<int64_t>::min();
}

// ceil(x) as int64 for a non-negative double, INT64_MAX when it does not fit
// (or is NaN).
inline int64_t SaturatingCeil(double x) {
  // 2^63 is exact as a double; anything at or above does not fit.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(x < kLimit)) return std::numeric_limits<int64_t>::max();
  if (x <= 0) return 0;
  const int64_t whole = static_cast<int64_t>(x);
  return static_cast<double>(whole) < x ? whole + 1 : whole;
}

// x rounded toward zero as int64, the nearest int64 limit when it does not
// fit, 0 for NaN.
inline int64_t SaturatingTrunc(double x) {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63, exact
  if (x != x) return 0;
  if (x >= kLimit) return std::numeric_limits<int64_t>::max();
  if (x < -kLimit) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_SATURATING_H_
