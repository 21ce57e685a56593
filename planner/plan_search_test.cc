// The shared plan-search steps on graphs small enough to work out by hand.
#include "planner/internal/plan_search.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using testutil::GraphBuilder;
using testutil::TestLink;

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

// kDropped changes only whether a schedule comes back, on the pruned plan
// and on the plan returned as it was; a traced judgment's records give the
// pruning the replay's.
TEST_F(KeepNeedlessRecomputesTest, ADroppedScheduleIsTheOnlyDifference) {
  for (const std::vector<int32_t>& dropped :
       {std::vector<int32_t>{s_, l_}, std::vector<int32_t>{s_}}) {
    for (Tracing tracing : {Tracing::kOff, Tracing::kOn}) {
      Plan plan = Plan::KeepAll(g_);
      for (int32_t t : dropped) plan.decisions[t].action = Action::kRecompute;
      absl::StatusOr<Judged> judged = JudgePlan(Context(), plan, tracing);
      ASSERT_TRUE(judged.ok()) << judged.status();
      EXPECT_EQ(judged->trace != nullptr, tracing == Tracing::kOn);
      absl::StatusOr<Judged> kept =
          KeepNeedlessRecomputes(Context(), *judged, ReturnedSchedule::kKept);
      absl::StatusOr<Judged> gone = KeepNeedlessRecomputes(
          Context(), *judged, ReturnedSchedule::kDropped);
      ASSERT_TRUE(kept.ok()) << kept.status();
      ASSERT_TRUE(gone.ok()) << gone.status();
      EXPECT_NE(kept->schedule, nullptr);
      EXPECT_EQ(gone->schedule, nullptr);
      EXPECT_EQ(kept->trace, nullptr);
      EXPECT_EQ(gone->trace, nullptr);
      EXPECT_EQ(gone->result.step_ns, kept->result.step_ns);
      EXPECT_EQ(gone->result.recompute_ns, kept->result.recompute_ns);
      for (int32_t t : {a_, s_, t_, l_}) {
        EXPECT_EQ(gone->plan.decisions[t].action,
                  kept->plan.decisions[t].action);
      }
      // Pruned: l kept where both were dropped; s alone stays.
      EXPECT_EQ(kept->plan.decisions[l_].action, Action::kKeep);
      EXPECT_EQ(kept->plan.decisions[s_].action, Action::kRecompute);
    }
  }
}

// Analysis and context for a hand-built step on the test link (1 byte/ns
// each way, no latency).
class HandWorkedStep {
 public:
  explicit HandWorkedStep(Graph g) : g_(std::move(g)) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g_, hw_);
    EXPECT_TRUE(a.ok()) << a.status();
    analysis_ = *std::move(a);
  }
  PlanningContext Context(int64_t budget) const {
    PlanningContext ctx{g_, hw_, analysis_, budget};
    ctx.explain = false;
    return ctx;
  }
  const Graph& graph() const { return g_; }

 private:
  Graph g_;
  Hardware hw_ = TestLink();
  StepAnalysis analysis_;
};

// f_a (100 ns) makes a (1000 B), f_b reads it and makes b (500 B), f_c
// makes c (10 B); backward b_c, b_b, b_a (1000 ns each) read c, b, a. Ideal
// starts: 0, 100, 200 | 300, 1300, 2300; backward begins at op 3.
//  - a, needed by b_a at 2300, copies back in 1000 ns: it must start by
//    1300, when b_b starts: prefetch after op 4.
//  - b, needed by b_b at 1300, in 500 ns: by 800, the latest op starting by
//    then is b_c: op 3.
//  - c is needed by b_c, the first backward op: no op of the backward pass
//    comes before it to issue its prefetch, so it becomes a recompute.
TEST(AssignPrefetchPointsTest, AsLateAsTheLinkAllowsNeverInTheForwardPass) {
  GraphBuilder b;
  const int32_t a = b.Tensor("a", 1000);
  const int32_t bt = b.Tensor("b", 500);
  const int32_t c = b.Tensor("c", 10);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_b", 100, {a}, {bt});
  b.Forward("f_c", 100, {}, {c});
  b.Backward("b_c", 1000, {c});
  b.Backward("b_b", 1000, {bt});
  b.Backward("b_a", 1000, {a});
  const HandWorkedStep step(b.Build());
  Plan plan = Plan::KeepAll(step.graph());
  for (int32_t t : {a, bt, c}) plan.decisions[t].action = Action::kSwap;
  ASSERT_TRUE(AssignPrefetchPoints(step.Context(1000), plan).ok());
  EXPECT_EQ(plan.decisions[a].prefetch_after_op, 4);
  EXPECT_EQ(plan.decisions[bt].prefetch_after_op, 3);
  EXPECT_EQ(plan.decisions[c].action, Action::kRecompute);
  EXPECT_EQ(plan.decisions[c].prefetch_after_op, kNone);
}

// The same, a 1500-byte a: it must start copying by 800, so b's copy, ahead
// of it in the H2D queue, must land by then, starting by 300: both after
// op 3, issued in need order.
TEST(AssignPrefetchPointsTest, ACopyAheadInTheQueueLandsBeforeTheNextStarts) {
  GraphBuilder b;
  const int32_t a = b.Tensor("a", 1500);
  const int32_t bt = b.Tensor("b", 500);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_b", 100, {a}, {bt});
  b.Forward("f_c", 100, {}, {});
  b.Backward("b_c", 1000, {});
  b.Backward("b_b", 1000, {bt});
  b.Backward("b_a", 1000, {a});
  const HandWorkedStep step(b.Build());
  Plan plan = Plan::KeepAll(step.graph());
  for (int32_t t : {a, bt}) plan.decisions[t].action = Action::kSwap;
  ASSERT_TRUE(AssignPrefetchPoints(step.Context(1000), plan).ok());
  EXPECT_EQ(plan.decisions[a].prefetch_after_op, 3);
  EXPECT_EQ(plan.decisions[bt].prefetch_after_op, 3);
}

// Four 1000-byte tensors made from nothing and read once in backward, all
// held at the end of the forward pass: 4000 B over a 2500-byte budget.
Graph FourTensors() {
  GraphBuilder b;
  std::vector<int32_t> t;
  for (int i = 1; i <= 4; ++i) {
    t.push_back(b.Tensor(absl::StrCat("t", i), 1000));
    b.Forward(absl::StrCat("f", i), 100, {}, {t.back()});
  }
  for (int i = 4; i >= 1; --i) {
    b.Backward(absl::StrCat("b", i), 100, {t[i - 1]});
  }
  return b.Build();
}

// Recomputing t4, t3, t2, t1 in that order: two moves free enough bytes
// but do not fit (rebuilding t4 first thing in backward needs 1000 B while
// t1 and t2 still hold 2000); all four fit; three is the fewest that fit:
// t1 alone is held when t4, then t3, then t2 are rebuilt.
TEST(FewestMovesThatFitTest, FindsTheShortestPrefixThatFits) {
  const HandWorkedStep step(FourTensors());
  const PlanningContext ctx = step.Context(2500);
  const std::vector<Move> moves = {{3, Action::kRecompute},
                                   {2, Action::kRecompute},
                                   {1, Action::kRecompute},
                                   {0, Action::kRecompute}};
  auto recomputed = [](const Judged& j) {
    std::vector<int32_t> out;
    for (size_t t = 0; t < j.plan.decisions.size(); ++t) {
      if (j.plan.decisions[t].action == Action::kRecompute) out.push_back(t);
    }
    return out;
  };
  // Checked by hand first: two moves fail, three fit.
  Plan two = Plan::KeepAll(step.graph());
  for (int32_t t : {3, 2}) two.decisions[t].action = Action::kRecompute;
  absl::StatusOr<Judged> judged_two = JudgePlan(ctx, two);
  ASSERT_TRUE(judged_two.ok());
  EXPECT_FALSE(judged_two->result.feasible);

  absl::StatusOr<Judged> fewest =
      FewestMovesThatFit(ctx, Plan::KeepAll(step.graph()), moves);
  ASSERT_TRUE(fewest.ok()) << fewest.status();
  ASSERT_TRUE(fewest->result.feasible) << fewest->result.infeasible_reason;
  EXPECT_EQ(recomputed(*fewest), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(fewest->result.peak_activation_bytes, 2000);
  EXPECT_EQ(fewest->result.recompute_ns, 300);

  // Under 1000 bytes nothing fits: every move is applied, infeasible.
  absl::StatusOr<Judged> none =
      FewestMovesThatFit(step.Context(999), Plan::KeepAll(step.graph()), moves);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->result.feasible);
  EXPECT_EQ(recomputed(*none), (std::vector<int32_t>{0, 1, 2, 3}));
}

// Recomputing all four, one tensor is held at a time: 1000 B is the lowest
// peak, found by bisection to 0.1% of the 4000-byte peak.
TEST(MinimumFeasibleBudgetTest, IsTheLowestPeakThePolicyReaches) {
  const HandWorkedStep step(FourTensors());
  absl::StatusOr<int64_t> lowest =
      MinimumFeasibleBudget("recompute_only", step.Context(4000));
  ASSERT_TRUE(lowest.ok()) << lowest.status();
  EXPECT_GE(*lowest, 1000);
  EXPECT_LE(*lowest, 1000 + 4);
}

// f_a (100 ns) makes a (1000 B); f_idle (1100 ns) makes nothing; f_b
// (100 ns) makes b (1000 B); backward b_b (100 ns) reads b, then, when
// `idle_ns` > 0, b_idle runs that long; b_a reads a. Both held would be
// 2000 B over a 1500-byte budget. Swapping a: its copy out (1000 ns) ends
// at 1100, before f_b needs the memory.
Graph LatePrefetchStep(int64_t idle_ns) {
  GraphBuilder b;
  const int32_t a = b.Tensor("a", 1000);
  const int32_t bt = b.Tensor("b", 1000);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_idle", 1100, {}, {});
  b.Forward("f_b", 100, {}, {bt});
  b.Backward("b_b", 100, {bt});
  if (idle_ns > 0) b.Backward("b_idle", idle_ns, {});
  b.Backward("b_a", 100, {a});
  return b.Build();
}

// Without b_idle, a's copy back cannot start before b is freed when b_b
// ends (1400): it lands at 2400 and b_a waits 1000 ns. Rebuilding a costs
// f_a's 100 ns: the repair recomputes it, a 1600-ns step (1500 + 100).
// The step's plan swapping a (tensor 0), judged.
absl::StatusOr<Judged> SwapA(const PlanningContext& ctx) {
  Plan swap_a = Plan::KeepAll(ctx.graph);
  swap_a.decisions[0].action = Action::kSwap;
  return JudgePlan(ctx, swap_a);
}

TEST(RepairLateSwapsTest, ALatePrefetchBecomesACheaperRecompute) {
  const HandWorkedStep step(LatePrefetchStep(0));
  const PlanningContext ctx = step.Context(1500);
  absl::StatusOr<Judged> judged = SwapA(ctx);
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->result.feasible) << judged->result.infeasible_reason;
  EXPECT_EQ(judged->result.stall_prefetch_ns, 1000);
  EXPECT_EQ(judged->result.step_ns, 2500);

  absl::StatusOr<std::optional<Judged>> repaired =
      RepairLateSwaps(ctx, *judged);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  ASSERT_TRUE(repaired->has_value());
  const Judged& r = **repaired;
  EXPECT_EQ(r.plan.decisions[0].action, Action::kRecompute);
  EXPECT_EQ(r.plan.decisions[1].action, Action::kKeep);
  EXPECT_TRUE(r.result.feasible) << r.result.infeasible_reason;
  EXPECT_EQ(r.result.step_ns, 1600);
}

// With a 2000-ns b_idle the copy back runs during it and lands as b_a
// starts: nothing is late, nothing to repair.
TEST(RepairLateSwapsTest, APrefetchOnTimeIsLeftAlone) {
  const HandWorkedStep step(LatePrefetchStep(2000));
  const PlanningContext ctx = step.Context(1500);
  absl::StatusOr<Judged> judged = SwapA(ctx);
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->result.feasible) << judged->result.infeasible_reason;
  EXPECT_EQ(judged->result.stall_prefetch_ns, 0);
  EXPECT_EQ(judged->result.step_ns,
            step.Context(1500).analysis.durations.total_ns);
  absl::StatusOr<std::optional<Judged>> repaired =
      RepairLateSwaps(ctx, *judged);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_FALSE(repaired->has_value());
}

}  // namespace
}  // namespace slackswap
