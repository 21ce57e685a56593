#include "model/budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(BudgetTest, ParsesFractionsAndUnits) {
  EXPECT_DOUBLE_EQ(ParseBudget("0.5")->fraction, 0.5);
  EXPECT_EQ(ParseBudget("20GB")->bytes, 20'000'000'000);
  EXPECT_EQ(ParseBudget("512MiB")->bytes, 512LL << 20);
  EXPECT_EQ(ParseBudget("1.5 gib")->bytes, 3LL << 29);
  EXPECT_EQ(ParseBudget("1000B")->bytes, 1000);
}

TEST(BudgetTest, ResolvesAgainstThePeak) {
  EXPECT_EQ(ParseBudget("0.5")->Resolve(1000), 500);
  EXPECT_EQ(ParseBudget("2KB")->Resolve(1), 2000);
  EXPECT_EQ(Budget::Fraction(1e-9).Resolve(10), 1);  // never "no limit"
}

TEST(BudgetTest, RejectsNonsense) {
  for (const char* bad :
       {"", "abc", "0", "-1", "-5GB", "nan", "inf", "5XB", "1e30GB", "0.1B"}) {
    auto b = ParseBudget(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("budget")) << bad;
  }
}

TEST(BudgetTest, ABareNumberAboveTenAsksForAUnit) {
  EXPECT_DOUBLE_EQ(ParseBudget("10")->fraction, 10);
  absl::StatusOr<Budget> b = ParseBudget("20");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("20GB or 20GiB"));
  EXPECT_EQ(ParseBudget("20GB")->bytes, 20'000'000'000);
}

}  // namespace
}  // namespace slackswap
