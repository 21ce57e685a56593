// swap_only: offload in the style of vDNN: swap the largest saved
// activations first, as few as the budget allows, prefetching each as late
// as the H2D stream lets it land in time. No recompute.
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

class SwapOnlyPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    SLACKSWAP_ASSIGN_OR_RETURN(
        Judged best, SwapLargestThatFit(ctx, Plan::KeepAll(ctx.graph)));
    SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
        ctx, "fits the budget", "largest first (vDNN-style offload)",
        "no time to prefetch it back", best.plan));
    return best.plan;
  }
};

}  // namespace

std::unique_ptr<Policy> NewSwapOnlyPolicy() {
  return std::make_unique<SwapOnlyPolicy>();
}

}  // namespace slackswap
