#include "core/planning_core.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/request_convert.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/svg_report.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/workloads.h"
#include "planner/version.h"
#include "testing/held_graph_source.h"

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

// Keeping everything on the device is simulated once per held graph and
// hardware profile, whatever the budget, and the reports are what a core
// with no source gives. Not for an inline graph, nor on a node.
TEST(PlanningCoreTest, KeepAllOnTheDeviceIsSimulatedOncePerHeldGraph) {
  testutil::HeldGraphSource source;
  PlanningCore held{CoreLimits{}, /*observer=*/nullptr, &source};
  PlanningCore alone{CoreLimits{}};
  const auto same_device_fit = [&](const v1::PlanRequest& req) {
    absl::StatusOr<v1::PlanResponse> a = held.PlanStep(req, {});
    absl::StatusOr<v1::PlanResponse> b = alone.PlanStep(req, {});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        a->report().device(), b->report().device()))
        << a->report().device().DebugString() << "\n"
        << b->report().device().DebugString();
  };
  v1::PlanRequest req = Gpt2Request();
  req.add_policies("slackswap");
  same_device_fit(req);
  EXPECT_EQ(source.keep_all.size(), 1u);
  EXPECT_EQ(source.keep_all_found, 0);
  req.set_budget_fraction(0.3);
  same_device_fit(req);
  EXPECT_EQ(source.keep_all.size(), 1u);
  EXPECT_EQ(source.keep_all_found, 1);
  // Another GPU (less memory: another fit) is another result.
  req.mutable_step()->set_hardware_name("a100-40gb-pcie4");
  same_device_fit(req);
  EXPECT_EQ(source.keep_all.size(), 2u);
  EXPECT_EQ(source.keep_all_found, 1);

  const int finds = source.keep_all_finds;
  v1::PlanRequest inline_graph = Gpt2Request();
  inline_graph.add_policies("slackswap");
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {.layers = 2});
  ASSERT_TRUE(g.ok()) << g.status();
  *inline_graph.mutable_step()->mutable_graph_inline() = GraphToProto(*g);
  same_device_fit(inline_graph);
  v1::PlanRequest on_node = Gpt2Request();
  on_node.add_policies("slackswap");
  on_node.mutable_step()->clear_hardware_name();
  on_node.mutable_step()->set_node_name("dgx-a100-80gb");
  on_node.mutable_step()->set_ranks(2);
  on_node.mutable_step()->mutable_workload()->set_data_parallel(2);
  same_device_fit(on_node);
  EXPECT_EQ(source.keep_all_finds, finds);
  EXPECT_EQ(source.keep_all.size(), 2u);
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

TEST(PlanningCoreTest, RenderSvgDrawsTheFastestFeasiblePolicyAndKeepsTheRest) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.set_render_svg(true);
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::PlanReport& report = resp->report();
  double best = 0;
  std::string drawn;
  for (const v1::PolicyResult& p : report.results()) {
    // Recorded for the picture only: the response has neither.
    EXPECT_EQ(p.result().events_size(), 0) << p.policy();
    EXPECT_EQ(p.result().memory_timeline_size(), 0) << p.policy();
    if (p.policy() != "ideal" && p.result().feasible() &&
        p.result().throughput_retained() > best) {
      best = p.result().throughput_retained();
      drawn = p.policy();
    }
  }
  EXPECT_THAT(resp->svg(), HasSubstr("<svg"));
  EXPECT_THAT(resp->svg(),
              HasSubstr(absl::StrCat("gpt2-xl on a100-80gb-pcie4: ", drawn,
                                     ", budget")));
  EXPECT_LE(resp->svg().size(), kMaxSvgBytes);
  // Without it, no picture; with events asked for too, they stay.
  req.set_render_svg(false);
  EXPECT_TRUE(core.PlanStep(req, {})->svg().empty());
  req.set_render_svg(true);
  req.set_include_events(true);
  resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_GT(resp->report().results(0).result().events_size(), 0);
}

TEST(PlanningCoreTest, RenderSvgOfATooLargeGraphNamesTheField) {
  CoreLimits limits;
  limits.max_event_ops = 10;
  PlanningCore core{limits};
  v1::PlanRequest req = Gpt2Request();
  req.set_render_svg(true);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("render_svg"));
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

TEST(PlanningCoreTest, ABudgetNothingMeetsIsAnAnswerWithEachMinimum) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.set_budget_bytes(1000);
  req.add_policies("slackswap");
  req.add_policies("recompute_only");
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::PlanReport& report = resp->report();
  EXPECT_THAT(report.budget_unmet(),
              HasSubstr("cannot be met: the lowest activation peak reachable "
                        "is"));
  ASSERT_EQ(report.results_size(), 2);
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (const v1::PolicyResult& p : report.results()) {
    SCOPED_TRACE(p.policy());
    EXPECT_FALSE(p.result().feasible());
    ASSERT_TRUE(p.has_min_budget_bytes());
    EXPECT_GT(p.min_budget_bytes(), 1000);
    EXPECT_DOUBLE_EQ(p.min_budget_fraction(),
                     static_cast<double>(p.min_budget_bytes()) /
                         report.unconstrained_peak_bytes());
    lowest = std::min(lowest, p.min_budget_bytes());
  }
  // The message names the lowest of them; at that budget a plan is feasible.
  EXPECT_THAT(report.budget_unmet(), HasSubstr(absl::StrCat(lowest, " bytes")));
  req.set_budget_bytes(lowest);
  absl::StatusOr<v1::PlanResponse> at = core.PlanStep(req, {});
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_TRUE(at->report().budget_unmet().empty());
  // A feasible request carries no minimums.
  for (const v1::PolicyResult& p : at->report().results()) {
    EXPECT_FALSE(p.has_min_budget_bytes()) << p.policy();
  }
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
  const int64_t peak = step->graph().index.saved_bytes;
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

// A sweep solves each budget's bound from the last budget's model and
// basis; each is the bound a plan request at that budget gets, built and
// solved on its own.
TEST(PlanningCoreTest, ASweepsBoundsAreThePlansBounds) {
  PlanningCore core{CoreLimits{}};
  v1::SweepRequest req;
  *req.mutable_step() = Gpt2Request().step();
  req.set_from(0.1);
  req.set_to(1.0);
  req.set_step_fraction(0.15);
  req.add_policies("slackswap");
  req.set_include_bound(true);
  std::vector<std::pair<double, double>> bounds;  // fraction, bound
  ASSERT_TRUE(core.SweepBudgets(req, {},
                                [&](const v1::SweepResponse& r) {
                                  if (r.has_point()) {
                                    EXPECT_TRUE(r.point().has_bound_retained())
                                        << r.point().unavailable();
                                    bounds.push_back(
                                        {r.point().budget_fraction(),
                                         r.point().bound_retained()});
                                  }
                                  return true;
                                })
                  .ok());
  ASSERT_EQ(bounds.size(), 7);  // 0.1, 0.25, ..., 1.0
  for (const auto& [fraction, bound] : bounds) {
    SCOPED_TRACE(fraction);
    v1::PlanRequest plan = Gpt2Request();
    plan.set_budget_fraction(fraction);
    plan.add_policies("slackswap");
    plan.set_include_bound(true);
    absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(plan, {});
    ASSERT_TRUE(resp.ok()) << resp.status();
    ASSERT_TRUE(resp->report().has_bound_retained());
    EXPECT_EQ(resp->report().bound_retained(), bound);
  }
  EXPECT_LT(bounds.front().second, 1);  // the LP ran there
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
  EXPECT_THAT(info.nodes(), ::testing::ElementsAreArray(NodeNames()));
  EXPECT_EQ(info.node_catalog_sha256().size(), 64u);
  EXPECT_NE(info.node_catalog_sha256(), info.hardware_catalog_sha256());
}

TEST(PlanningCoreTest, ListsTheNodeCatalog) {
  const v1::ListNodesResponse resp = PlanningCore{CoreLimits{}}.ListNodes();
  ASSERT_EQ(resp.nodes_size(), static_cast<int>(NodeCatalog().size()));
  for (int i = 0; i < resp.nodes_size(); ++i) {
    EXPECT_EQ(resp.nodes(i).name(), NodeCatalog()[i].name);
    EXPECT_EQ(resp.nodes(i).gpu_inline().name(), NodeCatalog()[i].gpu.name);
    EXPECT_EQ(resp.nodes(i).switches_size(),
              static_cast<int>(NodeCatalog()[i].switches.size()));
  }
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

// --- The device -------------------------------------------------------------

v1::PlanRequest Llama7bOn(const std::string& hardware) {
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("llama-7b");
  req.mutable_step()->set_hardware_name(hardware);
  req.mutable_budget_device();
  return req;
}

TEST(PlanningCoreTest, Llama7bOnA100_40GbNeedsAPlanAndGetsOneThatFits) {
  PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::PlanResponse> resp =
      core.PlanStep(Llama7bOn("a100-40gb-pcie4"), {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::PlanReport& report = resp->report();
  EXPECT_TRUE(report.budget_device());
  const v1::DeviceFit& fit = report.device();
  EXPECT_TRUE(fit.fits_device());
  EXPECT_FALSE(fit.fits_without_plan());
  EXPECT_EQ(fit.capacity_bytes(), 40'000'000'000);
  EXPECT_EQ(fit.framework_reserve_bytes(), kDefaultFrameworkReserveBytes);
  EXPECT_THAT(fit.summary(), ::testing::StartsWith("fits: static 13.48 GB"));
  for (const v1::PolicyResult& p : report.results()) {
    SCOPED_TRACE(p.policy());
    const v1::DeviceMemory& d = p.result().device();
    if (p.policy() == "ideal") {
      EXPECT_FALSE(d.fits_device());  // keeping everything: 56 GB
      continue;
    }
    // Every budgeted policy's search found a budget whose plan fits, under
    // the unconstrained peak, with its reserved peak plus the reserve at
    // most the device.
    EXPECT_TRUE(p.result().feasible());
    EXPECT_TRUE(d.fits_device());
    EXPECT_LE(d.peak_reserved_bytes() + d.framework_reserve_bytes(),
              d.capacity_bytes());
    EXPECT_EQ(d.required_bytes(),
              d.peak_reserved_bytes() + d.framework_reserve_bytes());
    EXPECT_LT(p.result().budget_bytes(), report.unconstrained_peak_bytes());
    EXPECT_EQ(p.plan().budget_bytes(), p.result().budget_bytes());
  }
  // The report's budget is the fitting policy's, the fastest.
  for (const v1::PolicyResult& p : report.results()) {
    if (p.policy() != fit.policy()) continue;
    EXPECT_EQ(report.budget_bytes(), p.result().budget_bytes());
    for (const v1::PolicyResult& q : report.results()) {
      if (q.policy() != "ideal") {
        EXPECT_GE(p.result().throughput_retained(),
                  q.result().throughput_retained());
      }
    }
  }
  // A headroom asks for that much more to stay free.
  v1::PlanRequest roomy = Llama7bOn("a100-40gb-pcie4");
  roomy.mutable_budget_device()->set_headroom_bytes(4'000'000'000);
  roomy.add_policies("slackswap");
  absl::StatusOr<v1::PlanResponse> r2 = core.PlanStep(roomy, {});
  ASSERT_TRUE(r2.ok()) << r2.status();
  const v1::DeviceMemory& d = r2->report().results(0).result().device();
  EXPECT_TRUE(d.fits_device());
  EXPECT_LE(
      d.peak_reserved_bytes() + d.framework_reserve_bytes() + 4'000'000'000,
      d.capacity_bytes());
  EXPECT_THAT(r2->report().device().summary(), HasSubstr("+ headroom 4.00 GB"));
}

TEST(PlanningCoreTest, Llama7bOnA100_80GbFitsWithoutAPlan) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Llama7bOn("a100-80gb-pcie4");
  req.add_policies("slackswap");
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::DeviceFit& fit = resp->report().device();
  EXPECT_TRUE(fit.fits_device());
  EXPECT_TRUE(fit.fits_without_plan());
  const v1::SimulationResult& r = resp->report().results(0).result();
  EXPECT_DOUBLE_EQ(r.throughput_retained(), 1.0);
  EXPECT_EQ(r.budget_bytes(), resp->report().unconstrained_peak_bytes());
}

TEST(PlanningCoreTest, FeasibleIsNotFitsAtAnActivationBudget) {
  // The whole activation peak is a budget every policy meets; on a 40 GB
  // device none of those plans fits, and the report says so with the
  // numbers.
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Llama7bOn("a100-40gb-pcie4");
  req.set_budget_fraction(1.0);
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  for (const v1::PolicyResult& p : resp->report().results()) {
    EXPECT_TRUE(p.result().feasible()) << p.policy();
    EXPECT_FALSE(p.result().device().fits_device()) << p.policy();
  }
  const v1::DeviceFit& fit = resp->report().device();
  EXPECT_FALSE(fit.fits_device());
  EXPECT_GT(fit.min_device_bytes(), fit.capacity_bytes());
  EXPECT_THAT(fit.summary(),
              ::testing::MatchesRegex("does not fit: static 13.48 GB \\+ "
                                      "activations 40.96 GB \\+ transient "
                                      "and allocator overhead .* \\+ reserve "
                                      "1.00 GB = .* > 40.00 GB"));
}

TEST(PlanningCoreTest, DeviceAndAllMemoryBudgetsAreValidated) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  req.mutable_budget_device()->set_headroom_bytes(-1);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("budget_device.headroom_bytes must be >= 0, got -1"));
  req.mutable_budget_device()->set_headroom_bytes(0);
  req.set_budget_covers_all_memory(true);
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("budget_covers_all_memory applies to budget_bytes or "
                        "budget_fraction"));
}

TEST(PlanningCoreTest, AnAllMemoryBudgetCoversActivationsAndTransients) {
  PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Gpt2Request();
  // 1.2 times the activation peak for activations and transients (the
  // logits and their gradient alone take 1.65 GB of it).
  req.set_budget_fraction(1.2);
  req.set_budget_covers_all_memory(true);
  req.set_timeline_points(100'000);
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::PlanReport& report = resp->report();
  EXPECT_TRUE(report.budget_covers_all_memory());
  const int64_t limit = report.budget_bytes();
  for (const v1::PolicyResult& p : report.results()) {
    if (p.policy() == "ideal") continue;
    SCOPED_TRACE(p.policy());
    const v1::SimulationResult& r = p.result();
    EXPECT_EQ(r.budget_bytes(), limit);
    if (p.policy() == "slackswap") {
      ASSERT_TRUE(r.feasible()) << r.infeasible_reason();
    }
    if (!r.feasible()) continue;
    // Planned for a smaller activation budget, so that activations and
    // transients together stay within the limit at every instant.
    EXPECT_LT(p.plan().budget_bytes(), limit);
    ASSERT_GT(r.memory_timeline_size(), 0);
    for (const v1::MemoryPoint& m : r.memory_timeline()) {
      EXPECT_LE(m.activation_bytes() + m.transient_bytes(), limit);
    }
  }
  // The same budget for activations alone: plans keep more.
  req.set_budget_covers_all_memory(false);
  absl::StatusOr<v1::PlanResponse> alone = core.PlanStep(req, {});
  ASSERT_TRUE(alone.ok());
  EXPECT_GT(alone->report().results(4).result().peak_activation_bytes(),
            report.results(4).result().peak_activation_bytes());
}
}  // namespace
}  // namespace slackswap
