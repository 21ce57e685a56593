// capuchin: the hybrid policy of Capuchin (Peng et al., ASPLOS 2020).
// Tensors are swapped in order of their free time (the idle window between
// the last forward use and the first backward use on the ideal timeline,
// minus the round trip), longest first, as long as the swap can still be
// hidden next to the swaps already chosen (Capuchin's feedback-driven swap
// placement, modelled with the same copy-stream test as slackswap) and the
// budget asks for more bytes; then tensors are recomputed in order of memory
// saved per second of recompute (MSPS), as few as the budget allows.
//
// What sets it apart from slackswap is what it swaps: the tensors with the
// most free time, not the ones most expensive to rebuild.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

int64_t FreeTime(const StepAnalysis& a, const Candidate& c) {
  const int32_t last = std::max(c.producer, c.last_fwd_use);
  return a.op_start_ns[c.first_bwd_use] - a.op_end_ns[last] - c.d2h_ns -
         c.h2d_ns;
}

class CapuchinPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    SLACKSWAP_ASSIGN_OR_RETURN(const std::vector<int32_t> swaps,
                               CapuchinSwaps(ctx));
    return CapuchinPlan(ctx, swaps);
  }
};

}  // namespace

absl::StatusOr<std::vector<int32_t>> CapuchinSwaps(const PlanningContext& ctx) {
  const StepAnalysis& a = ctx.analysis;
  const int64_t to_free =
      std::max<int64_t>(0, a.unconstrained_peak_bytes - ctx.budget_bytes);
  auto hides = [&](const Candidate& c) {
    return CanSwap(c) && FreeTime(a, c) > 0;
  };
  auto free_time = [&](const Candidate& c) { return FreeTime(a, c); };
  // The longest free time first.
  return AdmitToSlack(ctx,
                      OrderCandidates(a, hides, free_time, std::greater<>()),
                      a.forward_ns, to_free);
}

absl::StatusOr<Plan> CapuchinPlan(const PlanningContext& ctx,
                                  absl::Span<const int32_t> swaps) {
  Plan base = Plan::KeepAll(ctx.graph);
  for (int32_t t : swaps) base.decisions[t].action = Action::kSwap;
  // Most memory saved per second of recompute (MSPS) is the cheapest
  // rebuild per byte.
  SLACKSWAP_ASSIGN_OR_RETURN(
      Judged best,
      FewestMovesThatFit(
          ctx, base, CheapestRecomputeMoves(ctx.graph, ctx.analysis, base)));
  SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
      ctx, "fits the budget", "longest free time that still hides (Capuchin)",
      "most memory saved per second of recompute (Capuchin MSPS)", best.plan));
  return best.plan;
}

std::unique_ptr<Policy> NewCapuchinPolicy() {
  return std::make_unique<CapuchinPolicy>();
}

}  // namespace slackswap
