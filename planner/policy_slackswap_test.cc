// slackswap asked only for a verdict answers as its best plan does. Asked
// whether it fits (PlanningContext::first_feasible_plan), the plan it
// returns is feasible exactly when the best is, and where none is feasible
// it is the same plan: checked on random training steps at budgets from
// where nothing fits to where little must move, on one GPU (a latency-free
// link and a PCIe profile) and on every rank of an 8-GPU node. Asked
// whether it retains a share (enough_retained), it does exactly when the
// best does.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"
#include "testing/planning_step.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using testutil::RandomStepOptions;
using testutil::RandomTrainingStep;

struct Seen {
  int feasible = 0;
  int infeasible = 0;
  // Feasible, and the first feasible plan is not the best: the search
  // stopped before its end.
  int stopped_early = 0;
};

void ExpectTheSameAnswer(const PlanningContext& best_ctx, Seen& seen) {
  PlanningContext first_ctx = best_ctx;
  first_ctx.first_feasible_plan = true;
  absl::StatusOr<PlanOutcome> first =
      PlanAndSimulate("slackswap", first_ctx, {});
  absl::StatusOr<PlanOutcome> best = PlanAndSimulate("slackswap", best_ctx, {});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(first->result.feasible, best->result.feasible);
  if (best->result.feasible) {
    ++seen.feasible;
    // Not necessarily slower: the search is not exhaustive, and a plan it
    // would have narrowed down can be the faster one.
    if (first->result.step_ns != best->result.step_ns) ++seen.stopped_early;
    return;
  }
  // Nothing feasible: the whole search ran, as without the flag.
  ++seen.infeasible;
  EXPECT_EQ(first->result.step_ns, best->result.step_ns);
  ASSERT_EQ(first->plan.decisions.size(), best->plan.decisions.size());
  for (size_t t = 0; t < best->plan.decisions.size(); ++t) {
    EXPECT_EQ(first->plan.decisions[t].action, best->plan.decisions[t].action)
        << "tensor " << t;
  }
}

constexpr double kShares[] = {0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.85};

TEST(FirstFeasiblePlanTest, FeasibleExactlyWhenTheBestPlanIs) {
  Seen seen;
  for (const Hardware& hw :
       {testutil::TestLink(), *FindHardware("a100-80gb-pcie4")}) {
    for (uint32_t seed = 0; seed < 30; ++seed) {
      RandomStepOptions options;
      options.forward_ops = 20;
      const testutil::PlanningStep s =
          testutil::MakePlanningStep(RandomTrainingStep(seed, options), hw);
      for (double share : kShares) {
        SCOPED_TRACE(absl::StrCat(hw.name, " seed ", seed, " budget ", share));
        ExpectTheSameAnswer(s.AtShare(share), seen);
      }
    }
  }
  // The comparison covered both answers and searches cut short.
  EXPECT_GT(seen.feasible, 150);
  EXPECT_GT(seen.infeasible, 80);
  EXPECT_GT(seen.stopped_early, 60);
}

TEST(FirstFeasiblePlanTest, OnTheNodeToo) {
  const Node node = *FindNode("dgx-a100-80gb");
  const Hardware share = FairShareGpu(node, node.num_gpus);
  Seen seen;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    RandomStepOptions options;
    options.forward_ops = 20;
    const testutil::PlanningStep s =
        testutil::MakePlanningStep(RandomTrainingStep(seed, options), share);
    NodeRanks ranks;
    ranks.node = &node;
    ranks.graphs.assign(node.num_gpus, &s.graph);
    for (double fraction : kShares) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " budget ", fraction));
      PlanningContext ctx = s.AtShare(fraction);
      ctx.node = &ranks;
      ExpectTheSameAnswer(ctx, seen);
    }
  }
  EXPECT_GT(seen.feasible, 25);
  EXPECT_GT(seen.infeasible, 15);
  EXPECT_GT(seen.stopped_early, 12);
}

// Asked whether its plan retains a share (PlanningContext::enough_retained),
// slackswap stops between its stages once its plan does: yes exactly when
// its best plan's would be.
TEST(FirstFeasiblePlanTest, RetainsAShareExactlyWhenTheBestPlanDoes) {
  int yes = 0;
  int no = 0;
  int stopped_early = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    RandomStepOptions options;
    options.forward_ops = 20;
    const testutil::PlanningStep s = testutil::MakePlanningStep(
        RandomTrainingStep(seed, options), *FindHardware("a100-80gb-pcie4"));
    for (double share : {0.45, 0.6, 0.85}) {
      const PlanningContext best_ctx = s.AtShare(share);
      absl::StatusOr<PlanOutcome> best =
          PlanAndSimulate("slackswap", best_ctx, {});
      ASSERT_TRUE(best.ok()) << best.status();
      for (double target : {0.8, 0.9, 0.97}) {
        SCOPED_TRACE(
            absl::StrCat("seed ", seed, " budget ", share, " target ", target));
        PlanningContext verdict_ctx = best_ctx;
        verdict_ctx.enough_retained = target;
        absl::StatusOr<PlanOutcome> verdict =
            PlanAndSimulate("slackswap", verdict_ctx, {});
        ASSERT_TRUE(verdict.ok()) << verdict.status();
        const auto retains = [target](const SimResult& r) {
          return r.feasible && r.throughput_retained >= target;
        };
        ASSERT_EQ(retains(verdict->result), retains(best->result));
        (retains(best->result) ? yes : no) += 1;
        stopped_early += verdict->result.step_ns != best->result.step_ns;
      }
    }
  }
  EXPECT_GT(yes, 70);
  EXPECT_GT(no, 18);
  EXPECT_GT(stopped_early, 50);
}

}  // namespace
}  // namespace slackswap
