#include "server/shared_graph_source.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "model/workloads.h"

namespace slackswap {
namespace {

absl::StatusOr<Graph> NeverPrepared(const v1::OperatorGraph&) {
  return absl::InternalError("no graph is read from a shared tier here");
}

std::shared_ptr<const Graph> Gpt2(int64_t layers) {
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {.layers = layers});
  return g.ok() ? std::make_shared<const Graph>(*std::move(g)) : nullptr;
}

// Built workloads go to their own store, charged their estimated heap,
// apart from the graphs clients stored.
TEST(SharedGraphSourceTest, HoldsWorkloadsApartChargedTheirHeap) {
  GraphStore stored(1 << 20, absl::Hours(1));
  GraphStore workloads(64 << 20, absl::Hours(1));
  SharedGraphSource source(&stored, nullptr, 4, &NeverPrepared, &workloads);
  std::shared_ptr<const Graph> g = Gpt2(2);
  ASSERT_NE(g, nullptr);
  source.HoldWorkload("gpt2-xl|2", g);
  EXPECT_EQ(source.FindWorkload("gpt2-xl|2"), g);
  EXPECT_EQ(source.FindWorkload("gpt2-xl|3"), nullptr);
  EXPECT_EQ(workloads.size_bytes(), ApproxHeldBytes(*g));
  EXPECT_EQ(stored.entries(), 0);
  EXPECT_EQ(source.Find("gpt2-xl|2"), nullptr);
}

// A store too small for the graph, or none, holds nothing: every request
// builds its own.
TEST(SharedGraphSourceTest, ASmallStoreOrNoneHoldsNothing) {
  std::shared_ptr<const Graph> g = Gpt2(2);
  ASSERT_NE(g, nullptr);
  GraphStore stored(1 << 20, absl::Hours(1));
  GraphStore tiny(ApproxHeldBytes(*g) - 1, absl::Hours(1));
  SharedGraphSource small(&stored, nullptr, 4, &NeverPrepared, &tiny);
  small.HoldWorkload("k", g);
  EXPECT_EQ(small.FindWorkload("k"), nullptr);
  SharedGraphSource none(&stored, nullptr, 4, &NeverPrepared);
  none.HoldWorkload("k", g);
  EXPECT_EQ(none.FindWorkload("k"), nullptr);
}

}  // namespace
}  // namespace slackswap
