// recompute_only: activation checkpointing, no transfers. The better (by
// simulation) of
//  - greedy: recompute the cheapest rebuild per byte first, as few as the
//    budget allows;
//  - layer-wise (Chen et al. 2016; Megatron "full" recompute): keep only
//    what enters each layer, recompute everything made inside it; if that is
//    still over budget, recompute the cheapest of what remains;
// each then keeping the recomputes the budget turns out not to need (where
// the budget does not bind, as replayed by the simulator).
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

constexpr char kWhyKeep[] = "fits the budget";

// A tensor made inside a layer and read there is rebuilt by re-running the
// layer from its input; tensors crossing a layer boundary are the inputs.
bool MadeAndUsedInsideOneLayer(const Graph& g, const Candidate& c) {
  const int32_t layer = g.ops[c.producer].layer;
  if (layer < 0) return false;
  const GraphIndex& idx = g.index;
  for (int32_t i = idx.consumer_offsets[c.tensor];
       i < idx.consumer_offsets[c.tensor + 1]; ++i) {
    const Op& op = g.ops[idx.consumers[i]];
    if (op.phase == Phase::kForward && op.layer != layer) return false;
  }
  return true;
}

class RecomputeOnlyPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    const Plan keep_all = Plan::KeepAll(ctx.graph);

    SLACKSWAP_ASSIGN_OR_RETURN(Judged greedy,
                               RecomputeCheapestThatFit(ctx, keep_all));

    Plan layered = keep_all;
    for (const Candidate& c : ctx.analysis.candidates) {
      if (MadeAndUsedInsideOneLayer(ctx.graph, c)) {
        layered.decisions[c.tensor].action = Action::kRecompute;
      }
    }
    SLACKSWAP_ASSIGN_OR_RETURN(Judged layer_wise,
                               RecomputeCheapestThatFit(ctx, layered));
    if (Better(layer_wise.result, greedy.result)) {
      SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
          ctx, "a layer input (checkpoint)", "",
          "layer-wise checkpointing: rebuilt from the layer input",
          layer_wise.plan));
      return layer_wise.plan;
    }
    SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
        ctx, kWhyKeep, "",
        "greedy checkpointing: cheapest rebuild per byte first", greedy.plan));
    return greedy.plan;
  }
};

}  // namespace

std::unique_ptr<Policy> NewRecomputeOnlyPolicy() {
  return std::make_unique<RecomputeOnlyPolicy>();
}

}  // namespace slackswap
