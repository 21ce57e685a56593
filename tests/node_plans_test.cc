// Plans made for a node against plans made for one GPU, on the node:
// docs/PLANNERS.md's table ("Plans for a node"), computed here through the
// core (the Plan and Simulate RPCs' code) and compared with the doc, so the
// figures cannot drift from the code.
//
// For each node, layout (DDP or FSDP over its 8 GPUs), reference workload
// and budget: slackswap's plan for the node's GPU alone (a Plan request for
// one GPU) run on every rank of the node (a Simulate request on the node),
// and slackswap's plan for the node (a Plan request on the node: planned
// for each rank's share of the shared links, every candidate judged on the
// whole node). The node's plan is never slower: it starts from the
// single-GPU plan when that judges better (core/plan_step.cc).
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/planning_core.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "testing/doc_tables.h"
#include "testing/node_plan_cases.h"

namespace slackswap {
namespace {

using Case = testutil::NodePlanCase;

// slackswap's result in a plan response.
const v1::PolicyResult& Slackswap(const v1::PlanResponse& resp) {
  EXPECT_EQ(resp.report().results_size(), 1);
  EXPECT_EQ(resp.report().results(0).policy(), "slackswap");
  return resp.report().results(0);
}

struct Row {
  double alone_plan_on_node = 0;
  double node_plan = 0;
};

Row Measure(const PlanningCore& core, const Case& c) {
  Row row;
  v1::PlanRequest alone;
  *alone.mutable_step() = c.Step(/*on_node=*/false);
  alone.set_budget_fraction(c.budget);
  alone.add_policies("slackswap");
  absl::StatusOr<v1::PlanResponse> planned = core.PlanStep(alone, {});
  EXPECT_TRUE(planned.ok()) << planned.status();
  if (!planned.ok()) return row;

  v1::SimulateRequest run;
  *run.mutable_step() = c.Step(/*on_node=*/true);
  *run.mutable_plan() = Slackswap(*planned).plan();
  run.set_budget_fraction(c.budget);
  absl::StatusOr<v1::SimulateResponse> ran = core.SimulateStep(run, {});
  EXPECT_TRUE(ran.ok()) << ran.status();
  if (!ran.ok()) return row;
  row.alone_plan_on_node = ran->node().throughput_retained();

  v1::PlanRequest node = alone;
  *node.mutable_step() = c.Step(/*on_node=*/true);
  absl::StatusOr<v1::PlanResponse> for_node = core.PlanStep(node, {});
  EXPECT_TRUE(for_node.ok()) << for_node.status();
  if (!for_node.ok()) return row;
  const v1::PolicyResult& p = Slackswap(*for_node);
  EXPECT_TRUE(p.result().feasible()) << p.result().infeasible_reason();
  // The result is the node's: every rank ran, the slowest reported.
  EXPECT_EQ(p.node().ranks_size(), 8);
  EXPECT_EQ(p.result().step_ns(), p.node().step_ns());
  EXPECT_EQ(for_node->report().node_name(), c.node);
  EXPECT_EQ(for_node->report().ranks(), 8);
  row.node_plan = p.node().throughput_retained();
  return row;
}

std::string Pct(double retained) {
  return absl::StrFormat("%.1f%%", 100 * retained);
}

TEST(NodePlansTest, TheDocsTableIsWhatTheCoreGives) {
  const std::vector<std::vector<std::string>> rows = testutil::MarkdownTable(
      testutil::SourceFile("docs/PLANNERS.md"),
      "| node | layout | workload | budget | one-GPU plan on the node |");
  const std::vector<Case> cases = testutil::NodePlanCases();
  ASSERT_EQ(rows.size(), cases.size()) << "the table in docs/PLANNERS.md";
  const PlanningCore core(CoreLimits{});
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(absl::StrFormat("%s %s %s %.1f", c.node, c.layout, c.workload,
                                 c.budget));
    const Row r = Measure(core, c);
    EXPECT_GE(r.node_plan, r.alone_plan_on_node);
    const std::vector<std::string> want = {
        c.node,
        c.layout,
        c.workload,
        absl::StrFormat("%.1f", c.budget),
        Pct(r.alone_plan_on_node),
        Pct(r.node_plan),
        absl::StrFormat("%+.1f pp",
                        100 * (r.node_plan - r.alone_plan_on_node))};
    EXPECT_EQ(rows[i], want) << "| " << absl::StrJoin(want, " | ") << " |";
  }
}

}  // namespace
}  // namespace slackswap
