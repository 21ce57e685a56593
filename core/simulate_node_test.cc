// Simulate on a node (StepSpec.node): every rank's result, the slowest as
// the node's step, the links and sockets; the refusals, each naming the
// field; Plan and Sweep on a node; and the admission estimate of a node
// request.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/admission.h"
#include "core/planning_core.h"
#include "core/request_convert.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "model/node.h"
#include "model/plan.h"
#include "model/workloads.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

v1::SimulateRequest NodeRequest(int32_t ranks, int64_t layers = 2) {
  v1::SimulateRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(layers);
  req.mutable_step()->set_node_name("dgx-a100-80gb");
  req.mutable_step()->set_ranks(ranks);
  return req;
}

std::string ErrorOf(const absl::Status& s, absl::StatusCode code) {
  EXPECT_EQ(s.code(), code) << s;
  return std::string(s.message());
}

// swap_only's plan for gpt2-xl on the DGX's GPU at 0.6 of the peak: host
// copies that the step cannot all hide.
v1::Plan SwappingPlan(const PlanningCore& core) {
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(2);
  req.mutable_step()->set_hardware_name(FindNode("dgx-a100-80gb")->gpu.name);
  req.set_budget_fraction(0.6);
  req.add_policies("swap_only");
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  EXPECT_TRUE(resp.ok()) << resp.status();
  if (!resp.ok()) return v1::Plan();
  for (const v1::PolicyResult& p : resp->report().results()) {
    if (p.policy() == "swap_only") return p.plan();
  }
  ADD_FAILURE() << "no swap_only result";
  return v1::Plan();
}

TEST(SimulateNodeTest, EveryRankReportsAndTheSlowestIsTheNodesStep) {
  PlanningCore core(CoreLimits{});
  absl::StatusOr<v1::SimulateResponse> resp =
      core.SimulateStep(NodeRequest(/*ranks=*/0), {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_TRUE(resp->has_node());
  const v1::NodeSimulation& node = resp->node();
  EXPECT_EQ(node.node_name(), "dgx-a100-80gb");
  EXPECT_TRUE(node.feasible());
  ASSERT_EQ(node.ranks_size(), 8);
  int64_t slowest = 0;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(node.ranks(i).rank(), i);
    EXPECT_EQ(node.ranks(i).gpu(), i);
    EXPECT_TRUE(node.ranks(i).result().has_device());
    slowest = std::max(slowest, node.ranks(i).result().step_ns());
  }
  EXPECT_EQ(node.step_ns(), slowest);
  EXPECT_GT(node.step_ns(), 0);
  EXPECT_DOUBLE_EQ(node.throughput_retained(),
                   static_cast<double>(node.ideal_step_ns()) / node.step_ns());
  // The old field is the slowest rank's result.
  ASSERT_GE(node.slowest_rank(), 0);
  ASSERT_LT(node.slowest_rank(), 8);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      resp->result(), node.ranks(node.slowest_rank()).result()));
  EXPECT_EQ(resp->result().step_ns(), node.step_ns());
  // Eight GPU links, four uplinks, two sockets' memory.
  ASSERT_EQ(node.links_size(), 8 + 4 + 2);
  EXPECT_EQ(node.links(0).name(), "GPU 0 link");
  EXPECT_THAT(node.links(0).ranks(), ::testing::ElementsAre(0));
  EXPECT_EQ(node.links(8).ranks_size(), 2);
  EXPECT_EQ(node.links(12).ranks_size(), 4);
  ASSERT_EQ(node.sockets_size(), 2);
  EXPECT_EQ(node.sockets(0).pinned_capacity_bytes(), 500'000'000'000);
}

TEST(SimulateNodeTest, MoreRanksAreNeverFasterAndSharedUplinksSlowSwaps) {
  PlanningCore core(CoreLimits{});
  for (bool swapping : {false, true}) {
    SCOPED_TRACE(swapping ? "swap_only's plan" : "keep everything");
    v1::SimulateRequest one = NodeRequest(1);
    v1::SimulateRequest eight = NodeRequest(8);
    if (swapping) {
      *one.mutable_plan() = SwappingPlan(core);
      *eight.mutable_plan() = one.plan();
    }
    absl::StatusOr<v1::SimulateResponse> a = core.SimulateStep(one, {});
    absl::StatusOr<v1::SimulateResponse> b = core.SimulateStep(eight, {});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(a->node().feasible()) << a->node().infeasible_reason();
    ASSERT_TRUE(b->node().feasible()) << b->node().infeasible_reason();
    EXPECT_EQ(a->node().ranks_size(), 1);
    EXPECT_GE(b->node().step_ns(), a->node().step_ns());
    if (swapping) {
      EXPECT_GT(a->result().d2h_bytes(), 0);
      // Two GPUs share each uplink at one GPU link's rate.
      EXPECT_GT(b->node().step_ns(), a->node().step_ns());
    }
  }
}

TEST(SimulateNodeTest, ARankThatCannotRunMakesTheStepInfeasibleNamingIt) {
  PlanningCore core(CoreLimits{});
  v1::SimulateRequest req = NodeRequest(2);
  req.set_budget_bytes(1);  // keeping everything cannot meet it
  absl::StatusOr<v1::SimulateResponse> resp = core.SimulateStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_FALSE(resp->node().feasible());
  EXPECT_THAT(resp->node().infeasible_reason(), StartsWith("rank "));
  EXPECT_FALSE(resp->result().feasible());
  EXPECT_EQ(resp->result().infeasible_reason(),
            resp->node().infeasible_reason());
}

TEST(SimulateNodeTest, RenderSvgDrawsEveryRankAndTheLinks) {
  PlanningCore core{CoreLimits{}};
  v1::SimulateRequest req = NodeRequest(2);
  req.set_render_svg(true);
  absl::StatusOr<v1::SimulateResponse> resp = core.SimulateStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_THAT(resp->svg(), HasSubstr("gpt2-xl on dgx-a100-80gb"));
  EXPECT_THAT(resp->svg(), HasSubstr("id=\"r1-memory\""));
  EXPECT_THAT(resp->svg(), Not(HasSubstr("id=\"r2-memory\"")));
  // Events and timelines were recorded for the picture, not returned.
  EXPECT_EQ(resp->result().events_size(), 0);
  for (const v1::RankResult& rank : resp->node().ranks()) {
    EXPECT_EQ(rank.result().events_size(), 0);
    EXPECT_EQ(rank.result().memory_timeline_size(), 0);
  }
}

TEST(SimulateNodeTest, BadNodeRequestsNameTheField) {
  PlanningCore core(CoreLimits{});
  const auto error_of = [&](const v1::SimulateRequest& req) {
    return ErrorOf(core.SimulateStep(req, {}).status(),
                   absl::StatusCode::kInvalidArgument);
  };
  v1::SimulateRequest req = NodeRequest(0);
  req.mutable_step()->set_node_name("dgx-z9");
  EXPECT_THAT(error_of(req),
              HasSubstr("step.node_name: unknown node \"dgx-z9\"; known: "
                        "dgx-a100-80gb, hgx-h100-sxm"));
  EXPECT_THAT(error_of(NodeRequest(9)),
              HasSubstr("step.ranks must be in [0, 8]"));
  EXPECT_THAT(error_of(NodeRequest(-1)),
              HasSubstr("step.ranks must be in [0, 8]"));
  req = NodeRequest(0);
  req.mutable_step()->set_hardware_name("h100-pcie5");
  EXPECT_THAT(error_of(req),
              StartsWith("step.hardware_name: \"h100-pcie5\" is not the "
                         "GPU of step.node_name \"dgx-a100-80gb\""));
  // The node's own GPU, given again, is no conflict.
  req.mutable_step()->set_hardware_name(FindNode("dgx-a100-80gb")->gpu.name);
  EXPECT_TRUE(core.SimulateStep(req, {}).ok());
  req = NodeRequest(0);
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.mutable_step()->clear_node();
  req.mutable_step()->set_ranks(2);
  EXPECT_THAT(error_of(req), StartsWith("step.ranks: 2 given without a node"));
  // An inline node's errors name its field under step.node_inline.
  req = NodeRequest(0);
  v1::NodeProfile bad = NodeToProto(*FindNode("dgx-a100-80gb"));
  bad.mutable_switches(2)->set_gpus(1, 9);
  *req.mutable_step()->mutable_node_inline() = bad;
  EXPECT_THAT(error_of(req),
              StartsWith("step.node_inline.switches[2].gpus[1]: GPU 9"));
}

// Tensor x data parallel: the core builds each rank's graph (their
// collectives' groups differ) and gives the node the same answer as running
// those graphs on it directly.
TEST(SimulateNodeTest, ATensorTimesDataParallelLayoutRunsEachRanksGraph) {
  PlanningCore core(CoreLimits{});
  v1::SimulateRequest req;
  v1::WorkloadRef& w = *req.mutable_step()->mutable_workload();
  w.set_name("llama-7b");
  w.set_layers(2);
  w.set_tensor_parallel(2);
  w.set_data_parallel(4);
  req.mutable_step()->set_node_name("dgx-a100-80gb");
  absl::StatusOr<v1::SimulateResponse> resp = core.SimulateStep(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_TRUE(resp->node().feasible()) << resp->node().infeasible_reason();
  ASSERT_EQ(resp->node().ranks_size(), 8);

  const Node node = *FindNode("dgx-a100-80gb");
  std::vector<Graph> graphs;
  std::vector<OpDurations> durations;
  std::vector<Schedule> schedules;
  for (int32_t r = 0; r < 8; ++r) {
    absl::StatusOr<Graph> g = BuildWorkload(
        "llama-7b",
        {.layers = 2, .data_parallel = 4, .tensor_parallel = 2, .rank = r});
    ASSERT_TRUE(g.ok()) << g.status();
    graphs.push_back(*std::move(g));
  }
  for (const Graph& g : graphs) {
    durations.push_back(*ComputeDurations(g, node.gpu));
    schedules.push_back(*LowerPlan(g, Plan::KeepAll(g), durations.back(), {}));
  }
  std::vector<RankStep> ranks;
  for (int32_t r = 0; r < 8; ++r) {
    ranks.push_back({.gpu = r,
                     .graph = &graphs[r],
                     .durations = &durations[r],
                     .schedule = &schedules[r]});
  }
  SimOptions opts;
  opts.device.enabled = true;
  absl::StatusOr<NodeSimResult> direct = SimulateNode(node, ranks, opts);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(resp->node().step_ns(), direct->step_ns);
  for (int32_t r = 0; r < 8; ++r) {
    EXPECT_EQ(resp->node().ranks(r).result().step_ns(),
              direct->ranks[r].step_ns);
  }

  const auto error_of = [&](const v1::SimulateRequest& bad) {
    return ErrorOf(core.SimulateStep(bad, {}).status(),
                   absl::StatusCode::kInvalidArgument);
  };
  v1::SimulateRequest bad = req;
  bad.mutable_step()->mutable_workload()->set_rank(3);
  EXPECT_THAT(error_of(bad),
              StartsWith("step.workload.rank: a step on a node builds every "
                         "rank's step; leave rank out"));
  bad = req;
  bad.mutable_step()->mutable_workload()->set_data_parallel(2);
  EXPECT_THAT(error_of(bad),
              StartsWith("step.ranks: 8 ranks run a layout of 4 "
                         "(tensor_parallel 2 x data_parallel 2)"));
  bad = req;
  bad.mutable_step()->mutable_workload()->set_tensor_parallel(3);
  EXPECT_THAT(error_of(bad),
              HasSubstr("step.workload: transformer llama-7b: "
                        "tensor_parallel (3) must divide heads (32)"));
  // Fewer ranks than the layout: rank 0's data-parallel group names rank 4.
  bad = req;
  bad.mutable_step()->set_ranks(4);
  EXPECT_THAT(error_of(bad), HasSubstr("step.ranks: "));
}

// Plan on a node: every result is the node's, planned for each rank's share
// of the links (what the node's GPU would be alone is the seed), the bound
// says why it is unavailable.
TEST(SimulateNodeTest, PlanJudgesOnTheNode) {
  PlanningCore core(CoreLimits{});
  v1::PlanRequest plan;
  plan.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  plan.mutable_step()->mutable_workload()->set_layers(4);
  plan.mutable_step()->set_node_name("dgx-a100-80gb");
  plan.mutable_step()->set_ranks(4);
  plan.set_budget_fraction(0.5);
  plan.set_include_bound(true);
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(plan, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const v1::PlanReport& report = resp->report();
  EXPECT_EQ(report.node_name(), "dgx-a100-80gb");
  EXPECT_EQ(report.ranks(), 4);
  const Node dgx = *FindNode("dgx-a100-80gb");
  EXPECT_EQ(report.planned_h2d_gbps(), FairShareGpu(dgx, 4).h2d_gbps);
  EXPECT_LT(report.planned_h2d_gbps(), dgx.gpu.h2d_gbps);
  EXPECT_FALSE(report.has_bound_retained());
  EXPECT_THAT(report.bound_unavailable(),
              HasSubstr("the bound's model has one GPU's host link"));
  ASSERT_GT(report.results_size(), 1);
  for (const v1::PolicyResult& p : report.results()) {
    SCOPED_TRACE(p.policy());
    ASSERT_EQ(p.node().ranks_size(), 4);
    EXPECT_EQ(p.result().step_ns(), p.node().step_ns());
    EXPECT_EQ(p.result().feasible(), p.node().feasible());
  }
  // A single GPU's report has no node.
  plan.mutable_step()->clear_node();
  plan.mutable_step()->clear_ranks();
  plan.mutable_step()->set_hardware_name(dgx.gpu.name);
  absl::StatusOr<v1::PlanResponse> alone = core.PlanStep(plan, {});
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->report().node_name().empty());
  EXPECT_FALSE(alone->report().results(0).has_node());
}

// llama-7b (2 layers) on 4 ranks of the DGX, two behind each switch uplink
// that is no faster than one GPU's link: swaps the GPU alone hides do not
// all hide on the node. At 0.3 of the peak slackswap's node plan there
// starts from the GPU alone's plan (AlonePlan): a sweep without that seed
// retains less there than Plan does.
v1::StepSpec FourRanksOfTheDgx() {
  v1::StepSpec step;
  step.mutable_workload()->set_name("llama-7b");
  step.mutable_workload()->set_layers(2);
  step.set_node_name("dgx-a100-80gb");
  step.set_ranks(4);
  return step;
}

absl::StatusOr<std::vector<v1::SweepResponse>> Sweep(
    const PlanningCore& core, const v1::SweepRequest& req) {
  std::vector<v1::SweepResponse> out;
  absl::Status s = core.SweepBudgets(req, {}, [&](const v1::SweepResponse& m) {
    out.push_back(m);
    return true;
  });
  if (!s.ok()) return s;
  return out;
}

// Sweep on a node: at each budget every policy's point is exactly what a
// Plan request on the node gives at that budget (the same plans, seeded
// alike, judged on the whole node), not the GPU alone's; every point says
// which node and what it planned with, and that there is no bound.
TEST(SimulateNodeTest, SweepOnANodeIsPlanOnTheNodeAtEveryBudget) {
  PlanningCore core(CoreLimits{});
  const Node dgx = *FindNode("dgx-a100-80gb");
  const Hardware share = FairShareGpu(dgx, 4);
  ASSERT_LT(share.h2d_gbps, dgx.gpu.h2d_gbps);
  v1::SweepRequest sweep;
  *sweep.mutable_step() = FourRanksOfTheDgx();
  sweep.set_from(0.3);
  sweep.set_to(0.5);
  sweep.set_step_fraction(0.2);
  sweep.set_include_bound(true);
  absl::StatusOr<std::vector<v1::SweepResponse>> on_node = Sweep(core, sweep);
  ASSERT_TRUE(on_node.ok()) << on_node.status();

  v1::SweepRequest single = sweep;
  single.mutable_step()->clear_node();
  single.mutable_step()->clear_ranks();
  single.mutable_step()->set_hardware_name(dgx.gpu.name);
  single.set_include_bound(false);
  absl::StatusOr<std::vector<v1::SweepResponse>> alone = Sweep(core, single);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_EQ(alone->size(), on_node->size());

  int points = 0;
  int slower_on_the_node = 0;
  for (double f : {0.3, 0.5}) {
    SCOPED_TRACE(f);
    v1::PlanRequest plan;
    *plan.mutable_step() = FourRanksOfTheDgx();
    plan.set_budget_fraction(f);
    absl::StatusOr<v1::PlanResponse> planned = core.PlanStep(plan, {});
    ASSERT_TRUE(planned.ok()) << planned.status();
    for (const v1::PolicyResult& r : planned->report().results()) {
      SCOPED_TRACE(r.policy());
      ASSERT_TRUE(r.has_node());
      const auto at = [&](const std::vector<v1::SweepResponse>& msgs)
          -> const v1::SweepResponse* {
        for (const v1::SweepResponse& m : msgs) {
          if (m.has_point() && m.point().policy() == r.policy() &&
              m.point().budget_fraction() == f) {
            return &m;
          }
        }
        return nullptr;
      };
      const v1::SweepResponse* msg = at(*on_node);
      const v1::SweepResponse* single_msg = at(*alone);
      ASSERT_NE(msg, nullptr);
      ASSERT_NE(single_msg, nullptr);
      ++points;
      const v1::SweepPoint& p = msg->point();
      EXPECT_EQ(msg->node_name(), "dgx-a100-80gb");
      EXPECT_EQ(msg->ranks(), 4);
      EXPECT_EQ(msg->planned_h2d_gbps(), share.h2d_gbps);
      EXPECT_EQ(msg->planned_d2h_gbps(), share.d2h_gbps);
      EXPECT_EQ(p.budget_bytes(), planned->report().budget_bytes());
      EXPECT_EQ(p.feasible(), r.result().feasible());
      EXPECT_EQ(p.throughput_retained(), r.result().throughput_retained());
      EXPECT_EQ(p.peak_activation_bytes(), r.result().peak_activation_bytes());
      EXPECT_EQ(p.infeasible_reason(), r.result().infeasible_reason());
      EXPECT_TRUE(p.unavailable().empty()) << p.unavailable();
      EXPECT_FALSE(p.has_bound_retained());
      EXPECT_FALSE(p.has_gap_to_bound());
      EXPECT_THAT(p.bound_unavailable(),
                  HasSubstr("the bound's model has one GPU's host link"));
      EXPECT_TRUE(single_msg->node_name().empty());
      EXPECT_EQ(single_msg->ranks(), 0);
      if (p.throughput_retained() < single_msg->point().throughput_retained()) {
        ++slower_on_the_node;
      }
    }
  }
  EXPECT_EQ(points, 2 * static_cast<int>(DefaultPolicyNames().size()));
  // The node's shared uplinks show: not the GPU alone's answers.
  EXPECT_GT(slower_on_the_node, 0);
}

TEST(SimulateNodeTest, ANodeRequestIsEstimatedAtItsRanksSimulations) {
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {.layers = 2});
  ASSERT_TRUE(g.ok());
  const PlanningWork one = SimulateWork();
  const PlanningWork eight = SimulateWork(8);
  EXPECT_DOUBLE_EQ(eight.plans, 8 * one.plans);
  const CostEstimate a = EstimateCost(*g, 0, one.plans, 0, one.ranks);
  const CostEstimate b = EstimateCost(*g, 0, eight.plans, 0, eight.ranks);
  EXPECT_GT(b.seconds, a.seconds);
  EXPECT_GT(b.bytes, a.bytes);
  // A limit between the two admits one GPU's simulation and refuses the
  // node's, naming the estimate.
  CoreLimits limits;
  limits.max_request_seconds = (a.seconds + b.seconds) / 2;
  PlanningCore core(limits);
  v1::SimulateRequest single = NodeRequest(0);
  single.mutable_step()->clear_node();
  single.mutable_step()->set_ranks(0);
  single.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  EXPECT_TRUE(core.SimulateStep(single, {}).ok());
  EXPECT_THAT(ErrorOf(core.SimulateStep(NodeRequest(8), {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("--max_request_s"));
}

// A plan on a node judges every candidate on all its ranks and plans once
// more for the GPU alone (the seed): (ranks + 1) times one GPU's plans, and
// the solver's time twice. A sweep on a node likewise, at every budget.
TEST(SimulateNodeTest, ANodePlanIsEstimatedAtItsRanksAndTheSeed) {
  const PlanningWork one{.plans = 5, .solver_seconds = 2, .ranks = 1};
  const PlanningWork node = NodePlanWork(one, 8);
  EXPECT_DOUBLE_EQ(node.plans, 5 * 9);
  EXPECT_DOUBLE_EQ(node.solver_seconds, 4);
  EXPECT_EQ(node.ranks, 8);
  // A limit one GPU's plan meets refuses the node's, naming the estimate.
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {.layers = 2});
  ASSERT_TRUE(g.ok());
  const PlanningWork plan =
      PlanRequestWork(*ResolvePolicies({}), false, false, 2);
  const CostEstimate a = EstimateCost(*g, 0, plan.plans, 0, 1);
  const PlanningWork on_node = NodePlanWork(plan, 8);
  const CostEstimate b = EstimateCost(*g, 0, on_node.plans, 0, 8);
  CoreLimits limits;
  limits.max_request_seconds = (a.seconds + b.seconds) / 2;
  PlanningCore core(limits);
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(2);
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  EXPECT_TRUE(core.PlanStep(req, {}).ok());
  req.mutable_step()->set_node_name("dgx-a100-80gb");
  EXPECT_THAT(ErrorOf(core.PlanStep(req, {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("--max_request_s"));

  // The same for a sweep's 19 budgets (0.1 to 1.0 by 0.05), admitted or
  // refused before any is planned.
  const PlanningWork sweep =
      SweepWork(*ResolvePolicies({}), 19, false, false, 2);
  const CostEstimate c = EstimateCost(*g, 0, sweep.plans, 0, 1);
  const PlanningWork sweep_on_node = NodePlanWork(sweep, 8);
  const CostEstimate d =
      EstimateCost(*g, 0, sweep_on_node.plans, 0, sweep_on_node.ranks);
  limits.max_request_seconds = (c.seconds + d.seconds) / 2;
  PlanningCore sweeps(limits);
  v1::SweepRequest sweep_req;
  *sweep_req.mutable_step() = req.step();
  sweep_req.mutable_step()->clear_node();
  EXPECT_TRUE(sweeps.StartSweep(sweep_req, {}).ok());
  sweep_req.mutable_step()->set_node_name("dgx-a100-80gb");
  EXPECT_THAT(ErrorOf(sweeps.StartSweep(sweep_req, {}).status(),
                      absl::StatusCode::kResourceExhausted),
              HasSubstr("--max_request_s"));
}

}  // namespace
}  // namespace slackswap
