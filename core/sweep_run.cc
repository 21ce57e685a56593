// PlanningCore::SweepBudgets and StartSweep: the Sweep RPC, one unit at a
// time (SweepRun): every policy's point at each budget fraction, then the
// smallest budget that keeps the target share, then the lowest budget of
// each policy that was infeasible somewhere. On a node every plan is made
// and judged as Plan makes and judges it there (core/node_planning.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/admission.h"
#include "core/node_planning.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "model/budget.h"
#include "planner/analysis.h"
#include "planner/relaxation.h"
#include "planner/version.h"

namespace slackswap {
namespace {

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
  const double from = req.from() == 0 ? kDefaultSweepFrom : req.from();
  const double to = req.to() == 0 ? kDefaultSweepTo : req.to();
  const double by =
      req.step_fraction() == 0 ? kDefaultSweepStep : req.step_fraction();
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
// is computed (after the bound, when asked for, solved in `bounds`) in a
// copy of `header`, and added to `points`. On a node, slackswap starts from
// the GPU alone's plan too, as in a Plan request at this budget.
absl::Status SweepAt(const SweepSpec& spec, const PolicyRunner& runner,
                     const v1::SweepResponse& header, double f,
                     BoundSweep* bounds, std::vector<v1::SweepPoint>& points,
                     const Emit& emit) {
  const int64_t peak = spec.step.graph().index.saved_bytes;
  const int64_t budget = Budget::Fraction(f).Resolve(peak);
  PlanningContext at = runner.ctx;
  at.budget_bytes = budget;
  PolicyRound round;
  if (at.node != nullptr) {
    SLACKSWAP_ASSIGN_OR_RETURN(std::optional<Plan> alone,
                               AlonePlan(at, spec.step.hw, spec.policies));
    if (alone.has_value()) round.AddSeed(*std::move(alone));
  }
  SLACKSWAP_RETURN_IF_ERROR(
      round.Run(spec.policies, [&](const PolicyInfo& policy, double*) {
        return runner.Quiet(policy.name, budget, &round.seeds(),
                            round.judge_memo());
      }));
  std::optional<double> bound;
  std::string bound_unavailable;
  if (spec.include_bound) {
    SLACKSWAP_ASSIGN_OR_RETURN(
        bound, Bound(at, round.BoundStart(), &bound_unavailable, bounds));
  }
  for (const PolicyRound::Entry& e : round.entries()) {
    v1::SweepResponse msg = header;
    v1::SweepPoint& p = *msg.mutable_point();
    p.set_policy(e.policy->name);
    p.set_budget_fraction(f);
    p.set_budget_bytes(budget);
    if (e.result.has_value()) {
      p.set_feasible(e.result->feasible);
      p.set_throughput_retained(e.result->throughput_retained);
      p.set_peak_activation_bytes(e.result->peak_activation_bytes);
      p.set_infeasible_reason(e.result->infeasible_reason);
    } else {
      p.set_unavailable(e.unavailable);
    }
    if (bound.has_value()) {
      p.set_bound_retained(*bound);
      if (!e.policy->unbudgeted_reference && p.unavailable().empty()) {
        p.set_gap_to_bound(std::max(0.0, *bound - p.throughput_retained()));
      }
    } else if (spec.include_bound) {
      p.set_bound_unavailable(bound_unavailable);
    }
    points.push_back(p);
    SLACKSWAP_RETURN_IF_ERROR(emit(msg));
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
                 spec.step.graph().index.saved_bytes));
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

// What every point's message says of the request: the peak the fractions
// are of and, on a node, the node and the rates its plans counted on.
v1::SweepResponse PointHeader(const SweepSpec& spec,
                              const std::optional<NodePlanning>& on_node) {
  v1::SweepResponse header;
  header.set_unconstrained_peak_bytes(spec.step.graph().index.saved_bytes);
  if (on_node.has_value()) {
    header.set_node_name(spec.step.node->name);
    header.set_ranks(spec.step.ranks);
    header.set_planned_h2d_gbps(on_node->planning_hw.h2d_gbps);
    header.set_planned_d2h_gbps(on_node->planning_hw.d2h_gbps);
  }
  return header;
}

// A sweep's state between units: the resolved request, on a node its ranks
// and planning GPU, its analysis and context (which refer to them: never
// moved), the points so far, and, while they are computed, the bound's
// model, kept from one budget to the next (the fractions ascend: each
// budget's LP starts from the last one's optimum).
class SweepRunImpl : public SweepRun {
 public:
  // REQUIRES: `on_node` is PlanOnNode(spec->step); `analysis` is of the
  // step on the GPU its plans are made for.
  SweepRunImpl(std::unique_ptr<const SweepSpec> spec,
               std::optional<NodePlanning> on_node, StepAnalysis analysis,
               const StopFn& stop, int64_t max_recompute_tasks,
               CoreObserver* observer)
      : spec_(std::move(spec)),
        on_node_(std::move(on_node)),
        analysis_(std::move(analysis)),
        ctx_{spec_->step.graph(),
             on_node_.has_value() ? on_node_->planning_hw : spec_->step.hw,
             analysis_,
             std::max<int64_t>(1, spec_->step.graph().index.saved_bytes), stop},
        runner_{ctx_, observer},
        header_(PointHeader(*spec_, on_node_)) {
    ctx_.explain = false;  // sweep points carry no plans
    ctx_.optimal_time_limit_s = spec_->optimal_time_limit_s;
    ctx_.max_recompute_tasks = max_recompute_tasks;
    if (on_node_.has_value()) ctx_.node = &on_node_->ranks;
    // On a node there is no bound to solve (Bound says why).
    if (spec_->include_bound && ctx_.node == nullptr) bounds_.emplace(ctx_);
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
            SweepAt(*spec_, runner_, header_, spec_->fractions[index_],
                    bounds_ ? &*bounds_ : nullptr, points_, send));
        break;
      case Phase::kTargets:
        SLACKSWAP_RETURN_IF_ERROR(TargetAnswer(
            *spec_, runner_, *spec_->policies[index_], points_, send));
        break;
      case Phase::kMinimums:
        SLACKSWAP_RETURN_IF_ERROR(
            PolicyMinimum(ctx_, *spec_->policies[index_], send));
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
        if (index_ < spec_->fractions.size()) return;
        bounds_.reset();  // the last budget's bound is done
      } else if (index_ < spec_->policies.size()) {
        const PolicyInfo& p = *spec_->policies[index_];
        if (phase_ == Phase::kTargets ? AsksTarget(*spec_, p)
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
  const std::unique_ptr<const SweepSpec> spec_;
  const std::optional<NodePlanning> on_node_;
  const StepAnalysis analysis_;
  PlanningContext ctx_;
  const PolicyRunner runner_;
  const v1::SweepResponse header_;
  // Progress.
  Phase phase_ = Phase::kPoints;
  size_t index_ = 0;
  std::vector<v1::SweepPoint> points_;
  std::optional<BoundSweep> bounds_;
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
  SLACKSWAP_ASSIGN_OR_RETURN(SweepSpec resolved,
                             ResolveSweep(req, limits_, stop, graphs_));
  // On the heap: a node's ranks point into its step.
  auto spec = std::make_unique<const SweepSpec>(std::move(resolved));
  std::optional<NodePlanning> on_node = PlanOnNode(spec->step);
  const Graph& g = spec->step.graph();
  PlanningWork work = SweepWork(
      spec->policies, static_cast<int64_t>(spec->fractions.size()),
      spec->target > 0, spec->include_bound, spec->optimal_time_limit_s);
  if (on_node.has_value()) work = NodePlanWork(work, spec->step.ranks);
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(g, req, work));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());
  SLACKSWAP_ASSIGN_OR_RETURN(
      StepAnalysis analysis,
      AnalyzeStep(g, on_node.has_value() ? on_node->planning_hw : spec->step.hw,
                  stop));
  return std::make_unique<SweepRunImpl>(std::move(spec), std::move(on_node),
                                        std::move(analysis), stop,
                                        limits_.max_recompute_tasks, observer_);
}

}  // namespace slackswap
