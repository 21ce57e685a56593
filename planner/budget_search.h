// Planning against limits the policies do not plan against themselves: the
// whole device (the caching allocator's reserved peak, plus the framework
// reserve, must fit the GPU) or activation plus transient memory. The
// policies plan for an activation budget; this finds, by simulation, the
// largest activation budget whose plan a caller's judge accepts, and the
// smallest one whose plan retains a share of the ideal throughput.
//
//   Judge judge = [&](const Plan& plan, int64_t budget)
//       -> absl::StatusOr<Judgement> { ... simulate, compare ... };
//   absl::StatusOr<BudgetSearch> s = LargestFittingBudget("slackswap", ctx,
//                                                         judge, peak);
//   if (s.ok() && s->found) Use(s->plan, s->result);
//
// The search never guesses: every candidate budget's plan is made by the
// policy and judged by simulation. It steps down by the excess the judge
// measured (a plan's reserved peak falls about as much as its budget),
// twice as far each time a step did not shrink the excess (the reserved
// peak moves in the allocator's blocks), then bisects to 0.1% of the
// unconstrained peak, or until the plan that fits is as fast as the plan
// at the smallest budget over the limit (docs/PLANNERS.md, "The device
// budget").
#ifndef SLACKSWAP_PLANNER_BUDGET_SEARCH_H_
#define SLACKSWAP_PLANNER_BUDGET_SEARCH_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/plan.h"
#include "planner/policy.h"
#include "sim/simulator.h"

namespace slackswap {

// The most plans one search makes (and so what admission counts per
// policy searched).
inline constexpr int32_t kMaxSearchEvaluations = 24;

enum class Verdict : uint8_t {
  kFits,   // the plan meets the limit
  kOver,   // the plan is feasible at its budget but exceeds the limit
  kUnder,  // the policy cannot meet this budget (the plan is infeasible)
};

struct Judgement {
  SimResult result;
  Verdict verdict = Verdict::kOver;
  // With kOver: the bytes by which the plan exceeds the limit; 0 when the
  // judge cannot tell.
  int64_t excess = 0;
};

// Judges the plan a policy made for activation budget `budget`.
using Judge =
    std::function<absl::StatusOr<Judgement>(const Plan& plan, int64_t budget)>;

struct BudgetSearch {
  // Some budget's plan fits; then budget/plan/result are the largest such
  // budget's the search tried. Otherwise they are the plan that came nearest
  // (the least excess among feasible plans, the lowest budget on a tie), or,
  // when no plan was feasible, the last tried.
  bool found = false;
  int64_t budget_bytes = 0;
  Plan plan;
  SimResult result;
  int32_t evaluations = 0;
};

// Judges by the simulation alone, with `report`'s options: fits when the
// plan is feasible at its budget. For searches that steer by feasibility
// and throughput (SmallestBudgetRetaining).
Judge SimulationJudge(absl::string_view policy, const PlanningContext& ctx,
                      const SimOptions& report);

// Judges by the whole device: the plan simulated at its budget with
// `report`'s options and its device model (report.device, enabled), fits
// when the step completes and its reserved peak plus the framework reserve
// and headroom fits the GPU (DeviceReport::fits).
Judge DeviceJudge(absl::string_view policy, const PlanningContext& ctx,
                  const SimOptions& report);

// Judges by activation plus transient memory: the plan simulated with
// `all_memory_budget` limiting both (SimOptions::budget_covers_all) fits
// when that simulation is feasible.
Judge AllMemoryJudge(absl::string_view policy, const PlanningContext& ctx,
                     const SimOptions& report, int64_t all_memory_budget);

// Searches activation budgets in (0, start] for `policy`, each planned with
// ctx (its budget replaced) and judged by `judge`, assuming a smaller budget
// is no more likely to exceed the limit and a larger one's plan is no
// slower: it stops once the plan that fits is as fast as the plan at the
// smallest budget found over the limit (budgets between would plan no
// faster), else at the tolerance. Polls ctx.should_stop.
// REQUIRES: policy is not ideal; start > 0.
absl::StatusOr<BudgetSearch> LargestFittingBudget(absl::string_view policy,
                                                  const PlanningContext& ctx,
                                                  const Judge& judge,
                                                  int64_t start);

// The smallest activation budget, to 0.1% of the peak, at which `policy`'s
// plan, judged by `judge` (its result's throughput_retained), is feasible
// and retains at least `target`; found = false when even `peak` does not.
// Its probes ask the policy only whether its plan retains the target
// (PlanningContext::enough_retained; with ctx.prune_with_bounds), and the
// budget found is planned once more in full: the budget, plan and result
// are those of the bisection with every budget planned in full.
// REQUIRES: 0 < target <= 1.
absl::StatusOr<BudgetSearch> SmallestBudgetRetaining(absl::string_view policy,
                                                     const PlanningContext& ctx,
                                                     const Judge& judge,
                                                     double target);

// The smallest activation budget, to 0.1% of the peak, at which `policy`'s
// plan, judged by `judge`, is feasible: SmallestBudgetRetaining for any
// share above 0, the same budget, plan and result. Its probes ask the policy
// only whether it fits (PlanningContext::first_feasible_plan, which lets
// slackswap stop sooner than a share does).
absl::StatusOr<BudgetSearch> SmallestFeasibleBudget(absl::string_view policy,
                                                    const PlanningContext& ctx,
                                                    const Judge& judge);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_BUDGET_SEARCH_H_
