#include "server/keep_all_results.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace slackswap {
namespace {

std::shared_ptr<const SimResult> Result(int64_t step_ns) {
  auto r = std::make_shared<SimResult>();
  r->step_ns = step_ns;
  return r;
}

TEST(KeepAllResultsTest, FindsWhatWasHeldForTheSameGraphAndKey) {
  KeepAllResults results(4);
  auto g = std::make_shared<const Graph>();
  auto other = std::make_shared<const Graph>();
  results.Hold(g, "a100", Result(7));
  ASSERT_NE(results.Find(g, "a100"), nullptr);
  EXPECT_EQ(results.Find(g, "a100")->step_ns, 7);
  EXPECT_EQ(results.Find(g, "h100"), nullptr);
  EXPECT_EQ(results.Find(other, "a100"), nullptr);
  results.Hold(g, "a100", Result(8));
  EXPECT_EQ(results.Find(g, "a100")->step_ns, 8);
  EXPECT_EQ(results.size(), 1u);
}

// A graph freed and another made in its place (the allocator often hands
// back the same address) must not find the first one's result.
TEST(KeepAllResultsTest, AGraphGoneTakesItsResultsWithIt) {
  KeepAllResults results(4);
  auto g = std::make_shared<const Graph>();
  const Graph* address = g.get();
  results.Hold(g, "a100", Result(7));
  g.reset();
  std::shared_ptr<const Graph> later;
  for (int i = 0; i < 64 && later.get() != address; ++i) {
    later = std::make_shared<const Graph>();
  }
  EXPECT_EQ(results.Find(later, "a100"), nullptr);
  EXPECT_EQ(results.size(), later.get() == address ? 0u : 1u);
}

TEST(KeepAllResultsTest, HoldsAtMostItsCapacityLeastRecentlyUsedFirstOut) {
  KeepAllResults results(2);
  auto g = std::make_shared<const Graph>();
  results.Hold(g, "a", Result(1));
  results.Hold(g, "b", Result(2));
  ASSERT_NE(results.Find(g, "a"), nullptr);  // "b" is now the older
  results.Hold(g, "c", Result(3));
  EXPECT_EQ(results.size(), 2u);
  EXPECT_NE(results.Find(g, "a"), nullptr);
  EXPECT_EQ(results.Find(g, "b"), nullptr);
  EXPECT_NE(results.Find(g, "c"), nullptr);

  const std::string long_key(KeepAllResults::kMaxKeyBytes + 1, 'x');
  results.Hold(g, long_key, Result(4));
  EXPECT_EQ(results.Find(g, long_key), nullptr);
  EXPECT_NE(results.Find(g, "c"), nullptr);  // nothing dropped for it

  KeepAllResults none(0);
  none.Hold(g, "a", Result(1));
  EXPECT_EQ(none.Find(g, "a"), nullptr);
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace slackswap
