#include "common/format.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

TEST(FormatTest, FormatsBytesInDecimalUnits) {
  EXPECT_EQ(FormatBytes(7052996608), "7.05 GB");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1'500'000), "1.5 MB");
}

TEST(FormatTest, FormatsNanosecondsAsMilliseconds) {
  EXPECT_EQ(FormatMs(174'000), "0.174 ms");
  EXPECT_EQ(FormatMs(0), "0.000 ms");
}

// What format.cc printed before its integer paths, for the comparisons
// below.
std::string BytesByStrFormat(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e12) return absl::StrFormat("%.3g TB", b / 1e12);
  if (b >= 1e9) return absl::StrFormat("%.3g GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.3g MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.3g KB", b / 1e3);
  return absl::StrCat(bytes, " B");
}

std::string MsByStrFormat(int64_t ns) {
  return absl::StrFormat("%.3f ms", static_cast<double>(ns) / 1e6);
}

// Values where an integer rounding could part from the double's: every
// rounding tie and carry of three figures in each unit (and 1-2 off them),
// powers of ten, the limits, and random values of every magnitude.
std::vector<int64_t> HardIntegers() {
  std::vector<int64_t> v = {0,
                            1,
                            -1,
                            499,
                            500,
                            501,
                            999,
                            1000,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()};
  for (int64_t p = 1;; p *= 10) {
    // Three figures while they fit, the first figure beyond.
    const int64_t max_k = p <= std::numeric_limits<int64_t>::max() / 2000
                              ? 999
                              : std::numeric_limits<int64_t>::max() / p / 2;
    for (int64_t k = 1; k <= max_k; ++k) {
      for (const int64_t base : {k * p, k * p + p / 2}) {
        for (int64_t d = -2; d <= 2; ++d) v.push_back(base + d);
      }
    }
    if (p > std::numeric_limits<int64_t>::max() / 10) break;  // 10^18
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1'000'000; ++i) {
    const int shift = static_cast<int>(rng() % 63);
    v.push_back(static_cast<int64_t>(rng() >> (1 + shift)));
  }
  return v;
}

TEST(FormatTest, BytesAndMillisecondsReadAsStrFormatWouldPrintThem) {
  for (int64_t x : HardIntegers()) {
    ASSERT_EQ(FormatBytes(x), BytesByStrFormat(x)) << x;
    ASSERT_EQ(FormatMs(x), MsByStrFormat(x)) << x;
  }
}

TEST(FormatTest, DecimalsReadAsStrFormatWouldPrintThem) {
  std::vector<double> values = {0.0,
                                -0.0,
                                0.005,
                                0.015,
                                0.125,
                                2.675,
                                1e9,
                                1e12,
                                -1.5,
                                std::nan(""),
                                std::numeric_limits<double>::infinity()};
  for (int k = 0; k < 100'000; ++k) {
    values.push_back(k / 1000.0);  // many near ties of two decimals
    values.push_back(k / 1000.0 + 0.0005);
  }
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 300'000; ++i) {
    values.push_back(unit(rng) * std::pow(10.0, static_cast<int>(rng() % 16)));
  }
  for (double v : values) {
    for (int decimals = 0; decimals <= 6; ++decimals) {
      ASSERT_EQ(FormatDecimal(v, decimals),
                absl::StrFormat("%.*f", decimals, v))
          << v << " to " << decimals;
    }
  }
}

TEST(FormatTest, DropsTrailingZerosAsPercentGDoes) {
  EXPECT_EQ(FormatBytes(7'000'000'000), "7 GB");
  EXPECT_EQ(FormatBytes(12'000'000), "12 MB");
  EXPECT_EQ(FormatBytes(100'000), "100 KB");
  EXPECT_EQ(FormatBytes(999'600), "1e+03 KB");
  EXPECT_EQ(FormatMs(1'234'567'890), "1234.568 ms");
}

TEST(FormatTest, QuotesShortInputWhole) {
  EXPECT_EQ(QuoteInput("a100"), "\"a100\"");
  EXPECT_EQ(QuoteInput("a\"b\n"), "\"a\\\"b\\n\"");
}

TEST(FormatTest, CutsLongInputAndSaysHowLong) {
  const std::string name(20'000, 'x');
  const std::string quoted = QuoteInput(name);
  EXPECT_LE(quoted.size(), kMaxQuotedInput + 40);
  EXPECT_EQ(quoted.substr(0, kMaxQuotedInput + 2),
            "\"" + std::string(kMaxQuotedInput, 'x') + "\"");
  EXPECT_NE(quoted.find("(20000 bytes)"), std::string::npos);
}

TEST(FormatTest, ShortNamesStayShort) {
  EXPECT_EQ(ShortName("mlp_up"), "mlp_up");
  const std::string shown = ShortName(std::string(5000, 'a'));
  EXPECT_EQ(shown, std::string(100, 'a') + "...(5000 bytes)");
}

}  // namespace
}  // namespace slackswap
