// PlanningCore::SimulateStep: the Simulate RPC. A plan (or keeping every
// activation) judged by the simulator with the whole device modelled: on
// one GPU, or on the first `ranks` GPUs of a node, each rank running the
// same plan on its graph (the same graph, but for a layout whose ranks'
// collectives name different groups) through SimulateNode.
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/admission.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "io/svg_report.h"
#include "model/cost_model.h"
#include "planner/version.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"

namespace slackswap {
namespace {

// The plan lowered once and run on ranks 0..step.ranks-1 of the node, the
// rank's GPU its index. Ranks' graphs differ only in their collectives'
// groups, which neither the op durations nor the lowering read: rank 0's
// serve every rank. The lowering and the run are reported to `observer`
// (may be null) as one node simulation, the span a node plan's
// simulator_seconds covers (planner/policy.h SimulatePlan).
absl::Status SimulateOnNode(const Step& step, const slackswap::Plan& plan,
                            const SimOptions& opts, CoreObserver* observer,
                            v1::SimulateResponse* resp) {
  const Graph& g = step.graph();
  const Node& node = *step.node;
  absl::StatusOr<OpDurations> durations = ComputeDurations(g, node.gpu);
  if (!durations.ok()) return InField("plan", durations.status());
  Stopwatch watch;
  LoweringLimits limits;
  limits.max_recompute_tasks = opts.max_recompute_tasks;
  limits.should_stop = opts.should_stop;
  absl::StatusOr<Schedule> schedule = LowerPlan(g, plan, *durations, limits);
  if (!schedule.ok()) return InField("plan", schedule.status());
  std::vector<RankStep> ranks;
  ranks.reserve(step.ranks);
  for (int32_t i = 0; i < step.ranks; ++i) {
    ranks.push_back({.gpu = i,
                     .graph = &step.graph_of(i),
                     .durations = &*durations,
                     .schedule = &*schedule});
  }
  absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, opts);
  if (r.ok() && observer != nullptr) observer->NodeSimulation(watch.Lap());
  // Its refusals are about the ranks: a collective's group that names a
  // rank the step does not run, or leaves out the rank that issues it.
  if (!r.ok()) return InField("step.ranks", r.status());
  *resp->mutable_node() = NodeResultToProto(*r, node, ranks);
  if (r->ranks.empty()) return absl::OkStatus();
  const size_t reported = ReportedRank(*r);
  resp->mutable_node()->set_slowest_rank(static_cast<int32_t>(reported));
  *resp->mutable_result() =
      ResultToProto(ReportedResult(*r), *ranks[reported].graph);
  return absl::OkStatus();
}

// The picture of the step (response.svg), then the results as the request
// asked for them (without the events and timeline recorded only for the
// picture).
void DrawAndTrim(const v1::SimulateRequest& req, const Step& step,
                 v1::SimulateResponse& resp) {
  if (req.render_svg()) {
    const std::string graph = step.graph().name;
    resp.set_svg(step.node.has_value()
                     ? SvgNodeReport(resp.node(), absl::StrCat(graph, " on ",
                                                               step.node->name))
                     : SvgReport(resp.result(),
                                 absl::StrCat(graph, " on ", step.hw.name)));
  }
  DropUnaskedRecords(req.include_events(), req.timeline_points(),
                     resp.mutable_result());
  if (!resp.has_node()) return;
  DropUnaskedRecords(req.include_events(), req.timeline_points(),
                     resp.mutable_node());
}

}  // namespace

absl::StatusOr<v1::SimulateResponse> PlanningCore::SimulateStep(
    const v1::SimulateRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(Step step,
                             ResolveStep(req.step(), limits_, stop, graphs_));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckTimelinePoints(req.timeline_points(), limits_));
  const Graph& g = step.graph();
  SLACKSWAP_RETURN_IF_ERROR(CheckEvents(req.include_events(), g, limits_));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckEvents(req.render_svg(), g, limits_, "render_svg"));
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(
      g, req, SimulateWork(step.node.has_value() ? step.ranks : 1)));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());
  slackswap::Plan plan = slackswap::Plan::KeepAll(g);
  if (req.has_plan()) {
    absl::StatusOr<slackswap::Plan> p = PlanFromProto(req.plan(), g);
    if (!p.ok()) return InField("plan", p.status());
    plan = *std::move(p);
  }
  SimOptions opts;
  SLACKSWAP_ASSIGN_OR_RETURN(
      opts.budget_bytes,
      ResolveBudget(req.budget_case() == v1::SimulateRequest::kBudgetBytes,
                    req.budget_bytes(),
                    req.budget_case() == v1::SimulateRequest::kBudgetFraction,
                    req.budget_fraction(), g, /*optional=*/true));
  if (req.budget_case() == v1::SimulateRequest::BUDGET_NOT_SET) {
    opts.budget_bytes = plan.budget_bytes;
  }
  opts.budget_covers_all = req.budget_covers_all_memory();
  // The picture needs events and a timeline whether or not the response
  // carries them.
  opts.timeline_points =
      RecordedTimelinePoints(req.timeline_points(), req.render_svg());
  opts.record_timeline = opts.timeline_points > 0;
  opts.record_events = req.include_events() || req.render_svg();
  // The trace's and the picture's link counters (io/link_load.h).
  opts.record_link_load = opts.record_events;
  opts.should_stop = stop;
  opts.max_recompute_tasks = limits_.max_recompute_tasks;
  opts.device.enabled = true;
  opts.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  v1::SimulateResponse resp;
  if (step.node.has_value()) {
    SLACKSWAP_RETURN_IF_ERROR(
        SimulateOnNode(step, plan, opts, observer_, &resp));
  } else {
    absl::StatusOr<SimResult> r = slackswap::Simulate(g, step.hw, plan, opts);
    if (!r.ok()) return InField("plan", r.status());
    *resp.mutable_result() = ResultToProto(*r, g);
  }
  DrawAndTrim(req, step, resp);
  resp.set_server_seconds(watch.Lap());
  resp.set_planner_version(PlannerVersion());
  return resp;
}

}  // namespace slackswap
