// The searches over activation budgets, with judges whose answers are known
// in advance (an activation limit: every budget at or under it fits) and
// with the device judge on random training steps.
#include "planner/budget_search.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "planner/analysis.h"
#include "testing/graph_builder.h"
#include "testing/planning_step.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

struct Fixture {
  explicit Fixture(testutil::RandomStepOptions options = {.forward_ops = 12})
      : g(testutil::RandomTrainingStep(/*seed=*/3, options)) {
    absl::StatusOr<StepAnalysis> analysis = AnalyzeStep(g, hw);
    EXPECT_TRUE(analysis.ok()) << analysis.status();
    if (analysis.ok()) a = *std::move(analysis);
    peak = a.unconstrained_peak_bytes;
    tolerance = std::max<int64_t>(1, peak / 1000);
  }
  Graph g;
  Hardware hw = testutil::TestLink();
  StepAnalysis a;
  int64_t peak = 0;
  int64_t tolerance = 0;
  PlanningContext Context() { return PlanningContext{g, hw, a, peak}; }
};

// Fits when the plan's simulated activation peak is at most `limit`.
Judge ActivationLimit(const PlanningContext& ctx, const char* policy,
                      int64_t limit, int* calls) {
  return [&ctx, policy, limit, calls](
             const Plan& plan, int64_t budget) -> absl::StatusOr<Judgement> {
    ++*calls;
    PlanningContext at = ctx;
    at.budget_bytes = budget;
    Judgement j;
    absl::StatusOr<SimResult> r = SimulatePlan(policy, at, plan, {});
    if (!r.ok()) return r.status();
    j.result = *std::move(r);
    if (!j.result.feasible) {
      j.verdict = Verdict::kUnder;
    } else if (j.result.peak_activation_bytes <= limit) {
      j.verdict = Verdict::kFits;
    } else {
      j.verdict = Verdict::kOver;
      j.excess = j.result.peak_activation_bytes - limit;
    }
    return j;
  };
}

TEST(BudgetSearchTest, AStartThatFitsIsTheAnswer) {
  Fixture f;
  const PlanningContext ctx = f.Context();
  int calls = 0;
  absl::StatusOr<BudgetSearch> s = LargestFittingBudget(
      "slackswap", ctx, ActivationLimit(ctx, "slackswap", f.peak, &calls),
      f.peak);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->found);
  EXPECT_EQ(s->budget_bytes, f.peak);
  EXPECT_EQ(s->evaluations, 1);
  EXPECT_EQ(calls, 1);
}

TEST(BudgetSearchTest, FindsTheLargestBudgetUnderALimit) {
  // A plan for budget B peaks at most at B, so every budget up to the
  // limit fits: the answer is within the tolerance below it or above.
  Fixture f;
  const PlanningContext ctx = f.Context();
  for (const char* policy : {"recompute_only", "slackswap"}) {
    SCOPED_TRACE(policy);
    const int64_t limit = f.peak * 6 / 10;
    int calls = 0;
    absl::StatusOr<BudgetSearch> s = LargestFittingBudget(
        policy, ctx, ActivationLimit(ctx, policy, limit, &calls), f.peak);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->found);
    EXPECT_LE(s->result.peak_activation_bytes, limit);
    EXPECT_GE(s->budget_bytes, limit - f.tolerance);
    EXPECT_LE(s->evaluations, kMaxSearchEvaluations);
    EXPECT_EQ(s->evaluations, calls);
  }
}

// `judge` with each plan's step replaced by step_at(budget).
Judge WithSteps(const Judge& judge,
                const std::function<int64_t(int64_t)>& step_at) {
  return [judge, step_at](const Plan& plan,
                          int64_t budget) -> absl::StatusOr<Judgement> {
    absl::StatusOr<Judgement> j = judge(plan, budget);
    if (j.ok()) j->result.step_ns = step_at(budget);
    return j;
  };
}

TEST(BudgetSearchTest, AFitAsFastAsThePlanOverTheLimitEndsTheSearch) {
  // Steps that stop falling at a third of the peak: the plan there is as
  // fast as any at a larger budget. Under a limit at 60% the search ends
  // on a budget from that third up, as fast as the plan over the limit,
  // in fewer plans than with steps that fall all the way, where it
  // bisects to the tolerance.
  Fixture f;
  const PlanningContext ctx = f.Context();
  const int64_t limit = f.peak * 6 / 10;
  const int64_t flat_from = f.peak / 3;
  constexpr int64_t kFastest = 1000000;
  int calls = 0;
  const Judge exact = ActivationLimit(ctx, "slackswap", limit, &calls);
  absl::StatusOr<BudgetSearch> flat = LargestFittingBudget(
      "slackswap", ctx,
      WithSteps(exact,
                [&](int64_t budget) {
                  return kFastest + std::max<int64_t>(0, flat_from - budget);
                }),
      f.peak);
  absl::StatusOr<BudgetSearch> falling = LargestFittingBudget(
      "slackswap", ctx,
      WithSteps(exact,
                [&](int64_t budget) { return kFastest + (f.peak - budget); }),
      f.peak);
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_TRUE(falling.ok()) << falling.status();
  ASSERT_TRUE(flat->found);
  ASSERT_TRUE(falling->found);
  EXPECT_EQ(flat->result.step_ns, kFastest);
  EXPECT_GE(flat->budget_bytes, flat_from);
  EXPECT_LE(flat->result.peak_activation_bytes, limit);
  EXPECT_GE(falling->budget_bytes, limit - f.tolerance);
  EXPECT_LT(flat->evaluations, falling->evaluations);
}

TEST(BudgetSearchTest, AnExcessThatUnderstatesTheStepStillConverges) {
  // The reserved peak moves in the allocator's blocks: a budget lowered by
  // the excess measured can exceed by as much again. A judge that reports
  // the same small excess (0.1% of the peak) however far over the plan is
  // stands for that; stepping by it alone would spend every evaluation 0.1%
  // at a time.
  Fixture f;
  const PlanningContext ctx = f.Context();
  const int64_t limit = f.peak * 6 / 10;
  int calls = 0;
  const Judge exact = ActivationLimit(ctx, "recompute_only", limit, &calls);
  const int64_t stuck = f.tolerance;
  const Judge understated = [&exact, stuck](
                                const Plan& plan,
                                int64_t budget) -> absl::StatusOr<Judgement> {
    absl::StatusOr<Judgement> j = exact(plan, budget);
    if (j.ok() && j->verdict == Verdict::kOver) j->excess = stuck;
    return j;
  };
  absl::StatusOr<BudgetSearch> s =
      LargestFittingBudget("recompute_only", ctx, understated, f.peak);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->found);
  EXPECT_LE(s->result.peak_activation_bytes, limit);
  EXPECT_LE(s->evaluations, kMaxSearchEvaluations);
}

TEST(BudgetSearchTest, WhenNothingFitsTheNearestPlanComesBack) {
  Fixture f;
  const PlanningContext ctx = f.Context();
  int calls = 0;
  absl::StatusOr<BudgetSearch> s = LargestFittingBudget(
      "recompute_only", ctx, ActivationLimit(ctx, "recompute_only", 1, &calls),
      f.peak);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->found);
  ASSERT_TRUE(s->result.feasible);
  // The nearest is the lowest peak the search reached: the policy's lowest.
  absl::StatusOr<int64_t> lowest = MinimumFeasibleBudget("recompute_only", ctx);
  ASSERT_TRUE(lowest.ok());
  EXPECT_LE(s->result.peak_activation_bytes, *lowest + 2 * f.tolerance);
  EXPECT_LE(s->evaluations, kMaxSearchEvaluations);
}

TEST(BudgetSearchTest, TheDeviceJudgeFitsTheReservedPeak) {
  // Tensors of 32 to 512 MiB: well above the allocator's 20 MiB segments.
  Fixture f({.forward_ops = 12, .min_bytes = 32 << 20, .max_bytes = 512 << 20});
  // Size the device at 80% of what keeping everything needs.
  SimOptions report;
  report.device.enabled = true;
  f.hw.framework_reserve_bytes = 0;
  f.hw.memory_gb = 1e6;
  absl::StatusOr<SimResult> all =
      Simulate(f.g, f.hw, Plan::KeepAll(f.g), report);
  ASSERT_TRUE(all.ok());
  const int64_t keep_all = all->device->required_bytes;
  f.hw.memory_gb = keep_all * 0.8 / 1e9;
  const PlanningContext ctx = f.Context();
  absl::StatusOr<BudgetSearch> s = LargestFittingBudget(
      "slackswap", ctx, DeviceJudge("slackswap", ctx, report), f.peak);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->found);
  ASSERT_TRUE(s->result.device.has_value());
  EXPECT_TRUE(s->result.device->fits);
  EXPECT_LE(s->result.device->required_bytes, s->result.device->capacity_bytes);
  EXPECT_LT(s->budget_bytes, f.peak);
  // A device smaller than the static tensors and the least activations
  // fits nothing; the answer is the plan that needs least.
  f.hw.memory_gb = 1e-3;
  absl::StatusOr<BudgetSearch> none = LargestFittingBudget(
      "slackswap", ctx, DeviceJudge("slackswap", ctx, report), f.peak);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->found);
  EXPECT_FALSE(none->result.device->fits);
  EXPECT_LT(none->result.device->required_bytes, keep_all);
}

TEST(BudgetSearchTest, SmallestBudgetRetainingATarget) {
  Fixture f;
  const PlanningContext ctx = f.Context();
  SimOptions report;
  report.device.enabled = true;
  absl::StatusOr<BudgetSearch> s = SmallestBudgetRetaining(
      "slackswap", ctx, DeviceJudge("slackswap", ctx, report), 0.9);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->found);
  EXPECT_GE(s->result.throughput_retained, 0.9);
  EXPECT_LT(s->budget_bytes, f.peak);
  // Half a tolerance below, the plan no longer retains 90% (or the search
  // would have gone lower).
  if (s->budget_bytes > 2 * f.tolerance) {
    PlanningContext at = ctx;
    at.budget_bytes = s->budget_bytes - 2 * f.tolerance;
    absl::StatusOr<PlanOutcome> below = PlanAndSimulate("slackswap", at, {});
    ASSERT_TRUE(below.ok());
    EXPECT_FALSE(below->result.feasible &&
                 below->result.throughput_retained >= 0.9);
  }
}

// The device model only watches a run, so a bisection judged without it
// (as a Fit's are) ends where one judged with it does, on the same plan.
TEST(BudgetSearchTest, TheDeviceModelDoesNotSteerABisection) {
  Fixture f;
  const PlanningContext ctx = f.Context();
  SimOptions with_device;
  with_device.device.enabled = true;
  for (double target : {0.9, std::numeric_limits<double>::min()}) {
    SCOPED_TRACE(target);
    absl::StatusOr<BudgetSearch> device = SmallestBudgetRetaining(
        "slackswap", ctx, DeviceJudge("slackswap", ctx, with_device), target);
    absl::StatusOr<BudgetSearch> plain = SmallestBudgetRetaining(
        "slackswap", ctx, SimulationJudge("slackswap", ctx, {}), target);
    ASSERT_TRUE(device.ok()) << device.status();
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(device->found);
    EXPECT_TRUE(device->result.device.has_value());
    EXPECT_FALSE(plain->result.device.has_value());
    EXPECT_EQ(plain->found, device->found);
    EXPECT_EQ(plain->budget_bytes, device->budget_bytes);
    EXPECT_EQ(plain->evaluations, device->evaluations);
    EXPECT_EQ(plain->result.step_ns, device->result.step_ns);
    ASSERT_EQ(plain->plan.decisions.size(), device->plan.decisions.size());
    for (size_t t = 0; t < plain->plan.decisions.size(); ++t) {
      EXPECT_EQ(plain->plan.decisions[t].action,
                device->plan.decisions[t].action);
    }
  }
}

// The least memory a plan needs: bisecting down to where nothing fits, the
// budgets at which no plan can fit (the bound of
// planner/internal/step_bound.h) are not planned, and the answer is the
// same as with every budget planned.
TEST(BudgetSearchTest, BudgetsWhereNothingCanFitAreNotPlanned) {
  Fixture f;
  PlanningContext ctx = f.Context();
  SimOptions report;
  report.device.enabled = true;
  // The budgets judged (with the bounds, the one found is planned twice:
  // for the verdict, then in full).
  absl::flat_hash_set<int64_t> budgets[2];
  BudgetSearch found[2];
  for (bool prune : {false, true}) {
    ctx.prune_with_bounds = prune;
    const Judge device = DeviceJudge("slackswap", ctx, report);
    absl::flat_hash_set<int64_t>* judged = &budgets[prune];
    const Judge counted = [&](const Plan& plan, int64_t budget) {
      judged->insert(budget);
      return device(plan, budget);
    };
    absl::StatusOr<BudgetSearch> s = SmallestBudgetRetaining(
        "slackswap", ctx, counted, std::numeric_limits<double>::min());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->found);
    found[prune] = *std::move(s);
  }
  EXPECT_EQ(found[1].budget_bytes, found[0].budget_bytes);
  EXPECT_EQ(found[1].result.step_ns, found[0].result.step_ns);
  ASSERT_EQ(found[1].plan.decisions.size(), found[0].plan.decisions.size());
  for (size_t t = 0; t < found[0].plan.decisions.size(); ++t) {
    EXPECT_EQ(found[1].plan.decisions[t].action,
              found[0].plan.decisions[t].action);
  }
  EXPECT_LT(budgets[1].size(), budgets[0].size());
}

void ExpectSamePlan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t t = 0; t < a.decisions.size(); ++t) {
    EXPECT_EQ(a.decisions[t].action, b.decisions[t].action) << "tensor " << t;
    EXPECT_EQ(a.decisions[t].prefetch_after_op,
              b.decisions[t].prefetch_after_op)
        << "tensor " << t;
  }
}

// The bisections for the least memory ask the policy only for its verdict
// at each budget (PlanningContext::first_feasible_plan, enough_retained),
// then plan the budget found in full: they end on the budget, plan and
// result of the bisection with every budget planned in full (the bounds
// off), on one GPU and on every rank of an 8-GPU node.
TEST(BudgetSearchTest, AskingForVerdictsEndsWhereBestPlansDo) {
  const Node node = *FindNode("dgx-a100-80gb");
  const Hardware share = FairShareGpu(node, node.num_gpus);
  int compared = 0;
  for (bool on_node : {false, true}) {
    for (uint32_t seed = 0; seed < (on_node ? 4 : 8); ++seed) {
      const testutil::PlanningStep s = testutil::MakePlanningStep(
          testutil::RandomTrainingStep(seed, {.forward_ops = 16}),
          on_node ? share : testutil::TestLink());
      NodeRanks ranks;
      ranks.node = &node;
      ranks.graphs.assign(node.num_gpus, &s.graph);
      PlanningContext ctx = s.At(s.analysis.unconstrained_peak_bytes);
      if (on_node) ctx.node = &ranks;
      PlanningContext full = ctx;
      full.prune_with_bounds = false;
      const Judge judge = SimulationJudge("slackswap", ctx, {});
      for (double target : {0.0, 0.9, 0.97}) {
        SCOPED_TRACE(absl::StrCat(on_node ? "node" : "gpu", " seed ", seed,
                                  " target ", target));
        const auto search = [&](const PlanningContext& c) {
          return target == 0
                     ? SmallestFeasibleBudget("slackswap", c, judge)
                     : SmallestBudgetRetaining("slackswap", c, judge, target);
        };
        absl::StatusOr<BudgetSearch> quick = search(ctx);
        absl::StatusOr<BudgetSearch> best = search(full);
        ASSERT_TRUE(quick.ok()) << quick.status();
        ASSERT_TRUE(best.ok()) << best.status();
        EXPECT_EQ(quick->found, best->found);
        EXPECT_EQ(quick->budget_bytes, best->budget_bytes);
        EXPECT_EQ(quick->result.feasible, best->result.feasible);
        EXPECT_EQ(quick->result.step_ns, best->result.step_ns);
        ExpectSamePlan(quick->plan, best->plan);
        compared += best->found &&
                    best->budget_bytes < best->result.unconstrained_peak_bytes;
      }
    }
  }
  // Most searches went below the peak.
  EXPECT_GT(compared, 24);
}

// MinimumFeasibleBudget probes with the first feasible plan too: the budget
// is the bisection's over the best plans.
TEST(BudgetSearchTest, TheMinimumFeasibleBudgetIsTheBestPlansOne) {
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(seed);
    const testutil::PlanningStep s = testutil::MakePlanningStep(
        testutil::RandomTrainingStep(seed, {.forward_ops = 16}),
        testutil::TestLink());
    PlanningContext ctx = s.At(s.analysis.unconstrained_peak_bytes);
    absl::StatusOr<int64_t> minimum = MinimumFeasibleBudget("slackswap", ctx);
    ctx.prune_with_bounds = false;
    absl::StatusOr<int64_t> best = MinimumFeasibleBudget("slackswap", ctx);
    ASSERT_TRUE(minimum.ok()) << minimum.status();
    ASSERT_TRUE(best.ok()) << best.status();
    EXPECT_EQ(*minimum, *best);
  }
}

}  // namespace
}  // namespace slackswap
