// The memo of judgments and the exact pruning: neither may change a plan.
#include "planner/internal/judge_memo.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/hardware.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/policy.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using testutil::RandomTrainingStep;

struct Step {
  Graph graph;
  Hardware hw;
  StepAnalysis analysis;
};

Step MakeStep(uint32_t seed) {
  Step s{RandomTrainingStep(seed, {.forward_ops = 16}),
         *FindHardware("a100-80gb-pcie4")};
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(s.graph, s.hw);
  EXPECT_TRUE(a.ok()) << a.status();
  s.analysis = *std::move(a);
  return s;
}

PlanningContext Context(const Step& s, double fraction) {
  return PlanningContext{
      s.graph, s.hw, s.analysis,
      static_cast<int64_t>(fraction *
                           static_cast<double>(s.graph.index.saved_bytes))};
}

// Every third saved activation swapped, every third recomputed: plans whose
// judgment turns late swaps into recomputes and places prefetches.
Plan Mixed(const Step& s) {
  Plan plan = Plan::KeepAll(s.graph);
  plan.facts.resize(plan.decisions.size());
  int i = 0;
  for (const Candidate& c : s.analysis.candidates) {
    Decision& d = plan.decisions[c.tensor];
    if (i % 3 == 1) d.action = Action::kSwap;
    if (i % 3 == 2) d.action = Action::kRecompute;
    plan.facts[c.tensor].reason = absl::StrCat("caller's reason ", i);
    ++i;
  }
  return plan;
}

void ExpectSameJudged(const Judged& a, const Judged& b) {
  ASSERT_EQ(a.plan.decisions.size(), b.plan.decisions.size());
  for (size_t t = 0; t < a.plan.decisions.size(); ++t) {
    const Decision& x = a.plan.decisions[t];
    const Decision& y = b.plan.decisions[t];
    EXPECT_EQ(x.action, y.action) << "tensor " << t;
    EXPECT_EQ(x.prefetch_after_op, y.prefetch_after_op) << "tensor " << t;
    EXPECT_EQ(a.plan.FactsOf(static_cast<int32_t>(t)).reason.str(),
              b.plan.FactsOf(static_cast<int32_t>(t)).reason.str())
        << "tensor " << t;
  }
  EXPECT_EQ(a.plan.budget_bytes, b.plan.budget_bytes);
  EXPECT_EQ(a.result.feasible, b.result.feasible);
  EXPECT_EQ(a.result.step_ns, b.result.step_ns);
  EXPECT_EQ(a.result.peak_activation_bytes, b.result.peak_activation_bytes);
  EXPECT_EQ(a.result.d2h_bytes, b.result.d2h_bytes);
  EXPECT_EQ(a.result.recompute_ns, b.result.recompute_ns);
  EXPECT_EQ(a.schedule->tasks.size(), b.schedule->tasks.size());
  EXPECT_EQ(a.schedule->prefetches.items, b.schedule->prefetches.items);
}

// A remembered judgment, recalled on a plan with the same actions but its
// own reasons and stale prefetch points, is what judging that plan gives.
TEST(JudgeMemoTest, ARecalledJudgmentIsTheFreshOne) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const Step s = MakeStep(seed);
    PlanningContext ctx = Context(s, 0.4);
    const Plan first = Mixed(s);
    JudgeMemo memo;
    ctx.judge_memo = &memo;
    absl::StatusOr<Judged> judged = JudgePlan(ctx, first);
    ASSERT_TRUE(judged.ok()) << judged.status();
    EXPECT_EQ(memo.hits(), 0);

    Plan again = first;
    again.facts.resize(again.decisions.size());
    for (size_t t = 0; t < again.decisions.size(); ++t) {
      again.facts[t].reason = absl::StrCat("another caller ", t);
      if (again.decisions[t].action != Action::kKeep) {
        again.decisions[t].prefetch_after_op = 0;  // stale: chosen afresh
      }
    }
    absl::StatusOr<Judged> recalled = JudgePlan(ctx, again);
    ASSERT_TRUE(recalled.ok()) << recalled.status();
    EXPECT_EQ(memo.hits(), 1);

    PlanningContext alone = Context(s, 0.4);
    absl::StatusOr<Judged> fresh = JudgePlan(alone, again);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    ExpectSameJudged(*recalled, *fresh);
  }
}

// A memo serves the context it was first used with; at another budget the
// same plan is judged afresh (and judged differently).
TEST(JudgeMemoTest, AnotherBudgetIsNotServed) {
  const Step s = MakeStep(5);
  const Plan plan = Plan::KeepAll(s.graph);
  JudgeMemo memo;
  PlanningContext roomy = Context(s, 1.0);
  roomy.judge_memo = &memo;
  PlanningContext tight = Context(s, 0.3);
  tight.judge_memo = &memo;
  absl::StatusOr<Judged> fits = JudgePlan(roomy, plan);
  absl::StatusOr<Judged> does_not = JudgePlan(tight, plan);
  ASSERT_TRUE(fits.ok() && does_not.ok());
  EXPECT_TRUE(fits->result.feasible);
  EXPECT_FALSE(does_not->result.feasible);
  EXPECT_EQ(memo.hits(), 0);
}

// A search asked only whether it fits stops early (first_feasible_plan):
// what it found is not served to the whole search at the same budget, nor
// the other way round.
TEST(JudgeMemoTest, AFirstFeasibleSearchIsServedApart) {
  const Step s = MakeStep(5);
  const Plan plan = Plan::KeepAll(s.graph);
  JudgeMemo memo;
  PlanningContext whole = Context(s, 0.5);
  whole.judge_memo = &memo;
  PlanningContext first = whole;
  first.first_feasible_plan = true;
  ASSERT_TRUE(RecomputeCheapestThatFit(whole, plan).ok());
  const int64_t hits = memo.hits();
  ASSERT_TRUE(RecomputeCheapestThatFit(first, plan).ok());
  EXPECT_EQ(memo.hits(), hits);
  ASSERT_TRUE(RecomputeCheapestThatFit(whole, plan).ok());
  EXPECT_GT(memo.hits(), hits);
}

// Bounded: a memo too small for one judgment remembers none.
TEST(JudgeMemoTest, AFullMemoRemembersNothingMore) {
  const Step s = MakeStep(6);
  JudgeMemo memo(/*max_bytes=*/16);
  PlanningContext ctx = Context(s, 0.5);
  ctx.judge_memo = &memo;
  ASSERT_TRUE(JudgePlan(ctx, Mixed(s)).ok());
  ASSERT_TRUE(JudgePlan(ctx, Mixed(s)).ok());
  EXPECT_EQ(memo.hits(), 0);
  EXPECT_LE(memo.bytes(), 16);
}

// On a graph large enough that the cap per element would let the memo hold
// many judgments, the cap in all holds it to a few: of six distinct plans
// judged, fewer are remembered than the per-element cap would keep.
TEST(JudgeMemoTest, ALargeGraphsMemoStaysUnderItsCapInAll) {
  Step s{RandomTrainingStep(3, {.forward_ops = 150'000}),
         *FindHardware("a100-80gb-pcie4")};
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(s.graph, s.hw);
  ASSERT_TRUE(a.ok()) << a.status();
  s.analysis = *std::move(a);
  const int64_t elements =
      static_cast<int64_t>(s.graph.ops.size() + 2 * s.graph.tensors.size() +
                           s.graph.index.consumers.size());
  ASSERT_GT(elements * JudgeMemo::kMaxBytesPerGraphElement,
            4 * JudgeMemo::kMaxBytes)
      << elements << " elements";
  JudgeMemo memo;
  PlanningContext ctx = Context(s, 0.5);
  ctx.judge_memo = &memo;
  // Six plans with different actions: of every six candidates, the
  // shift-th swapped and the one three after it recomputed.
  auto plan = [&s](int shift) {
    Plan p = Plan::KeepAll(s.graph);
    int i = 0;
    for (const Candidate& c : s.analysis.candidates) {
      if (i % 6 == shift) p.decisions[c.tensor].action = Action::kSwap;
      if (i % 6 == (shift + 3) % 6) {
        p.decisions[c.tensor].action = Action::kRecompute;
      }
      ++i;
    }
    return p;
  };
  int64_t largest_entry = 0;
  for (int shift = 0; shift < 6; ++shift) {
    const int64_t before = memo.bytes();
    ASSERT_TRUE(JudgePlan(ctx, plan(shift)).ok());
    largest_entry = std::max(largest_entry, memo.bytes() - before);
    EXPECT_LE(memo.bytes(), JudgeMemo::kMaxBytes);
  }
  ASSERT_EQ(memo.hits(), 0);  // six distinct plans
  for (int shift = 0; shift < 6; ++shift) {
    ASSERT_TRUE(JudgePlan(ctx, plan(shift)).ok());
  }
  // Some remembered, not all: six entries would pass the cap in all.
  EXPECT_GT(memo.hits(), 0);
  EXPECT_LT(memo.hits(), 6) << "entries of up to " << largest_entry << " bytes";
  EXPECT_GT(6 * largest_entry, JudgeMemo::kMaxBytes);
}

// Every policy plans the same with the memo and without it (a memo that
// remembers nothing), on random graphs at tight and loose budgets.
TEST(JudgeMemoTest, PlansAreTheSameWithoutIt) {
  for (uint32_t seed = 10; seed < 22; ++seed) {
    const Step s = MakeStep(seed);
    for (double fraction : {0.25, 0.5, 0.8}) {
      for (const std::string& policy : DefaultPolicyNames()) {
        SCOPED_TRACE(
            absl::StrCat("seed ", seed, ", budget ", fraction, ", ", policy));
        PlanningContext with = Context(s, fraction);
        absl::StatusOr<PlanOutcome> a = PlanAndSimulate(policy, with, {});
        JudgeMemo forgetful(/*max_bytes=*/0);
        PlanningContext without = Context(s, fraction);
        without.judge_memo = &forgetful;
        absl::StatusOr<PlanOutcome> b = PlanAndSimulate(policy, without, {});
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_TRUE(b.ok()) << b.status();
        EXPECT_EQ(forgetful.hits(), 0);
        ASSERT_EQ(a->plan.decisions.size(), b->plan.decisions.size());
        for (size_t t = 0; t < a->plan.decisions.size(); ++t) {
          EXPECT_EQ(a->plan.decisions[t].action, b->plan.decisions[t].action);
          EXPECT_EQ(a->plan.decisions[t].prefetch_after_op,
                    b->plan.decisions[t].prefetch_after_op);
        }
        EXPECT_EQ(a->result.step_ns, b->result.step_ns);
        EXPECT_EQ(a->result.feasible, b->result.feasible);
      }
    }
  }
}

// A round's policies sharing one memo and their seeds, as the core runs
// them (slackswap last, judging and running the others again), plan what
// each plans alone, with reasons and without.
TEST(JudgeMemoTest, ARoundSharingOnePlansWhatEachPlansAlone) {
  for (uint32_t seed = 30; seed < 36; ++seed) {
    const Step s = MakeStep(seed);
    for (const auto& [explain, prune] :
         {std::pair(true, true), std::pair(false, true),
          std::pair(false, false)}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, explain ? ", reasons" : "",
                                prune ? ", pruned" : ""));
      JudgeMemo memo;
      std::vector<Plan> seeds;
      std::vector<Plan> alone_seeds;
      for (const std::string& policy : DefaultPolicyNames()) {
        PlanningContext shared = Context(s, 0.4);
        shared.explain = explain;
        shared.seeds = &seeds;
        shared.judge_memo = &memo;
        shared.prune_with_bounds = prune;
        PlanningContext alone = Context(s, 0.4);
        alone.explain = explain;
        alone.prune_with_bounds = prune;
        alone.seeds = &alone_seeds;
        absl::StatusOr<Plan> a = PlanWithPolicy(policy, shared);
        absl::StatusOr<Plan> b = PlanWithPolicy(policy, alone);
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_TRUE(b.ok()) << b.status();
        ASSERT_EQ(a->decisions.size(), b->decisions.size());
        for (size_t t = 0; t < a->decisions.size(); ++t) {
          EXPECT_EQ(a->decisions[t].action, b->decisions[t].action);
          EXPECT_EQ(a->decisions[t].prefetch_after_op,
                    b->decisions[t].prefetch_after_op);
          const int32_t tensor = static_cast<int32_t>(t);
          EXPECT_EQ(a->FactsOf(tensor).reason.str(),
                    b->FactsOf(tensor).reason.str());
          EXPECT_EQ(a->FactsOf(tensor).recompute_ns,
                    b->FactsOf(tensor).recompute_ns);
        }
        EXPECT_EQ(a->policy, policy);
        if (policy != "ideal") {
          seeds.push_back(*a);
          alone_seeds.push_back(*b);
        }
      }
      // slackswap ran the three baselines again: each came from the memo;
      // pruning may skip recompute_only (planner/internal/step_bound.h).
      EXPECT_GE(memo.plan_hits(), prune ? 2 : 3);
    }
  }
}

// A plan made with reasons serves a context without them, reasons cleared;
// one made without does not serve a context that wants them.
TEST(JudgeMemoTest, AnExplainedPlanServesAQuietContext) {
  const Step s = MakeStep(40);
  JudgeMemo memo;
  PlanningContext loud = Context(s, 0.5);
  loud.judge_memo = &memo;
  PlanningContext quiet = loud;
  quiet.explain = false;
  ASSERT_TRUE(PlanWithPolicy("capuchin", quiet).ok());
  EXPECT_EQ(memo.plan_hits(), 0);
  absl::StatusOr<Plan> explained = PlanWithPolicy("capuchin", loud);
  ASSERT_TRUE(explained.ok());
  EXPECT_EQ(memo.plan_hits(), 0);  // the quiet plan has no reasons to give
  absl::StatusOr<Plan> recalled = PlanWithPolicy("capuchin", quiet);
  ASSERT_TRUE(recalled.ok());
  EXPECT_EQ(memo.plan_hits(), 1);
  bool any_reason = false;
  for (size_t t = 0; t < explained->decisions.size(); ++t) {
    const int32_t tensor = static_cast<int32_t>(t);
    any_reason |= !explained->FactsOf(tensor).reason.empty();
    EXPECT_TRUE(recalled->FactsOf(tensor).reason.empty());
    EXPECT_EQ(recalled->decisions[t].action, explained->decisions[t].action);
  }
  EXPECT_TRUE(any_reason);
}

// Pruned only when provably beaten: a plan whose compute alone outlasts the
// best step is not simulated; against a slower (or infeasible) best it is.
TEST(JudgeUnlessBeatenTest, SkipsOnlyWhatCannotWin) {
  const Step s = MakeStep(7);
  const PlanningContext ctx = Context(s, 0.5);
  absl::StatusOr<Plan> recomputing = PlanWithPolicy("recompute_only", ctx);
  ASSERT_TRUE(recomputing.ok()) << recomputing.status();
  const Plan& plan = *recomputing;
  absl::StatusOr<Judged> judged = JudgePlan(ctx, plan);
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->result.feasible) << judged->result.infeasible_reason;
  ASSERT_GT(judged->result.recompute_ns, 0);

  SimResult faster;  // a feasible best at the ideal step
  faster.feasible = true;
  faster.step_ns = s.analysis.durations.total_ns;
  absl::StatusOr<std::optional<Judged>> pruned =
      JudgeUnlessBeaten(ctx, plan, faster);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_FALSE(pruned->has_value());

  SimResult slower = faster;
  slower.step_ns = judged->result.step_ns + 1;
  absl::StatusOr<std::optional<Judged>> kept =
      JudgeUnlessBeaten(ctx, plan, slower);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(kept->has_value());
  EXPECT_EQ((*kept)->result.step_ns, judged->result.step_ns);

  SimResult infeasible = faster;
  infeasible.feasible = false;
  absl::StatusOr<std::optional<Judged>> against_infeasible =
      JudgeUnlessBeaten(ctx, plan, infeasible);
  ASSERT_TRUE(against_infeasible.ok());
  EXPECT_TRUE(against_infeasible->has_value());
}

}  // namespace
}  // namespace slackswap
