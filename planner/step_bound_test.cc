// The step bounds' promise, plan by plan: no plan the simulator accepts runs
// a step shorter than LeastFeasibleStepNs says for its swaps, and no plan
// lowers to less compute than LeastComputeNs; checked on random plans at the
// budget their own peak sets (where it binds exactly) and on every policy's
// plans, on random training steps over a latency-free link and a PCIe
// profile. Then that pruning with them changes no plan slackswap makes.
#include "planner/internal/step_bound.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/saturating.h"
#include "gtest/gtest.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/internal/judge_memo.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"
#include "testing/planning_step.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using testutil::RandomStepOptions;
using testutil::RandomTrainingStep;

using Step = testutil::PlanningStep;
constexpr auto MakeStep = testutil::MakePlanningStep;

std::vector<Hardware> Links() {
  return {testutil::TestLink(), *FindHardware("a100-80gb-pcie4")};
}

int64_t TasksNs(const Schedule& schedule) {
  int64_t sum = 0;
  for (const Task& task : schedule.tasks) sum += task.duration_ns;
  return sum;
}

std::vector<int32_t> Swaps(const Plan& plan) {
  std::vector<int32_t> swaps;
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    if (plan.decisions[t].action == Action::kSwap) {
      swaps.push_back(static_cast<int32_t>(t));
    }
  }
  return swaps;
}

// Each saved activation kept, swapped or recomputed at random.
Plan RandomPlan(const Graph& g, std::mt19937& rng) {
  Plan plan = Plan::KeepAll(g);
  std::uniform_int_distribution<int> pick(0, 2);
  for (int32_t t : g.index.saved) {
    const int choice = pick(rng);
    if (choice == 1) plan.decisions[t].action = Action::kSwap;
    if (choice == 2) plan.decisions[t].action = Action::kRecompute;
  }
  return plan;
}

TEST(StepBoundTest, NoRandomPlanBeatsTheBoundsAtTheBudgetItsPeakSets) {
  int feasible = 0;
  int above_ideal = 0;  // where the bound says more than the ideal step
  for (const Hardware& hw : Links()) {
    for (uint32_t seed = 0; seed < 12; ++seed) {
      RandomStepOptions options;
      options.forward_ops = 16;
      const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
      std::mt19937 rng(seed);
      for (int i = 0; i < 12; ++i) {
        SCOPED_TRACE(absl::StrCat(hw.name, " seed ", seed, " plan ", i));
        const Plan plan = RandomPlan(s.graph, rng);
        // Unlimited first, for the plan's own activation peak; then at that
        // peak as the budget, where nothing waits for memory and the
        // budget binds where the peak is.
        absl::StatusOr<Judged> free_run =
            JudgePlan(s.At(std::numeric_limits<int64_t>::max() / 4), plan);
        ASSERT_TRUE(free_run.ok()) << free_run.status();
        const PlanningContext ctx =
            s.At(std::max<int64_t>(1, free_run->result.peak_activation_bytes));
        absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
        ASSERT_TRUE(judged.ok()) << judged.status();
        // Judging may turn a swap into a recompute (or keep it): the bound
        // of the plan before still holds for the plan after.
        EXPECT_LE(LeastComputeNs(ctx, plan), TasksNs(*judged->schedule));
        EXPECT_LE(LeastComputeNs(ctx, judged->plan),
                  TasksNs(*judged->schedule));
        if (!judged->result.feasible) continue;
        ++feasible;
        EXPECT_TRUE(MayFitTheBudget(ctx, plan));
        EXPECT_TRUE(MayFitTheBudget(ctx, judged->plan));
        const int64_t least = LeastFeasibleStepNs(ctx, Swaps(plan));
        EXPECT_LE(least, judged->result.step_ns);
        EXPECT_LE(LeastFeasibleStepNs(ctx, Swaps(judged->plan)),
                  judged->result.step_ns);
        above_ideal += least > s.analysis.durations.total_ns;
      }
    }
  }
  EXPECT_GT(feasible, 200);
  // The bound is not the ideal step in disguise: it counts recomputes.
  EXPECT_GT(above_ideal, 50);
}

// Below the plans' own peaks the forward pass may wait for swap-outs: the
// wait LeastSwapOutWaitNs counts, on top of the least compute, never
// exceeds the simulated step, for the plan as made and as judging turned
// it (swaps the prefetch points cannot serve become recomputes). On one GPU
// and on every GPU of an 8-GPU node, where a rank plans with its fair share
// of the shared links but a copy that finds them free runs faster.
// `node` null: one GPU, `hw`; else its first `num_ranks` GPUs, each
// rank planning with `hw`.
void CheckSwapOutWaits(const Node* node, int32_t num_ranks, const Hardware& hw,
                       uint32_t seed_base) {
  int feasible = 0;
  int waits = 0;    // where the bound says the forward pass must wait
  int tighter = 0;  // where it waits longer than one rank's link alone says
  for (uint32_t seed = 0; seed < 12; ++seed) {
    RandomStepOptions options;
    options.forward_ops = 16;
    const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
    NodeRanks ranks;
    ranks.node = node;
    ranks.graphs.assign(num_ranks, &s.graph);
    std::mt19937 rng(seed_base + seed);
    for (double fraction : {0.3, 0.5, 0.7}) {
      PlanningContext ctx = s.AtShare(fraction);
      if (node != nullptr) ctx.node = &ranks;
      for (int i = 0; i < 8; ++i) {
        SCOPED_TRACE(absl::StrCat(hw.name, " seed ", seed, " budget ", fraction,
                                  " plan ", i));
        const Plan plan = RandomPlan(s.graph, rng);
        absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
        ASSERT_TRUE(judged.ok()) << judged.status();
        const int64_t wait = LeastSwapOutWaitNs(ctx, plan);
        ASSERT_GE(wait, 0);
        if (!judged->result.feasible) continue;
        ++feasible;
        EXPECT_LE(SaturatingAdd(LeastComputeNs(ctx, plan), wait),
                  judged->result.step_ns);
        EXPECT_LE(SaturatingAdd(LeastComputeNs(ctx, judged->plan),
                                LeastSwapOutWaitNs(ctx, judged->plan)),
                  judged->result.step_ns);
        waits += wait > 0;
        if (node != nullptr) {
          // What the GPU's own link alone would say, for every rank.
          const PlanningContext alone{s.graph, node->gpu, ctx.analysis,
                                      ctx.budget_bytes};
          tighter += wait > LeastSwapOutWaitNs(alone, plan);
        }
      }
    }
  }
  EXPECT_GT(feasible, 40);
  // The bound is not zero in disguise: it finds forward passes that wait.
  EXPECT_GT(waits, 10);
  // On a node, the ranks sharing a switch's uplink wait for each other's
  // copies too, and the bound says so.
  if (node != nullptr) {
    EXPECT_GT(tighter, 15);
  }
}

TEST(StepBoundTest, NoRandomPlanWaitsLessForSwapOutsThanTheBoundSays) {
  uint32_t seed_base = 200;
  for (const Hardware& hw : Links()) {
    CheckSwapOutWaits(nullptr, 0, hw, seed_base);
    seed_base += 100;
  }
}

// All 8 GPUs, two behind each switch; and 3, where GPU 2 has its switch to
// itself and copies faster than the share the ranks plan with.
TEST(StepBoundTest, NoRandomPlanOnANodeWaitsLessThanTheBoundSays) {
  const Node node = *FindNode("dgx-a100-80gb");
  for (int32_t num_ranks : {8, 3}) {
    SCOPED_TRACE(absl::StrCat(num_ranks, " ranks"));
    CheckSwapOutWaits(&node, num_ranks, FairShareGpu(node, num_ranks), 400);
  }
}

// A swap the first backward op needs has no room for its prefetch, so
// judging makes it a recompute, which leaves memory without a copy: the
// wait must not count its copy. By hand (1 byte/ns, budget 1000 bytes): a
// swapped, f1 would wait for a's copy until 1100; recomputed, nothing waits
// and the step is the four ops and two re-runs, 600 ns.
TEST(StepBoundTest, ASwapJudgingTurnsIntoARecomputeIsNotWaitedFor) {
  testutil::GraphBuilder b;
  const int32_t a = b.Tensor("a", 1000);
  const int32_t y = b.Tensor("y", 1000);
  b.Forward("f0", 100, {}, {a});
  b.Forward("f1", 100, {}, {y});
  b.Backward("b0", 100, {a});
  b.Backward("b1", 100, {y});
  const Step s = MakeStep(b.Build(), testutil::TestLink());
  const PlanningContext ctx = s.At(1000);
  Plan plan = Plan::KeepAll(s.graph);
  plan.decisions[a].action = Action::kSwap;
  plan.decisions[y].action = Action::kRecompute;
  absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->result.feasible) << judged->result.infeasible_reason;
  EXPECT_EQ(judged->plan.decisions[a].action, Action::kRecompute);
  EXPECT_EQ(judged->result.step_ns, 600);
  EXPECT_EQ(LeastSwapOutWaitNs(ctx, plan), 0);
  EXPECT_LE(
      SaturatingAdd(LeastComputeNs(ctx, plan), LeastSwapOutWaitNs(ctx, plan)),
      judged->result.step_ns);
}

TEST(StepBoundTest, WhatMayFitTheBudgetRulesOutNeverFits) {
  int ruled_out = 0;
  int fit = 0;
  for (const Hardware& hw : Links()) {
    for (uint32_t seed = 0; seed < 12; ++seed) {
      RandomStepOptions options;
      options.forward_ops = 16;
      const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
      std::mt19937 rng(100 + seed);
      for (double fraction : {0.3, 0.5, 0.7}) {
        const PlanningContext ctx = s.AtShare(fraction);
        for (int i = 0; i < 8; ++i) {
          SCOPED_TRACE(absl::StrCat(hw.name, " seed ", seed, " budget ",
                                    fraction, " plan ", i));
          const Plan plan = RandomPlan(s.graph, rng);
          absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
          ASSERT_TRUE(judged.ok()) << judged.status();
          fit += judged->result.feasible;
          if (MayFitTheBudget(ctx, plan)) continue;
          ++ruled_out;
          EXPECT_FALSE(judged->result.feasible);
        }
      }
    }
  }
  // Both kinds occur: the test can tell a wrong rule.
  EXPECT_GT(ruled_out, 50);
  EXPECT_GT(fit, 50);
}

TEST(StepBoundTest, NoPolicysPlanBeatsTheBounds) {
  int plans = 0;
  int capuchin_plans = 0;
  for (const Hardware& hw : Links()) {
    for (uint32_t seed = 0; seed < 16; ++seed) {
      const Step s = MakeStep(RandomTrainingStep(seed), hw);
      for (double fraction : {0.3, 0.5, 0.7}) {
        const PlanningContext ctx = s.AtShare(fraction);
        for (const PolicyInfo& p : PolicyRegistry()) {
          if (p.unbudgeted_reference) continue;
          SCOPED_TRACE(absl::StrCat(hw.name, " seed ", seed, " budget ",
                                    fraction, " ", p.name));
          absl::StatusOr<PlanOutcome> o = PlanAndSimulate(p.name, ctx, {});
          ASSERT_TRUE(o.ok()) << o.status();
          if (!o->result.feasible) continue;
          ++plans;
          EXPECT_LE(LeastFeasibleStepNs(ctx, Swaps(o->plan)),
                    o->result.step_ns);
          EXPECT_LE(LeastComputeNs(ctx, o->plan), o->result.step_ns);
          EXPECT_TRUE(MayFitTheBudget(ctx, o->plan));
          if (absl::string_view(p.name) != "capuchin") continue;
          // It swaps only among the swaps it starts from, so their bound
          // holds for it: what lets slackswap skip its search.
          absl::StatusOr<std::vector<int32_t>> start = CapuchinSwaps(ctx);
          ASSERT_TRUE(start.ok()) << start.status();
          for (int32_t t : Swaps(o->plan)) {
            EXPECT_NE(std::find(start->begin(), start->end(), t), start->end())
                << "tensor " << t;
          }
          EXPECT_LE(LeastFeasibleStepNs(ctx, *start), o->result.step_ns);
          ++capuchin_plans;
        }
      }
    }
  }
  EXPECT_GT(plans, 150);
  EXPECT_GT(capuchin_plans, 25);
}

TEST(StepBoundTest, IsTheIdealStepWhereNothingMustMove) {
  const Step s = MakeStep(RandomTrainingStep(4), testutil::TestLink());
  const int64_t ideal = s.analysis.durations.total_ns;
  EXPECT_EQ(LeastFeasibleStepNs(s.At(s.graph.index.saved_bytes), {}), ideal);
  EXPECT_EQ(LeastComputeNs(s.At(1), Plan::KeepAll(s.graph)), ideal);
}

// Tensor t of `g` gets a rebuild recipe reading `inputs` for `ns`; the
// caller indexes the graph again.
void GiveRecipe(Graph& g, int32_t t, std::vector<int32_t> inputs, int64_t ns) {
  Rebuild r;
  r.inputs.assign(inputs.begin(), inputs.end());
  r.cost.duration_ns = ns;
  g.tensors[t].rebuild = r;
}

// Worked by hand: f makes a (no recipe) and b (a 100 ns recipe), g makes c
// and d (recipes of 100 and 300 ns), h makes e (a 900 ns recipe); each
// forward op takes 1000 ns. Recomputing all five re-runs f once (b comes
// back with a); c and d cost their recipes, 400 ns, less than re-running
// g; e its recipe, 900 ns. The old bound counted f's re-run alone; the
// lowering's tasks add up to the new one exactly.
TEST(StepBoundTest, CountsEachProducersCheapestRestore) {
  testutil::GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000, TensorKind::kParameter);
  const int32_t a = b.Tensor("a", 1000);
  const int32_t bt = b.Tensor("b", 1000);
  const int32_t c = b.Tensor("c", 1000);
  const int32_t d = b.Tensor("d", 1000);
  const int32_t e = b.Tensor("e", 1000);
  b.Forward("f", 1000, {x}, {a, bt});
  b.Forward("g", 1000, {a, bt}, {c, d});
  b.Forward("h", 1000, {c, d}, {e});
  b.Backward("h.bwd", 1000, {e, c, d});
  b.Backward("g.bwd", 1000, {a, bt});
  Graph g = b.Build();
  GiveRecipe(g, bt, {x}, 100);
  GiveRecipe(g, c, {a, bt}, 100);
  GiveRecipe(g, d, {a, bt}, 300);
  GiveRecipe(g, e, {c, d}, 900);
  ASSERT_TRUE(IndexGraph(g).ok());
  const Step s = MakeStep(std::move(g), testutil::TestLink());
  const int64_t ideal = s.analysis.durations.total_ns;
  const PlanningContext ctx = s.At(1);
  Plan plan = Plan::KeepAll(s.graph);
  for (int32_t t : {a, bt, c, d, e}) {
    plan.decisions[t].action = Action::kRecompute;
  }
  EXPECT_EQ(LeastComputeNs(ctx, plan), ideal + 1000 + 400 + 900);
  absl::StatusOr<Schedule> lowered =
      LowerPlan(s.graph, plan, s.analysis.durations);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(TasksNs(*lowered), LeastComputeNs(ctx, plan));
}

// A re-run reads its op's inputs, and those the forward pass freed come
// back first: recomputing s re-runs g (1000 ns), which reads u1 (made by
// f1, no recipe: 1000 ns more) and u2 (its recipe, 300 ns, is cheaper than
// re-running f2).
TEST(StepBoundTest, CountsTheInputsAReRunRestores) {
  testutil::GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000, TensorKind::kParameter);
  const int32_t u1 = b.Tensor("u1", 1000);
  const int32_t u2 = b.Tensor("u2", 1000);
  const int32_t st = b.Tensor("s", 1000);
  b.Forward("f1", 1000, {x}, {u1});
  b.Forward("f2", 1000, {x}, {u2});
  b.Forward("g", 1000, {u1, u2}, {st});
  b.Backward("g.bwd", 1000, {st});
  Graph g = b.Build();
  GiveRecipe(g, u2, {x}, 300);
  ASSERT_TRUE(IndexGraph(g).ok());
  const Step s = MakeStep(std::move(g), testutil::TestLink());
  ASSERT_FALSE(s.graph.index.is_saved[u1]);
  ASSERT_FALSE(s.graph.index.is_saved[u2]);
  Plan plan = Plan::KeepAll(s.graph);
  plan.decisions[st].action = Action::kRecompute;
  const int64_t least = LeastComputeNs(s.At(1), plan);
  EXPECT_EQ(least, s.analysis.durations.total_ns + 1000 + 1000 + 300);
  absl::StatusOr<Schedule> lowered =
      LowerPlan(s.graph, plan, s.analysis.durations);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(TasksNs(*lowered), least);
}

// A plan of another graph rules nothing out: judging it is what says so.
TEST(StepBoundTest, APlanOfAnotherSizeIsLeftToTheLowering) {
  const Step s = MakeStep(RandomTrainingStep(4), testutil::TestLink());
  const PlanningContext ctx = s.At(1);
  Plan short_plan = Plan::KeepAll(s.graph);
  short_plan.decisions.pop_back();
  EXPECT_TRUE(MayFitTheBudget(ctx, short_plan));
  EXPECT_EQ(LeastComputeNs(ctx, short_plan), s.analysis.durations.total_ns);
  EXPECT_EQ(LeastSwapOutWaitNs(ctx, short_plan), 0);
  absl::StatusOr<Judged> judged = JudgePlan(ctx, short_plan);
  EXPECT_EQ(judged.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StepBoundTest, SaysWhenNoRecomputeFreesEnough) {
  const Step s = MakeStep(RandomTrainingStep(4), testutil::TestLink());
  // The peak op's own outputs stay, whatever the plan.
  EXPECT_EQ(LeastFeasibleStepNs(s.At(1), {}),
            std::numeric_limits<int64_t>::max());
}

TEST(StepBoundTest, FewerSwapsNeverLowerIt) {
  const Step s = MakeStep(RandomTrainingStep(5), testutil::TestLink());
  const PlanningContext ctx = s.AtShare(0.4);
  std::vector<int32_t> swaps = s.graph.index.saved;
  int64_t previous = LeastFeasibleStepNs(ctx, swaps);
  int rose = 0;
  while (!swaps.empty()) {
    swaps.pop_back();
    const int64_t least = LeastFeasibleStepNs(ctx, swaps);
    EXPECT_GE(least, previous);
    rose += least > previous;
    previous = least;
  }
  EXPECT_GT(rose, 0);
}

// Where the speed-up comes from, on a reference workload: at half the peak
// no plan without swaps can match slackswap's, so recompute_only's search
// and the slack's emptier levels are skipped; nor can a plan with at most
// capuchin's starting swaps, so its search does not run either (a memo
// shared with slackswap holds no capuchin plan after it; without the
// bounds it does).
TEST(StepBoundTest, WhatTheBoundsSkipOnGpt2XlAtHalfThePeak) {
  absl::StatusOr<Graph> g = BuildTransformer(*FindWorkload("gpt2-xl"));
  ASSERT_TRUE(g.ok()) << g.status();
  const Step s = MakeStep(*std::move(g), *FindHardware("a100-80gb-pcie4"));
  const PlanningContext ctx = s.AtShare(0.5);
  absl::StatusOr<PlanOutcome> o = PlanAndSimulate("slackswap", ctx, {});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(o->result.feasible);
  EXPECT_GT(LeastFeasibleStepNs(ctx, {}), o->result.step_ns);
  EXPECT_LE(LeastFeasibleStepNs(ctx, Swaps(o->plan)), o->result.step_ns);
  absl::StatusOr<std::vector<int32_t>> start = CapuchinSwaps(ctx);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_GT(LeastFeasibleStepNs(ctx, *start), o->result.step_ns);
  for (bool prune : {true, false}) {
    SCOPED_TRACE(prune ? "with the bounds" : "without");
    JudgeMemo memo;
    PlanningContext c = ctx;
    c.judge_memo = &memo;
    c.prune_with_bounds = prune;
    absl::StatusOr<Plan> plan = PlanWithPolicy("slackswap", c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    PlanningContext quiet = c;  // slackswap makes the baselines' plans quiet
    quiet.explain = false;
    EXPECT_EQ(memo.HoldsPlan(quiet, "capuchin"), !prune);
  }
}

// Pruning by the bounds changes no plan: slackswap with and without it, on
// random steps at tight and loose budgets, the same decisions and step.
// slackswap's plan with the bounds pruning and without them: the same.
void ExpectPruningChangesNothing(const PlanningContext& pruned) {
  PlanningContext full = pruned;
  full.prune_with_bounds = false;
  absl::StatusOr<PlanOutcome> a = PlanAndSimulate("slackswap", pruned, {});
  absl::StatusOr<PlanOutcome> b = PlanAndSimulate("slackswap", full, {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->result.step_ns, b->result.step_ns);
  EXPECT_EQ(a->result.feasible, b->result.feasible);
  ASSERT_EQ(a->plan.decisions.size(), b->plan.decisions.size());
  for (size_t t = 0; t < a->plan.decisions.size(); ++t) {
    EXPECT_EQ(a->plan.decisions[t].action, b->plan.decisions[t].action)
        << "tensor " << t;
    EXPECT_EQ(a->plan.decisions[t].prefetch_after_op,
              b->plan.decisions[t].prefetch_after_op)
        << "tensor " << t;
  }
}

TEST(StepBoundTest, PruningChangesNoPlan) {
  int compared = 0;
  for (const Hardware& hw : Links()) {
    for (uint32_t seed = 0; seed < 10; ++seed) {
      RandomStepOptions options;
      options.forward_ops = 20;
      const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
      for (double fraction : {0.2, 0.35, 0.5, 0.8}) {
        SCOPED_TRACE(
            absl::StrCat(hw.name, " seed ", seed, " budget ", fraction));
        ExpectPruningChangesNothing(s.AtShare(fraction));
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 80);
}

// The same on the node, where the swap-out bound also counts the copies of
// the ranks that share a switch: every rank of dgx-a100-80gb, two behind
// each switch.
TEST(StepBoundTest, PruningChangesNoNodePlan) {
  const Node node = *FindNode("dgx-a100-80gb");
  const Hardware share = FairShareGpu(node, node.num_gpus);
  int compared = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    RandomStepOptions options;
    options.forward_ops = 20;
    const Step s = MakeStep(RandomTrainingStep(seed, options), share);
    NodeRanks ranks;
    ranks.node = &node;
    ranks.graphs.assign(node.num_gpus, &s.graph);
    for (double fraction : {0.2, 0.35, 0.5, 0.8}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " budget ", fraction));
      PlanningContext pruned = s.AtShare(fraction);
      pruned.node = &ranks;
      ExpectPruningChangesNothing(pruned);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 40);
}

}  // namespace
}  // namespace slackswap
