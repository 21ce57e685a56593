// The bound's promise, checked plan by plan: no plan the simulator accepts
// runs faster than the model says it could, on random training steps, on
// both a latency-free test link and a PCIe profile (10 us per copy), and on
// graphs small enough to simulate every plan.
#include "planner/relaxation.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using testing::RandomStepOptions;
using testing::RandomTrainingStep;

struct Step {
  Graph graph;
  Hardware hw;
  StepAnalysis analysis;

  PlanningContext At(double fraction) const {
    PlanningContext ctx{
        graph, hw, analysis,
        std::max<int64_t>(
            1, static_cast<int64_t>(fraction * graph.index.saved_bytes))};
    ctx.explain = false;
    ctx.optimal_time_limit_s = 0.5;
    return ctx;
  }
};

Step MakeStep(Graph g, Hardware hw) {
  Step s{std::move(g), std::move(hw), {}};
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(s.graph, s.hw);
  EXPECT_TRUE(a.ok()) << a.status();
  s.analysis = *std::move(a);
  return s;
}

Hardware Pcie() { return *FindHardware("a100-80gb-pcie4"); }

// Every budgeted policy's plan, simulated, at ctx's budget.
std::vector<PlanOutcome> EveryPlan(const PlanningContext& ctx) {
  std::vector<PlanOutcome> out;
  for (const PolicyInfo& p : PolicyRegistry()) {
    if (p.unbudgeted_reference) continue;
    absl::StatusOr<PlanOutcome> o = PlanAndSimulate(p.name, ctx, {});
    EXPECT_TRUE(o.ok()) << p.name << ": " << o.status();
    if (o.ok()) out.push_back(*std::move(o));
  }
  return out;
}

TEST(RelaxationTest, IsTheWholeStepWhenTheBudgetCoversThePeak) {
  const Step s = MakeStep(RandomTrainingStep(1), Pcie());
  for (double fraction : {1.0, 1.5, 20.0}) {
    absl::StatusOr<Relaxation> b = SolveRelaxation(s.At(fraction), {});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(b->feasible);
    EXPECT_EQ(b->retained_upper, 1);
    EXPECT_EQ(b->step_ns_lower, s.analysis.durations.total_ns);
  }
}

// The heart of it: over random steps, budgets and links, every policy's
// feasible plan is a feasible point of the model with a step no shorter
// than the model's fastest for its decisions, and so no shorter than the
// bound. Starting the solver from a plan changes how, not what, it finds.
TEST(RelaxationTest, NoPlanTheSimulatorAcceptsBeatsTheModel) {
  int plans = 0;
  for (uint32_t seed = 0; seed < 24; ++seed) {
    for (const Hardware& hw : {testing::TestLink(), Pcie()}) {
      RandomStepOptions options;
      if (hw.transfer_latency_ns > 0) {
        // Tensors near the latency (10 us is 255 KB at 25.5 GB/s).
        options.min_bytes = 4 << 10;
        options.max_bytes = 4 << 20;
        options.min_ns = 4'000;
        options.max_ns = 400'000;
      } else {
        options.min_ns = 1'000;
        options.max_ns = 1'000'000;
        options.min_bytes = 1'000;
        options.max_bytes = 1'000'000;
      }
      const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
      for (double fraction : {0.3, 0.5, 0.7}) {
        const PlanningContext ctx = s.At(fraction);
        SCOPED_TRACE(
            absl::StrCat("seed ", seed, " ", hw.name, " budget ", fraction));
        absl::StatusOr<Relaxation> bound = SolveRelaxation(ctx, {});
        ASSERT_TRUE(bound.ok()) << bound.status();
        for (const PlanOutcome& o : EveryPlan(ctx)) {
          if (!o.result.feasible) continue;
          ++plans;
          SCOPED_TRACE(o.plan.policy);
          EXPECT_TRUE(bound->feasible);
          EXPECT_LE(bound->step_ns_lower, o.result.step_ns);
          EXPECT_GE(bound->retained_upper, o.result.throughput_retained);
          absl::StatusOr<int64_t> model = ModelStepNs(ctx, o.plan);
          ASSERT_TRUE(model.ok()) << model.status();
          EXPECT_LE(*model, o.result.step_ns);
          EXPECT_GE(*model, bound->step_ns_lower);
          RelaxationOptions warm;
          warm.start = &o.plan;
          absl::StatusOr<Relaxation> started = SolveRelaxation(ctx, warm);
          ASSERT_TRUE(started.ok()) << started.status();
          EXPECT_NEAR(started->step_ns_lower, bound->step_ns_lower,
                      1e-6 * static_cast<double>(bound->step_ns_lower));
        }
      }
    }
  }
  EXPECT_GT(plans, 200);
}

// Blocks of ops are a relaxation of one step per op: looser, still above
// every plan.
TEST(RelaxationTest, CoarseTimeIsLooserNeverTighter) {
  RandomStepOptions options;
  options.forward_ops = 30;
  int compared = 0;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const Step s = MakeStep(RandomTrainingStep(seed, options), Pcie());
    for (double fraction : {0.4, 0.7}) {
      const PlanningContext ctx = s.At(fraction);
      absl::StatusOr<Relaxation> fine = SolveRelaxation(ctx, {});
      ASSERT_TRUE(fine.ok()) << fine.status();
      for (int32_t steps : {40, 12, 3}) {
        SCOPED_TRACE(absl::StrCat("seed ", seed, " budget ", fraction, " ",
                                  steps, " steps"));
        RelaxationOptions coarse_options;
        coarse_options.max_steps = steps;
        absl::StatusOr<Relaxation> coarse =
            SolveRelaxation(ctx, coarse_options);
        ASSERT_TRUE(coarse.ok()) << coarse.status();
        if (!fine->feasible) continue;  // the coarse model may still be
        EXPECT_TRUE(coarse->feasible);
        EXPECT_LE(coarse->step_ns_lower, fine->step_ns_lower);
        compared += coarse->step_ns_lower < fine->step_ns_lower;
      }
    }
  }
  EXPECT_GT(compared, 5);  // coarser is looser somewhere
}

// A budget under what the model can reach at all: no plan exists.
TEST(RelaxationTest, SaysWhenNoPlanCanMeetTheBudget) {
  const Step s = MakeStep(RandomTrainingStep(3), testing::TestLink());
  PlanningContext ctx = s.At(0.5);
  ctx.budget_bytes = 1;
  absl::StatusOr<Relaxation> b = SolveRelaxation(ctx, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->feasible);
}

TEST(RelaxationTest, RefusesWhatIsTooLargeAndHearsTheStopFunction) {
  const Step s = MakeStep(RandomTrainingStep(4), Pcie());
  RelaxationOptions small;
  small.max_ops = 5;
  absl::StatusOr<Relaxation> too_large = SolveRelaxation(s.At(0.5), small);
  EXPECT_EQ(too_large.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_large.status().message()),
              HasSubstr("at most 5"));
  PlanningContext stopped = s.At(0.5);
  stopped.should_stop = [] { return true; };
  for (bool integer : {false, true}) {
    RelaxationOptions options;
    options.integer = integer;
    EXPECT_EQ(SolveRelaxation(stopped, options).status().code(),
              absl::StatusCode::kCancelled);
  }
}

// Every keep / swap / recompute assignment of a small step, judged as the
// policies judge theirs: the fastest feasible one.
std::optional<SimResult> FastestOfEveryPlan(const PlanningContext& ctx) {
  const StepAnalysis& a = ctx.analysis;
  const size_t n = a.candidates.size();
  std::vector<int> choice(n, 0);
  std::optional<SimResult> best;
  while (true) {
    Plan plan = Plan::KeepAll(ctx.graph);
    bool allowed = true;
    for (size_t i = 0; i < n; ++i) {
      const Candidate& c = a.candidates[i];
      if (choice[i] == 1 && !CanSwap(c)) allowed = false;
      plan.decisions[c.tensor].action = choice[i] == 0   ? Action::kKeep
                                        : choice[i] == 1 ? Action::kSwap
                                                         : Action::kRecompute;
    }
    if (allowed) {
      absl::StatusOr<Judged> j = JudgePlan(ctx, std::move(plan));
      EXPECT_TRUE(j.ok()) << j.status();
      if (j.ok() && j->result.feasible &&
          (!best.has_value() || j->result.step_ns < best->step_ns)) {
        best = j->result;
      }
    }
    size_t i = 0;
    while (i < n && choice[i] == 2) choice[i++] = 0;
    if (i == n) break;
    ++choice[i];
  }
  return best;
}

// On steps of at most 9 saved tensors (up to 19,683 plans each): the bound is
// at most the best of every plan; optimal's model bound too; and how often
// `optimal` and `slackswap` find that best is printed (docs/PLANNERS.md).
TEST(EnumerationTest, NoPlanOfASmallStepBeatsTheBound) {
  int steps = 0, optimal_found = 0, slackswap_found = 0;
  double optimal_worst = 0, slackswap_worst = 0;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    RandomStepOptions options;
    options.forward_ops = 5;
    options.min_bytes = 8 << 10;
    options.max_bytes = 8 << 20;
    options.min_ns = 5'000;
    options.max_ns = 500'000;
    const Step s = MakeStep(RandomTrainingStep(seed, options), Pcie());
    if (s.analysis.candidates.size() > 9) continue;
    for (double fraction : {0.3, 0.5, 0.7}) {
      const PlanningContext ctx = s.At(fraction);
      SCOPED_TRACE(absl::StrCat("seed ", seed, " budget ", fraction));
      const std::optional<SimResult> best = FastestOfEveryPlan(ctx);
      if (!best.has_value()) continue;
      ++steps;
      absl::StatusOr<Relaxation> bound = SolveRelaxation(ctx, {});
      ASSERT_TRUE(bound.ok()) << bound.status();
      EXPECT_LE(bound->step_ns_lower, best->step_ns);
      absl::StatusOr<PlanOutcome> optimal = PlanAndSimulate("optimal", ctx, {});
      ASSERT_TRUE(optimal.ok()) << optimal.status();
      ASSERT_TRUE(optimal->plan.proof.has_value());
      EXPECT_LE(optimal->plan.proof->step_ns_lower, best->step_ns);
      absl::StatusOr<PlanOutcome> slack = PlanAndSimulate("slackswap", ctx, {});
      ASSERT_TRUE(slack.ok()) << slack.status();
      auto behind = [&](const SimResult& r) {
        return r.feasible ? best->throughput_retained - r.throughput_retained
                          : best->throughput_retained;
      };
      optimal_found += behind(optimal->result) <= 0;
      slackswap_found += behind(slack->result) <= 0;
      optimal_worst = std::max(optimal_worst, behind(optimal->result));
      slackswap_worst = std::max(slackswap_worst, behind(slack->result));
    }
  }
  EXPECT_GT(steps, 30);
  std::printf(
      "enumerated %d steps: optimal reaches the best plan in %d (worst %.2f pp "
      "behind), slackswap in %d (worst %.2f pp behind)\n",
      steps, optimal_found, 100 * optimal_worst, slackswap_found,
      100 * slackswap_worst);
}

}  // namespace
}  // namespace slackswap
