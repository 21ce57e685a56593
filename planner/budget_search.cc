#include "planner/budget_search.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "planner/internal/step_bound.h"

namespace slackswap {
namespace {

// Plans and judges one candidate budget, counting evaluations.
class Evaluator {
 public:
  Evaluator(absl::string_view policy, const PlanningContext& ctx,
            const Judge& judge)
      : policy_(policy), ctx_(ctx), judge_(judge) {}

  absl::StatusOr<std::pair<Plan, Judgement>> operator()(int64_t budget) {
    if (StopRequested(ctx_.should_stop)) {
      return absl::CancelledError("searching budgets stopped");
    }
    ++count_;
    PlanningContext at = ctx_;
    at.budget_bytes = budget;
    SLACKSWAP_ASSIGN_OR_RETURN(Plan plan, PlanWithPolicy(policy_, at));
    SLACKSWAP_ASSIGN_OR_RETURN(Judgement j, judge_(plan, budget));
    return std::make_pair(std::move(plan), std::move(j));
  }

  int32_t count() const { return count_; }

 private:
  const absl::string_view policy_;
  const PlanningContext& ctx_;
  const Judge& judge_;
  int32_t count_ = 0;
};

// The bisection's stopping width: 0.1% of the unconstrained peak, as
// MinimumFeasibleBudget.
int64_t Tolerance(const PlanningContext& ctx) {
  return std::max<int64_t>(1, ctx.analysis.unconstrained_peak_bytes / 1000);
}

// No plan of any policy fits `budget`: when the op where memory peaks
// starts, even every saved activation moved cannot make room
// (planner/internal/step_bound.h).
bool NothingFits(const PlanningContext& ctx, int64_t budget) {
  PlanningContext at = ctx;
  at.budget_bytes = budget;
  return LeastFeasibleStepNs(at, ctx.graph.index.saved) ==
         std::numeric_limits<int64_t>::max();
}

void Keep(int64_t budget, std::pair<Plan, Judgement>& e, BudgetSearch& out) {
  out.budget_bytes = budget;
  out.plan = std::move(e.first);
  out.result = std::move(e.second.result);
}

}  // namespace

Judge SimulationJudge(absl::string_view policy, const PlanningContext& ctx,
                      const SimOptions& report) {
  return [policy, &ctx, report](const Plan& plan,
                                int64_t budget) -> absl::StatusOr<Judgement> {
    PlanningContext at = ctx;
    at.budget_bytes = budget;
    Judgement j;
    SLACKSWAP_ASSIGN_OR_RETURN(j.result,
                               SimulatePlan(policy, at, plan, report));
    j.verdict = j.result.feasible ? Verdict::kFits : Verdict::kUnder;
    return j;
  };
}

Judge DeviceJudge(absl::string_view policy, const PlanningContext& ctx,
                  const SimOptions& report) {
  return [simulate = SimulationJudge(policy, ctx, report)](
             const Plan& plan, int64_t budget) -> absl::StatusOr<Judgement> {
    SLACKSWAP_ASSIGN_OR_RETURN(Judgement j, simulate(plan, budget));
    if (!j.result.feasible || !j.result.device.has_value()) {
      j.verdict = Verdict::kUnder;
    } else if (j.result.device->fits) {
      j.verdict = Verdict::kFits;
    } else {
      j.verdict = Verdict::kOver;
      j.excess =
          j.result.device->required_bytes - j.result.device->capacity_bytes;
    }
    return j;
  };
}

Judge AllMemoryJudge(absl::string_view policy, const PlanningContext& ctx,
                     const SimOptions& report, int64_t all_memory_budget) {
  SimOptions opts = report;
  opts.budget_covers_all = true;
  return [policy, &ctx, opts, all_memory_budget](
             const Plan& plan, int64_t) -> absl::StatusOr<Judgement> {
    PlanningContext at = ctx;
    at.budget_bytes = all_memory_budget;
    Judgement j;
    SLACKSWAP_ASSIGN_OR_RETURN(j.result, SimulatePlan(policy, at, plan, opts));
    j.verdict = j.result.feasible ? Verdict::kFits : Verdict::kOver;
    return j;
  };
}

absl::StatusOr<BudgetSearch> LargestFittingBudget(absl::string_view policy,
                                                  const PlanningContext& ctx,
                                                  const Judge& judge,
                                                  int64_t start) {
  const int64_t tolerance = Tolerance(ctx);
  Evaluator evaluate(policy, ctx, judge);
  BudgetSearch out;
  // Budgets known to exceed the limit start at `over` (-1: none yet); below
  // `under` the policy has no feasible plan. The step of the plan at
  // `over` when it ran (-1: it did not, or no such plan).
  int64_t over = -1;
  int64_t over_step_ns = -1;
  int64_t under = 0;
  bool have_nearest = false;
  int64_t nearest_excess = 0;
  int64_t next = start;
  // The last step down by a measured excess and that excess; 0 after
  // anything else.
  int64_t last_step = 0;
  int64_t last_excess = 0;
  while (evaluate.count() < kMaxSearchEvaluations) {
    const int64_t lo = out.found ? out.budget_bytes : under;
    if (evaluate.count() > 0) {
      // Nothing above `start` to try when it did not exceed the limit.
      if (over < 0 || over - lo <= tolerance) break;
      // The plan that fits is as fast as the plan at the smallest budget
      // over the limit: the budgets between have plans no faster, if a
      // larger budget's plan is no slower (what SmallestBudgetRetaining's
      // bisection assumes too). The fastest plan that fits is found, and
      // the one with the most room left of the equally fast ones tried.
      if (out.found && over_step_ns >= 0 &&
          out.result.step_ns <= over_step_ns) {
        break;
      }
      if (!(next > lo && next < over)) next = lo + (over - lo) / 2;
    }
    const int64_t budget = next;
    SLACKSWAP_ASSIGN_OR_RETURN(auto e, evaluate(budget));
    next = -1;  // bisect unless the excess says where to look
    switch (e.second.verdict) {
      case Verdict::kFits:
        out.found = true;
        Keep(budget, e, out);
        last_step = 0;
        break;
      case Verdict::kUnder:
        last_step = 0;
        // Above a budget that fits, an infeasible plan bounds the search
        // like one that exceeds the limit.
        (out.found ? over : under) = budget;
        if (out.found) over_step_ns = -1;
        if (!out.found && !have_nearest) Keep(budget, e, out);
        break;
      case Verdict::kOver: {
        over = budget;
        over_step_ns = e.second.result.feasible ? e.second.result.step_ns : -1;
        const int64_t excess = e.second.excess;
        if (!out.found) {
          if (excess > 0) {
            // The reserved peak moves in the allocator's blocks and
            // segments, not byte for byte: when a step down by the excess
            // did not shrink it, the next step is twice as long.
            last_step = last_step > 0 && excess >= last_excess
                            ? std::max(excess, 2 * last_step)
                            : excess;
            last_excess = excess;
            next = budget - last_step;
          }
          if (!have_nearest || excess < nearest_excess ||
              (excess == nearest_excess && budget < out.budget_bytes)) {
            have_nearest = true;
            nearest_excess = excess;
            Keep(budget, e, out);
          }
        }
        break;
      }
    }
  }
  out.evaluations = evaluate.count();
  return out;
}

namespace {

bool Retains(const SimResult& r, double target) {
  return r.feasible && r.throughput_retained >= target;
}

// SmallestBudgetRetaining's bisection, each budget planned with ctx.
absl::StatusOr<BudgetSearch> Bisect(absl::string_view policy,
                                    const PlanningContext& ctx,
                                    const Judge& judge, double target) {
  const int64_t peak =
      std::max<int64_t>(1, ctx.analysis.unconstrained_peak_bytes);
  const int64_t tolerance = Tolerance(ctx);
  Evaluator evaluate(policy, ctx, judge);
  BudgetSearch out;
  SLACKSWAP_ASSIGN_OR_RETURN(auto top, evaluate(peak));
  out.found = Retains(top.second.result, target);
  Keep(peak, top, out);
  int64_t lo = 0;  // does not retain the target
  int64_t hi = peak;
  while (out.found && hi - lo > tolerance &&
         evaluate.count() < kMaxSearchEvaluations) {
    const int64_t mid = lo + (hi - lo) / 2;
    // Planned, it would come back infeasible: the same step of the
    // bisection without the planning.
    if (ctx.prune_with_bounds && NothingFits(ctx, mid)) {
      lo = mid;
      continue;
    }
    SLACKSWAP_ASSIGN_OR_RETURN(auto e, evaluate(mid));
    if (Retains(e.second.result, target)) {
      hi = mid;
      Keep(mid, e, out);
    } else {
      lo = mid;
    }
  }
  out.evaluations = evaluate.count();
  return out;
}

// The bisection with each budget planned with `probing`, which asks the
// policy only for its verdict there (PlanningContext::AsksForAVerdict),
// then the budget found planned in full with ctx: the same budget, plan and
// result as with every budget planned in full, for one more plan.
absl::StatusOr<BudgetSearch> BisectThenPlan(absl::string_view policy,
                                            const PlanningContext& ctx,
                                            const PlanningContext& probing,
                                            const Judge& judge, double target) {
  SLACKSWAP_ASSIGN_OR_RETURN(BudgetSearch out,
                             Bisect(policy, probing, judge, target));
  if (!probing.AsksForAVerdict()) return out;
  Evaluator evaluate(policy, ctx, judge);
  SLACKSWAP_ASSIGN_OR_RETURN(auto e, evaluate(out.budget_bytes));
  if (out.found && !Retains(e.second.result, target)) {
    const SimResult& r = e.second.result;
    return absl::InternalError(absl::StrCat(
        policy, "'s plan at ", out.budget_bytes, " bytes ",
        r.feasible ? absl::StrCat("retains ", r.throughput_retained,
                                  " of the ideal, under the target ", target)
                   : absl::StrCat("is infeasible (", r.infeasible_reason, ")"),
        ", where the plan it made when asked only for a verdict met it"));
  }
  Keep(out.budget_bytes, e, out);
  out.evaluations += evaluate.count();
  return out;
}

}  // namespace

absl::StatusOr<BudgetSearch> SmallestBudgetRetaining(absl::string_view policy,
                                                     const PlanningContext& ctx,
                                                     const Judge& judge,
                                                     double target) {
  PlanningContext probing = ctx;
  if (ctx.prune_with_bounds) probing.enough_retained = target;
  return BisectThenPlan(policy, ctx, probing, judge, target);
}

absl::StatusOr<BudgetSearch> SmallestFeasibleBudget(absl::string_view policy,
                                                    const PlanningContext& ctx,
                                                    const Judge& judge) {
  PlanningContext probing = ctx;
  probing.first_feasible_plan = ctx.prune_with_bounds;
  return BisectThenPlan(policy, ctx, probing, judge,
                        std::numeric_limits<double>::min());
}

}  // namespace slackswap
