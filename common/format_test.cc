#include "common/format.h"

#include <string>

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
