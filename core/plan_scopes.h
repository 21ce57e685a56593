// What a Plan request plans for, as metrics label it (server/metrics.h:
// slackswap_plans_total{scope}): one GPU, or the ranks of a node
// (StepSpec.node_name or node_inline).
//
//   observer->PlanAdmitted(step.node.has_value() ? kNodeScope : kGpuScope);
#ifndef SLACKSWAP_CORE_PLAN_SCOPES_H_
#define SLACKSWAP_CORE_PLAN_SCOPES_H_

namespace slackswap {

inline constexpr char kGpuScope[] = "gpu";
inline constexpr char kNodeScope[] = "node";
// Every scope, so that metrics can create each one's series at zero.
inline constexpr const char* kPlanScopes[] = {kGpuScope, kNodeScope};

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_PLAN_SCOPES_H_
