// PlanningCore::SimulateStep: the Simulate RPC. A plan (or keeping every
// activation) judged by the simulator with the whole device modelled.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/admission.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "planner/version.h"

namespace slackswap {

absl::StatusOr<v1::SimulateResponse> PlanningCore::SimulateStep(
    const v1::SimulateRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(Step step,
                             ResolveStep(req.step(), limits_, stop, graphs_));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckTimelinePoints(req.timeline_points(), limits_));
  const Graph& g = step.graph();
  SLACKSWAP_RETURN_IF_ERROR(CheckEvents(req.include_events(), g, limits_));
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, SimulateWork()));
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
  opts.timeline_points = req.timeline_points();
  opts.record_timeline = req.timeline_points() > 0;
  opts.record_events = req.include_events();
  opts.should_stop = stop;
  opts.max_recompute_tasks = limits_.max_recompute_tasks;
  opts.device.enabled = true;
  opts.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  absl::StatusOr<SimResult> r = slackswap::Simulate(g, step.hw, plan, opts);
  if (!r.ok()) return InField("plan", r.status());
  v1::SimulateResponse resp;
  *resp.mutable_result() = ResultToProto(*r, g);
  resp.set_server_seconds(watch.Lap());
  resp.set_planner_version(PlannerVersion());
  return resp;
}

}  // namespace slackswap
