// PlanningCore::PlanStep: the Plan RPC. Every policy's plan at the
// request's budget (an activation budget, or the device or all memory,
// searched), each judged with the whole device modelled; whether they fit
// the device; the minimum budgets when none is feasible; the LP bound when
// asked for.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "core/admission.h"
#include "core/device_fit.h"
#include "core/node_planning.h"
#include "core/plan_scopes.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "io/svg_report.h"
#include "planner/budget_search.h"
#include "planner/version.h"

namespace slackswap {
namespace {

// How a plan request's budget is met: an activation budget the policies
// plan for directly, or a limit they are searched against (the device, or
// activation plus transient memory).
enum class BudgetMode { kActivations, kDevice, kAllMemory };

struct PlanBudget {
  BudgetMode mode = BudgetMode::kActivations;
  // Activations: the budget; all memory: the limit on both; device: the
  // unconstrained peak (where each search starts).
  int64_t bytes = 0;
  int64_t headroom_bytes = 0;

  bool searched() const { return mode != BudgetMode::kActivations; }
};

absl::StatusOr<PlanBudget> ResolvePlanBudget(const v1::PlanRequest& req,
                                             const Graph& g) {
  PlanBudget b;
  if (req.budget_case() == v1::PlanRequest::kBudgetDevice) {
    if (req.budget_covers_all_memory()) {
      return absl::InvalidArgumentError(
          "budget_covers_all_memory applies to budget_bytes or "
          "budget_fraction; budget_device covers all memory already");
    }
    b.headroom_bytes = req.budget_device().headroom_bytes();
    if (b.headroom_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "budget_device.headroom_bytes must be >= 0, got ", b.headroom_bytes));
    }
    b.mode = BudgetMode::kDevice;
    b.bytes = std::max<int64_t>(1, g.index.saved_bytes);
    return b;
  }
  SLACKSWAP_ASSIGN_OR_RETURN(
      b.bytes,
      ResolveBudget(req.budget_case() == v1::PlanRequest::kBudgetBytes,
                    req.budget_bytes(),
                    req.budget_case() == v1::PlanRequest::kBudgetFraction,
                    req.budget_fraction(), g, /*optional=*/false));
  if (req.budget_covers_all_memory()) b.mode = BudgetMode::kAllMemory;
  return b;
}

// A Plan request, validated.
struct PlanSpec {
  Step step;
  PlanBudget budget;
  std::vector<const PolicyInfo*> policies;
  double optimal_time_limit_s = 0;
};

absl::StatusOr<PlanSpec> ResolvePlan(const v1::PlanRequest& req,
                                     const CoreLimits& limits,
                                     const StopFn& stop, GraphSource* graphs) {
  PlanSpec spec;
  SLACKSWAP_ASSIGN_OR_RETURN(spec.step,
                             ResolveStep(req.step(), limits, stop, graphs));
  SLACKSWAP_ASSIGN_OR_RETURN(spec.budget,
                             ResolvePlanBudget(req, spec.step.graph()));
  SLACKSWAP_ASSIGN_OR_RETURN(spec.policies, ResolvePolicies(req.policies()));
  SLACKSWAP_RETURN_IF_ERROR(CheckTimelinePoints(req.timeline_points(), limits));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckEvents(req.include_events(), spec.step.graph(), limits));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckEvents(req.render_svg(), spec.step.graph(), limits, "render_svg"));
  SLACKSWAP_ASSIGN_OR_RETURN(
      spec.optimal_time_limit_s,
      ResolveOptimalTimeLimit(req.has_optimal_time_limit_s(),
                              req.optimal_time_limit_s()));
  return spec;
}

// What each policy's reported simulation records: what the request asks
// for, and with render_svg what the picture draws.
SimOptions ReportOptions(const v1::PlanRequest& req, const PlanBudget& b) {
  SimOptions report;
  report.timeline_points =
      RecordedTimelinePoints(req.timeline_points(), req.render_svg());
  report.record_timeline = report.timeline_points > 0;
  report.record_events = req.include_events() || req.render_svg();
  report.record_link_load = report.record_events;
  report.device.enabled = true;
  report.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  report.device.headroom_bytes = b.headroom_bytes;
  return report;
}

constexpr char kNoSolverSearch[] =
    "not planned: the device and all-memory budgets are searched by "
    "simulating plans at many activation budgets, and this policy's solver "
    "would run at each";

// `policy`'s plan for the request: at its activation budget, or searched
// for the device or all memory (the reference is never searched: it has no
// budget).
absl::StatusOr<PlanOutcome> PlanPolicy(const PolicyRunner& runner,
                                       const PolicyInfo& policy,
                                       const PlanBudget& b,
                                       const SimOptions& report,
                                       double* seconds) {
  const PlanningContext& ctx = runner.ctx;
  if (!b.searched() || policy.unbudgeted_reference) {
    return runner.Run(policy.name, report, seconds);
  }
  if (policy.may_be_unavailable) return absl::UnavailableError(kNoSolverSearch);
  if (b.mode == BudgetMode::kDevice) {
    return runner.Search(policy.name, DeviceJudge(policy.name, ctx, report),
                         b.bytes, seconds);
  }
  return runner.Search(
      policy.name, AllMemoryJudge(policy.name, ctx, report, b.bytes),
      std::min(b.bytes, std::max<int64_t>(1, ctx.graph.index.saved_bytes)),
      seconds);
}

// The retained share of a step of `step_ns`.
double RetainedAt(const StepAnalysis& a, int64_t step_ns) {
  if (step_ns <= 0) return 1;
  return std::min(1.0, static_cast<double>(a.durations.total_ns) /
                           static_cast<double>(step_ns));
}

// One round entry as the report gives it.
v1::PolicyResult ResultOf(const PolicyRound& round, const PolicyRound::Entry& e,
                          const PlanningContext& ctx, bool include_reasons) {
  v1::PolicyResult p;
  p.set_policy(e.policy->name);
  if (!e.result.has_value()) {
    p.set_unavailable(e.unavailable);
    return p;
  }
  const Plan& plan = round.PlanOf(e);
  *p.mutable_result() = ResultToProto(*e.result, ctx.graph);
  // Kept tensors need no decision; with reasons, every decision shows.
  *p.mutable_plan() =
      PlanToProto(plan, ctx.graph, ctx.hw.name, include_reasons);
  p.set_planning_seconds(e.seconds);
  if (e.node.has_value() && ctx.node != nullptr) {
    std::vector<RankStep> ranks;
    for (size_t r = 0; r < ctx.node->graphs.size(); ++r) {
      ranks.push_back(
          {.gpu = static_cast<int32_t>(r), .graph = ctx.node->graphs[r]});
    }
    *p.mutable_node() = NodeResultToProto(*e.node, *ctx.node->node, ranks);
  }
  if (plan.proof.has_value()) {
    p.set_optimal_proven(plan.proof->optimal);
    p.set_model_bound_retained(
        RetainedAt(ctx.analysis, plan.proof->step_ns_lower));
  }
  return p;
}

// For a budget no policy's plan meets: each policy's lowest feasible
// budget in its result, and why in the report (budget_unmet).
absl::Status MinimumBudgets(const PlanningContext& ctx, v1::PlanReport& out) {
  int64_t lowest = std::numeric_limits<int64_t>::max();
  std::string by;
  const int64_t peak = ctx.graph.index.saved_bytes;
  for (v1::PolicyResult& p : *out.mutable_results()) {
    SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* policy,
                               FindPolicy(p.policy()));
    // The reference has no budget; a solver's policy would take its time
    // limit per bisection step.
    if (policy->unbudgeted_reference || policy->may_be_unavailable ||
        !p.unavailable().empty()) {
      continue;
    }
    SLACKSWAP_ASSIGN_OR_RETURN(int64_t minimum,
                               MinimumFeasibleBudget(policy->name, ctx));
    p.set_min_budget_bytes(minimum);
    p.set_min_budget_fraction(Fraction(minimum, peak));
    if (minimum < lowest) {
      lowest = minimum;
      by = policy->name;
    }
  }
  if (out.budget_covers_all_memory()) {
    // The minimums are activation budgets: transient memory comes on top,
    // so they do not compare with an all-memory budget.
    out.set_budget_unmet(absl::StrCat(
        "budget ", ctx.budget_bytes, " bytes (", FormatBytes(ctx.budget_bytes),
        ") of activation and transient memory is met by no policy's plan",
        by.empty() ? ""
                   : absl::StrCat("; the lowest activation peak reachable, "
                                  "transients aside, is ",
                                  lowest, " bytes (", FormatBytes(lowest),
                                  ", with ", by, ")")));
    return absl::OkStatus();
  }
  const absl::Status unmet =
      by.empty()
          ? absl::FailedPreconditionError(absl::StrCat(
                "budget ", ctx.budget_bytes, " bytes (",
                FormatBytes(ctx.budget_bytes), ") is met by no policy's plan"))
          : BudgetNotMetError(ctx.budget_bytes, lowest, by, peak);
  out.set_budget_unmet(std::string(unmet.message()));
  return absl::OkStatus();
}

// What a keep-all result depends on besides its graph: every field of the
// hardware profile, and the device options.
std::string KeepAllKey(const Hardware& hw, const DeviceOptions& device) {
  std::string key;
  SerializeDeterministic(HardwareToProto(hw), &key);
  absl::StrAppend(&key, "|", device.enabled, "|",
                  device.allocator.expandable_segments, "|",
                  device.headroom_bytes);
  return key;
}

// SimulateKeepAll, or the result `graphs` holds for the step's graph on
// this hardware with these options: a request on a graph the source holds
// asks the same of it whatever its budget. Not on a node (every rank runs
// there).
absl::StatusOr<SimResult> KeepAllOnDevice(const PlanningContext& ctx,
                                          const Step& step, GraphSource* graphs,
                                          const DeviceOptions& device) {
  if (graphs == nullptr || !step.graph_from_source || ctx.node != nullptr) {
    return SimulateKeepAll(ctx, device);
  }
  const std::string key = KeepAllKey(ctx.hw, device);
  if (std::shared_ptr<const SimResult> held =
          graphs->FindKeepAll(step.graph_holder, key)) {
    return *held;
  }
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult result, SimulateKeepAll(ctx, device));
  graphs->HoldKeepAll(step.graph_holder, key,
                      std::make_shared<const SimResult>(result));
  return result;
}

// Whether the results fit the device (report.device). Keeping every
// activation is the unbudgeted reference's result when the request has one
// (it is that simulation), else simulated here or held by `graphs`. For a
// device budget, the best fitting policy's activation budget becomes the
// report's.
absl::Status AddDeviceFit(const PlanningContext& ctx, const Step& step,
                          GraphSource* graphs, const PlanBudget& b,
                          const DeviceOptions& device, v1::PlanReport& out) {
  std::optional<v1::SimulationResult> keep_all;
  for (const v1::PolicyResult& p : out.results()) {
    absl::StatusOr<const PolicyInfo*> info = FindPolicy(p.policy());
    if (info.ok() && (*info)->unbudgeted_reference && p.has_result() &&
        p.result().has_device()) {
      keep_all = p.result();
      break;
    }
  }
  if (!keep_all.has_value()) {
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult r,
                               KeepAllOnDevice(ctx, step, graphs, device));
    keep_all = ResultToProto(r, ctx.graph);
  }
  *out.mutable_device() = DescribeDeviceFit(out.results(), *keep_all);
  if (b.mode != BudgetMode::kDevice) return absl::OkStatus();
  int64_t chosen = 0;
  for (const v1::PolicyResult& p : out.results()) {
    if (p.policy() == out.device().policy()) {
      chosen = p.result().budget_bytes();
    }
  }
  out.set_budget_bytes(chosen);
  out.set_budget_fraction(Fraction(chosen, ctx.graph.index.saved_bytes));
  return absl::OkStatus();
}

// The bound, and each budgeted result's gap to it; or why there is none.
absl::Status AddBound(const PlanningContext& ctx, const PolicyRound& round,
                      const PlanBudget& b, v1::PlanReport& out) {
  if (b.searched()) {
    out.set_bound_unavailable(
        "the bound is for activation budgets: ask with budget_bytes or "
        "budget_fraction");
    return absl::OkStatus();
  }
  std::string unavailable;
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> bound,
                             Bound(ctx, round.BoundStart(), &unavailable));
  if (!bound.has_value()) {
    out.set_bound_unavailable(unavailable);
    return absl::OkStatus();
  }
  out.set_bound_retained(*bound);
  for (v1::PolicyResult& p : *out.mutable_results()) {
    absl::StatusOr<const PolicyInfo*> info = FindPolicy(p.policy());
    if (!info.ok() || (*info)->unbudgeted_reference || !p.has_result()) {
      continue;
    }
    p.set_gap_to_bound(
        std::max(0.0, *bound - p.result().throughput_retained()));
  }
  return absl::OkStatus();
}

// The report's description of the question.
void DescribeRequest(const PlanSpec& spec, v1::PlanReport& out) {
  const Graph& g = spec.step.graph();
  out.set_graph_name(g.name);
  out.set_hardware_name(spec.step.hw.name);
  out.set_budget_bytes(spec.budget.bytes);
  out.set_unconstrained_peak_bytes(g.index.saved_bytes);
  out.set_budget_fraction(Fraction(spec.budget.bytes, g.index.saved_bytes));
  out.set_budget_device(spec.budget.mode == BudgetMode::kDevice);
  out.set_budget_covers_all_memory(spec.budget.mode == BudgetMode::kAllMemory);
  if (spec.step.node.has_value()) {
    out.set_node_name(spec.step.node->name);
    out.set_ranks(spec.step.ranks);
  }
}

// The result a plan's picture draws: with a device budget, the policy that
// fits (report.device); else the fastest feasible budgeted policy (the
// first of equals); else the first budgeted policy with a result (drawn
// infeasible, where it got stuck); else any result. Null when none has one.
const v1::PolicyResult* PolicyToDraw(const v1::PlanReport& report) {
  const v1::PolicyResult* fastest = nullptr;
  const v1::PolicyResult* budgeted = nullptr;
  const v1::PolicyResult* any = nullptr;
  for (const v1::PolicyResult& p : report.results()) {
    if (!p.has_result()) continue;
    if (report.budget_device() && p.policy() == report.device().policy()) {
      return &p;
    }
    if (any == nullptr) any = &p;
    absl::StatusOr<const PolicyInfo*> info = FindPolicy(p.policy());
    if (!info.ok() || (*info)->unbudgeted_reference) continue;
    if (budgeted == nullptr) budgeted = &p;
    if (p.result().feasible() &&
        (fastest == nullptr || p.result().throughput_retained() >
                                   fastest->result().throughput_retained())) {
      fastest = &p;
    }
  }
  return fastest != nullptr ? fastest : budgeted != nullptr ? budgeted : any;
}

// The picture of the chosen policy's result (response.svg), then each
// result as the request asked for it (without the events and timeline
// recorded only for the picture).
void DrawAndTrim(const v1::PlanRequest& req, v1::PlanResponse& resp) {
  v1::PlanReport& out = *resp.mutable_report();
  if (req.render_svg()) {
    if (const v1::PolicyResult* p = PolicyToDraw(out); p != nullptr) {
      const int64_t budget = p->result().budget_bytes();
      const std::string budget_text =
          budget > 0
              ? absl::StrFormat(
                    "budget %s (%.2f of the activation peak%s)",
                    FormatBytes(budget),
                    Fraction(budget, out.unconstrained_peak_bytes()),
                    out.budget_covers_all_memory() ? ", with transients" : "")
              : std::string("no budget");
      if (p->has_node()) {
        resp.set_svg(SvgNodeReport(
            p->node(), absl::StrCat(out.graph_name(), " on ", out.node_name(),
                                    " (", out.ranks(), " ranks): ", p->policy(),
                                    ", ", budget_text, " per rank")));
      } else {
        resp.set_svg(SvgReport(
            p->result(),
            absl::StrCat(out.graph_name(), " on ", out.hardware_name(), ": ",
                         p->policy(), ", ", budget_text)));
      }
    }
  }
  for (v1::PolicyResult& p : *out.mutable_results()) {
    if (!p.has_result()) continue;
    DropUnaskedRecords(req.include_events(), req.timeline_points(),
                       p.mutable_result());
    if (!p.has_node()) continue;
    DropUnaskedRecords(req.include_events(), req.timeline_points(),
                       p.mutable_node());
  }
}

}  // namespace

absl::StatusOr<v1::PlanResponse> PlanningCore::PlanStep(
    const v1::PlanRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(const PlanSpec spec,
                             ResolvePlan(req, limits_, stop, graphs_));
  const Graph& g = spec.step.graph();
  const std::optional<NodePlanning> on_node = PlanOnNode(spec.step);
  PlanningWork work =
      PlanRequestWork(spec.policies, spec.budget.searched(),
                      req.include_bound(), spec.optimal_time_limit_s);
  if (on_node.has_value()) work = NodePlanWork(work, spec.step.ranks);
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, work));
  if (observer_ != nullptr) {
    observer_->GraphOps(g.ops.size());
    observer_->PlanAdmitted(on_node.has_value() ? kNodeScope : kGpuScope);
  }
  const Hardware& hw =
      on_node.has_value() ? on_node->planning_hw : spec.step.hw;
  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw, stop));
  PlanningContext ctx = Context(g, hw, analysis, spec.budget.bytes, stop);
  ctx.explain = req.include_reasons();
  ctx.optimal_time_limit_s = spec.optimal_time_limit_s;
  if (on_node.has_value()) ctx.node = &on_node->ranks;
  const SimOptions report = ReportOptions(req, spec.budget);
  PolicyRound round;
  ctx.seeds = &round.seeds();
  ctx.judge_memo = round.judge_memo();
  if (on_node.has_value() && !spec.budget.searched()) {
    SLACKSWAP_ASSIGN_OR_RETURN(std::optional<Plan> alone,
                               AlonePlan(ctx, spec.step.hw, spec.policies));
    if (alone.has_value()) round.AddSeed(*std::move(alone));
  }
  const PolicyRunner runner{ctx, observer_};
  SLACKSWAP_RETURN_IF_ERROR(
      round.Run(spec.policies, [&](const PolicyInfo& policy, double* seconds) {
        return PlanPolicy(runner, policy, spec.budget, report, seconds);
      }));

  v1::PlanResponse resp;
  v1::PlanReport& out = *resp.mutable_report();
  DescribeRequest(spec, out);
  if (on_node.has_value()) {
    out.set_planned_h2d_gbps(on_node->planning_hw.h2d_gbps);
    out.set_planned_d2h_gbps(on_node->planning_hw.d2h_gbps);
  }
  for (const PolicyRound::Entry& e : round.entries()) {
    *out.add_results() = ResultOf(round, e, ctx, req.include_reasons());
  }
  if (round.any_budgeted() && !round.any_feasible()) {
    SLACKSWAP_RETURN_IF_ERROR(MinimumBudgets(ctx, out));
  }
  SLACKSWAP_RETURN_IF_ERROR(
      AddDeviceFit(ctx, spec.step, graphs_, spec.budget, report.device, out));
  if (req.include_bound()) {
    SLACKSWAP_RETURN_IF_ERROR(AddBound(ctx, round, spec.budget, out));
  }
  DrawAndTrim(req, resp);
  resp.set_server_seconds(watch.Lap());
  resp.set_planner_version(PlannerVersion());
  return resp;
}

absl::Status BudgetNotMetError(int64_t budget, int64_t lowest,
                               const std::string& by, int64_t peak) {
  const std::string lowest_text =
      absl::StrCat(lowest, " bytes (", FormatBytes(lowest), ", ",
                   absl::StrFormat("%.3f", Fraction(lowest, peak)),
                   " of the unconstrained peak, with ", by, ")");
  if (lowest <= budget) {
    // A plan's prefetches and rebuilds can deadlock under one budget and
    // fit under a smaller one, so the bisection can land below `budget`.
    return absl::FailedPreconditionError(absl::StrCat(
        "budget ", budget, " bytes (", FormatBytes(budget),
        ") is met by no policy's plan, though a lower budget is: ", lowest_text,
        "; plans are not monotone in the budget near this one"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("budget ", budget, " bytes (", FormatBytes(budget),
                   ") cannot be met: the lowest activation peak reachable is ",
                   lowest_text));
}

}  // namespace slackswap
