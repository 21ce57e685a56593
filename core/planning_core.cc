#include "core/planning_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "core/admission.h"
#include "core/device_fit.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/budget_search.h"
#include "planner/policy.h"
#include "planner/relaxation.h"
#include "planner/version.h"

namespace slackswap {
namespace {

class Stopwatch {
 public:
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::duration<double> d = now - last_;
    last_ = now;
    return d.count();
  }

 private:
  std::chrono::steady_clock::time_point last_ =
      std::chrono::steady_clock::now();
};

// Plans and judges one policy, reporting to the observer.
struct PolicyRunner {
  const PlanningContext& ctx;
  CoreObserver* observer;

  absl::StatusOr<PlanOutcome> Run(const std::string& policy,
                                  const SimOptions& report,
                                  double* seconds) const {
    Stopwatch watch;
    SLACKSWAP_ASSIGN_OR_RETURN(Plan plan, MakePlan(policy, ctx));
    const double planner_seconds = watch.Lap();
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult result,
                               SimulatePlan(policy, ctx, plan, report));
    const double simulator_seconds = watch.Lap();
    if (observer != nullptr) {
      observer->PolicyRun(policy, planner_seconds, simulator_seconds,
                          result.throughput_retained, result.feasible);
    }
    if (seconds != nullptr) *seconds = planner_seconds + simulator_seconds;
    return PlanOutcome{std::move(plan), std::move(result)};
  }

  // `policy`'s plan at the largest activation budget up to `start` whose
  // plan `judge` accepts (planner/budget_search.h), with its result; the
  // search's whole time counts as planning.
  absl::StatusOr<PlanOutcome> Search(const std::string& policy,
                                     const Judge& judge, int64_t start,
                                     double* seconds) const {
    Stopwatch watch;
    SLACKSWAP_ASSIGN_OR_RETURN(BudgetSearch s,
                               LargestFittingBudget(policy, ctx, judge, start));
    const double planner_seconds = watch.Lap();
    if (observer != nullptr) {
      observer->PolicyRun(policy, planner_seconds, 0,
                          s.result.throughput_retained, s.result.feasible);
    }
    if (seconds != nullptr) *seconds = planner_seconds;
    return PlanOutcome{std::move(s.plan), std::move(s.result)};
  }

  // `policy`'s plan and result at `budget`, no timeline; `seeds` as
  // PlanningContext::seeds.
  absl::StatusOr<PlanOutcome> Quiet(
      const std::string& policy, int64_t budget,
      const std::vector<Plan>* seeds = nullptr) const {
    PlanningContext at = ctx;
    at.budget_bytes = budget;
    at.seeds = seeds;
    SimOptions report;
    report.record_timeline = false;
    return PolicyRunner{at, observer}.Run(policy, report, nullptr);
  }
};

double Fraction(int64_t bytes, int64_t peak) {
  return static_cast<double>(bytes) / std::max<int64_t>(1, peak);
}

// The LP bound's cost beside one slackswap plan of the same graph, from the
// request's best plan as the core starts it (bench/planner_bench: 8 to 18
// times on the reference workloads, 11 on a 10,000-op step; from scratch,
// which only a request without a plan the model accepts pays, 25 to 220).
constexpr double kBoundRelativeCost = 60;

// The smallest budget at which `policy` retains `target`: bisection in bytes
// from the lowest swept budget that reaches it down to the highest that
// does not, to 0.1% of the peak.
absl::StatusOr<v1::TargetAnswer> FindTarget(
    const PolicyRunner& runner, const std::string& policy, double target,
    const std::vector<v1::SweepPoint>& points, int64_t peak) {
  v1::TargetAnswer out;
  out.set_policy(policy);
  out.set_target(target);
  int64_t hi = -1;
  double hi_retained = 0;
  for (const v1::SweepPoint& p : points) {
    if (p.policy() == policy && p.feasible() &&
        p.throughput_retained() >= target &&
        (hi < 0 || p.budget_bytes() < hi)) {
      hi = p.budget_bytes();
      hi_retained = p.throughput_retained();
    }
  }
  if (hi < 0) {
    // Keeping everything always fits; try the full peak before giving up.
    SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome o, runner.Quiet(policy, peak));
    const SimResult& r = o.result;
    if (!r.feasible || r.throughput_retained < target) {
      out.set_reached(false);
      return out;
    }
    hi = peak;
    hi_retained = r.throughput_retained;
  }
  int64_t lo = 0;
  for (const v1::SweepPoint& p : points) {
    if (p.policy() == policy && p.budget_bytes() < hi) {
      lo = std::max(lo, p.budget_bytes());
    }
  }
  while (hi - lo > std::max<int64_t>(1, peak / 1000)) {
    const int64_t mid = lo + (hi - lo) / 2;
    SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome o, runner.Quiet(policy, mid));
    const SimResult& r = o.result;
    if (r.feasible && r.throughput_retained >= target) {
      hi = mid;
      hi_retained = r.throughput_retained;
    } else {
      lo = mid;
    }
  }
  out.set_reached(true);
  out.set_budget_bytes(hi);
  out.set_budget_fraction(Fraction(hi, peak));
  out.set_throughput_retained(hi_retained);
  return out;
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

// The retained share of a step of `step_ns`.
double RetainedAt(const StepAnalysis& a, int64_t step_ns) {
  if (step_ns <= 0) return 1;
  return std::min(1.0, static_cast<double>(a.durations.total_ns) /
                           static_cast<double>(step_ns));
}

// Which of a request's plans the bound's solver starts from: the fastest
// feasible one, else the one with the lowest peak (the model, looser than
// the simulator, may still accept it).
class BoundStart {
 public:
  // `index`: where the plan judged `r` is in the request's seeds.
  void Offer(const SimResult& r, size_t index) {
    const std::pair<bool, int64_t> key = {
        !r.feasible, r.feasible ? r.step_ns : r.peak_activation_bytes};
    if (!best_.has_value() || key < key_) {
      best_ = index;
      key_ = key;
    }
  }
  const slackswap::Plan* In(const std::vector<slackswap::Plan>& seeds) const {
    return best_.has_value() ? &seeds[*best_] : nullptr;
  }

 private:
  std::optional<size_t> best_;
  std::pair<bool, int64_t> key_;
};

// The LP bound at ctx's budget: the retained share no plan beats, or why
// there is none (never a made-up value). CANCELLED passes through. `start`
// (may be null): a plan for the solver to start from (BoundStart).
absl::StatusOr<std::optional<double>> Bound(const PlanningContext& ctx,
                                            const slackswap::Plan* start,
                                            std::string* unavailable) {
  RelaxationOptions options;
  options.start = start;
  absl::StatusOr<Relaxation> b = SolveRelaxation(ctx, options);
  if (!b.ok()) {
    if (absl::IsCancelled(b.status())) return b.status();
    *unavailable = std::string(b.status().message());
    return std::nullopt;
  }
  return b->feasible ? b->retained_upper : 0.0;
}

// Adds the bound, and each budgeted result's gap to it, to `out`.
absl::Status AddBound(const PlanningContext& ctx, const slackswap::Plan* start,
                      v1::PlanReport& out) {
  std::string unavailable;
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> bound,
                             Bound(ctx, start, &unavailable));
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

// Keeping every activation, simulated with no budget on the device: the
// unbudgeted reference's result when the request has one (it is that
// simulation), else simulated here.
absl::StatusOr<v1::SimulationResult> KeepAllOnDevice(
    const PlanningContext& ctx, const DeviceOptions& device,
    const google::protobuf::RepeatedPtrField<v1::PolicyResult>& results) {
  for (const v1::PolicyResult& p : results) {
    absl::StatusOr<const PolicyInfo*> info = FindPolicy(p.policy());
    if (info.ok() && (*info)->unbudgeted_reference && p.has_result() &&
        p.result().has_device()) {
      return p.result();
    }
  }
  SimOptions opts;
  opts.record_timeline = false;
  opts.should_stop = ctx.should_stop;
  opts.max_recompute_tasks = ctx.max_recompute_tasks;
  opts.device = device;
  SLACKSWAP_ASSIGN_OR_RETURN(
      SimResult r, Simulate(ctx.graph, ctx.hw, Plan::KeepAll(ctx.graph), opts));
  return ResultToProto(r, ctx.graph);
}

}  // namespace

PlanningCore::PlanningCore(CoreLimits limits, CoreObserver* observer,
                           GraphSource* graphs)
    : limits_(limits), observer_(observer), graphs_(graphs) {}

absl::Status PlanningCore::CheckRequestCost(
    const Graph& g, const google::protobuf::Message& req, double plans,
    double solver_seconds) const {
  if (limits_.max_request_bytes <= 0 && limits_.max_request_seconds <= 0) {
    return absl::OkStatus();
  }
  // A parsed request takes about 12 times its wire size in memory (measured
  // on graphs of 10^3 to 10^6 ops).
  const int64_t held = 12 * static_cast<int64_t>(req.ByteSizeLong());
  return CheckCost(EstimateCost(g, held, plans, solver_seconds),
                   limits_.max_request_bytes, limits_.max_request_seconds,
                   absl::StrCat("the graph (", g.ops.size(), " ops, ",
                                g.tensors.size(), " tensors)"));
}

PlanningContext PlanningCore::Context(const Graph& g, const Hardware& hw,
                                      const StepAnalysis& analysis,
                                      int64_t budget,
                                      const StopFn& stop) const {
  PlanningContext ctx{g, hw, analysis, budget, stop};
  ctx.max_recompute_tasks = limits_.max_recompute_tasks;
  return ctx;
}

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

// Why `policy` has no result when its budget is searched for.
constexpr char kNoSolverSearch[] =
    "not planned: the device and all-memory budgets are searched by "
    "simulating plans at many activation budgets, and this policy's solver "
    "would run at each";

}  // namespace

absl::StatusOr<v1::PlanResponse> PlanningCore::PlanStep(
    const v1::PlanRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(Step step,
                             ResolveStep(req.step(), limits_, stop, graphs_));
  SLACKSWAP_ASSIGN_OR_RETURN(const PlanBudget plan_budget,
                             ResolvePlanBudget(req, step.graph));
  const bool searched = plan_budget.mode != BudgetMode::kActivations;
  SLACKSWAP_ASSIGN_OR_RETURN(std::vector<const PolicyInfo*> policies,
                             ResolvePolicies(req.policies()));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckTimelinePoints(req.timeline_points(), limits_));
  const Graph& g = step.graph;
  SLACKSWAP_RETURN_IF_ERROR(CheckEvents(req.include_events(), g, limits_));
  SLACKSWAP_ASSIGN_OR_RETURN(
      const double time_limit,
      ResolveOptimalTimeLimit(req.has_optimal_time_limit_s(),
                              req.optimal_time_limit_s()));
  double plans = 0;
  double solver_seconds = 0;
  for (const PolicyInfo* policy : policies) {
    if (searched && policy->may_be_unavailable) continue;
    // A searched budget plans each policy up to kMaxSearchEvaluations times.
    plans +=
        policy->relative_cost *
        (searched && !policy->unbudgeted_reference ? kMaxSearchEvaluations : 1);
    if (policy->uses_solver_time && !searched) solver_seconds += time_limit;
  }
  if (req.include_bound() && !searched) plans += kBoundRelativeCost;
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, plans, solver_seconds));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());

  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis,
                             AnalyzeStep(g, step.hw, stop));
  PlanningContext ctx = Context(g, step.hw, analysis, plan_budget.bytes, stop);
  ctx.explain = req.include_reasons();
  ctx.optimal_time_limit_s = time_limit;
  const PolicyRunner runner{ctx, observer_};
  SimOptions report;
  report.timeline_points = req.timeline_points();
  report.record_timeline = req.timeline_points() > 0;
  report.record_events = req.include_events();
  report.device.enabled = true;
  report.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  report.device.headroom_bytes = plan_budget.headroom_bytes;

  v1::PlanResponse resp;
  v1::PlanReport& out = *resp.mutable_report();
  out.set_graph_name(g.name);
  out.set_hardware_name(step.hw.name);
  out.set_budget_bytes(plan_budget.bytes);
  out.set_unconstrained_peak_bytes(g.index.saved_bytes);
  out.set_budget_fraction(Fraction(plan_budget.bytes, g.index.saved_bytes));
  out.set_budget_device(plan_budget.mode == BudgetMode::kDevice);
  out.set_budget_covers_all_memory(plan_budget.mode == BudgetMode::kAllMemory);
  // In registry order (slackswap last: it starts from the others' plans),
  // reported in the request's.
  std::vector<const PolicyInfo*> run_order = policies;
  // Registry entries are one vector: their addresses are registry order.
  std::sort(run_order.begin(), run_order.end());
  std::vector<slackswap::Plan> seeds;
  ctx.seeds = &seeds;
  absl::flat_hash_map<const PolicyInfo*, v1::PolicyResult> results;
  bool any_budgeted = false;
  bool any_feasible = false;
  BoundStart start;
  for (const PolicyInfo* policy : run_order) {
    v1::PolicyResult& p = results[policy];
    p.set_policy(policy->name);
    double seconds = 0;
    absl::StatusOr<PlanOutcome> o;
    if (!searched || policy->unbudgeted_reference) {
      o = runner.Run(policy->name, report, &seconds);
    } else if (policy->may_be_unavailable) {
      p.set_unavailable(kNoSolverSearch);
      continue;
    } else if (plan_budget.mode == BudgetMode::kDevice) {
      o = runner.Search(policy->name, DeviceJudge(policy->name, ctx, report),
                        plan_budget.bytes, &seconds);
    } else {
      o = runner.Search(
          policy->name,
          AllMemoryJudge(policy->name, ctx, report, plan_budget.bytes),
          std::min(plan_budget.bytes,
                   std::max<int64_t>(1, g.index.saved_bytes)),
          &seconds);
    }
    if (!o.ok()) {
      if (!policy->may_be_unavailable || absl::IsCancelled(o.status())) {
        return o.status();
      }
      p.set_unavailable(std::string(o.status().message()));
      continue;
    }
    *p.mutable_result() = ResultToProto(o->result, g);
    // Kept tensors need no decision; with reasons, every decision shows.
    *p.mutable_plan() =
        PlanToProto(o->plan, g, step.hw.name, req.include_reasons());
    p.set_planning_seconds(seconds);
    if (o->plan.proof.has_value()) {
      p.set_optimal_proven(o->plan.proof->optimal);
      p.set_model_bound_retained(
          RetainedAt(analysis, o->plan.proof->step_ns_lower));
    }
    if (!policy->unbudgeted_reference) {
      any_budgeted = true;
      any_feasible |= o->result.feasible;
      start.Offer(o->result, seeds.size());
      seeds.push_back(std::move(o->plan));
    }
  }
  for (const PolicyInfo* policy : policies) {
    *out.add_results() = std::move(results[policy]);
  }
  if (any_budgeted && !any_feasible) {
    SLACKSWAP_RETURN_IF_ERROR(MinimumBudgets(ctx, out));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(
      v1::SimulationResult keep_all,
      KeepAllOnDevice(ctx, report.device, out.results()));
  *out.mutable_device() = DescribeDeviceFit(out.results(), keep_all);
  if (plan_budget.mode == BudgetMode::kDevice) {
    // The best fitting policy's activation budget, if any.
    int64_t chosen = 0;
    for (const v1::PolicyResult& p : out.results()) {
      if (p.policy() == out.device().policy()) {
        chosen = p.result().budget_bytes();
      }
    }
    out.set_budget_bytes(chosen);
    out.set_budget_fraction(Fraction(chosen, g.index.saved_bytes));
  }
  if (req.include_bound()) {
    if (searched) {
      out.set_bound_unavailable(
          "the bound is for activation budgets: ask with budget_bytes or "
          "budget_fraction");
    } else {
      SLACKSWAP_RETURN_IF_ERROR(AddBound(ctx, start.In(seeds), out));
    }
  }
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

namespace {

// A sweep request, validated: the step, the policies, and the budget
// fractions in order.
struct SweepSpec {
  Step step;
  std::vector<const PolicyInfo*> policies;
  std::vector<double> fractions;
  double target = 0;
  bool include_bound = false;
  double optimal_time_limit_s = PlanningContext::kDefaultOptimalTimeLimitS;
};

absl::StatusOr<SweepSpec> ResolveSweep(const v1::SweepRequest& req,
                                       const CoreLimits& limits,
                                       const StopFn& stop,
                                       GraphSource* graphs) {
  SweepSpec spec;
  SLACKSWAP_ASSIGN_OR_RETURN(spec.step,
                             ResolveStep(req.step(), limits, stop, graphs));
  SLACKSWAP_ASSIGN_OR_RETURN(spec.policies, ResolvePolicies(req.policies()));
  const double from = req.from() == 0 ? 0.1 : req.from();
  const double to = req.to() == 0 ? 1.0 : req.to();
  const double by = req.step_fraction() == 0 ? 0.05 : req.step_fraction();
  SLACKSWAP_RETURN_IF_ERROR(CheckFraction("from", from));
  SLACKSWAP_RETURN_IF_ERROR(CheckFraction("to", to));
  if (to < from) {
    return absl::InvalidArgumentError(
        absl::StrCat("to must be >= from (", from, "), got ", to));
  }
  if (!(std::isfinite(by) && by > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_fraction must be > 0, got ", by));
  }
  const double count = std::floor((to - from) / by + 1e-9) + 1;
  if (count * spec.policies.size() > limits.max_sweep_points) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "from/to/step_fraction: ", count, " budgets x ", spec.policies.size(),
        " policies exceed the limit of ", limits.max_sweep_points, " points"));
  }
  if (!std::isfinite(req.target()) || req.target() < 0 || req.target() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("target must be in [0, 1], got ", req.target()));
  }
  spec.target = req.target();
  spec.include_bound = req.include_bound();
  SLACKSWAP_ASSIGN_OR_RETURN(
      spec.optimal_time_limit_s,
      ResolveOptimalTimeLimit(req.has_optimal_time_limit_s(),
                              req.optimal_time_limit_s()));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    // Rounded so that 0.1 + 3 * 0.3 is 1.0, not 0.9999999999999999.
    spec.fractions.push_back(std::round((from + i * by) * 1e9) / 1e9);
  }
  return spec;
}

using Emit = std::function<absl::Status(const v1::SweepResponse&)>;

// Every policy's point at budget fraction `f`, each emitted as soon as it
// is computed (after the bound, when asked for), and added to `points`.
absl::Status SweepAt(const SweepSpec& spec, const PolicyRunner& runner,
                     double f, std::vector<v1::SweepPoint>& points,
                     const Emit& emit) {
  const int64_t peak = spec.step.graph.index.saved_bytes;
  // In registry order (ResolvePolicies), slackswap last with the others'
  // plans.
  const std::vector<const PolicyInfo*>& run_order = spec.policies;
  {
    const int64_t budget = Budget::Fraction(f).Resolve(peak);
    std::vector<Plan> seeds;
    BoundStart start;
    absl::flat_hash_map<const PolicyInfo*, v1::SweepPoint> at_budget;
    for (const PolicyInfo* policy : run_order) {
      v1::SweepPoint& p = at_budget[policy];
      p.set_policy(policy->name);
      p.set_budget_fraction(f);
      p.set_budget_bytes(budget);
      absl::StatusOr<PlanOutcome> o =
          runner.Quiet(policy->name, budget, &seeds);
      if (!o.ok()) {
        if (!policy->may_be_unavailable || absl::IsCancelled(o.status())) {
          return o.status();
        }
        p.set_unavailable(std::string(o.status().message()));
        continue;
      }
      const SimResult& r = o->result;
      p.set_feasible(r.feasible);
      p.set_throughput_retained(r.throughput_retained);
      p.set_peak_activation_bytes(r.peak_activation_bytes);
      p.set_infeasible_reason(r.infeasible_reason);
      if (!policy->unbudgeted_reference) {
        start.Offer(r, seeds.size());
        seeds.push_back(std::move(o->plan));
      }
    }
    std::optional<double> bound;
    std::string bound_unavailable;
    if (spec.include_bound) {
      PlanningContext at = runner.ctx;
      at.budget_bytes = budget;
      SLACKSWAP_ASSIGN_OR_RETURN(
          bound, Bound(at, start.In(seeds), &bound_unavailable));
    }
    for (auto& [policy, p] : at_budget) {
      if (!bound.has_value()) continue;
      p.set_bound_retained(*bound);
      if (!policy->unbudgeted_reference && p.unavailable().empty()) {
        p.set_gap_to_bound(std::max(0.0, *bound - p.throughput_retained()));
      }
    }
    for (const PolicyInfo* policy : spec.policies) {
      v1::SweepResponse msg;
      msg.set_unconstrained_peak_bytes(peak);
      *msg.mutable_point() = at_budget[policy];
      if (!bound.has_value() && spec.include_bound) {
        msg.mutable_point()->set_unavailable(
            msg.point().unavailable().empty() ? "no bound: " + bound_unavailable
                                              : msg.point().unavailable());
      }
      points.push_back(msg.point());
      SLACKSWAP_RETURN_IF_ERROR(emit(msg));
    }
  }
  return absl::OkStatus();
}

// Whether the sweep answers the target question for `policy`: not for the
// reference, which has no budget to find, nor for a solver's policy, which
// would take its time limit per bisection step.
bool AsksTarget(const SweepSpec& spec, const PolicyInfo& policy) {
  return spec.target > 0 && !policy.unbudgeted_reference &&
         !policy.may_be_unavailable;
}

// `policy`'s smallest budget that retains the target.
absl::Status TargetAnswer(const SweepSpec& spec, const PolicyRunner& runner,
                          const PolicyInfo& policy,
                          const std::vector<v1::SweepPoint>& points,
                          const Emit& emit) {
  v1::SweepResponse msg;
  SLACKSWAP_ASSIGN_OR_RETURN(
      *msg.mutable_target(),
      FindTarget(runner, policy.name, spec.target, points,
                 spec.step.graph.index.saved_bytes));
  return emit(msg);
}

// Whether `policy` was infeasible at some point, so the sweep reports its
// minimum budget (a solver's policy aside: its bisection would take its
// time limit per step).
bool NeedsMinimum(const PolicyInfo& policy,
                  const std::vector<v1::SweepPoint>& points) {
  return !policy.may_be_unavailable &&
         std::any_of(points.begin(), points.end(),
                     [&](const v1::SweepPoint& p) {
                       return p.policy() == policy.name && !p.feasible();
                     });
}

// `policy`'s lowest budget it meets.
absl::Status PolicyMinimum(const PlanningContext& ctx, const PolicyInfo& policy,
                           const Emit& emit) {
  SLACKSWAP_ASSIGN_OR_RETURN(int64_t minimum,
                             MinimumFeasibleBudget(policy.name, ctx));
  v1::SweepResponse msg;
  v1::PolicyMinimum* m = msg.mutable_minimum();
  m->set_policy(policy.name);
  m->set_budget_bytes(minimum);
  m->set_budget_fraction(Fraction(minimum, ctx.graph.index.saved_bytes));
  return emit(msg);
}

// A sweep's state between units: the resolved request, its analysis and
// context (which refer to them: never moved), and the points so far.
class SweepRunImpl : public SweepRun {
 public:
  SweepRunImpl(SweepSpec spec, StepAnalysis analysis, const StopFn& stop,
               int64_t max_recompute_tasks, CoreObserver* observer)
      : spec_(std::move(spec)),
        analysis_(std::move(analysis)),
        ctx_{spec_.step.graph, spec_.step.hw, analysis_,
             std::max<int64_t>(1, spec_.step.graph.index.saved_bytes), stop},
        runner_{ctx_, observer} {
    ctx_.explain = false;  // sweep points carry no plans
    ctx_.optimal_time_limit_s = spec_.optimal_time_limit_s;
    ctx_.max_recompute_tasks = max_recompute_tasks;
    Settle();
  }
  SweepRunImpl(const SweepRunImpl&) = delete;
  SweepRunImpl& operator=(const SweepRunImpl&) = delete;

  bool Done() const override { return phase_ == Phase::kDone; }

  absl::Status Next(
      const std::function<bool(const v1::SweepResponse&)>& emit) override {
    const Emit send = [&](const v1::SweepResponse& r) -> absl::Status {
      v1::SweepResponse msg = r;
      msg.set_planner_version(PlannerVersion());
      if (!emit(msg)) return absl::CancelledError("the client went away");
      return absl::OkStatus();
    };
    switch (phase_) {
      case Phase::kPoints:
        SLACKSWAP_RETURN_IF_ERROR(
            SweepAt(spec_, runner_, spec_.fractions[index_], points_, send));
        break;
      case Phase::kTargets:
        SLACKSWAP_RETURN_IF_ERROR(TargetAnswer(
            spec_, runner_, *spec_.policies[index_], points_, send));
        break;
      case Phase::kMinimums:
        SLACKSWAP_RETURN_IF_ERROR(
            PolicyMinimum(ctx_, *spec_.policies[index_], send));
        break;
      case Phase::kDone:
        return absl::FailedPreconditionError("the sweep is done");
    }
    ++index_;
    Settle();
    return absl::OkStatus();
  }

 private:
  enum class Phase { kPoints, kTargets, kMinimums, kDone };

  // Moves on from (phase_, index_) to the next unit that has work, or to
  // kDone.
  void Settle() {
    while (phase_ != Phase::kDone) {
      if (phase_ == Phase::kPoints) {
        if (index_ < spec_.fractions.size()) return;
      } else if (index_ < spec_.policies.size()) {
        const PolicyInfo& p = *spec_.policies[index_];
        if (phase_ == Phase::kTargets ? AsksTarget(spec_, p)
                                      : NeedsMinimum(p, points_)) {
          return;
        }
        ++index_;
        continue;
      }
      phase_ = phase_ == Phase::kPoints    ? Phase::kTargets
               : phase_ == Phase::kTargets ? Phase::kMinimums
                                           : Phase::kDone;
      index_ = 0;
    }
  }

  // Immutable after construction.
  const SweepSpec spec_;
  const StepAnalysis analysis_;
  PlanningContext ctx_;
  const PolicyRunner runner_;
  // Progress.
  Phase phase_ = Phase::kPoints;
  size_t index_ = 0;
  std::vector<v1::SweepPoint> points_;
};

}  // namespace

absl::Status PlanningCore::SweepBudgets(
    const v1::SweepRequest& req, const StopFn& stop,
    const std::function<bool(const v1::SweepResponse&)>& emit) const {
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<SweepRun> run,
                             StartSweep(req, stop));
  while (!run->Done()) SLACKSWAP_RETURN_IF_ERROR(run->Next(emit));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SweepRun>> PlanningCore::StartSweep(
    const v1::SweepRequest& req, const StopFn& stop) const {
  SLACKSWAP_ASSIGN_OR_RETURN(SweepSpec spec,
                             ResolveSweep(req, limits_, stop, graphs_));
  const Graph& g = spec.step.graph;
  double plans = 0;
  double solver_seconds = 0;
  const double budgets = static_cast<double>(spec.fractions.size());
  for (const PolicyInfo* policy : spec.policies) {
    plans += policy->relative_cost;
    if (policy->uses_solver_time) {
      solver_seconds += spec.optimal_time_limit_s * budgets;
    }
  }
  // Every point, and a bisection (about 12 plannings) per target answer.
  plans *= budgets + (spec.target > 0 ? 12 : 0);
  if (spec.include_bound) plans += kBoundRelativeCost * budgets;
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, plans, solver_seconds));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());
  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis,
                             AnalyzeStep(g, spec.step.hw, stop));
  return std::make_unique<SweepRunImpl>(std::move(spec), std::move(analysis),
                                        stop, limits_.max_recompute_tasks,
                                        observer_);
}

absl::StatusOr<Graph> PlanningCore::PrepareGraph(const v1::OperatorGraph& graph,
                                                 const StopFn& stop) const {
  return ResolveInlineGraph(graph, "graph", limits_, stop);
}

absl::StatusOr<v1::SimulateResponse> PlanningCore::SimulateStep(
    const v1::SimulateRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(Step step,
                             ResolveStep(req.step(), limits_, stop, graphs_));
  SLACKSWAP_RETURN_IF_ERROR(
      CheckTimelinePoints(req.timeline_points(), limits_));
  const Graph& g = step.graph;
  SLACKSWAP_RETURN_IF_ERROR(CheckEvents(req.include_events(), g, limits_));
  // One simulation costs about what planning `ideal` does.
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, /*plans=*/0.25));
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

v1::ListHardwareProfilesResponse PlanningCore::ListHardwareProfiles() const {
  v1::ListHardwareProfilesResponse resp;
  for (const Hardware& hw : HardwareCatalog()) {
    *resp.add_profiles() = HardwareToProto(hw);
  }
  return resp;
}

v1::ServerInfoResponse PlanningCore::Info() const {
  v1::ServerInfoResponse info;
  info.set_version(Version());
  info.set_commit(Commit());
  for (const PolicyInfo& p : PolicyRegistry()) {
    v1::PolicyDescription* d = info.add_policies();
    d->set_name(p.name);
    d->set_summary(p.summary);
    d->set_unbudgeted_reference(p.unbudgeted_reference);
  }
  for (const std::string& w : WorkloadNames()) info.add_workloads(w);
  for (const Hardware& hw : HardwareCatalog()) {
    info.add_hardware_profiles(hw.name);
  }
  info.set_planner_version(PlannerVersion());
  std::string catalog;
  SerializeDeterministic(ListHardwareProfiles(), &catalog);
  info.set_hardware_catalog_sha256(Sha256Hex(Sha256::Of(catalog)));
  v1::ServerLimits* l = info.mutable_limits();
  l->set_max_graph_ops(limits_.max_graph_ops);
  l->set_max_graph_tensors(limits_.max_graph_tensors);
  l->set_max_workload_layers(limits_.max_workload_layers);
  l->set_max_timeline_points(limits_.max_timeline_points);
  l->set_max_sweep_points(limits_.max_sweep_points);
  l->set_max_event_ops(limits_.max_event_ops);
  l->set_max_fit_profiles(kMaxFitProfiles);
  return info;
}

namespace {

absl::StatusOr<v1::ListWorkloadsResponse> BuildWorkloadList() {
  v1::ListWorkloadsResponse resp;
  for (const std::string& name : WorkloadNames()) {
    SLACKSWAP_ASSIGN_OR_RETURN(TransformerConfig c, FindWorkload(name));
    SLACKSWAP_ASSIGN_OR_RETURN(Graph g, BuildTransformer(c));
    v1::WorkloadInfo* w = resp.add_workloads();
    w->set_name(name);
    w->set_layers(c.layers);
    w->set_hidden(c.hidden);
    w->set_heads(c.heads);
    w->set_ffn(c.ffn);
    w->set_seq(c.seq);
    w->set_batch(c.batch);
    w->set_ops(g.ops.size());
    w->set_saved_activation_bytes(g.index.saved_bytes);
  }
  return resp;
}

}  // namespace

absl::StatusOr<v1::ListWorkloadsResponse> PlanningCore::ListWorkloads() const {
  // The presets are fixed: their graphs are built once, on the first call.
  static const auto* const kList =
      new absl::StatusOr<v1::ListWorkloadsResponse>(BuildWorkloadList());
  return *kList;
}

absl::StatusOr<v1::GetWorkloadResponse> PlanningCore::GetWorkload(
    const v1::GetWorkloadRequest& req) const {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Graph g, ResolveWorkload(req.workload(), "workload", limits_));
  v1::GetWorkloadResponse resp;
  *resp.mutable_graph() = GraphToProto(g);
  return resp;
}

}  // namespace slackswap
