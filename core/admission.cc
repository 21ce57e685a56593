#include "core/admission.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/saturating.h"

namespace slackswap {
namespace {

// Peak working memory of planning one request, per graph element: the
// domain graph, the analysis, the schedules and results the searches hold.
// Measured 200-350 bytes on chains, fan-outs and transformers.
constexpr int64_t kBytesPerElement = 400;
// Fixed per request: the catalog, the response, allocator slack.
constexpr int64_t kBytesPerRequest = 4 << 20;
// One plan of the most expensive heuristic (slackswap), per graph element:
// measured 1.2-2.3 microseconds (bench/planner_bench, 4,000 to 670,000
// elements), since it compares, repairs and refines every candidate.
constexpr double kSecondsPerElementPlan = 3e-6;

}  // namespace

int64_t GraphElements(const Graph& g) {
  int64_t n = static_cast<int64_t>(g.ops.size() + g.tensors.size());
  for (const Op& op : g.ops) {
    n += static_cast<int64_t>(op.inputs.size() + op.outputs.size());
  }
  return n;
}

CostEstimate EstimateCost(const Graph& g, int64_t request_bytes, double plans,
                          double solver_seconds) {
  const int64_t elements = GraphElements(g);
  CostEstimate cost;
  cost.bytes = SaturatingAdd(SaturatingAdd(kBytesPerRequest, request_bytes),
                             SaturatingMul(elements, kBytesPerElement));
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
