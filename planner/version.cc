#include "planner/version.h"

#include "absl/strings/str_cat.h"

namespace slackswap {

std::string PlannerVersion() { return absl::StrCat(kPlannerVersion); }

}  // namespace slackswap
