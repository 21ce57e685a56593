// Test-only: the grid of node plans docs/PLANNERS.md's node tables are
// computed over ("Plans for a node", "Staggered plans"): each 8-GPU node
// with two GPUs per switch, DDP and FSDP over its 8 ranks, the reference
// workloads, budgets 0.3 and 0.5 of each rank's activation peak.
//
//   for (const NodePlanCase& c : NodePlanCases()) {
//     v1::StepSpec step = c.Step(/*on_node=*/true);
//   }
#ifndef SLACKSWAP_TESTING_NODE_PLAN_CASES_H_
#define SLACKSWAP_TESTING_NODE_PLAN_CASES_H_

#include <string>
#include <vector>

#include "slackswap/v1/planner_service.pb.h"

namespace slackswap::testutil {

struct NodePlanCase {
  std::string node;
  std::string layout;  // "DDP" or "FSDP"
  std::string workload;
  double budget = 0;
  static constexpr int32_t kRanks = 8;

  // The workload in its layout over kRanks, on the node (or its GPU alone).
  v1::StepSpec Step(bool on_node) const;
};

// In the tables' order. bert-large has no FSDP step: FSDP cannot
// recompute a post-norm encoder's layers (model/transformer.h).
std::vector<NodePlanCase> NodePlanCases();

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_NODE_PLAN_CASES_H_
