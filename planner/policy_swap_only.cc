// swap_only: offload in the style of vDNN: swap the largest saved
// activations first, as few as the budget allows, prefetching each as late
// as the H2D stream lets it land in time. No recompute.
#include "common/status_macros.h"
#include "planner/plan_search.h"
#include "planner/policies.h"

namespace slackswap {
namespace {

class SwapOnlyPolicy : public Policy {
 public:
  const char* name() const override { return "swap_only"; }

  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    std::vector<Move> moves;
    int64_t host_bytes = 0;
    for (const Candidate* c : OrderCandidates(
             ctx.analysis, CanSwap, [](const Candidate&x, const Candidate&y) {
               return x.bytes > y.bytes;
             })) {
      // Host copies must fit in pinned memory.
      if (host_bytes + c->bytes > ctx.hw.pinned_host_memory_bytes) continue;
      host_bytes += c->bytes;
      moves.push_back({c->tensor, Action::kSwap});
    }
    SLACKSWAP_ASSIGN_OR_RETURN(
        Judged best, FewestMovesThatFit(ctx, Plan::KeepAll(ctx.graph), moves));
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
