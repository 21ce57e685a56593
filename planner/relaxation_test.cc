// The bound's promise, checked plan by plan: no plan the simulator accepts
// runs faster than the model says it could, on random training steps, on
// both a latency-free test link and a PCIe profile (10 us per copy), and on
// graphs small enough to simulate every plan.
#include "planner/relaxation.h"

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/internal/relaxation_model.h"
#include "planner/policy.h"
#include "testing/graph_builder.h"
#include "testing/planning_step.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;
using testutil::RandomStepOptions;
using testutil::RandomTrainingStep;

// Contexts for the optimal policy's MILP, too, within half a second.
struct Step : testutil::PlanningStep {
  PlanningContext At(double share) const {
    PlanningContext ctx = AtShare(share);
    ctx.optimal_time_limit_s = 0.5;
    return ctx;
  }
};

Step MakeStep(Graph g, Hardware hw) {
  return Step{testutil::MakePlanningStep(std::move(g), std::move(hw))};
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
    for (const Hardware& hw : {testutil::TestLink(), Pcie()}) {
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
  const Step s = MakeStep(RandomTrainingStep(3), testutil::TestLink());
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

// A sweep's bounds, each budget solved from the last one's model and
// basis, are the bounds solved from scratch: the same model at each budget,
// the same optimum.
TEST(BoundSweepTest, EachBudgetGetsTheBoundSolvedFromScratch) {
  int warm = 0, compared = 0, feasible = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    for (const Hardware& hw : {testutil::TestLink(), Pcie()}) {
      RandomStepOptions options;
      if (hw.transfer_latency_ns > 0) {
        // Tensors near the latency: the copies' rows bind, then free.
        options.min_bytes = 4 << 10;
        options.max_bytes = 4 << 20;
      }
      const Step s = MakeStep(RandomTrainingStep(seed, options), hw);
      const PlanningContext sweep_ctx = s.At(1);
      BoundSweep sweep(sweep_ctx);
      for (double fraction : {0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}) {
        const PlanningContext ctx = s.At(fraction);
        SCOPED_TRACE(
            absl::StrCat("seed ", seed, " ", hw.name, " budget ", fraction));
        absl::StatusOr<PlanOutcome> plan =
            PlanAndSimulate("slackswap", ctx, {});
        ASSERT_TRUE(plan.ok()) << plan.status();
        RelaxationOptions from_plan;
        from_plan.start = &plan->plan;
        absl::StatusOr<Relaxation> cold = SolveRelaxation(ctx, {});
        absl::StatusOr<Relaxation> swept =
            sweep.Solve(ctx.budget_bytes, from_plan);
        ASSERT_TRUE(cold.ok()) << cold.status();
        ASSERT_TRUE(swept.ok()) << swept.status();
        EXPECT_EQ(swept->feasible, cold->feasible);
        EXPECT_EQ(swept->step_ns_lower, cold->step_ns_lower);
        EXPECT_EQ(swept->retained_upper, cold->retained_upper);
        ++compared;
        feasible += cold->feasible;
      }
      warm += sweep.warm_solves();
    }
  }
  EXPECT_EQ(compared, 12 * 2 * 9);
  EXPECT_GT(feasible, 100);
  // Every budget after a sweep's first started from the last one's basis,
  // but the full one: keeping everything fits there, no LP.
  EXPECT_EQ(warm, 12 * 2 * 7);
}

TEST(BoundSweepTest, ALowerBudgetBuildsTheModelAnew) {
  const Step s = MakeStep(RandomTrainingStep(3), Pcie());
  const PlanningContext sweep_ctx = s.At(1);
  BoundSweep sweep(sweep_ctx);
  for (double fraction : {0.8, 0.5, 0.6}) {
    SCOPED_TRACE(fraction);
    const PlanningContext ctx = s.At(fraction);
    absl::StatusOr<Relaxation> swept = sweep.Solve(ctx.budget_bytes, {});
    absl::StatusOr<Relaxation> cold = SolveRelaxation(ctx, {});
    ASSERT_TRUE(swept.ok()) << swept.status();
    ASSERT_TRUE(cold.ok()) << cold.status();
    EXPECT_TRUE(cold->feasible);
    EXPECT_EQ(swept->step_ns_lower, cold->step_ns_lower);
  }
  EXPECT_EQ(sweep.warm_solves(), 1);  // 0.6 from 0.5's; 0.5 built anew
}

TEST(BoundSweepTest, NoPlanMeetsABudgetThenTheNextStartsFromItsBasis) {
  const Step s = MakeStep(RandomTrainingStep(3), testutil::TestLink());
  const PlanningContext sweep_ctx = s.At(1);
  BoundSweep sweep(sweep_ctx);
  absl::StatusOr<Relaxation> none = sweep.Solve(1, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->feasible);
  for (double fraction : {0.5, 0.7}) {
    const PlanningContext ctx = s.At(fraction);
    absl::StatusOr<Relaxation> swept = sweep.Solve(ctx.budget_bytes, {});
    ASSERT_TRUE(swept.ok()) << swept.status();
    EXPECT_TRUE(swept->feasible);
    EXPECT_EQ(swept->step_ns_lower, SolveRelaxation(ctx, {})->step_ns_lower);
  }
  EXPECT_EQ(sweep.warm_solves(), 2);
}

TEST(BoundSweepTest, SolvesTheLpOnlyAndHearsTheStopFunction) {
  const Step s = MakeStep(RandomTrainingStep(4), Pcie());
  PlanningContext ctx = s.At(1);
  bool stop = false;
  ctx.should_stop = [&stop] { return stop; };
  BoundSweep sweep(ctx);
  const int64_t half = s.At(0.5).budget_bytes;
  RelaxationOptions milp;
  milp.integer = true;
  EXPECT_EQ(sweep.Solve(half, milp).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(sweep.Solve(half, {}).ok());
  stop = true;
  EXPECT_EQ(sweep.Solve(s.At(0.6).budget_bytes, {}).status().code(),
            absl::StatusCode::kCancelled);
  // Keeping everything fits: no model, whatever the stop function says.
  absl::StatusOr<Relaxation> all = sweep.Solve(s.At(1).budget_bytes, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->retained_upper, 1);
}

// The model's phases, each on a step of eight ops worked out by hand:
//   0 f_u 100 ns makes u (1 MB), read only by f_s: freed after forward
//   1 f_s 200 ns makes s (2 MB, candidate 0), read by b_s
//   2 f_w 300 ns makes w (3 MB, candidate 1, a 50 ns recipe), read by b_w
//   3 f_long 5000 ns
//   4 f_v 400 ns makes v (4 MB, candidate 2), read by b_v right after: no
//     op between to prefetch from, so it cannot be swapped
//   5 b_v 500 ns, 6 b_w 600 ns, 7 b_s 700 ns
// on a link moving 1 byte/ns D2H (0.001 MB/us) and 2 H2D, no latency unless
// a test sets one. Keeping everything holds 0, 2, 5, 5, 9, 9, 5, 2 MB at the
// ops' starts.
class ModelBuilderTest : public ::testing::Test {
 protected:
  ModelBuilderTest() {
    testutil::GraphBuilder b;
    const int32_t u = b.Tensor("u", 1'000'000);
    const int32_t s = b.Tensor("s", 2'000'000);
    const int32_t w = b.Tensor("w", 3'000'000);
    const int32_t v = b.Tensor("v", 4'000'000);
    b.Forward("f_u", 100, {}, {u});
    b.Forward("f_s", 200, {u}, {s});
    b.Forward("f_w", 300, {}, {w});
    b.Forward("f_long", 5000, {}, {});
    b.Forward("f_v", 400, {}, {v});
    b.Backward("b_v", 500, {v});
    b.Backward("b_w", 600, {w});
    b.Backward("b_s", 700, {s});
    graph_ = b.Build();
    Rebuild recipe;
    recipe.cost.duration_ns = 50;
    graph_.tensors[w].rebuild = recipe;
    EXPECT_TRUE(IndexGraph(graph_).ok());
    hw_ = testutil::TestLink();
    hw_.h2d_gbps = 2;
  }

  // The builder for a budget of `budget_mb`, on the link as it is then.
  ModelBuilder& Builder(double budget_mb, int32_t max_steps = 2048,
                        bool integer = false) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(graph_, hw_);
    EXPECT_TRUE(a.ok()) << a.status();
    analysis_ = *std::move(a);
    ctx_.emplace(PlanningContext{graph_, hw_, analysis_,
                                 static_cast<int64_t>(budget_mb * 1e6)});
    builder_.emplace(*ctx_, integer, max_steps, lp_);
    return *builder_;
  }

  // Phases 1 to 6.
  ModelBuilder& BuiltToMemory(double budget_mb) {
    ModelBuilder& m = Builder(budget_mb);
    m.AddDecisions();
    EXPECT_TRUE(m.AddRerunChains().ok());
    m.PlaceCandidates();
    m.ChooseThresholds();
    m.SplitTime();
    EXPECT_TRUE(m.AddBoundaries().ok());
    return m;
  }

  // Columns by what they are: s<i>, r<i>, z<i> per candidate, y<p> per op;
  // per block start j, M<j> P<j> D<j> Q<j> F<j> H<j> E<j> (ModelBuilder::
  // Boundary), and G<j>, u<j>, v<j>, h<j>: the time added in the block
  // before it and its D2H, H2D and H2D stream flows; c<index> the rest.
  std::map<int, std::string> Names() const {
    std::map<int, std::string> names;
    const Layout& l = builder_->layout();
    for (size_t i = 0; i < l.swap.size(); ++i) {
      names[l.swap[i]] = absl::StrCat("s", i);
      names[l.recompute[i]] = absl::StrCat("r", i);
      if (l.recipe[i] >= 0) names[l.recipe[i]] = absl::StrCat("z", i);
    }
    for (size_t p = 0; p < l.rerun.size(); ++p) {
      if (l.rerun[p] >= 0) names[l.rerun[p]] = absl::StrCat("y", p);
    }
    const std::vector<ModelBuilder::Boundary>& at = builder_->boundaries();
    for (size_t j = 0; j < at.size(); ++j) {
      const ModelBuilder::Boundary& b = at[j];
      int i = 0;
      for (int col : {b.moved, b.made, b.out_needed, b.landed, b.needed,
                      b.h2d_busy, b.in_needed}) {
        names[col] = absl::StrCat(std::string(1, "MPDQFHE"[i++]), j);
      }
    }
    NameFlows(names);
    return names;
  }

  // The G columns are the only ones that cost; each bounds three flows.
  void NameFlows(std::map<int, std::string>& names) const {
    std::map<int, int> block_of_gap;
    for (int col = 0; col < lp_.columns(); ++col) {
      if (lp_.cost()[col] == 0) continue;
      const int j = static_cast<int>(block_of_gap.size()) + 1;
      block_of_gap[col] = j;
      names[col] = absl::StrCat("G", j);
    }
    std::map<int, int> flows_of_gap;
    for (size_t e = 0; e + 1 < lp_.entry_cols().size(); ++e) {
      // A capacity row: the flow's 1 then the gap's -rate, nothing else.
      auto gap = block_of_gap.find(lp_.entry_cols()[e + 1]);
      if (gap == block_of_gap.end() || lp_.entry_values()[e + 1] >= 0 ||
          lp_.entry_rows()[e] != lp_.entry_rows()[e + 1]) {
        continue;
      }
      const char* kinds = "uvh";
      names[lp_.entry_cols()[e]] = absl::StrCat(
          std::string(1, kinds[flows_of_gap[gap->first]++]), gap->second);
    }
  }

  // Rows first .. the last, as "lo <= a*x + b*y <= hi" in the order their
  // coefficients were set; `added` names the columns from
  // `first_added` on, in order.
  std::vector<std::string> Rows(int first = 0, int first_added = 0,
                                const std::vector<std::string>& added = {}) {
    std::map<int, std::string> names = Names();
    for (size_t i = 0; i < added.size(); ++i) {
      names[first_added + static_cast<int>(i)] = added[i];
    }
    std::vector<std::vector<std::string>> terms(lp_.rows());
    for (size_t e = 0; e < lp_.entry_cols().size(); ++e) {
      const int col = lp_.entry_cols()[e];
      auto name = names.find(col);
      terms[lp_.entry_rows()[e]].push_back(absl::StrCat(
          lp_.entry_values()[e], "*",
          name == names.end() ? absl::StrCat("c", col) : name->second));
    }
    std::vector<std::string> rows;
    for (int row = first; row < lp_.rows(); ++row) {
      rows.push_back(absl::StrCat(lp_.row_lo()[row],
                                  " <= ", absl::StrJoin(terms[row], " + "),
                                  " <= ", lp_.row_hi()[row]));
    }
    return rows;
  }

  Graph graph_;
  Hardware hw_;
  StepAnalysis analysis_;
  std::optional<PlanningContext> ctx_;
  LpBuilder lp_;
  std::optional<ModelBuilder> builder_;
};

TEST_F(ModelBuilderTest, DecisionsAreOnePerCandidateAndProducer) {
  ModelBuilder& m = Builder(/*budget_mb=*/6);
  m.AddDecisions();
  // s, r per candidate (v's swap at most 0), y per producer, w's recipe.
  EXPECT_EQ(lp_.columns(), 10);
  const Layout& l = m.layout();
  EXPECT_THAT(l.rerun, ElementsAre(-1, Ge(0), Ge(0), -1, Ge(0), -1, -1, -1));
  EXPECT_THAT(l.recipe, ElementsAre(-1, Ge(0), -1));
  EXPECT_EQ(lp_.col_hi()[l.swap[0]], 1);
  EXPECT_EQ(lp_.col_hi()[l.swap[2]], 0);
  EXPECT_THAT(lp_.integer(), IsEmpty());
  EXPECT_THAT(Rows(), ElementsAre(
                          // Recompute fits: re-runs and recipes, in us.
                          "0 <= -0.2*y1 + -0.3*y2 + -0.05*z1 + -0.4*y4 <= inf",
                          "-inf <= 1*s0 + 1*r0 <= 1",   //
                          "-inf <= 1*r0 + -1*y1 <= 0",  //
                          "-inf <= 1*s1 + 1*r1 <= 1",
                          "-inf <= 1*r1 + -1*y2 + -1*z1 <= 0",
                          "-inf <= 1*s2 + 1*r2 <= 1",  //
                          "-inf <= 1*r2 + -1*y4 <= 0"));
}

TEST_F(ModelBuilderTest, IntegerDecisionsAreMarkedSo) {
  Builder(/*budget_mb=*/6, /*max_steps=*/2048, /*integer=*/true).AddDecisions();
  EXPECT_THAT(lp_.integer(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST_F(ModelBuilderTest, ReRunningAProducerReRunsTheProducersOfItsFreedInputs) {
  ModelBuilder& m = Builder(/*budget_mb=*/6);
  m.AddDecisions();
  const int before = lp_.rows();
  ASSERT_TRUE(m.AddRerunChains().ok());
  // f_s reads u, which nobody saved: re-running f_s re-runs f_u.
  EXPECT_THAT(m.layout().chain, ElementsAre(std::make_pair(1, 0)));
  EXPECT_THAT(Rows(before), ElementsAre("-inf <= 1*y1 + -1*y0 <= 0"));
  EXPECT_EQ(Rows()[m.recompute_fits()],
            "0 <= -0.2*y1 + -0.3*y2 + -0.05*z1 + -0.4*y4 + -0.1*y0 <= inf");
}

TEST_F(ModelBuilderTest, CandidatesEnterTheSumsAtTheOpsThatMakeAndNeedThem) {
  ModelBuilder& m = Builder(/*budget_mb=*/6);
  m.AddDecisions();
  ASSERT_TRUE(m.AddRerunChains().ok());
  const int rows = lp_.rows(), columns = lp_.columns();
  m.PlaceCandidates();
  EXPECT_EQ(lp_.rows(), rows);
  EXPECT_EQ(lp_.columns(), columns);
  const ModelBuilder::Changes& c = m.changes();
  const auto none = IsEmpty();
  EXPECT_THAT(c.made_before,
              ElementsAre(none, none, ElementsAre(0), ElementsAre(1), none,
                          ElementsAre(2), none, none, none));
  // v has no gap.
  EXPECT_THAT(c.gap_from,
              ElementsAre(none, none, ElementsAre(0), ElementsAre(1), none,
                          none, none, none, none));
  EXPECT_THAT(c.gap_until, ElementsAre(none, none, none, none, none, none,
                                       ElementsAre(1), ElementsAre(0), none));
  EXPECT_THAT(c.needed_by,
              ElementsAre(none, none, none, none, none, ElementsAre(2),
                          ElementsAre(1), ElementsAre(0), none));
  EXPECT_THAT(c.resident, ElementsAre(0, 2, 3, 0, 4, 0, -4, -3, -2));
}

TEST_F(ModelBuilderTest, ThresholdsAreTheSizesOfSwapsLatencyBinds) {
  // Latency x rate: none; 0.6 MB (s, 2 MB, is within 4x); 1 MB (s and w; v
  // would be too, but it cannot be swapped).
  for (const auto& [latency_ns, expected] :
       std::vector<std::pair<int64_t, std::vector<double>>>{
           {0, {}}, {600'000, {2}}, {1'000'000, {2, 3}}}) {
    SCOPED_TRACE(absl::StrCat("latency ", latency_ns, " ns"));
    hw_.transfer_latency_ns = latency_ns;
    ModelBuilder& m = Builder(/*budget_mb=*/6);
    m.AddDecisions();
    ASSERT_TRUE(m.AddRerunChains().ok());
    m.PlaceCandidates();
    const int rows = lp_.rows();
    m.ChooseThresholds();
    EXPECT_EQ(lp_.rows(), rows);
    EXPECT_EQ(m.thresholds(), expected);
  }
}

TEST_F(ModelBuilderTest, TimeStepsAreOpsOrBlocksOfThem) {
  for (const auto& [max_steps, expected] :
       std::vector<std::pair<int32_t, std::vector<int32_t>>>{
           {2048, {0, 1, 2, 3, 4, 5, 6, 7, 8}},
           // Forward gets 3 x 5 / 8 = 1 block, backward (from op 5) the
           // other 2.
           {3, {0, 5, 6, 8}}}) {
    SCOPED_TRACE(absl::StrCat(max_steps, " steps"));
    ModelBuilder& m = Builder(/*budget_mb=*/6, max_steps);
    m.AddDecisions();
    ASSERT_TRUE(m.AddRerunChains().ok());
    m.PlaceCandidates();
    m.ChooseThresholds();
    m.SplitTime();
    EXPECT_EQ(m.block_starts(), expected);
    EXPECT_THAT(m.alive_at(), ElementsAre(0, 2, 5, 5, 9, 9, 5, 2));
  }
}

TEST_F(ModelBuilderTest, EachOpStartBoundsTheLinkAndTheRunningSums) {
  ModelBuilder& m = Builder(/*budget_mb=*/6);
  m.AddDecisions();
  ASSERT_TRUE(m.AddRerunChains().ok());
  m.PlaceCandidates();
  m.ChooseThresholds();
  m.SplitTime();
  const int rows = lp_.rows(), columns = lp_.columns();
  ASSERT_TRUE(m.AddBoundaries().ok());
  // Nine starts (the step's end too) of seven sums and six bounds; before
  // each but the first, a gap and three flows, each flow in one row.
  EXPECT_EQ(lp_.columns() - columns, 9 * 7 + 8 * 4);
  EXPECT_EQ(lp_.rows() - rows, 9 * 13 + 8 * 3);
  // Op 3's start: op 2 (0.3 us) ran before it and made w (3 MB); s, made
  // before, lets landed bytes be as many as moved ones (a' = 1 without
  // latency).
  EXPECT_THAT(
      Rows(rows),
      IsSupersetOf({"-inf <= 1*u3 + -0.001*G3 <= 0.0003",
                    "-inf <= 1*v3 + -0.002*G3 <= 0.0006",
                    "-inf <= 1*h3 + -0.002*G3 <= 0.0006",
                    "0 <= 1*M3 + -1*M2 + -1*u3 <= 0",
                    "0 <= 1*P3 + -1*P2 + -3*s1 <= 0", "0 <= 1*D3 + -1*D2 <= 0",
                    "0 <= 1*Q3 + -1*Q2 + -1*v3 <= 0", "0 <= 1*F3 + -1*F2 <= 0",
                    "0 <= 1*H3 + -1*H2 + -1*h3 <= 0", "0 <= 1*E3 + -1*E2 <= 0",
                    "-inf <= 1*M3 + -1*P3 <= 0", "-inf <= 1*D3 + -1*M3 <= 0",
                    "-inf <= 1*F3 + -1*Q3 <= 0", "-inf <= 1*Q3 + -1*M3 <= 0",
                    "-inf <= 1*E3 + -1*H3 <= 0", "-inf <= 1*H3 + -2*M3 <= 0"}));
  // b_w first needs w: out (D, stream bytes) and in (F, real bytes) by op 6.
  EXPECT_THAT(Rows(rows), IsSupersetOf({"0 <= 1*D6 + -1*D5 + -3*s1 <= 0",
                                        "0 <= 1*F6 + -1*F5 + -3*s1 <= 0",
                                        "0 <= 1*E6 + -1*E5 + -3*s1 <= 0"}));
  // Only the time added before backward ops (5, 6, 7 and the end) can
  // re-run forward ops.
  EXPECT_EQ(Rows()[m.recompute_fits()],
            "0 <= -0.2*y1 + -0.3*y2 + -0.05*z1 + -0.4*y4 + -0.1*y0 + 1*G5 + "
            "1*G6 + 1*G7 + 1*G8 <= inf");
}

TEST_F(ModelBuilderTest, MemoryIsBoundWhereKeepingEverythingIsOverBudget) {
  ModelBuilder& m = BuiltToMemory(/*budget_mb=*/6);
  const int rows = lp_.rows(), columns = lp_.columns();
  ASSERT_TRUE(m.AddMemoryRows().ok());
  // Ops 4 and 5 hold 9 MB, 3 over. Each gets GS, GR (s and w are in their
  // gap at both) and W, no more than all moved (a = 1 without latency).
  EXPECT_EQ(lp_.columns() - columns, 6);
  EXPECT_THAT(
      Rows(rows, columns, {"GS4", "GR4", "W4", "GS5", "GR5", "W5"}),
      ElementsAre("0 <= 1*GS4 + -2*s0 + -3*s1 <= 0",
                  "0 <= 1*GR4 + -2*r0 + -3*r1 <= 0",
                  "-inf <= 1*W4 + -1*M4 <= 0",
                  "-inf <= 1*W4 + -1*GS4 + 1*Q4 + -1*F4 <= 0",
                  "-inf <= -1*GR4 + -1*W4 <= -3", "0 <= 1*GS5 + -1*GS4 <= 0",
                  "0 <= 1*GR5 + -1*GR4 <= 0", "-inf <= 1*W5 + -1*M5 <= 0",
                  "-inf <= 1*W5 + -1*GS5 + 1*Q5 + -1*F5 <= 0",
                  "-inf <= -1*GR5 + -1*W5 <= -3"));
}

TEST_F(ModelBuilderTest, NoMemoryRowsWhereKeepingEverythingFits) {
  ModelBuilder& m = BuiltToMemory(/*budget_mb=*/9);
  const int rows = lp_.rows();
  ASSERT_TRUE(m.AddMemoryRows().ok());
  EXPECT_EQ(lp_.rows(), rows);
}

TEST_F(ModelBuilderTest, ReleasingBytesTakesCopiesTheLatencyMakesLong) {
  // 1 MB of latency x rate per copy: s and w weigh 3 and 4 MB of stream, so
  // finished copies release at most 3/4 of what moved. Of the thresholds
  // (2 and 3 MB), 2 does not bind at op 4 (w, larger, could release the 3
  // MB over alone); 3 does: no copy is larger, so n copies release at most
  // 3 n.
  hw_.transfer_latency_ns = 1'000'000;
  ModelBuilder& m = BuiltToMemory(/*budget_mb=*/6);
  const int rows = lp_.rows(), columns = lp_.columns();
  ASSERT_TRUE(m.AddMemoryRows().ok());
  EXPECT_EQ(lp_.columns() - columns, 8);  // GS, GR, W and n at ops 4 and 5
  std::vector<std::string> op4 =
      Rows(rows, columns, {"GS4", "GR4", "W4", "n4"});
  op4.resize(7);
  EXPECT_THAT(op4, ElementsAre("0 <= 1*GS4 + -2*s0 + -3*s1 <= 0",
                               "0 <= 1*GR4 + -2*r0 + -3*r1 <= 0",
                               "-inf <= 1*W4 + -0.75*M4 <= 0",
                               "-inf <= 1*W4 + -1*GS4 + 1*Q4 + -1*F4 <= 0",
                               "-inf <= 1*W4 + 1*n4 + -1*M4 <= 0",
                               "-inf <= 1*W4 + -3*n4 <= 0",
                               "-inf <= -1*GR4 + -1*W4 <= -3"));
}

// Where the budget enters: at the budget built for, BudgetRowBounds gives
// every row its bound as built; higher, the memory rows' bounds rise, and
// the rows of a block no longer over it are free. (Thresholds that stop
// binding while their block is still over the budget: BoundSweepTest's
// PCIe steps free hundreds of such rows.)
TEST_F(ModelBuilderTest, TheBudgetsRowsAreWhereTheBudgetEntersAndOnlyThose) {
  // As in ReleasingBytesTakesCopiesTheLatencyMakesLong.
  hw_.transfer_latency_ns = 1'000'000;
  ModelBuilder& m = BuiltToMemory(/*budget_mb=*/6);
  const int rows = lp_.rows();
  ASSERT_TRUE(m.AddMemoryRows().ok());
  const std::vector<MemoryBlock>& blocks = m.layout().memory;
  ASSERT_EQ(blocks.size(), 2);  // ops 4 and 5
  for (const MemoryBlock& block : blocks) {
    EXPECT_EQ(block.alive, 9);
    EXPECT_GT(block.first_row, rows);  // after GS's and GR's sums
    EXPECT_EQ(lp_.row_hi()[block.memory_row], -3);
    EXPECT_GE(block.stream_row, block.first_row);
    ASSERT_EQ(block.few.size(), 1);  // the 3 MB threshold; 2 MB does not bind
    EXPECT_EQ(block.few[0].second, 0);
  }
  EXPECT_EQ(blocks[1].memory_row, lp_.rows() - 1);

  std::vector<double> hi = lp_.row_hi();
  BudgetRowBounds(blocks, 6'000'000, hi);
  EXPECT_EQ(hi, lp_.row_hi());

  BudgetRowBounds(blocks, 8'000'000, hi);
  for (int row = 0; row < lp_.rows(); ++row) {
    const bool memory =
        row == blocks[0].memory_row || row == blocks[1].memory_row;
    EXPECT_EQ(hi[row], memory ? -1 : lp_.row_hi()[row]) << row;
  }

  BudgetRowBounds(blocks, 9'000'000, hi);  // keeping everything fits there
  for (int row = 0; row < lp_.rows(); ++row) {
    const bool freed =
        (row >= blocks[0].first_row && row <= blocks[0].memory_row) ||
        row >= blocks[1].first_row;
    EXPECT_EQ(hi[row], freed ? kInf : lp_.row_hi()[row]) << row;
  }
}

TEST(ModelBuilderStopTest, BuildingTheModelHearsTheStopFunction) {
  RandomStepOptions options;
  options.forward_ops = 3000;
  const Step s = MakeStep(RandomTrainingStep(1, options), Pcie());
  PlanningContext ctx = s.At(0.5);
  ctx.should_stop = [] { return true; };
  LpBuilder lp;
  absl::StatusOr<Layout> layout =
      ModelBuilder(ctx, /*integer=*/false, /*max_steps=*/8192, lp).Build();
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("building the bound's model stopped"));
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
