// Collectives worked by hand for each kind and algorithm, the double binary
// tree's shape checked for every group size up to 130, n = 1, and byte
// counts near the int64 limit.
#include "sim/collective_model.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr CollectiveAlgorithm kRing = CollectiveAlgorithm::kRing;
constexpr CollectiveAlgorithm kTree = CollectiveAlgorithm::kTree;

std::vector<std::tuple<int32_t, int32_t, int64_t>> Flows(
    const CollectivePlan& p) {
  std::vector<std::tuple<int32_t, int32_t, int64_t>> out;
  for (const CollectiveFlow& f : p.flows)
    out.emplace_back(f.src, f.dst, f.bytes);
  return out;
}

// The most bytes one rank sends or receives, from the flows.
int64_t MostPerRank(const CollectivePlan& p, int32_t n) {
  std::vector<int64_t> sent(n, 0);
  std::vector<int64_t> received(n, 0);
  for (const CollectiveFlow& f : p.flows) {
    sent[f.src] += f.bytes;
    received[f.dst] += f.bytes;
  }
  int64_t most = 0;
  for (int32_t r = 0; r < n; ++r) most = std::max({most, sent[r], received[r]});
  return most;
}

TEST(CollectiveModelTest, RingAllReduce) {
  // 800 bytes over 4 ranks: each rank sends 2 x 3/4 x 800 = 1200 bytes to
  // its successor, after 2 x 3 = 6 hops.
  const CollectivePlan p =
      PlanCollective(CollectiveKind::kAllReduce, kRing, 800, 4);
  EXPECT_EQ(p.algorithm, kRing);
  EXPECT_THAT(
      Flows(p),
      ElementsAre(std::make_tuple(0, 1, 1200), std::make_tuple(1, 2, 1200),
                  std::make_tuple(2, 3, 1200), std::make_tuple(3, 0, 1200)));
  EXPECT_EQ(p.steps, 6);
  EXPECT_EQ(p.wire_bytes, 1200);
  // 6 x 100 ns + 1200 B / 10 B/ns = 720 ns (the header's example).
  EXPECT_EQ(
      CollectiveTimeNs(CollectiveKind::kAllReduce, kRing, 800, 4, 10, 100),
      720);
}

TEST(CollectiveModelTest, RingAllReduceTimeIsTheBusBandwidthFormula) {
  // 1 GiB over 8 ranks at 25 B/ns, 1 us per hop:
  //   2 x 7/8 x 2^30 = 1,879,048,192 bytes; / 25 = 75,161,927.68 -> 75,161,928
  //   2 x 7 hops x 1,000 ns = 14,000
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kRing,
                                int64_t{1} << 30, 8),
            1'879'048'192);
  EXPECT_EQ(CollectiveTimeNs(CollectiveKind::kAllReduce, kRing,
                             int64_t{1} << 30, 8, 25, 1000),
            75'175'928);
}

TEST(CollectiveModelTest, RingAllGatherAndReduceScatter) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    // 3/4 x 800 = 600 bytes per rank, 3 hops.
    const CollectivePlan p = PlanCollective(kind, kRing, 800, 4);
    EXPECT_THAT(
        Flows(p),
        ElementsAre(std::make_tuple(0, 1, 600), std::make_tuple(1, 2, 600),
                    std::make_tuple(2, 3, 600), std::make_tuple(3, 0, 600)));
    EXPECT_EQ(p.steps, 3);
    EXPECT_EQ(p.wire_bytes, 600);
    // 3 x 100 + 600 / 10 = 360.
    EXPECT_EQ(CollectiveTimeNs(kind, kRing, 800, 4, 10, 100), 360);
    // NCCL has no tree for these: the model runs them as rings.
    const CollectivePlan t = PlanCollective(kind, kTree, 800, 4);
    EXPECT_EQ(t.algorithm, kRing);
    EXPECT_EQ(Flows(t), Flows(p));
    EXPECT_EQ(t.steps, 3);
  }
}

TEST(CollectiveModelTest, RingBytesRoundUp) {
  // 100 bytes over 3 ranks: 2 x 2/3 x 100 = 133.3 -> 134; 2/3 x 100 = 66.7
  // -> 67.
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kRing, 100, 3),
            134);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllGather, kRing, 100, 3), 67);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kReduceScatter, kRing, 100, 3),
            67);
}

TEST(CollectiveModelTest, WireBytesAreTheBusBandwidthFactors) {
  // nccl-tests' factors (docs/SIMULATOR.md names the source): all-reduce
  // 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n.
  for (int32_t n : {2, 3, 4, 8, 16, 64}) {
    const int64_t bytes = int64_t{n} << 20;
    EXPECT_EQ(
        CollectiveWireBytes(CollectiveKind::kAllReduce, kRing, bytes, n) * n,
        2 * (n - 1) * bytes);
    for (CollectiveKind kind :
         {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
          CollectiveKind::kAllToAll}) {
      EXPECT_EQ(CollectiveWireBytes(kind, kRing, bytes, n) * n,
                (n - 1) * bytes);
    }
  }
}

TEST(CollectiveModelTest, AllToAll) {
  // Each of 4 ranks sends 800 / 4 = 200 bytes to each of the 3 others at
  // once: 600 bytes out and in per rank, one hop.
  const CollectivePlan p =
      PlanCollective(CollectiveKind::kAllToAll, kRing, 800, 4);
  ASSERT_EQ(p.flows.size(), 12u);
  EXPECT_EQ(Flows(p)[0], std::make_tuple(0, 1, 200));
  EXPECT_EQ(Flows(p)[2], std::make_tuple(0, 3, 200));
  EXPECT_EQ(Flows(p)[3], std::make_tuple(1, 0, 200));
  EXPECT_EQ(Flows(p)[11], std::make_tuple(3, 2, 200));
  for (const CollectiveFlow& f : p.flows) EXPECT_NE(f.src, f.dst);
  EXPECT_EQ(p.steps, 1);
  EXPECT_EQ(p.wire_bytes, 600);
  EXPECT_EQ(MostPerRank(p, 4), 600);
  // 100 + 600 / 10 = 160.
  EXPECT_EQ(CollectiveTimeNs(CollectiveKind::kAllToAll, kTree, 800, 4, 10, 100),
            160);
  // 100 bytes over 3 ranks: ceil(100 / 3) = 34 to each other rank.
  const CollectivePlan odd =
      PlanCollective(CollectiveKind::kAllToAll, kRing, 100, 3);
  EXPECT_EQ(odd.flows.size(), 6u);
  EXPECT_EQ(odd.flows[0].bytes, 34);
  EXPECT_EQ(odd.wire_bytes, 68);
}

TEST(CollectiveModelTest, SendRecv) {
  for (int32_t n : {2, 8}) {
    const CollectivePlan p =
        PlanCollective(CollectiveKind::kSendRecv, kRing, 1000, n);
    EXPECT_THAT(Flows(p), ElementsAre(std::make_tuple(0, 1, 1000)));
    EXPECT_EQ(p.steps, 1);
    EXPECT_EQ(p.wire_bytes, 1000);
  }
  // 100 + 1000 / 10 = 200.
  EXPECT_EQ(
      CollectiveTimeNs(CollectiveKind::kSendRecv, kRing, 1000, 2, 10, 100),
      200);
}

TEST(CollectiveModelTest, TreeAllReduceOnFourRanks) {
  // NCCL's binary tree on 4 ranks: 0 -> 2 -> {1, 3} (0 the root). The
  // second tree mirrors it (4 is even): rank r sits where 3 - r does, so
  // 3 -> 1 -> {2, 0}. Each edge carries its tree's half (400 of 800 bytes)
  // up and down:
  //   rank 1: one edge in the first tree, three in the second: 4 x 400
  //   rank 2: three in the first, one in the second:            4 x 400
  //   ranks 0 and 3: one edge in each tree:                     2 x 400
  // Both trees are 2 deep: 2 x 2 = 4 hops.
  const CollectivePlan p =
      PlanCollective(CollectiveKind::kAllReduce, kTree, 800, 4);
  EXPECT_EQ(p.algorithm, kTree);
  EXPECT_THAT(Flows(p),
              ElementsAre(
                  // First tree, by child: 1 -> 2, 2 -> 0, 3 -> 2.
                  std::make_tuple(1, 2, 400), std::make_tuple(2, 1, 400),
                  std::make_tuple(2, 0, 400), std::make_tuple(0, 2, 400),
                  std::make_tuple(3, 2, 400), std::make_tuple(2, 3, 400),
                  // Second tree, by child: 0 -> 1, 1 -> 3, 2 -> 1.
                  std::make_tuple(0, 1, 400), std::make_tuple(1, 0, 400),
                  std::make_tuple(1, 3, 400), std::make_tuple(3, 1, 400),
                  std::make_tuple(2, 1, 400), std::make_tuple(1, 2, 400)));
  EXPECT_EQ(p.steps, 4);
  EXPECT_EQ(p.wire_bytes, 1600);
  EXPECT_EQ(MostPerRank(p, 4), 1600);
  // 4 x 100 + 1600 / 10 = 560 (the ring: 720).
  EXPECT_EQ(
      CollectiveTimeNs(CollectiveKind::kAllReduce, kTree, 800, 4, 10, 100),
      560);
}

TEST(CollectiveModelTest, TreeAllReduceOnThreeAndTwoRanks) {
  // 3 ranks (odd: the second tree shifts the first by one rank). First
  // tree: 0 -> 2 -> 1; second: 1 -> 0 -> 2. Ranks 0 and 2 have three edges
  // in all (3 x 400 = 1200), rank 1 two.
  const CollectivePlan three =
      PlanCollective(CollectiveKind::kAllReduce, kTree, 800, 3);
  EXPECT_THAT(
      Flows(three),
      ElementsAre(std::make_tuple(1, 2, 400), std::make_tuple(2, 1, 400),
                  std::make_tuple(2, 0, 400), std::make_tuple(0, 2, 400),
                  std::make_tuple(0, 1, 400), std::make_tuple(1, 0, 400),
                  std::make_tuple(2, 0, 400), std::make_tuple(0, 2, 400)));
  EXPECT_EQ(three.wire_bytes, 1200);
  EXPECT_EQ(three.steps, 4);
  // 2 ranks: one edge per tree, the halves 401 and 400 of 801 bytes: each
  // rank sends and receives the whole tensor once, as in a ring.
  const CollectivePlan two =
      PlanCollective(CollectiveKind::kAllReduce, kTree, 801, 2);
  EXPECT_THAT(
      Flows(two),
      ElementsAre(std::make_tuple(1, 0, 401), std::make_tuple(0, 1, 401),
                  std::make_tuple(0, 1, 400), std::make_tuple(1, 0, 400)));
  EXPECT_EQ(two.wire_bytes, 801);
  EXPECT_EQ(two.steps, 2);
}

TEST(CollectiveModelTest, TreeShapeForEveryGroupUpTo130) {
  for (int32_t n = 2; n <= 130; ++n) {
    SCOPED_TRACE(n);
    const int64_t bytes = 1001;
    const CollectivePlan p =
        PlanCollective(CollectiveKind::kAllReduce, kTree, bytes, n);
    // Two trees of n - 1 edges, each edge both ways.
    ASSERT_EQ(p.flows.size(), static_cast<size_t>(4 * (n - 1)));
    // Each tree spans the ranks and is ceil(log2 n) deep: follow the
    // reduce flows (the even ones) up to the root.
    int32_t log2 = 0;
    while ((1 << log2) < n) ++log2;
    EXPECT_EQ(p.steps, 2 * log2);
    for (int32_t t = 0; t < 2; ++t) {
      std::vector<int32_t> parent(n, -1);
      for (int32_t e = 0; e < n - 1; ++e) {
        const CollectiveFlow& up = p.flows[2 * ((n - 1) * t + e)];
        const CollectiveFlow& down = p.flows[2 * ((n - 1) * t + e) + 1];
        EXPECT_EQ(up.src, down.dst);
        EXPECT_EQ(up.dst, down.src);
        EXPECT_EQ(up.bytes, t == 0 ? 501 : 500);
        ASSERT_EQ(parent[up.src], -1);
        parent[up.src] = up.dst;
      }
      int32_t deepest = 0;
      for (int32_t r = 0; r < n; ++r) {
        int32_t depth = 0;
        for (int32_t x = r; parent[x] >= 0; x = parent[x]) {
          ++depth;
          ASSERT_LE(depth, n);  // no cycle
        }
        deepest = std::max(deepest, depth);
      }
      EXPECT_EQ(deepest, log2);
    }
    // The wire bytes counted from the flows, and the header's bound.
    EXPECT_EQ(p.wire_bytes, MostPerRank(p, n));
    EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kTree, bytes, n),
              p.wire_bytes);
    EXPECT_LE(p.wire_bytes, 4 * 501);
    // Rings: each rank sends once and receives once.
    const CollectivePlan ring =
        PlanCollective(CollectiveKind::kAllReduce, kRing, bytes, n);
    EXPECT_EQ(ring.wire_bytes, MostPerRank(ring, n));
  }
  // From 4 ranks on, some rank has four edges: 2 x bytes for an even size.
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kTree, 800, 8),
            1600);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kTree, 800, 64),
            1600);
}

TEST(CollectiveModelTest, OneRankIsANoOp) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllReduce, CollectiveKind::kAllToAll,
        CollectiveKind::kSendRecv}) {
    for (CollectiveAlgorithm algorithm : {kRing, kTree}) {
      const CollectivePlan p = PlanCollective(kind, algorithm, 1 << 20, 1);
      EXPECT_THAT(p.flows, IsEmpty());
      EXPECT_EQ(p.steps, 0);
      EXPECT_EQ(p.wire_bytes, 0);
      EXPECT_EQ(CollectiveTimeNs(kind, algorithm, 1 << 20, 1, 10, 1000), 0);
    }
  }
}

TEST(CollectiveModelTest, ZeroBytesPayOnlyTheHops) {
  const CollectivePlan p =
      PlanCollective(CollectiveKind::kAllReduce, kRing, 0, 4);
  EXPECT_THAT(p.flows, IsEmpty());
  EXPECT_EQ(p.steps, 6);
  EXPECT_EQ(CollectiveTimeNs(CollectiveKind::kAllReduce, kRing, 0, 4, 10, 100),
            600);
}

TEST(CollectiveModelTest, HugeInputsSaturate) {
  // 2^60 bytes over 8 ranks: 2 x 7/8 x 2^60 = 7 x 2^58, exact.
  const int64_t big = int64_t{1} << 60;
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kRing, big, 8),
            7 * (int64_t{1} << 58));
  // The largest group: (n-1)/n x 2^60 = 2^60 - floor(2^60 / n), exact
  // (no n x bytes product is formed).
  const int32_t most = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllGather, kRing, big, most),
            big - big / most);
  EXPECT_EQ(CollectiveSteps(CollectiveKind::kAllReduce, kRing, most),
            2 * (int64_t{most} - 1));
  EXPECT_EQ(CollectiveSteps(CollectiveKind::kAllReduce, kTree, most), 62);
  // Past int64: 2 x 63/64 x (2^63 - 1) and a tree's 4 x 2^61 saturate.
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kRing, kMax, 64),
            kMax);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllReduce, kTree,
                                int64_t{1} << 62, 4),
            kMax);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllToAll, kRing, kMax, 3),
            2 * 3'074'457'345'618'258'603);
  EXPECT_EQ(CollectiveWireBytes(CollectiveKind::kAllToAll, kRing, kMax, 64),
            63 * (kMax / 64 + 1));
  // Times: the copy and the hops both saturate.
  EXPECT_EQ(
      CollectiveTimeNs(CollectiveKind::kAllReduce, kRing, kMax, 64, 0.001, 0),
      kMax);
  EXPECT_EQ(
      CollectiveTimeNs(CollectiveKind::kAllReduce, kRing, 1, 64, 1, kMax / 2),
      kMax);
}

}  // namespace
}  // namespace slackswap
