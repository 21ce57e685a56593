#include "planner/analysis.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/workloads.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using testutil::GraphBuilder;
using testutil::TestLink;

// x -> f1 -> y (unsaved) -> f2 -> z; backward reads z, then x.
struct Chain {
  Graph g;
  int32_t x, y, z;
  Chain() {
    GraphBuilder b;
    x = b.Tensor("x", 100);
    y = b.Tensor("y", 200);
    z = b.Tensor("z", 3000);
    b.Forward("f0", 10, {}, {x});
    b.Forward("f1", 20, {x}, {y});
    b.Forward("f2", 30, {y}, {z});
    b.Backward("b_z", 40, {z});
    b.Backward("b_x", 50, {x});
    g = b.Build();
  }
};

TEST(AnalyzeStepTest, DescribesCandidatesAndTheIdealTimeline) {
  Chain c;
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(c.g, TestLink());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->forward_ns, 60);
  EXPECT_EQ(a->op_start_ns[3], 60);     // b_z
  EXPECT_EQ(a->op_end_ns.back(), 150);  // b_x
  EXPECT_EQ(a->unconstrained_peak_bytes, 3100);
  ASSERT_EQ(a->candidates.size(), 2u);  // x and z; y is not saved
  const Candidate& z = a->candidates[a->candidate_of[c.z]];
  EXPECT_EQ(z.bytes, 3000);
  EXPECT_EQ(z.d2h_ns, 3000);  // 1 byte/ns
  EXPECT_EQ(z.h2d_ns, 3000);
  // Rebuilding z re-runs f2, and f1 for the unsaved y: a chain.
  EXPECT_EQ(z.recompute_ns, 50);
  EXPECT_EQ(z.producer, 2);
  EXPECT_EQ(z.last_fwd_use, kNone);  // read only in backward
  EXPECT_EQ(z.first_bwd_use, 3);
  const Candidate& x = a->candidates[a->candidate_of[c.x]];
  EXPECT_EQ(x.recompute_ns, 10);
  EXPECT_EQ(x.last_fwd_use, 1);   // f1
  EXPECT_EQ(x.first_bwd_use, 4);  // b_x
}

TEST(RecomputeCostTest, ChainsThroughWhatThePlanDrops) {
  Chain c;
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(c.g, TestLink());
  ASSERT_TRUE(a.ok());
  Plan plan = Plan::KeepAll(c.g);
  EXPECT_EQ(RecomputeCostNs(c.g, a->durations, plan, c.z), 50);
  // With x dropped as well, rebuilding z reaches back to f0.
  plan.decisions[c.x].action = Action::kRecompute;
  EXPECT_EQ(RecomputeCostNs(c.g, a->durations, plan, c.z), 60);
  // A swapped input is brought back, not rebuilt.
  plan.decisions[c.x].action = Action::kSwap;
  EXPECT_EQ(RecomputeCostNs(c.g, a->durations, plan, c.z), 50);
}

// docs/PERFORMANCE.md gives it: a 10^6-op step has a million candidates.
int32_t Named(const Graph& g, const std::string& name) {
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].name.view() == name) return static_cast<int32_t>(t);
  }
  ADD_FAILURE() << name;
  return 0;
}

// FSDP (model/transformer.h): a layer's activations rebuild from the
// parameters its backward gathers; its input would need the previous
// layer's, gathered only after this layer's backward: kept instead.
TEST(RecomputableTest, FsdpLayerInputsAreKept) {
  WorkloadOverrides o;
  o.layers = 2;
  absl::StatusOr<Graph> single = BuildWorkload("gpt2-xl", o);
  o.fully_sharded = 8;
  absl::StatusOr<Graph> fsdp = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(single.ok() && fsdp.ok()) << fsdp.status();
  const std::vector<bool> all = RecomputableTensors(*single);
  for (int32_t t : single->index.saved) EXPECT_TRUE(all[t]);

  const std::vector<bool> r = RecomputableTensors(*fsdp);
  for (const char* yes :
       {"L0.xn", "L0.q", "L1.u", "L1.g", "yn", "probs", "x0", "L1.r1"}) {
    EXPECT_TRUE(r[Named(*fsdp, yes)]) << yes;
  }
  // L1's input (L0's output) and ln_f's (L1's output).
  for (const char* no : {"L0.r2", "L1.r2"}) {
    EXPECT_FALSE(r[Named(*fsdp, no)]) << no;
  }
  StepAnalysis a;
  a.recomputable = r;
  Plan plan = Plan::KeepAll(*fsdp);
  for (int32_t t : fsdp->index.saved) {
    plan.decisions[t].action = Action::kRecompute;
  }
  EXPECT_TRUE(KeepUnrecomputable(a, plan));
  EXPECT_EQ(plan.decisions[Named(*fsdp, "L0.r2")].action, Action::kKeep);
  EXPECT_EQ(plan.decisions[Named(*fsdp, "L0.xn")].action, Action::kRecompute);
  EXPECT_FALSE(KeepUnrecomputable(a, plan));
}

TEST(AnalysisTest, CandidatesAreCompact) { EXPECT_EQ(sizeof(Candidate), 48u); }

}  // namespace
}  // namespace slackswap
