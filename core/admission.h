// What a request is estimated to cost before it is planned, and the check
// against the server's limits: a request that would run past
// --max_request_s or need more memory than --max_request_mb is refused up
// front with RESOURCE_EXHAUSTED and the estimate, instead of failing late
// (or taking the process past its memory limit).
//
//   CostEstimate cost = EstimateCost(graph, request_bytes, /*plans=*/3.2);
//   absl::Status s = CheckCost(cost, limits, "step.graph_inline");
//
// The constants are measurements of this planner on the reference machine
// (docs/RELIABILITY.md, "Admission by cost"), rounded up: the estimate is
// meant to be an upper bound for ordinary graphs, not a prediction.
#ifndef SLACKSWAP_CORE_ADMISSION_H_
#define SLACKSWAP_CORE_ADMISSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/graph.h"
#include "planner/policy.h"

namespace slackswap {

struct CostEstimate {
  int64_t bytes = 0;
  double seconds = 0;
};

// Graph elements the planner walks: ops, tensors and every input and output
// reference.
int64_t GraphElements(const Graph& g);

// For `plans` plannings of g (a policy's plan and its simulations; the sum
// of the policies' PolicyInfo::relative_cost over every budget planned),
// holding a request of `request_bytes` (in memory), plus `solver_seconds`
// the optimal policy's solver may run (its time limit per budget), with
// `ranks` copies of the per-element working memory (a node simulation's
// ranks each hold their own state of the step).
CostEstimate EstimateCost(const Graph& g, int64_t request_bytes, double plans,
                          double solver_seconds = 0, int32_t ranks = 1);

// The memory a parsed request holds: about 12 times its wire size
// (measured on graphs of 10^3 to 10^6 ops). Saturates.
int64_t ParsedRequestBytes(int64_t wire_bytes);

// How much planning a request asks for: plannings of its graph (each
// weighted by PolicyInfo::relative_cost) and seconds of the optimal
// policy's solver.
struct PlanningWork {
  double plans = 0;
  double solver_seconds = 0;
  // Steps simulated at once, each with its own working memory (a node
  // simulation's ranks); 1 otherwise.
  int32_t ranks = 1;
};

// A Plan request: each policy once at an activation budget, or up to
// kMaxSearchEvaluations times when its budget is searched (`searched`: the
// device or all memory; a solver's policy is then not planned), plus the
// bound when asked for at an activation budget.
PlanningWork PlanRequestWork(const std::vector<const PolicyInfo*>& policies,
                             bool searched, bool include_bound,
                             double optimal_time_limit_s);

// A Sweep: every policy at each of `budgets`, a bisection per policy when
// it asks the target question, and the bound per budget when asked for.
PlanningWork SweepWork(const std::vector<const PolicyInfo*>& policies,
                       int64_t budgets, bool asks_target, bool include_bound,
                       double optimal_time_limit_s);

// A Fit request: per profile, each policy's device search and the first
// policy's two bisections (the target, the least memory), each ending with
// one plan made in full.
PlanningWork FitWork(const std::vector<const PolicyInfo*>& policies,
                     int64_t profiles);

// A Simulate request: one simulation of each of `ranks` GPUs (1: one GPU;
// a node's ranks cost about that many simulations of one, in time and in
// working memory).
PlanningWork SimulateWork(int32_t ranks = 1);
// A Plan or Sweep request's `work` on a node of `ranks`: every judgment
// simulates every rank, and the same policies run once more for one GPU
// alone at each budget (the seed AlonePlan, core/node_planning.h, gives
// slackswap).
PlanningWork NodePlanWork(const PlanningWork& work, int32_t ranks);

// RESOURCE_EXHAUSTED naming `what`, the estimate and the limit when the
// estimate exceeds max_bytes or max_seconds (either 0: no limit).
absl::Status CheckCost(const CostEstimate& cost, int64_t max_bytes,
                       double max_seconds, const std::string& what);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_ADMISSION_H_
