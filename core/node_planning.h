// How Plan and Sweep plan for a node (StepSpec.node): one plan for every
// rank, made for each rank's share of the node's shared links and judged by
// simulating all the ranks together (docs/PLANNERS.md, "Plans for a node").
// Internal to core/.
//
//   std::optional<NodePlanning> on_node = PlanOnNode(step);
//   const Hardware& hw = on_node ? on_node->planning_hw : step.hw;
//   PlanningContext ctx = ...;  // with hw
//   if (on_node) ctx.node = &on_node->ranks;
//   SLACKSWAP_ASSIGN_OR_RETURN(std::optional<Plan> alone,
//                              AlonePlan(ctx, step.hw, policies));
//   if (alone) round.AddSeed(*std::move(alone));
#ifndef SLACKSWAP_CORE_NODE_PLANNING_H_
#define SLACKSWAP_CORE_NODE_PLANNING_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/request_convert.h"
#include "model/hardware.h"
#include "model/plan.h"
#include "planner/policy.h"

namespace slackswap {

// A request on a node: its ranks, and the GPU as each rank's plan sees it
// (its share of the shared links, FairShareGpu).
struct NodePlanning {
  NodeRanks ranks;
  Hardware planning_hw;
};

// None for one GPU. The ranks point into `step` (its node and graphs):
// REQUIRES: `step` outlives the result and is not moved.
std::optional<NodePlanning> PlanOnNode(const Step& step);

// On a node, the plan slackswap gives the node's GPU alone (a single-GPU
// request with the same policies at node_ctx's budget; none when slackswap
// is not among them): a seed, so that the node's slackswap, which starts
// from the best seed it judges on the node, never returns a plan slower on
// the node than that one.
absl::StatusOr<std::optional<Plan>> AlonePlan(
    const PlanningContext& node_ctx, const Hardware& gpu,
    const std::vector<const PolicyInfo*>& policies);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_NODE_PLANNING_H_
