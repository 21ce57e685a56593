// The policy implementations (one file each) and what they share. Callers
// use CreatePolicy (policy.h) instead.
#ifndef SLACKSWAP_PLANNER_POLICIES_H_
#define SLACKSWAP_PLANNER_POLICIES_H_

#include <functional>
#include <memory>
#include <vector>

#include "planner/analysis.h"
#include "planner/policy.h"

namespace slackswap {

std::unique_ptr<Policy> NewIdealPolicy();
std::unique_ptr<Policy> NewRecomputeOnlyPolicy();
std::unique_ptr<Policy> NewSwapOnlyPolicy();
std::unique_ptr<Policy> NewCapuchinPolicy();
std::unique_ptr<Policy> NewSlackSwapPolicy();

// A swap needs an op between its last forward use and its first backward
// use to issue the prefetch from.
bool CanSwap(const Candidate& c);

// Rebuild time per byte: what recomputing costs for the memory it saves.
double RecomputeNsPerByte(const Candidate& c);

// Candidates passing `keep`, ordered by `less` (ties by production order).
std::vector<const Candidate*> OrderCandidates(
    const StepAnalysis& a, const std::function<bool(const Candidate&)>& keep,
    const std::function<bool(const Candidate&, const Candidate&)>& less);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_POLICIES_H_
