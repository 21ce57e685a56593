#include "core/policy_round.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "planner/relaxation.h"
#include "sim/schedule.h"

namespace slackswap {

double Stopwatch::Lap() {
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::duration<double> d = now - last_;
  last_ = now;
  return d.count();
}

absl::StatusOr<PlanOutcome> PolicyRunner::Run(const std::string& policy,
                                              const SimOptions& report,
                                              double* seconds) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(Plan plan, PlanWithPolicy(policy, ctx));
  const double planner_seconds = watch.Lap();
  std::optional<NodeSimResult> node;
  SLACKSWAP_ASSIGN_OR_RETURN(
      SimResult result,
      SimulatePlan(policy, ctx, plan, report,
                   ctx.node != nullptr ? &node.emplace() : nullptr));
  const double simulator_seconds = watch.Lap();
  if (observer != nullptr) {
    observer->PolicyRun(policy, planner_seconds, simulator_seconds,
                        result.throughput_retained, result.feasible);
    if (ctx.node != nullptr) observer->NodeSimulation(simulator_seconds);
  }
  if (seconds != nullptr) *seconds = planner_seconds + simulator_seconds;
  return PlanOutcome{std::move(plan), std::move(result), std::move(node)};
}

absl::StatusOr<PlanOutcome> PolicyRunner::Search(const std::string& policy,
                                                 const Judge& judge,
                                                 int64_t start,
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
  return PlanOutcome{std::move(s.plan), std::move(s.result), std::nullopt};
}

absl::StatusOr<PlanOutcome> PolicyRunner::Quiet(const std::string& policy,
                                                int64_t budget,
                                                const std::vector<Plan>* seeds,
                                                JudgeMemo* judge_memo) const {
  PlanningContext at = ctx;
  at.budget_bytes = budget;
  at.seeds = seeds;
  at.judge_memo = judge_memo;
  SimOptions report;
  report.record_timeline = false;
  return PolicyRunner{at, observer}.Run(policy, report, nullptr);
}

absl::Status PolicyRound::Run(const std::vector<const PolicyInfo*>& policies,
                              const RunFn& run) {
  for (const PolicyInfo* policy : policies) {
    Entry& entry = entries_.emplace_back();
    entry.policy = policy;
    absl::StatusOr<PlanOutcome> o = run(*policy, &entry.seconds);
    if (!o.ok()) {
      if (!policy->may_be_unavailable || absl::IsCancelled(o.status())) {
        return o.status();
      }
      entry.unavailable = std::string(o.status().message());
      continue;
    }
    entry.result = std::move(o->result);
    entry.node = std::move(o->node);
    if (policy->unbudgeted_reference) {
      entry.plan_index = static_cast<int>(references_.size());
      references_.push_back(std::move(o->plan));
      continue;
    }
    any_budgeted_ = true;
    any_feasible_ |= entry.result->feasible;
    // The fastest feasible plan, else the one with the lowest peak.
    const std::pair<bool, int64_t> key = {
        !entry.result->feasible, entry.result->feasible
                                     ? entry.result->step_ns
                                     : entry.result->peak_activation_bytes};
    if (!bound_start_.has_value() || key < bound_start_key_) {
      bound_start_ = seeds_.size();
      bound_start_key_ = key;
    }
    entry.plan_index = static_cast<int>(seeds_.size());
    seeds_.push_back(std::move(o->plan));
  }
  return absl::OkStatus();
}

const PolicyRound::Entry& PolicyRound::Of(const PolicyInfo* policy) const {
  return *std::find_if(entries_.begin(), entries_.end(),
                       [policy](const Entry& e) { return e.policy == policy; });
}

const Plan& PolicyRound::PlanOf(const Entry& entry) const {
  return entry.policy->unbudgeted_reference ? references_[entry.plan_index]
                                            : seeds_[entry.plan_index];
}

const Plan* PolicyRound::BoundStart() const {
  return bound_start_.has_value() ? &seeds_[*bound_start_] : nullptr;
}

absl::StatusOr<std::optional<double>> Bound(const PlanningContext& ctx,
                                            const Plan* start,
                                            std::string* unavailable,
                                            BoundSweep* sweep) {
  if (ctx.node != nullptr) {
    *unavailable =
        "the bound's model has one GPU's host link; a node's shared uplinks, "
        "socket memory and collectives are not in it, so it would not bound "
        "a node's step";
    return std::nullopt;
  }
  RelaxationOptions options;
  options.start = start;
  absl::StatusOr<Relaxation> b = sweep != nullptr
                                     ? sweep->Solve(ctx.budget_bytes, options)
                                     : SolveRelaxation(ctx, options);
  if (!b.ok()) {
    if (absl::IsCancelled(b.status())) return b.status();
    *unavailable = std::string(b.status().message());
    return std::nullopt;
  }
  return b->feasible ? b->retained_upper : 0.0;
}

absl::StatusOr<SimResult> SimulateKeepAll(const PlanningContext& ctx,
                                          const DeviceOptions& device) {
  SimOptions report;
  report.record_timeline = false;
  report.device = device;
  SimOptions opts = ctx.Simulation(report);
  opts.budget_bytes = 0;  // keeping everything has no budget to meet
  // Through RunSchedule: on a node, keeping everything runs on every rank.
  SLACKSWAP_ASSIGN_OR_RETURN(Schedule schedule,
                             LowerPlan(ctx.graph, Plan::KeepAll(ctx.graph),
                                       ctx.analysis.durations, ctx.Lowering()));
  return RunSchedule(ctx, schedule, opts);
}

double Fraction(int64_t bytes, int64_t peak) {
  return static_cast<double>(bytes) / std::max<int64_t>(1, peak);
}

}  // namespace slackswap
