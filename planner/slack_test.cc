#include "planner/internal/slack.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using testutil::GraphBuilder;
using testutil::TestLink;

TEST(MinTreeTest, RangeAddAndMinimum) {
  MinTree t({5, 3, 8, 6});
  EXPECT_EQ(t.Min(0, 3), 3);
  t.Add(0, 1, -4);  // 1 -1 8 6
  EXPECT_EQ(t.Min(0, 3), -1);
  EXPECT_EQ(t.Min(2, 3), 6);
  t.Add(1, 3, 10);  // 1 9 18 16
  EXPECT_EQ(t.Min(1, 3), 9);
  EXPECT_EQ(t.Min(0, 0), 1);
}

// Against a plain array, on every size up to 40 (powers of two and not):
// random range adds and range minimums agree.
TEST(MinTreeTest, AgreesWithAPlainArray) {
  std::mt19937 rng(7);
  for (int n = 1; n <= 40; ++n) {
    std::vector<int64_t> plain(n);
    for (int64_t& v : plain) v = static_cast<int64_t>(rng() % 1000) - 500;
    MinTree tree(plain);
    for (int step = 0; step < 200; ++step) {
      int32_t lo = static_cast<int32_t>(rng() % n);
      int32_t hi = static_cast<int32_t>(rng() % n);
      if (lo > hi) std::swap(lo, hi);
      if (rng() % 2 == 0) {
        const int64_t v = static_cast<int64_t>(rng() % 200) - 100;
        tree.Add(lo, hi, v);
        for (int32_t i = lo; i <= hi; ++i) plain[i] += v;
      } else {
        const int64_t want =
            *std::min_element(plain.begin() + lo, plain.begin() + hi + 1);
        ASSERT_EQ(tree.Min(lo, hi), want)
            << "n=" << n << " [" << lo << ", " << hi << "] at step " << step;
      }
    }
  }
}

// Three 1000-byte tensors made back to back, then 2500 ns of forward
// compute, then backward: room on D2H for two 1000-ns swap-outs only.
TEST(SlackFillerTest, AdmitsSwapsWhileTheStreamsMeetEveryDeadline) {
  GraphBuilder b;
  int32_t t0 = b.Tensor("t0", 1000);
  int32_t t1 = b.Tensor("t1", 1000);
  int32_t t2 = b.Tensor("t2", 1000);
  b.Forward("f0", 0, {}, {t0});
  b.Forward("f1", 0, {}, {t1});
  b.Forward("f2", 0, {}, {t2});
  b.Forward("tail", 2500, {}, {});
  b.Backward("head", 10000, {});
  b.Backward("b2", 1, {t2});
  b.Backward("b1", 1, {t1});
  b.Backward("b0", 1, {t0});
  Graph g = b.Build();
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, TestLink());
  ASSERT_TRUE(a.ok());
  SlackFiller filler(*a, a->forward_ns);
  EXPECT_TRUE(filler.TryAdmit(0));
  EXPECT_TRUE(filler.TryAdmit(2));
  EXPECT_FALSE(filler.TryAdmit(1));  // 3000 ns of copies in 2500 ns
}

TEST(SlackFillerTest, PrefetchesMustLandBeforeTheirUse) {
  // Plenty of forward time, but only 1500 ns of backward compute before the
  // two tensors are needed.
  GraphBuilder b;
  int32_t t0 = b.Tensor("t0", 1000);
  int32_t t1 = b.Tensor("t1", 1000);
  b.Forward("f0", 0, {}, {t0});
  b.Forward("f1", 0, {}, {t1});
  b.Forward("tail", 100000, {}, {});
  b.Backward("head", 1500, {});
  b.Backward("b1", 1, {t1});
  b.Backward("b0", 1, {t0});
  Graph g = b.Build();
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, TestLink());
  ASSERT_TRUE(a.ok());
  SlackFiller filler(*a, a->forward_ns);
  EXPECT_TRUE(filler.TryAdmit(1));
  EXPECT_FALSE(filler.TryAdmit(0));
}

}  // namespace
}  // namespace slackswap
