// Other completions of a plan's swaps (TryOtherCompletions): free siblings
// worked by hand, the order they make, the order per byte a re-run
// restores (PerByte), and on random steps, never a longer step than the
// plan they start from.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"
#include "testing/planning_step.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using testutil::GraphBuilder;

// A norm makes y (1000 bytes) and its statistics s (200) in one 150-ns op;
// u (1000) comes from a 500-ns op, w (3000) from a 30-us one. 5200 saved
// bytes against a 4000-byte budget: 1200 must go. Cheapest per byte: y
// (0.15 ns/B), u (0.5), s (0.75), w (10). y alone frees too little, so the
// cheapest-per-byte prefix is y and u, 650 ns of rebuilds, neither of which
// can be kept (the budget binds when w is made). Rebuilding y re-runs the
// norm, which restores s with it: y and s free 1200 bytes for 150 ns.
class FreeSiblingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphBuilder b;
    const int32_t x = b.Tensor("x", 1000, TensorKind::kInput);
    y_ = b.Tensor("y", 1000);
    s_ = b.Tensor("s", 200);
    u_ = b.Tensor("u", 1000);
    w_ = b.Tensor("w", 3000);
    b.Forward("norm", 150, {x}, {y_, s_});
    b.Forward("f_u", 500, {x}, {u_});
    b.Forward("f_w", 30'000, {x}, {w_});
    b.Backward("b_w", 10, {w_});
    b.Backward("b_u", 10, {u_});
    b.Backward("b_norm", 10, {y_, s_});
    step_ = testutil::MakePlanningStep(b.Build(), testutil::TestLink());
  }

  PlanningContext Context() const { return step_.At(4000); }

  static constexpr int64_t kIdealNs = 150 + 500 + 30'000 + 3 * 10;
  int32_t y_ = 0, s_ = 0, u_ = 0, w_ = 0;
  testutil::PlanningStep step_;
};

TEST_F(FreeSiblingsTest, AReRunsOtherOutputsFollowIt) {
  const Plan keep_all = Plan::KeepAll(step_.graph);
  std::vector<int32_t> order;
  for (const Move& m : WithFreeSiblings(
           step_.graph,
           CheapestRecomputeMoves(step_.graph, step_.analysis, keep_all))) {
    EXPECT_EQ(m.action, Action::kRecompute);
    order.push_back(m.tensor);
  }
  EXPECT_EQ(order, (std::vector<int32_t>{y_, s_, u_, w_}));
}

TEST_F(FreeSiblingsTest, TheCompletionRebuildsOnlyTheNormsOutputs) {
  const PlanningContext ctx = Context();
  absl::StatusOr<Judged> cheapest =
      RecomputeCheapestThatFit(ctx, Plan::KeepAll(step_.graph));
  ASSERT_TRUE(cheapest.ok()) << cheapest.status();
  ASSERT_TRUE(cheapest->result.feasible) << cheapest->result.infeasible_reason;
  EXPECT_EQ(cheapest->result.step_ns, kIdealNs + 150 + 500);
  EXPECT_EQ(cheapest->plan.decisions[u_].action, Action::kRecompute);

  absl::StatusOr<Judged> other = TryOtherCompletions(ctx, *cheapest);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(other->result.feasible);
  EXPECT_EQ(other->result.step_ns, kIdealNs + 150);
  EXPECT_EQ(other->plan.decisions[y_].action, Action::kRecompute);
  EXPECT_EQ(other->plan.decisions[s_].action, Action::kRecompute);
  EXPECT_EQ(other->plan.decisions[u_].action, Action::kKeep);
  EXPECT_EQ(other->plan.decisions[w_].action, Action::kKeep);
  EXPECT_LE(other->result.peak_activation_bytes, 4000);
}

TEST_F(FreeSiblingsTest, APlanAlreadyAtItsBoundComesBackAsItIs) {
  const PlanningContext ctx = Context();
  Plan plan = Plan::KeepAll(step_.graph);
  plan.decisions[y_].action = Action::kRecompute;
  plan.decisions[s_].action = Action::kRecompute;
  absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
  ASSERT_TRUE(judged.ok()) << judged.status();
  absl::StatusOr<Judged> other = TryOtherCompletions(ctx, *judged);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(judged->result.step_ns, kIdealNs + 150);
  EXPECT_EQ(other->result.step_ns, judged->result.step_ns);
  EXPECT_EQ(other->plan.decisions[u_].action, Action::kKeep);
}

// Per byte its re-run restores, the norm's two outputs share one 150-ns
// rebuild over 1200 bytes: 0.125 ns/B each, ahead of u; per byte of the
// tensor, s (0.75) comes after u (0.5).
TEST_F(FreeSiblingsTest, PerByteTheReRunRestoresTheNormsOutputsComeFirst) {
  const Plan keep_all = Plan::KeepAll(step_.graph);
  using Ranked = std::vector<std::pair<double, int32_t>>;
  EXPECT_EQ(KeptByRebuildNsPerByte(step_.graph, step_.analysis, keep_all,
                                   PerByte::kRestoredByTheReRun),
            (Ranked{{0.125, y_}, {0.125, s_}, {0.5, u_}, {10.0, w_}}));
  EXPECT_EQ(KeptByRebuildNsPerByte(step_.graph, step_.analysis, keep_all,
                                   PerByte::kOfTheTensor),
            (Ranked{{0.15, y_}, {0.5, u_}, {0.75, s_}, {10.0, w_}}));
  // Over every candidate, as the keep-all plan keeps them.
  EXPECT_EQ(EveryCandidateByRebuildNsPerByte(step_.graph, step_.analysis,
                                             PerByte::kRestoredByTheReRun),
            (Ranked{{0.125, y_}, {0.125, s_}, {0.5, u_}, {10.0, w_}}));
  EXPECT_EQ(EveryCandidateByRebuildNsPerByte(step_.graph, step_.analysis,
                                             PerByte::kOfTheTensor),
            (Ranked{{0.15, y_}, {0.5, u_}, {0.75, s_}, {10.0, w_}}));
  EXPECT_TRUE(KeepsSiblings(step_.graph, step_.analysis, keep_all));
  // With s already dropped, y's re-run restores only y.
  Plan without_s = keep_all;
  without_s.decisions[s_].action = Action::kRecompute;
  EXPECT_FALSE(KeepsSiblings(step_.graph, step_.analysis, without_s));
  EXPECT_EQ(KeptByRebuildNsPerByte(step_.graph, step_.analysis, without_s,
                                   PerByte::kRestoredByTheReRun),
            (Ranked{{0.15, y_}, {0.5, u_}, {10.0, w_}}));
}

TEST_F(FreeSiblingsTest, CompletedPerByteTheReRunRestoresOnlyTheNormRuns) {
  absl::StatusOr<Judged> fit = RecomputeCheapestThatFit(
      Context(), Plan::KeepAll(step_.graph), PerByte::kRestoredByTheReRun);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(fit->result.feasible) << fit->result.infeasible_reason;
  EXPECT_EQ(fit->result.step_ns, kIdealNs + 150);
  EXPECT_EQ(fit->plan.decisions[y_].action, Action::kRecompute);
  EXPECT_EQ(fit->plan.decisions[s_].action, Action::kRecompute);
  EXPECT_EQ(fit->plan.decisions[u_].action, Action::kKeep);
  EXPECT_LE(fit->result.peak_activation_bytes, 4000);
}

// On a real step: the same moves, and a move out of the cheapest-per-byte
// order only ever in a run of its producer's outputs led by one whose
// rebuild re-runs that producer (a recipe's rebuild, a dropout mask's,
// restores nothing else).
TEST(WithFreeSiblingsTest, OnlyBringsSiblingsForward) {
  absl::StatusOr<Graph> g = BuildTransformer(*FindWorkload("gpt2-xl"));
  ASSERT_TRUE(g.ok());
  absl::StatusOr<StepAnalysis> a =
      AnalyzeStep(*g, *FindHardware("a100-80gb-pcie4"));
  ASSERT_TRUE(a.ok());
  const std::vector<Move> cheapest =
      CheapestRecomputeMoves(*g, *a, Plan::KeepAll(*g));
  const std::vector<Move> moved = WithFreeSiblings(*g, cheapest);
  ASSERT_EQ(moved.size(), cheapest.size());
  std::vector<int32_t> x, y;
  for (const Move& m : cheapest) x.push_back(m.tensor);
  for (const Move& m : moved) y.push_back(m.tensor);
  EXPECT_TRUE(std::is_permutation(x.begin(), x.end(), y.begin()));
  int brought = 0;
  size_t next = 0;  // the cheapest move not yet placed, in x's order
  std::vector<bool> placed(g->tensors.size(), false);
  for (size_t i = 0; i < y.size(); ++i) {
    while (next < x.size() && placed[x[next]]) ++next;
    placed[y[i]] = true;
    if (y[i] == x[next]) continue;
    ++brought;
    // The run of its producer's outputs it ends, and the run's lead.
    const int32_t producer = g->index.producer[y[i]];
    size_t lead = i;
    while (lead > 0 && g->index.producer[y[lead - 1]] == producer) --lead;
    EXPECT_LT(lead, i) << g->TensorLabel(y[i]) << " leads no run";
    EXPECT_FALSE(g->index.has_recipe[y[lead]]) << g->TensorLabel(y[lead]);
  }
  // gpt2-xl's norms and attention make statistics beside their outputs.
  EXPECT_GT(brought, 90);
}

// Never a longer step than the plan it starts from, what it returns is what
// its plan simulates to, and on some of these steps it is shorter.
TEST(TryOtherCompletionsTest, OnRandomStepsNeverLonger) {
  int judged = 0;
  int shorter = 0;
  for (uint32_t seed = 0; seed < 32; ++seed) {
    const testutil::PlanningStep s = testutil::MakePlanningStep(
        testutil::RandomTrainingStep(seed, {.forward_ops = 16}),
        *FindHardware("a100-80gb-pcie4"));
    for (double share : {0.3, 0.5, 0.7}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " budget ", share));
      const PlanningContext ctx = s.AtShare(share);
      absl::StatusOr<Judged> start =
          RecomputeCheapestThatFit(ctx, Plan::KeepAll(s.graph));
      ASSERT_TRUE(start.ok()) << start.status();
      if (!start->result.feasible) continue;
      absl::StatusOr<Judged> other = TryOtherCompletions(ctx, *start);
      ASSERT_TRUE(other.ok()) << other.status();
      ASSERT_TRUE(other->result.feasible);
      EXPECT_LE(other->result.step_ns, start->result.step_ns);
      absl::StatusOr<Judged> again = JudgePlan(ctx, other->plan);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->result.step_ns, other->result.step_ns);
      EXPECT_LE(other->result.peak_activation_bytes, ctx.budget_bytes);
      ++judged;
      shorter += other->result.step_ns < start->result.step_ns;
    }
  }
  EXPECT_GT(judged, 30);
  EXPECT_GT(shorter, 0);
  std::printf("%d of %d plans shorter\n", shorter, judged);
}

}  // namespace
}  // namespace slackswap
