#include "core/node_planning.h"

#include <algorithm>

#include "common/status_macros.h"
#include "core/policy_round.h"
#include "planner/analysis.h"

namespace slackswap {

std::optional<NodePlanning> PlanOnNode(const Step& step) {
  if (!step.node.has_value()) return std::nullopt;
  NodePlanning n;
  n.ranks.node = &*step.node;
  for (int32_t r = 0; r < step.ranks; ++r) {
    n.ranks.graphs.push_back(&step.graph_of(r));
  }
  n.planning_hw = FairShareGpu(*step.node, step.ranks);
  return n;
}

absl::StatusOr<std::optional<Plan>> AlonePlan(
    const PlanningContext& node_ctx, const Hardware& gpu,
    const std::vector<const PolicyInfo*>& policies) {
  const auto slackswap =
      std::find_if(policies.begin(), policies.end(), [](const PolicyInfo* p) {
        return absl::string_view(p->name) == "slackswap";
      });
  if (slackswap == policies.end()) return std::nullopt;
  SLACKSWAP_ASSIGN_OR_RETURN(
      const StepAnalysis analysis,
      AnalyzeStep(node_ctx.graph, gpu, node_ctx.should_stop));
  PlanningContext alone{node_ctx.graph, gpu, analysis, node_ctx.budget_bytes,
                        node_ctx.should_stop};
  alone.max_recompute_tasks = node_ctx.max_recompute_tasks;
  alone.optimal_time_limit_s = node_ctx.optimal_time_limit_s;
  alone.explain = false;
  PolicyRound round;
  alone.seeds = &round.seeds();
  alone.judge_memo = round.judge_memo();
  SimOptions quiet;
  quiet.record_timeline = false;
  SLACKSWAP_RETURN_IF_ERROR(
      round.Run(policies, [&](const PolicyInfo& policy, double* seconds) {
        return PolicyRunner{alone, nullptr}.Run(policy.name, quiet, seconds);
      }));
  const PolicyRound::Entry& entry = round.Of(*slackswap);
  if (!entry.result.has_value()) return std::nullopt;
  return round.PlanOf(entry);
}

}  // namespace slackswap
