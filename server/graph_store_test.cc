#include "server/graph_store.h"

#include <memory>

#include "gtest/gtest.h"

namespace slackswap {
namespace {

std::shared_ptr<const Graph> Named(const std::string& name) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  return g;
}

class GraphStoreTest : public ::testing::Test {
 protected:
  absl::Time now_ = absl::UnixEpoch();
  GraphStore store_{/*capacity_bytes=*/1000, absl::Minutes(10),
                    [this] { return now_; }};
};

TEST_F(GraphStoreTest, FindsWhatItHolds) {
  ASSERT_TRUE(store_.Put("a", Named("A"), 100));
  ASSERT_NE(store_.Find("a"), nullptr);
  EXPECT_EQ(store_.Find("a")->name, "A");
  EXPECT_EQ(store_.Find("b"), nullptr);
  EXPECT_EQ(store_.size_bytes(), 100);
}

TEST_F(GraphStoreTest, EvictsTheLeastRecentlyUsedToMakeRoom) {
  store_.Put("a", Named("A"), 400);
  store_.Put("b", Named("B"), 400);
  store_.Find("a");                  // b is now the least recently used
  store_.Put("c", Named("C"), 400);  // 1200 > 1000: b goes
  EXPECT_NE(store_.Find("a"), nullptr);
  EXPECT_EQ(store_.Find("b"), nullptr);
  EXPECT_NE(store_.Find("c"), nullptr);
  EXPECT_EQ(store_.size_bytes(), 800);
  EXPECT_EQ(store_.entries(), 2);
}

TEST_F(GraphStoreTest, ExpiresWhatIsNotUsedForItsTimeToLive) {
  store_.Put("a", Named("A"), 100);
  store_.Put("b", Named("B"), 100);
  now_ += absl::Minutes(6);
  EXPECT_NE(store_.Find("a"), nullptr);  // a's clock restarts
  now_ += absl::Minutes(6);
  EXPECT_NE(store_.Find("a"), nullptr);
  EXPECT_EQ(store_.Find("b"), nullptr);  // 12 minutes unused
  EXPECT_EQ(store_.entries(), 1);
  // Expired entries also go when room is made.
  now_ += absl::Minutes(11);
  store_.Put("c", Named("C"), 100);
  EXPECT_EQ(store_.entries(), 1);
  EXPECT_EQ(store_.size_bytes(), 100);
}

TEST_F(GraphStoreTest, AGraphLargerThanTheStoreIsNotHeld) {
  store_.Put("a", Named("A"), 100);
  EXPECT_FALSE(store_.Put("huge", Named("H"), 1001));
  EXPECT_EQ(store_.Find("huge"), nullptr);
  EXPECT_NE(store_.Find("a"), nullptr);  // and nothing was evicted for it
  // Replacing an entry charges the new size only.
  EXPECT_TRUE(store_.Put("a", Named("A2"), 300));
  EXPECT_EQ(store_.Find("a")->name, "A2");
  EXPECT_EQ(store_.size_bytes(), 300);
}

TEST(GraphStoreCapacityTest, ZeroCapacityHoldsNothing) {
  GraphStore store(0, absl::Minutes(1));
  EXPECT_FALSE(store.Put("a", Named("A"), 1));
  EXPECT_EQ(store.Find("a"), nullptr);
}

}  // namespace
}  // namespace slackswap
