// The shared plan-search steps on graphs small enough to work out by hand.
#include "planner/internal/plan_search.h"

#include "gtest/gtest.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using testing::GraphBuilder;
using testing::TestLink;

// a, s, t, l: 1000 bytes each, all saved: 4000 at the end of the forward
// pass, over a 3000-byte budget, so one of s and l must go. s dies after
// f_t reads it; l comes last, from a 300-ns op. Recomputing both fits, but
// l's memory is never needed: after f_t only a and t are held.
class KeepNeedlessRecomputesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphBuilder b;
    a_ = b.Tensor("a", 1000);
    s_ = b.Tensor("s", 1000);
    t_ = b.Tensor("t", 1000);
    l_ = b.Tensor("l", 1000);
    b.Forward("f_a", 100, {}, {a_});
    b.Forward("f_s", 100, {a_}, {s_});
    b.Forward("f_t", 100, {s_}, {t_});
    b.Forward("f_l", 300, {}, {l_});
    b.Backward("b_l", 10, {l_});
    b.Backward("b_t", 10, {t_});
    b.Backward("b_s", 10, {s_});
    b.Backward("b_a", 10, {a_});
    g_ = b.Build();
    absl::StatusOr<StepAnalysis> analysis = AnalyzeStep(g_, hw_);
    ASSERT_TRUE(analysis.ok()) << analysis.status();
    analysis_ = *std::move(analysis);
  }

  // The plan recomputing `dropped` under a 3000-byte budget, judged.
  Judged Judge(std::vector<int32_t> dropped) {
    Plan plan = Plan::KeepAll(g_);
    for (int32_t t : dropped) plan.decisions[t].action = Action::kRecompute;
    absl::StatusOr<Judged> judged = JudgePlan(Context(), plan);
    EXPECT_TRUE(judged.ok()) << judged.status();
    EXPECT_TRUE(judged->result.feasible) << judged->result.infeasible_reason;
    return *std::move(judged);
  }

  PlanningContext Context() const {
    return PlanningContext{g_, hw_, analysis_, /*budget_bytes=*/3000};
  }

  Graph g_;
  Hardware hw_ = TestLink();
  StepAnalysis analysis_;
  int32_t a_, s_, t_, l_;
};

TEST_F(KeepNeedlessRecomputesTest, KeepsWhatTheBudgetDoesNotNeed) {
  Judged both = Judge({s_, l_});
  EXPECT_EQ(both.result.recompute_ns, 400);

  absl::StatusOr<Judged> pruned = KeepNeedlessRecomputes(Context(), both);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_TRUE(pruned->result.feasible) << pruned->result.infeasible_reason;
  // l (the larger rebuild) is kept; then s no longer fits beside it.
  EXPECT_EQ(pruned->plan.decisions[l_].action, Action::kKeep);
  EXPECT_EQ(pruned->plan.decisions[s_].action, Action::kRecompute);
  EXPECT_EQ(pruned->result.recompute_ns, 100);
  EXPECT_EQ(pruned->result.step_ns, both.result.step_ns - 300);
  EXPECT_LE(pruned->result.peak_activation_bytes, 3000);
}

TEST_F(KeepNeedlessRecomputesTest, ReturnsThePlanWhenEveryRecomputeIsNeeded) {
  // a, t and l fill the budget once l is made: s must stay dropped.
  Judged only_s = Judge({s_});
  absl::StatusOr<Judged> pruned = KeepNeedlessRecomputes(Context(), only_s);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->plan.decisions[s_].action, Action::kRecompute);
  EXPECT_EQ(pruned->result.step_ns, only_s.result.step_ns);
}

}  // namespace
}  // namespace slackswap
