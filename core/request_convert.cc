#include "core/request_convert.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/format.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "io/convert.h"
#include "model/budget.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/policy.h"

namespace slackswap {

absl::Status InField(const std::string& field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

namespace {

absl::StatusOr<WorkloadOverrides> ResolveOverrides(const v1::WorkloadRef& ref,
                                                   const std::string& field,
                                                   const CoreLimits& limits) {
  WorkloadOverrides o;
  if (ref.has_batch()) o.batch = ref.batch();
  if (ref.has_seq()) o.seq = ref.seq();
  if (ref.has_layers()) {
    if (ref.layers() > limits.max_workload_layers) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ".layers: ", ref.layers(),
                       " exceeds the limit of ", limits.max_workload_layers));
    }
    o.layers = ref.layers();
  }
  if (ref.has_data_parallel()) {
    if (ref.data_parallel() < 1 || ref.data_parallel() > kMaxDataParallel) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".data_parallel must be in [1, ",
                       kMaxDataParallel, "] ranks, got ", ref.data_parallel()));
    }
    o.data_parallel = ref.data_parallel();
  }
  if (ref.has_fully_sharded()) {
    if (ref.fully_sharded() < 1 ||
        ref.fully_sharded() > kMaxFullyShardedRanks) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".fully_sharded must be in [1, ", kMaxFullyShardedRanks,
          "] ranks, got ", ref.fully_sharded()));
    }
    o.fully_sharded = ref.fully_sharded();
  }
  if (ref.has_tensor_parallel()) {
    if (ref.tensor_parallel() < 1 ||
        ref.tensor_parallel() > kMaxTensorParallel) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".tensor_parallel must be in [1, ", kMaxTensorParallel,
          "] ranks, got ", ref.tensor_parallel()));
    }
    o.tensor_parallel = ref.tensor_parallel();
  }
  if (ref.has_rank()) o.rank = ref.rank();
  if (!ref.attention().empty()) {
    absl::StatusOr<Attention> a = ParseAttention(ref.attention());
    if (!a.ok()) return InField(field + ".attention", a.status());
    o.attention = *a;
  }
  return o;
}

// INVALID_ARGUMENT for a message that set none of a oneof's fields: "step:
// set ..." for prefix "step.", just "set ..." for the request itself.
absl::Status NoneSet(const std::string& prefix, absl::string_view what) {
  if (prefix.empty()) return absl::InvalidArgumentError(what);
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(prefix).substr(0, prefix.size() - 1), ": ", what));
}

}  // namespace

namespace {

// RESOURCE_EXHAUSTED, naming `field`, for a built graph over the ops limit.
absl::Status CheckBuiltSize(const Graph& g, const std::string& field,
                            const CoreLimits& limits) {
  if (static_cast<int64_t>(g.ops.size()) > limits.max_graph_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ": ", g.ops.size(), " ops exceed the limit of ",
                     limits.max_graph_ops));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> BuildWorkloadIn(const std::string& name,
                                      const WorkloadOverrides& o,
                                      const std::string& field,
                                      const CoreLimits& limits) {
  absl::StatusOr<Graph> graph = BuildWorkload(name, o);
  if (!graph.ok()) return InField(field, graph.status());
  SLACKSWAP_RETURN_IF_ERROR(CheckBuiltSize(*graph, field, limits));
  return graph;
}

// What names a built workload's graph: the workload and every override,
// set or not (the catalog is compiled in, so equal keys build equal
// graphs).
std::string WorkloadKey(const std::string& name, const WorkloadOverrides& o) {
  std::string key = name;
  const auto add = [&key](const std::optional<int64_t>& v) {
    absl::StrAppend(&key, "|", v.has_value() ? absl::StrCat(*v) : "-");
  };
  add(o.batch);
  add(o.seq);
  add(o.layers);
  add(o.attention.has_value()
          ? std::optional<int64_t>(static_cast<int64_t>(*o.attention))
          : std::nullopt);
  add(o.data_parallel);
  add(o.fully_sharded);
  add(o.tensor_parallel);
  add(o.rank);
  return key;
}

// BuildWorkloadIn, reusing the graph `graphs` holds for the same workload
// and offering it the one built. The size limit is checked either way: a
// source may be shared by cores with other limits.
absl::StatusOr<std::shared_ptr<const Graph>> SharedWorkloadIn(
    const std::string& name, const WorkloadOverrides& o,
    const std::string& field, const CoreLimits& limits, GraphSource* graphs) {
  std::string key;
  if (graphs != nullptr) {
    key = WorkloadKey(name, o);
    if (std::shared_ptr<const Graph> held = graphs->FindWorkload(key)) {
      SLACKSWAP_RETURN_IF_ERROR(CheckBuiltSize(*held, field, limits));
      return held;
    }
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, BuildWorkloadIn(name, o, field, limits));
  auto built = std::make_shared<const Graph>(std::move(g));
  if (graphs != nullptr) graphs->HoldWorkload(key, built);
  return built;
}

}  // namespace

absl::StatusOr<Graph> ResolveWorkload(const v1::WorkloadRef& ref,
                                      const std::string& field,
                                      const CoreLimits& limits) {
  SLACKSWAP_ASSIGN_OR_RETURN(WorkloadOverrides o,
                             ResolveOverrides(ref, field, limits));
  return BuildWorkloadIn(ref.name(), o, field, limits);
}

absl::Status CheckFraction(const std::string& field, double fraction) {
  if (!std::isfinite(fraction) || fraction <= 0 ||
      fraction > kMaxBudgetFraction) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be in (0, ", kMaxBudgetFraction, "], got ",
                     fraction, " (a fraction of the unconstrained peak)"));
  }
  return absl::OkStatus();
}

absl::Status CheckGraphSize(int64_t ops, int64_t tensors,
                            const std::string& field,
                            const CoreLimits& limits) {
  if (ops > limits.max_graph_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ".ops: ", ops, " ops exceed the limit of ",
                     limits.max_graph_ops));
  }
  if (tensors > limits.max_graph_tensors) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ".tensors: ", tensors, " tensors exceed the limit of ",
        limits.max_graph_tensors));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> ResolveInlineGraph(const v1::OperatorGraph& g,
                                         const std::string& field,
                                         const CoreLimits& limits,
                                         const StopFn& stop) {
  SLACKSWAP_RETURN_IF_ERROR(
      CheckGraphSize(g.ops_size(), g.tensors_size(), field, limits));
  absl::StatusOr<Graph> graph = GraphFromProto(g, stop);
  if (!graph.ok()) {
    if (absl::IsCancelled(graph.status())) return graph.status();
    return InField(field, graph.status());
  }
  return graph;
}

absl::StatusOr<Hardware> ResolveHardware(const v1::HardwareProfile* inline_hw,
                                         const std::string* name,
                                         const std::string& prefix) {
  if (inline_hw != nullptr) {
    absl::StatusOr<Hardware> hw = HardwareFromProto(*inline_hw);
    if (!hw.ok()) return InField(prefix + "hardware_inline", hw.status());
    return hw;
  }
  if (name != nullptr) {
    absl::StatusOr<Hardware> hw = FindHardware(*name);
    if (!hw.ok()) return InField(prefix + "hardware_name", hw.status());
    return hw;
  }
  return NoneSet(prefix, "set hardware_inline or hardware_name");
}

absl::StatusOr<std::shared_ptr<const Graph>> ResolveGraph(
    const v1::OperatorGraph* inline_graph, const std::string* graph_sha256,
    const v1::WorkloadRef* workload, const std::string& prefix,
    const CoreLimits& limits, const StopFn& stop, GraphSource* graphs) {
  if (inline_graph != nullptr) {
    SLACKSWAP_ASSIGN_OR_RETURN(
        Graph g, ResolveInlineGraph(*inline_graph, prefix + "graph_inline",
                                    limits, stop));
    return std::make_shared<const Graph>(std::move(g));
  }
  if (graph_sha256 != nullptr) {
    const std::string field = prefix + "graph_sha256";
    if (!IsSha256Hex(*graph_sha256)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": want 64 lower-case hex digits, got ",
                       QuoteInput(*graph_sha256)));
    }
    std::shared_ptr<const Graph> stored =
        graphs == nullptr ? nullptr : graphs->Find(*graph_sha256);
    if (stored == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          field, ": no graph ", *graph_sha256,
          " is stored here (it expired, or another server holds it): send "
          "it with PutGraph or inline"));
    }
    return stored;
  }
  if (workload != nullptr) {
    const std::string field = prefix + "workload";
    SLACKSWAP_ASSIGN_OR_RETURN(WorkloadOverrides o,
                               ResolveOverrides(*workload, field, limits));
    return SharedWorkloadIn(workload->name(), o, field, limits, graphs);
  }
  return NoneSet(prefix, "set graph_inline, graph_sha256 or workload");
}

absl::StatusOr<Node> ResolveNode(const v1::NodeProfile* inline_node,
                                 const std::string* name,
                                 const std::string& prefix) {
  if (inline_node != nullptr) {
    absl::StatusOr<Node> node = NodeFromProto(*inline_node);
    if (node.ok()) return node;
    // NodeFromProto names the node first (`node "x": switches[2]...`); in a
    // request the field path says which node it is.
    const std::string head =
        absl::StrCat("node ", QuoteInput(inline_node->name()), ": ");
    absl::string_view message = node.status().message();
    if (absl::ConsumePrefix(&message, head)) {
      return absl::Status(node.status().code(),
                          absl::StrCat(prefix, "node_inline.", message));
    }
    return InField(prefix + "node_inline", node.status());
  }
  if (name != nullptr) {
    absl::StatusOr<Node> node = FindNode(*name);
    if (!node.ok()) {
      // FindNode's NOT_FOUND lists the catalog; a request's bad name is
      // bad input.
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "node_name: ", node.status().message()));
    }
    return node;
  }
  return NoneSet(prefix, "set node_inline or node_name");
}

namespace {

// The other ranks' graphs of a workload whose ranks differ (tensor
// parallelism with data parallelism or sharding: their collectives'
// groups), for ranks 1 to step.ranks - 1; rank 0's is the step's graph.
absl::Status ResolveRankGraphs(const v1::WorkloadRef& ref,
                               const CoreLimits& limits, const StopFn& stop,
                               GraphSource* graphs, Step& step) {
  const std::string field = "step.workload";
  SLACKSWAP_ASSIGN_OR_RETURN(WorkloadOverrides o,
                             ResolveOverrides(ref, field, limits));
  absl::StatusOr<TransformerConfig> config = WorkloadConfig(ref.name(), o);
  if (!config.ok()) return InField(field, config.status());
  if (!RanksDiffer(*config)) return absl::OkStatus();
  if (step.ranks > LayoutRanks(*config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step.ranks: ", step.ranks, " ranks run a layout of ",
        LayoutRanks(*config), " (tensor_parallel ", config->tensor_parallel,
        " x ", config->fully_sharded > 1 ? "fully_sharded " : "data_parallel ",
        std::max(config->data_parallel, config->fully_sharded), ")"));
  }
  step.rank_graphs.push_back(step.graph_holder);
  for (int32_t r = 1; r < step.ranks; ++r) {
    if (stop && stop()) {
      return absl::CancelledError("building the ranks' steps stopped");
    }
    o.rank = r;
    SLACKSWAP_ASSIGN_OR_RETURN(
        std::shared_ptr<const Graph> g,
        SharedWorkloadIn(ref.name(), o, field, limits, graphs));
    step.rank_graphs.push_back(std::move(g));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Step> ResolveStep(const v1::StepSpec& spec,
                                 const CoreLimits& limits, const StopFn& stop,
                                 GraphSource* graphs) {
  Step step;
  if (spec.node_case() == v1::StepSpec::NODE_NOT_SET) {
    if (spec.ranks() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step.ranks: ", spec.ranks(),
          " given without a node; set step.node_name or step.node_inline"));
    }
  } else {
    const bool by_name = spec.node_case() == v1::StepSpec::kNodeName;
    const std::string node_field =
        by_name ? "step.node_name" : "step.node_inline";
    SLACKSWAP_ASSIGN_OR_RETURN(
        Node node, ResolveNode(by_name ? nullptr : &spec.node_inline(),
                               by_name ? &spec.node_name() : nullptr, "step."));
    if (spec.ranks() < 0 || spec.ranks() > node.num_gpus) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step.ranks must be in [0, ", node.num_gpus, "] (", node_field, " ",
          QuoteInput(node.name), " has ", node.num_gpus,
          " GPUs; 0: all of them), got ", spec.ranks()));
    }
    step.ranks = spec.ranks() == 0 ? node.num_gpus : spec.ranks();
    if (spec.hardware_case() != v1::StepSpec::HARDWARE_NOT_SET) {
      SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, ResolveHardwareOf(spec, "step."));
      // Equal profiles are equal messages (HardwareToProto sets every field).
      if (!google::protobuf::util::MessageDifferencer::Equals(
              HardwareToProto(hw), HardwareToProto(node.gpu))) {
        const std::string hw_field = spec.has_hardware_inline()
                                         ? "step.hardware_inline"
                                         : "step.hardware_name";
        return absl::InvalidArgumentError(
            absl::StrCat(hw_field, ": ", QuoteInput(hw.name),
                         " is not the GPU of ", node_field, " ",
                         QuoteInput(node.name), " (", QuoteInput(node.gpu.name),
                         "); leave the hardware out to use the node's GPU"));
      }
    }
    step.hw = node.gpu;
    step.node = std::move(node);
  }
  if (step.node.has_value() && spec.has_workload() &&
      spec.workload().has_rank()) {
    return absl::InvalidArgumentError(
        "step.workload.rank: a step on a node builds every rank's step; "
        "leave rank out");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(
      step.graph_holder, ResolveGraphOf(spec, "step.", limits, stop, graphs));
  step.graph_from_source = graphs != nullptr && !spec.has_graph_inline();
  if (!step.node.has_value()) {
    SLACKSWAP_ASSIGN_OR_RETURN(step.hw, ResolveHardwareOf(spec, "step."));
  } else if (spec.has_workload()) {
    SLACKSWAP_RETURN_IF_ERROR(
        ResolveRankGraphs(spec.workload(), limits, stop, graphs, step));
  }
  return step;
}

absl::StatusOr<int64_t> ResolveBudget(bool has_bytes, int64_t bytes,
                                      bool has_fraction, double fraction,
                                      const Graph& g, bool optional) {
  if (has_bytes) {
    if (bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("budget_bytes must be > 0, got ", bytes));
    }
    return bytes;
  }
  if (has_fraction) {
    SLACKSWAP_RETURN_IF_ERROR(CheckFraction("budget_fraction", fraction));
    return Budget::Fraction(fraction).Resolve(g.index.saved_bytes);
  }
  if (optional) return 0;
  return absl::InvalidArgumentError(
      "budget: set budget_bytes or budget_fraction");
}

absl::StatusOr<std::vector<const PolicyInfo*>> ResolvePolicies(
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::vector<const PolicyInfo*> out;
  if (names.empty()) {
    for (const PolicyInfo& p : PolicyRegistry()) {
      if (p.in_default_set) out.push_back(&p);
    }
    return out;
  }
  if (names.size() > kMaxPolicyNames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policies: ", names.size(), " names; at most ", kMaxPolicyNames,
        " (there are ", PolicyRegistry().size(), " policies)"));
  }
  for (int i = 0; i < names.size(); ++i) {
    absl::StatusOr<const PolicyInfo*> p = FindPolicy(names[i]);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policies[", i, "]: ", p.status().message()));
    }
    // A name given twice is planned once.
    if (std::find(out.begin(), out.end(), *p) == out.end()) out.push_back(*p);
  }
  // Registry order (the registry is one vector: addresses are its order),
  // whatever the request's: equal sets of names are equal questions, with
  // equal answers (and one cache entry).
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<double> ResolveOptimalTimeLimit(bool has_seconds,
                                               double seconds) {
  if (!has_seconds) return PlanningContext::kDefaultOptimalTimeLimitS;
  if (!(seconds > 0 && seconds <= 600)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimal_time_limit_s must be in (0, 600], got ", seconds));
  }
  return seconds;
}

absl::Status CheckTimelinePoints(int32_t points, const CoreLimits& limits) {
  if (points < 0 || points > limits.max_timeline_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeline_points must be in [0, ",
                     limits.max_timeline_points, "], got ", points));
  }
  return absl::OkStatus();
}

absl::Status CheckEvents(bool include_events, const Graph& g,
                         const CoreLimits& limits, absl::string_view field) {
  if (include_events &&
      static_cast<int64_t>(g.ops.size()) > limits.max_event_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": the graph has ", g.ops.size(),
        " ops; events are served for at most ", limits.max_event_ops));
  }
  return absl::OkStatus();
}

int32_t RecordedTimelinePoints(int32_t requested, bool render_svg) {
  return render_svg && requested == 0 ? kSvgTimelinePoints : requested;
}

void DropUnaskedRecords(bool include_events, int32_t timeline_points,
                        v1::SimulationResult* r) {
  if (!include_events) r->clear_events();
  if (timeline_points == 0) r->clear_memory_timeline();
}

void DropUnaskedRecords(bool include_events, int32_t timeline_points,
                        v1::NodeSimulation* n) {
  for (v1::RankResult& rank : *n->mutable_ranks()) {
    DropUnaskedRecords(include_events, timeline_points, rank.mutable_result());
  }
  if (include_events) return;
  for (v1::LinkUsage& link : *n->mutable_links()) link.clear_load();
}

}  // namespace slackswap
