// optimal: the planning problem's integer model (planner/relaxation.h)
// solved by COIN-OR CBC within a time limit (2 s unless the request says
// otherwise) from slackswap's plan, its plan judged by the simulator like
// every other policy's, then polished by the same moves slackswap uses. The
// model relaxes the simulator (it costs a recompute as its producer alone, and
// prefetches as free of memory), so its optimum is exact for the model, not
// for the simulator: the plan carries CBC's proof (proven, or stopped at the
// limit) and the model's bound, a lower bound on any plan's step.
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/relaxation.h"

namespace slackswap {
namespace {

// Single-tensor changes tried on the model's plan.
constexpr int kPolishTrials = 16;

// The model's decisions as a plan, judged, made to fit when the simulator
// finds it does not, and polished.
absl::StatusOr<Judged> JudgeModelPlan(const PlanningContext& ctx,
                                      const Relaxation& model) {
  Plan plan = Plan::KeepAll(ctx.graph);
  const StepAnalysis& a = ctx.analysis;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    Decision& d = plan.decisions[a.candidates[i].tensor];
    if (model.swap[i] > 0.5) d.action = Action::kSwap;
    if (model.recompute[i] > 0.5) d.action = Action::kRecompute;
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Judged judged, JudgePlan(ctx, std::move(plan)));
  if (!judged.result.feasible) {
    // What the model leaves out (recompute chains' memory, prefetches
    // reserving theirs early) can overflow the budget: recompute the
    // cheapest of what it keeps until the simulator agrees.
    SLACKSWAP_ASSIGN_OR_RETURN(judged,
                               RecomputeCheapestThatFit(ctx, judged.plan));
  }
  return RefineBySimulation(ctx, std::move(judged), kPolishTrials);
}

class OptimalPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    // slackswap's own plan (without this request's other plans) is where
    // the solver starts: it always has a plan to improve on, and the
    // answer is never worse than it. slackswap, run after this policy with
    // its plan among the others, is then never worse than this one.
    PlanningContext quiet = ctx;
    quiet.explain = false;
    quiet.seeds = nullptr;
    SLACKSWAP_ASSIGN_OR_RETURN(Plan start_plan,
                               PlanWithPolicy("slackswap", quiet));
    SLACKSWAP_ASSIGN_OR_RETURN(Judged start,
                               JudgePlan(ctx, std::move(start_plan)));
    RelaxationOptions options;
    options.integer = true;
    options.time_limit_s = ctx.optimal_time_limit_s;
    if (start.result.feasible) options.start = &start.plan;
    SLACKSWAP_ASSIGN_OR_RETURN(Relaxation model, SolveRelaxation(ctx, options));
    const PlanProof proof{model.proven_optimal, model.step_ns_lower};
    if (!model.feasible) {
      // Not even the model meets the budget: no plan does.
      Plan plan = Plan::KeepAll(ctx.graph);
      SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
          ctx, "no plan meets the budget (the model is infeasible)", "", "",
          plan));
      plan.proof = proof;
      return plan;
    }
    if (model.swap.empty()) {
      // No plan of the solver's own: out of time, or a model too large for
      // the time limit.
      const std::string why = absl::StrCat(
          "as in slackswap's plan (",
          model.milp_skipped
              ? absl::StrCat("the model is too large for the MILP in ",
                             ctx.optimal_time_limit_s, " s")
              : "the solver found none in its time limit",
          ")");
      SLACKSWAP_RETURN_IF_ERROR(
          ExplainDecisions(ctx, why, why, why, start.plan));
      start.plan.proof = proof;
      return std::move(start.plan);
    }
    SLACKSWAP_ASSIGN_OR_RETURN(Judged judged, JudgeModelPlan(ctx, model));
    // The model ranks plans by its own, optimistic, step time: the plan it
    // started from may still simulate better than the one it ended with.
    PlanProof proved = proof;
    bool from_model = true;
    if (Better(start.result, judged.result)) {
      judged = std::move(start);
      from_model = false;
      proved.optimal = false;  // not the model's plan
    }
    if (from_model) {
      SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
          ctx, "the model's plan keeps it", "the model's plan swaps it",
          "the model's plan recomputes it", judged.plan));
    } else {
      constexpr char kWhy[] =
          "as in slackswap's plan, which simulated better than the model's";
      SLACKSWAP_RETURN_IF_ERROR(
          ExplainDecisions(ctx, kWhy, kWhy, kWhy, judged.plan));
    }
    judged.plan.proof = proved;
    return std::move(judged.plan);
  }
};

}  // namespace

std::unique_ptr<Policy> NewOptimalPolicy() {
  return std::make_unique<OptimalPolicy>();
}

}  // namespace slackswap
