// The planner's version: answers (plans, simulated results) are a function
// of the request and this. It goes into ServerInfo and every planning
// response, so that clients caching answers know when to drop them.
// planner/version_test.cc fingerprints the answers on fixed requests and
// fails, saying so, when they change without this changing.
//
//   resp.set_planner_version(PlannerVersion());
#ifndef SLACKSWAP_PLANNER_VERSION_H_
#define SLACKSWAP_PLANNER_VERSION_H_

#include <string>

namespace slackswap {

// Bump when a change makes any plan or simulated figure differ, and record
// the new fingerprint in planner/version_test.cc.
inline constexpr int kPlannerVersion = 4;

// kPlannerVersion as text ("1").
std::string PlannerVersion();

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_VERSION_H_
