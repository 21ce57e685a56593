// Validates the parts requests share and converts them to domain structs:
// the step (graph, and hardware or a node), the budget and the policy list.
// Errors are INVALID_ARGUMENT (or RESOURCE_EXHAUSTED for size limits) and
// name the request field, e.g. "step.workload.name: unknown workload 'gpt5'".
//
//   absl::StatusOr<Step> step = ResolveStep(req.step(), limits);
//   absl::StatusOr<int64_t> budget = ResolveBudget(
//       req.budget_case() == v1::PlanRequest::kBudgetBytes, req.budget_bytes(),
//       req.budget_case() == v1::PlanRequest::kBudgetFraction,
//       req.budget_fraction(), step->graph(), /*optional=*/false);
#ifndef SLACKSWAP_CORE_REQUEST_CONVERT_H_
#define SLACKSWAP_CORE_REQUEST_CONVERT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/graph_source.h"
#include "core/planning_core.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/workloads.h"
#include "planner/policy.h"

namespace slackswap {

// A step's graph is shared, never copied: converted for this request, or
// the one a graph store holds (a 10^6-op graph is hundreds of megabytes).
struct Step {
  std::shared_ptr<const Graph> graph_holder;
  // The GPU: StepSpec's hardware, or the node's GPU.
  Hardware hw;
  // With StepSpec's node: the node, and the ranks that run the step (GPUs
  // 0 to ranks - 1; StepSpec.ranks, or every GPU when it is 0).
  std::optional<Node> node;
  int32_t ranks = 0;
  // On a node, when the ranks run different graphs (a workload combining
  // tensor parallelism with data parallelism or sharding, whose ranks'
  // collectives name different groups): rank r's graph, [0] the step's
  // graph. Empty: every rank runs graph().
  std::vector<std::shared_ptr<const Graph>> rank_graphs;
  // graph_holder came from the GraphSource or was offered to it (a stored
  // graph's digest, a workload): results for it may be held there too.
  bool graph_from_source = false;

  const Graph& graph() const { return *graph_holder; }
  const Graph& graph_of(int32_t rank) const {
    return rank_graphs.empty() ? *graph_holder
                               : *rank_graphs[static_cast<size_t>(rank)];
  }
};

// `stop` is polled while an inline graph is converted. A graph named by
// digest comes from `graphs` (NOT_FOUND when it is null or lacks it); a
// workload's graphs (each rank's, on a node) are taken from `graphs` when
// it holds them (FindWorkload), else built and offered to it. With
// a node (ResolveNode), hardware may be left out; given, it must be the
// node's GPU.
absl::StatusOr<Step> ResolveStep(const v1::StepSpec& spec,
                                 const CoreLimits& limits,
                                 const StopFn& stop = nullptr,
                                 GraphSource* graphs = nullptr);

// RESOURCE_EXHAUSTED when a graph of `ops` and `tensors` exceeds the
// limits, naming `field`.ops or `field`.tensors.
absl::Status CheckGraphSize(int64_t ops, int64_t tensors,
                            const std::string& field, const CoreLimits& limits);

// Converts an inline graph (from a request or for the graph store) under
// the limits (CheckGraphSize); errors name `field`.
absl::StatusOr<Graph> ResolveInlineGraph(const v1::OperatorGraph& g,
                                         const std::string& field,
                                         const CoreLimits& limits,
                                         const StopFn& stop);

// The graph of whichever of an inline graph, a stored graph's digest (from
// `graphs`; NOT_FOUND when it is null or lacks it) or a workload (held by
// `graphs` or built and offered to it) is non-null; errors name prefix + the
// field (prefix e.g. "step."). None: INVALID_ARGUMENT.
absl::StatusOr<std::shared_ptr<const Graph>> ResolveGraph(
    const v1::OperatorGraph* inline_graph, const std::string* graph_sha256,
    const v1::WorkloadRef* workload, const std::string& prefix,
    const CoreLimits& limits, const StopFn& stop, GraphSource* graphs);

// An inline profile (validated) or a catalog name, whichever is non-null;
// errors name prefix + "hardware_inline" or "hardware_name" (prefix e.g.
// "step."). Neither: INVALID_ARGUMENT.
absl::StatusOr<Hardware> ResolveHardware(const v1::HardwareProfile* inline_hw,
                                         const std::string* name,
                                         const std::string& prefix);

// An inline node (NodeFromProto, validated) or a node catalog name,
// whichever is non-null; errors name prefix + "node_inline" and the node's
// own field (e.g. "step.node_inline.switches[2].gpus[1]: GPU 9 does not
// exist (num_gpus 8)") or prefix + "node_name" (listing the catalog's
// names). Neither: INVALID_ARGUMENT.
absl::StatusOr<Node> ResolveNode(const v1::NodeProfile* inline_node,
                                 const std::string* name,
                                 const std::string& prefix);

// The same for a message with StepSpec's `graph` oneof (StepSpec,
// FitRequest) and its `hardware` oneof (StepSpec, FitProfile).
template <typename Message>
absl::StatusOr<std::shared_ptr<const Graph>> ResolveGraphOf(
    const Message& m, const std::string& prefix, const CoreLimits& limits,
    const StopFn& stop, GraphSource* graphs) {
  return ResolveGraph(
      m.has_graph_inline() ? &m.graph_inline() : nullptr,
      m.graph_case() == Message::kGraphSha256 ? &m.graph_sha256() : nullptr,
      m.has_workload() ? &m.workload() : nullptr, prefix, limits, stop, graphs);
}
template <typename Message>
absl::StatusOr<Hardware> ResolveHardwareOf(const Message& m,
                                           const std::string& prefix) {
  return ResolveHardware(
      m.has_hardware_inline() ? &m.hardware_inline() : nullptr,
      m.hardware_case() == Message::kHardwareName ? &m.hardware_name()
                                                  : nullptr,
      prefix);
}

// Builds the named workload with the reference's overrides; errors name
// `field` (e.g. "step.workload"). RESOURCE_EXHAUSTED above limits.
absl::StatusOr<Graph> ResolveWorkload(const v1::WorkloadRef& ref,
                                      const std::string& field,
                                      const CoreLimits& limits);

// INVALID_ARGUMENT naming `field` unless `fraction` is in
// (0, kMaxBudgetFraction].
absl::Status CheckFraction(const std::string& field, double fraction);

// Bytes from a budget oneof: `bytes` if set, else `fraction` of the graph's
// unconstrained peak. `has_*` say which was set; neither: no limit (0) when
// `optional`, else an error.
absl::StatusOr<int64_t> ResolveBudget(bool has_bytes, int64_t bytes,
                                      bool has_fraction, double fraction,
                                      const Graph& g, bool optional);

// The most entries `policies` may list (names given twice count twice).
inline constexpr int kMaxPolicyNames = 64;

// Empty means the default set (PolicyInfo::in_default_set), in registry
// order; unknown names are errors naming the index; a name given twice is
// planned once.
absl::StatusOr<std::vector<const PolicyInfo*>> ResolvePolicies(
    const google::protobuf::RepeatedPtrField<std::string>& names);

absl::Status CheckTimelinePoints(int32_t points, const CoreLimits& limits);

// Events grow with the graph: RESOURCE_EXHAUSTED above limits.max_event_ops,
// naming `field` (the request field that asks for them).
absl::Status CheckEvents(bool include_events, const Graph& g,
                         const CoreLimits& limits,
                         absl::string_view field = "include_events");

// The timeline points a simulation records: the request's, or, for a
// picture (render_svg) of a request that asks for none, enough for the
// picture's pixel columns.
inline constexpr int32_t kSvgTimelinePoints = 2'000;
int32_t RecordedTimelinePoints(int32_t requested, bool render_svg);

// A result recorded for a picture as the response gives it: its events
// only with include_events, its timeline only with timeline_points.
void DropUnaskedRecords(bool include_events, int32_t timeline_points,
                        v1::SimulationResult* r);
// The same for every rank of a node, and the links' load series, which
// are recorded with the events (for the trace and the picture).
void DropUnaskedRecords(bool include_events, int32_t timeline_points,
                        v1::NodeSimulation* n);

// The optimal policy's time limit: `seconds` when set, in (0, 600], else
// the default (2 s).
absl::StatusOr<double> ResolveOptimalTimeLimit(bool has_seconds,
                                               double seconds);

// Prefixes a status message with the request field it concerns.
absl::Status InField(const std::string& field, const absl::Status& s);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_REQUEST_CONVERT_H_
