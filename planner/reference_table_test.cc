// The reference table: the three frozen workloads on a100-80gb-pcie4 at half
// their unconstrained activation peak. Every policy's plan fits, and
// slackswap retains at least what every baseline does. Then how close it
// comes to the bound at 0.3 to 0.7 of the peak. The seed's figure is
// printed beside slackswap's for comparison, not asserted: nothing is tuned
// toward it.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/policy.h"
#include "planner/relaxation.h"
#include "testing/doc_tables.h"
#include "testing/reference.h"

namespace slackswap {
namespace {

class ReferenceTableTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceTableTest, SlackSwapMeetsTheBudgetAndBeatsEveryBaseline) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  const std::string model = GetParam();
  absl::StatusOr<Graph> g = BuildTransformer(*FindWorkload(model));
  ASSERT_TRUE(g.ok());
  absl::StatusOr<Hardware> hw = FindHardware("a100-80gb-pcie4");
  ASSERT_TRUE(hw.ok());
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(*g, *hw);
  ASSERT_TRUE(a.ok());
  const int64_t budget = g->index.saved_bytes / 2;
  const PlanningContext ctx{*g, *hw, *a, budget};

  double slackswap = 0;
  double best_baseline = 0;
  for (const std::string& policy : DefaultPolicyNames()) {
    if (policy == "ideal") continue;
    absl::StatusOr<PlanOutcome> out = PlanAndSimulate(policy, ctx, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const SimResult& r = out->result;
    EXPECT_TRUE(r.feasible) << policy << ": " << r.infeasible_reason;
    EXPECT_LE(r.peak_activation_bytes, budget) << policy;
    EXPECT_EQ(r.budget_bytes, budget) << policy;
    // The reported figure is the simulator's: simulating the plan again
    // gives it back.
    SimOptions opts;
    opts.budget_bytes = budget;
    absl::StatusOr<SimResult> again = Simulate(*g, *hw, out->plan, opts);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->step_ns, r.step_ns) << policy;
    if (policy == "slackswap") {
      slackswap = r.throughput_retained;
    } else {
      best_baseline = std::max(best_baseline, r.throughput_retained);
    }
  }
  EXPECT_GE(slackswap, best_baseline);
  const double seed = testutil::Number(
      testutil::Reference(), {"seed_figures_throughput_retained", model});
  RecordProperty("slackswap_retained", std::to_string(slackswap));
  RecordProperty("seed_retained", std::to_string(seed));
  std::printf("%s: slackswap %.4f, best baseline %.4f, seed %.3f\n",
              model.c_str(), slackswap, best_baseline, seed);
}

// The targets (docs/PLANNERS.md, "How close to the best"): at 0.3 to 0.7
// of the peak, slackswap within 0.25 pp of the bound at 0.3 and 0.4 and
// within 0.05 pp at 0.5 and 0.7; the bound at least every policy; and the
// figures the doc's tables write are these. The targets were set on the
// reference setup, whose hardware is the frozen reference's (constant
// efficiencies): asserted there. On the catalog profile (its efficiency
// tables, docs/FIDELITY.md) the doc's second table says where each is met.
struct TargetsTable {
  Hardware hw;
  const char* header;
  bool assert_targets;
};

void CheckTargets(const TargetsTable& setup) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>>
      documented;
  for (const std::vector<std::string>& row : testutil::MarkdownTable(
           testutil::SourceFile("docs/PLANNERS.md"), setup.header)) {
    if (row.size() >= 2) documented[{row[0], row[1]}] = row;
  }
  const Hardware& hw = setup.hw;
  int rows = 0;
  for (const char* model : {"bert-large", "gpt2-xl", "llama-7b"}) {
    absl::StatusOr<Graph> g = BuildTransformer(*FindWorkload(model));
    ASSERT_TRUE(g.ok());
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(*g, hw);
    ASSERT_TRUE(a.ok());
    for (const char* budget : {"0.3", "0.4", "0.5", "0.7"}) {
      SCOPED_TRACE(absl::StrCat(model, " at ", budget));
      PlanningContext ctx{
          *g, hw, *a,
          static_cast<int64_t>(std::stod(budget) *
                               static_cast<double>(g->index.saved_bytes))};
      ctx.explain = false;
      std::vector<Plan> seeds;
      ctx.seeds = &seeds;
      std::vector<SimResult> results;
      for (const std::string& policy : DefaultPolicyNames()) {
        if (policy == "ideal") continue;
        absl::StatusOr<PlanOutcome> out = PlanAndSimulate(policy, ctx, {});
        ASSERT_TRUE(out.ok()) << out.status();
        results.push_back(out->result);
        seeds.push_back(out->plan);
      }
      const SimResult& slack = results.back();  // slackswap runs last
      ASSERT_TRUE(slack.feasible);
      RelaxationOptions options;
      options.start = &seeds.back();
      absl::StatusOr<Relaxation> bound = SolveRelaxation(ctx, options);
      ASSERT_TRUE(bound.ok()) << bound.status();
      for (const SimResult& r : results) {
        EXPECT_GE(slack.throughput_retained, r.throughput_retained);
        EXPECT_GE(bound->retained_upper, r.throughput_retained);
      }
      const double gap_pp =
          100 * (bound->retained_upper - slack.throughput_retained);
      const double target_pp = std::stod(budget) >= 0.5 ? 0.05 : 0.25;
      const std::string gap = absl::StrFormat("%.3f", gap_pp);
      // As the table rounds it.
      const bool met = std::stod(gap) <= target_pp;
      if (setup.assert_targets) {
        EXPECT_TRUE(met) << gap << " pp";
      }
      std::vector<std::string> row = {
          model,
          budget,
          absl::StrFormat("%.3f%%", 100 * slack.throughput_retained),
          absl::StrFormat("%.3f%%", 100 * bound->retained_upper),
          gap,
          absl::StrFormat("%.2f", target_pp)};
      if (!setup.assert_targets) row.push_back(met ? "yes" : "no");
      std::printf("| %s |\n", absl::StrJoin(row, " | ").c_str());
      EXPECT_EQ(
          documented[std::make_pair(std::string(model), std::string(budget))],
          row)
          << "docs/PLANNERS.md's table " << setup.header;
      ++rows;
    }
  }
  EXPECT_EQ(documented.size(), rows);
}

TEST(ReferenceTargetsTest, SlackSwapIsWithinItsTargetOfTheBound) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  CheckTargets(
      {testutil::FrozenCostModel(*FindHardware("a100-80gb-pcie4")),
       "| model | budget | slackswap | bound | gap (pp) | target (pp) |",
       /*assert_targets=*/true});
}

TEST(ReferenceTargetsTest, OnTheCatalogProfileTheTableSaysWhereTheyAreMet) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  CheckTargets({*FindHardware("a100-80gb-pcie4"),
                "| model | budget | slackswap (tables) | bound (tables) |",
                /*assert_targets=*/false});
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceTableTest,
                         ::testing::Values("bert-large", "gpt2-xl",
                                           "llama-7b"));

}  // namespace
}  // namespace slackswap
