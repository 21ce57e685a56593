// ideal: keep everything, no limit. The 100% reference every other policy is
// measured against.
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

class IdealPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    Plan plan = Plan::KeepAll(ctx.graph);
    SLACKSWAP_RETURN_IF_ERROR(
        ExplainDecisions(ctx, "ideal: no memory limit", "", "", plan));
    return plan;
  }
};

}  // namespace

std::unique_ptr<Policy> NewIdealPolicy() {
  return std::make_unique<IdealPolicy>();
}

}  // namespace slackswap
