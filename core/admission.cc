#include "core/admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/saturating.h"
#include "planner/budget_search.h"

namespace slackswap {
namespace {

// Peak working memory of planning one request, per graph element: the
// domain graph, the analysis, the schedules and results the searches hold.
// Measured 200-362 bytes: every default policy at budget 0.3 on a
// 200,000-link chain 311, a 400,000-op forward chain 280, a 200,000-wide
// fan-out 362, gpt2-xl at 1,000 and 10,000 layers 200 and 232 (slackswap
// alone 201): PlanStep's peak RSS above the parsed request's, each in a
// fresh process. The judgments its policies share come on top: capped per
// element and in all (JudgeMemoCapBytes, planner/policy.h).
constexpr int64_t kBytesPerElement = 400;
// Fixed per request: the catalog, the response, allocator slack.
constexpr int64_t kBytesPerRequest = 4 << 20;
// One plan of the most expensive heuristic (slackswap), per graph element:
// the whole request (`slackswap plan --graph FILE --policy slackswap`, the
// file read and converted, the device fit reported), wall time, planner
// version 4: gpt2-xl of 1,000, 10,000 and 41,666 layers (160,059,
// 1,600,059 and 6,666,619 elements) 1.1, 2.0 and 1.1 us at budget 0.5, and
// 2.9, 4.7 and 4.1 us at 0.3, where the search judges more levels on more
// recomputes. A 200,000-link chain: 0.9 us at 0.5, 7.6 us at 0.3 (its
// chains of recomputes lower long), the one shape measured above this.
constexpr double kSecondsPerElementPlan = 5e-6;

// A parsed request's memory per byte of its wire form (the message, parsed
// on an arena by the server: the domain graph's layout does not change it).
constexpr int64_t kParsedBytesPerWireByte = 12;

// The LP bound's cost beside one slackswap plan of the same graph, from the
// request's best plan as the core starts it (bench/planner_bench: 8 to 18
// times on the reference workloads, 11 on a 10,000-op step; from scratch,
// which only a request without a plan the model accepts pays, 25 to 220).
constexpr double kBoundRelativeCost = 60;

// Plannings of one bisection for a sweep's target answer: to 0.1% of the
// peak from the swept points' bracket.
constexpr double kTargetBisectionPlans = 12;

// One simulation costs about a quarter of planning `ideal`.
constexpr double kSimulationPlans = 0.25;

}  // namespace

int64_t ParsedRequestBytes(int64_t wire_bytes) {
  return SaturatingMul(wire_bytes, kParsedBytesPerWireByte);
}

PlanningWork PlanRequestWork(const std::vector<const PolicyInfo*>& policies,
                             bool searched, bool include_bound,
                             double optimal_time_limit_s) {
  PlanningWork work;
  for (const PolicyInfo* policy : policies) {
    if (searched && policy->may_be_unavailable) continue;
    work.plans +=
        policy->relative_cost *
        (searched && !policy->unbudgeted_reference ? kMaxSearchEvaluations : 1);
    if (policy->uses_solver_time && !searched) {
      work.solver_seconds += optimal_time_limit_s;
    }
  }
  if (include_bound && !searched) work.plans += kBoundRelativeCost;
  return work;
}

PlanningWork SweepWork(const std::vector<const PolicyInfo*>& policies,
                       int64_t budgets, bool asks_target, bool include_bound,
                       double optimal_time_limit_s) {
  PlanningWork work;
  const double n = static_cast<double>(budgets);
  for (const PolicyInfo* policy : policies) {
    work.plans += policy->relative_cost;
    if (policy->uses_solver_time) {
      work.solver_seconds += optimal_time_limit_s * n;
    }
  }
  work.plans *= n + (asks_target ? kTargetBisectionPlans : 0);
  if (include_bound) work.plans += kBoundRelativeCost * n;
  return work;
}

PlanningWork FitWork(const std::vector<const PolicyInfo*>& policies,
                     int64_t profiles) {
  PlanningWork work;
  if (policies.empty()) return work;
  for (const PolicyInfo* p : policies) {
    work.plans += p->relative_cost * kMaxSearchEvaluations;
  }
  // The two bisections of the first policy, each planning the budget it
  // found once more in full.
  work.plans +=
      policies.front()->relative_cost * (2 * kMaxSearchEvaluations + 2);
  work.plans *= static_cast<double>(profiles);
  return work;
}

PlanningWork SimulateWork(int32_t ranks) {
  ranks = std::max(ranks, 1);
  return {
      .plans = kSimulationPlans * ranks, .solver_seconds = 0, .ranks = ranks};
}

PlanningWork NodePlanWork(const PlanningWork& work, int32_t ranks) {
  ranks = std::max(ranks, 1);
  return {.plans = work.plans * (ranks + 1),
          .solver_seconds = work.solver_seconds * 2,
          .ranks = ranks};
}

int64_t GraphElements(const Graph& g) {
  int64_t n = static_cast<int64_t>(g.ops.size() + g.tensors.size());
  for (const Op& op : g.ops) {
    n += static_cast<int64_t>(op.inputs.size() + op.outputs.size());
  }
  return n;
}

CostEstimate EstimateCost(const Graph& g, int64_t request_bytes, double plans,
                          double solver_seconds, int32_t ranks) {
  const int64_t elements = GraphElements(g);
  CostEstimate cost;
  cost.bytes = SaturatingAdd(
      SaturatingAdd(kBytesPerRequest, request_bytes),
      SaturatingAdd(SaturatingMul(SaturatingMul(elements, kBytesPerElement),
                                  std::max<int64_t>(ranks, 1)),
                    JudgeMemoCapBytes(elements)));
  cost.seconds =
      static_cast<double>(elements) * kSecondsPerElementPlan * plans +
      solver_seconds;
  return cost;
}

absl::Status CheckCost(const CostEstimate& cost, int64_t max_bytes,
                       double max_seconds, const std::string& what) {
  if (max_bytes > 0 && cost.bytes > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": planning it needs an estimated ", FormatBytes(cost.bytes),
        " of memory; this server allows ", FormatBytes(max_bytes),
        " per request (--max_request_mb)"));
  }
  if (max_seconds > 0 && cost.seconds > max_seconds) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": planning it would take an estimated ",
        absl::StrFormat("%.1f", cost.seconds), " s; this server allows ",
        max_seconds, " s per request (--max_request_s)"));
  }
  return absl::OkStatus();
}

}  // namespace slackswap
