#include "core/planning_core.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/request_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/workloads.h"
#include "planner/version.h"

namespace slackswap {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

v1::PlanRequest Gpt2Request(int64_t layers = 2) {
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(layers);
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  return req;
}

std::string ErrorOf(const absl::Status& s, absl::StatusCode code) {
  EXPECT_EQ(s.code(), code) << s;
  return std::string(s.message());
}

TEST(PlanningCoreTest, PlansEveryPolicyByDefault) {
  PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(Gpt2Request(), {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->report().results_size(), 5);
  EXPECT_EQ(resp->report().results(4).policy(), "slackswap");
  EXPECT_TRUE(resp->report().results(4).result().feasible());
  EXPECT_LE(resp->report().results(4).result().peak_activation_bytes(),
            resp->report().budget_bytes());
  // Reasons only on request.
  EXPECT_TRUE(resp->report().results(4).plan().decisions(0).reason().empty());
}

TEST(PlanningCoreTest, SameRequestSameAnswer) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.set_include_reasons(true);
  req.set_timeline_points(50);
  v1::PlanResponse a = *core.PlanStep(req, {});
  v1::PlanResponse b = *core.PlanStep(req, {});
  for (v1::PlanResponse* r : {&a, &b}) {
    r->clear_server_seconds();
    for (auto& p : *r->mutable_report()->mutable_results()) {
      p.clear_planning_seconds();
    }
  }
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_LE(a.report().results(4).result().memory_timeline_size(), 50);
  EXPECT_FALSE(a.report().results(4).plan().decisions(0).reason().empty());
}

TEST(PlanningCoreTest, ErrorsNameTheField) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.mutable_step()->mutable_workload()->set_name("gpt5");
  EXPECT_THAT(
      ErrorOf(core.PlanStep(req, {}).status(), absl::StatusCode::kNotFound),
      HasSubstr("step.workload"));
  req = Gpt2Request();
  req.mutable_step()->set_hardware_name("tpu");
  EXPECT_THAT(
      ErrorOf(core.PlanStep(req, {}).status(), absl::StatusCode::kNotFound),
      HasSubstr("step.hardware_name"));
  req = Gpt2Request();
  req.set_budget_bytes(-1);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("budget_bytes must be > 0"));
  req = Gpt2Request();
  req.clear_budget_fraction();
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("budget: set budget_bytes or budget_fraction"));
  req = Gpt2Request();
  req.add_policies("slackswap");
  req.add_policies("magic");
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("policies[1]: unknown policy \"magic\""));
  req = Gpt2Request();
  req.mutable_step()->clear_workload();
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("step: set graph_inline, graph_sha256 or workload"));
  req = Gpt2Request();
  req.set_timeline_points(-3);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("timeline_points"));
}

TEST(PlanningCoreTest, InlineGraphErrorsNameTheOp) {
  PlanningCore core{CoreLimits{}};
  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("gpt2-xl");
  get.mutable_workload()->set_layers(1);
  v1::PlanRequest req = Gpt2Request();
  *req.mutable_step()->mutable_graph_inline() = core.GetWorkload(get)->graph();
  req.mutable_step()->mutable_graph_inline()->mutable_ops(3)->add_input_ids(
      987654);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("step.graph_inline: op 3 ("));
}

TEST(PlanningCoreTest, LimitsAreRefusedUpFront) {
  CoreLimits limits;
  limits.max_graph_ops = 50;
  PlanningCore core{limits};
  EXPECT_THAT(ErrorOf(core.PlanStep(Gpt2Request(), {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("exceed the limit of 50"));
  v1::PlanRequest req = Gpt2Request(20000);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("step.workload.layers"));
}

TEST(PlanningCoreTest, ABudgetNothingMeetsIsAFailedPrecondition) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.set_budget_bytes(1000);
  req.add_policies("slackswap");
  std::string msg = ErrorOf(core.PlanStep(req, {}).status(),
                            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(msg, HasSubstr("the lowest activation peak reachable is"));
}

TEST(PlanningCoreTest, ABudgetUnmetAboveAMetOneIsNotCalledUnreachable) {
  // The bisection for the lowest peak can land under the budget asked for
  // when plans are not monotone in the budget; the error must not then
  // claim the budget is below what can be reached.
  absl::Status above =
      BudgetNotMetError(13'090'488, 12'070'744, "swap_only", 25'174'016);
  EXPECT_EQ(above.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(above.message()),
              HasSubstr("is met by no policy's plan, though a lower budget "
                        "is: 12070744 bytes (12.1 MB, 0.479 of the "
                        "unconstrained peak, with swap_only)"));
  EXPECT_THAT(std::string(above.message()), Not(HasSubstr("cannot be met")));

  absl::Status below =
      BudgetNotMetError(1000, 12'070'744, "swap_only", 25'174'016);
  EXPECT_THAT(std::string(below.message()),
              HasSubstr("cannot be met: the lowest activation peak reachable "
                        "is 12070744 bytes"));
}

TEST(PlanningCoreTest, StopsWhenAskedTo) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request(48);
  absl::StatusOr<v1::PlanResponse> resp =
      core.PlanStep(req, [] { return true; });
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kCancelled);
}

TEST(PlanningCoreTest, SweepsStreamPointsTargetsAndMinimums) {
  PlanningCore core{CoreLimits{}};
  v1::SweepRequest req;
  *req.mutable_step() = Gpt2Request().step();
  req.set_from(0.05);
  req.set_to(1.0);
  req.set_step_fraction(0.19);
  req.add_policies("recompute_only");
  req.add_policies("slackswap");
  req.set_target(0.99);
  absl::StatusOr<Step> step = ResolveStep(req.step(), CoreLimits{});
  ASSERT_TRUE(step.ok()) << step.status();
  const int64_t peak = step->graph.index.saved_bytes;
  int points = 0, targets = 0;
  std::vector<std::string> infeasible;  // policies, in first-seen order
  std::vector<std::string> minimums;
  absl::Status s = core.SweepBudgets(req, {}, [&](const v1::SweepResponse& r) {
    points += r.has_point();
    targets += r.has_target();
    if (r.has_point()) {
      // The real peak, not one derived from a rounded budget.
      EXPECT_EQ(r.unconstrained_peak_bytes(), peak);
      if (!r.point().feasible() &&
          std::find(infeasible.begin(), infeasible.end(), r.point().policy()) ==
              infeasible.end()) {
        infeasible.push_back(r.point().policy());
      }
    }
    if (r.has_minimum()) {
      minimums.push_back(r.minimum().policy());
      EXPECT_GT(r.minimum().budget_bytes(), 0);
    }
    return true;
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(points, 12);  // 0.05, 0.24, ..., 1.0 for two policies
  EXPECT_EQ(targets, 2);
  // recompute_only cannot fit 5% of the peak, so it gets a minimum; each
  // policy infeasible somewhere gets exactly one, and no other does.
  EXPECT_THAT(infeasible, Contains("recompute_only"));
  EXPECT_THAT(minimums, UnorderedElementsAreArray(infeasible));
  // A stopped client stops the sweep.
  s = core.SweepBudgets(req, {},
                        [](const v1::SweepResponse&) { return false; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
}

// A sweep run unit by unit, with pauses between units, sends what the whole
// sweep sends: budget by budget (one unit each), then one unit per target
// answer and per minimum.
TEST(PlanningCoreTest, ASweepRunUnitByUnitSendsWhatTheWholeSweepSends) {
  PlanningCore core{CoreLimits{}};
  v1::SweepRequest req;
  *req.mutable_step() = Gpt2Request().step();
  req.set_from(0.05);
  req.set_to(0.5);
  req.set_step_fraction(0.15);  // 4 budgets
  req.add_policies("slackswap");
  req.add_policies("recompute_only");
  req.set_target(0.9);
  std::vector<std::string> whole;
  ASSERT_TRUE(core.SweepBudgets(req, {},
                                [&](const v1::SweepResponse& r) {
                                  whole.push_back(r.SerializeAsString());
                                  return true;
                                })
                  .ok());
  absl::StatusOr<std::unique_ptr<SweepRun>> run = core.StartSweep(req, {});
  ASSERT_TRUE(run.ok()) << run.status();
  std::vector<std::string> units;
  std::vector<int> per_unit;
  while (!(*run)->Done()) {
    int n = 0;
    ASSERT_TRUE((*run)
                    ->Next([&](const v1::SweepResponse& r) {
                      EXPECT_EQ(r.planner_version(), PlannerVersion());
                      units.push_back(r.SerializeAsString());
                      ++n;
                      return true;
                    })
                    .ok());
    per_unit.push_back(n);
  }
  EXPECT_EQ(units, whole);
  // 4 budgets of 2 points, then one message per unit: 2 target answers and
  // the minimums of the policies that cannot fit 5% of this 2-layer step
  // (both).
  EXPECT_EQ(per_unit, (std::vector<int>{2, 2, 2, 2, 1, 1, 1, 1}));
}

// A graph named by digest comes from the graph source, or is NOT_FOUND.
TEST(PlanningCoreTest, GraphsByDigestComeFromTheGraphSource) {
  class OneGraph : public GraphSource {
   public:
    std::shared_ptr<const Graph> Find(const std::string& sha256) override {
      if (sha256 != std::string(64, 'a')) return nullptr;
      return std::make_shared<const Graph>(*BuildWorkload("bert-large", {}));
    }
  } source;
  PlanningCore core{CoreLimits{}, nullptr, &source};
  v1::PlanRequest req = Gpt2Request();
  req.mutable_step()->set_graph_sha256(std::string(64, 'a'));
  absl::StatusOr<v1::PlanResponse> found = core.PlanStep(req, {});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->report().graph_name(), "bert-large");
  EXPECT_EQ(found->planner_version(), PlannerVersion());
  req.mutable_step()->set_graph_sha256(std::string(64, 'b'));
  EXPECT_THAT(
      ErrorOf(core.PlanStep(req, {}).status(), absl::StatusCode::kNotFound),
      HasSubstr("step.graph_sha256: no graph bbbb"));
  req.mutable_step()->set_graph_sha256("not-hex");
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("step.graph_sha256: want 64 lower-case hex digits"));
  // Without a source, every digest is unknown.
  PlanningCore bare{CoreLimits{}};
  req.mutable_step()->set_graph_sha256(std::string(64, 'a'));
  EXPECT_EQ(bare.PlanStep(req, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PlanningCoreTest, ServerInfoNamesThePlannerAndTheCatalog) {
  const v1::ServerInfoResponse info = PlanningCore{CoreLimits{}}.Info();
  EXPECT_EQ(info.planner_version(), PlannerVersion());
  EXPECT_EQ(info.hardware_catalog_sha256().size(), 64u);
  EXPECT_EQ(info.hardware_catalog_sha256(),
            PlanningCore{CoreLimits{}}.Info().hardware_catalog_sha256());
}

TEST(PlanningCoreTest, SimulatesAPlanFromAPlanResponse) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest preq = Gpt2Request();
  preq.add_policies("slackswap");
  v1::PlanResponse planned = *core.PlanStep(preq, {});
  v1::SimulateRequest sreq;
  *sreq.mutable_step() = preq.step();
  *sreq.mutable_plan() = planned.report().results(0).plan();
  absl::StatusOr<v1::SimulateResponse> sim = core.SimulateStep(sreq, {});
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_EQ(sim->result().step_ns(),
            planned.report().results(0).result().step_ns());
  EXPECT_EQ(sim->result().budget_bytes(), planned.report().budget_bytes());
}

TEST(PlanningCoreTest, ListsAndServesWorkloads) {
  PlanningCore core{CoreLimits{}};
  EXPECT_EQ(core.ListHardwareProfiles().profiles_size(), 4);
  absl::StatusOr<v1::ListWorkloadsResponse> w = core.ListWorkloads();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->workloads_size(), 3);
  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("llama-7b");
  get.mutable_workload()->set_layers(1);
  absl::StatusOr<v1::GetWorkloadResponse> g = core.GetWorkload(get);
  ASSERT_TRUE(g.ok());
  EXPECT_GT(g->graph().ops_size(), 20);
}

}  // namespace
}  // namespace slackswap
