#include "core/planning_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "core/admission.h"
#include "core/device_fit.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/node.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/budget_search.h"
#include "planner/policy.h"
#include "planner/relaxation.h"
#include "planner/version.h"

namespace slackswap {

PlanningCore::PlanningCore(CoreLimits limits, CoreObserver* observer,
                           GraphSource* graphs)
    : limits_(limits), observer_(observer), graphs_(graphs) {}

absl::Status PlanningCore::CheckRequestCost(
    const Graph& g, const google::protobuf::Message& req,
    const PlanningWork& work) const {
  if (limits_.max_request_bytes <= 0 && limits_.max_request_seconds <= 0) {
    return absl::OkStatus();
  }
  const int64_t held =
      ParsedRequestBytes(static_cast<int64_t>(req.ByteSizeLong()));
  return CheckCost(
      EstimateCost(g, held, work.plans, work.solver_seconds, work.ranks),
      limits_.max_request_bytes, limits_.max_request_seconds,
      absl::StrCat("the graph (", g.ops.size(), " ops, ", g.tensors.size(),
                   " tensors)"));
}

PlanningContext PlanningCore::Context(const Graph& g, const Hardware& hw,
                                      const StepAnalysis& analysis,
                                      int64_t budget,
                                      const StopFn& stop) const {
  PlanningContext ctx{g, hw, analysis, budget, stop};
  ctx.max_recompute_tasks = limits_.max_recompute_tasks;
  return ctx;
}

absl::StatusOr<Graph> PlanningCore::PrepareGraph(const v1::OperatorGraph& graph,
                                                 const StopFn& stop) const {
  return ResolveInlineGraph(graph, "graph", limits_, stop);
}

v1::ListHardwareProfilesResponse PlanningCore::ListHardwareProfiles() const {
  v1::ListHardwareProfilesResponse resp;
  for (const Hardware& hw : HardwareCatalog()) {
    *resp.add_profiles() = HardwareToProto(hw);
  }
  return resp;
}

v1::ListNodesResponse PlanningCore::ListNodes() const {
  v1::ListNodesResponse resp;
  for (const Node& node : NodeCatalog()) *resp.add_nodes() = NodeToProto(node);
  return resp;
}

v1::ServerInfoResponse PlanningCore::Info() const {
  v1::ServerInfoResponse info;
  info.set_version(Version());
  info.set_commit(Commit());
  for (const PolicyInfo& p : PolicyRegistry()) {
    v1::PolicyDescription* d = info.add_policies();
    d->set_name(p.name);
    d->set_summary(p.summary);
    d->set_unbudgeted_reference(p.unbudgeted_reference);
  }
  for (const std::string& w : WorkloadNames()) info.add_workloads(w);
  for (const Hardware& hw : HardwareCatalog()) {
    info.add_hardware_profiles(hw.name);
  }
  info.set_planner_version(PlannerVersion());
  std::string catalog;
  SerializeDeterministic(ListHardwareProfiles(), &catalog);
  info.set_hardware_catalog_sha256(Sha256Hex(Sha256::Of(catalog)));
  for (const std::string& n : NodeNames()) info.add_nodes(n);
  catalog.clear();
  SerializeDeterministic(ListNodes(), &catalog);
  info.set_node_catalog_sha256(Sha256Hex(Sha256::Of(catalog)));
  v1::ServerLimits* l = info.mutable_limits();
  l->set_max_graph_ops(limits_.max_graph_ops);
  l->set_max_graph_tensors(limits_.max_graph_tensors);
  l->set_max_workload_layers(limits_.max_workload_layers);
  l->set_max_timeline_points(limits_.max_timeline_points);
  l->set_max_sweep_points(limits_.max_sweep_points);
  l->set_max_event_ops(limits_.max_event_ops);
  l->set_max_fit_profiles(kMaxFitProfiles);
  return info;
}

namespace {

absl::StatusOr<v1::ListWorkloadsResponse> BuildWorkloadList() {
  v1::ListWorkloadsResponse resp;
  for (const std::string& name : WorkloadNames()) {
    SLACKSWAP_ASSIGN_OR_RETURN(TransformerConfig c, FindWorkload(name));
    SLACKSWAP_ASSIGN_OR_RETURN(Graph g, BuildTransformer(c));
    v1::WorkloadInfo* w = resp.add_workloads();
    w->set_name(name);
    w->set_layers(c.layers);
    w->set_hidden(c.hidden);
    w->set_heads(c.heads);
    w->set_ffn(c.ffn);
    w->set_seq(c.seq);
    w->set_batch(c.batch);
    w->set_ops(g.ops.size());
    w->set_saved_activation_bytes(g.index.saved_bytes);
  }
  return resp;
}

}  // namespace

absl::StatusOr<v1::ListWorkloadsResponse> PlanningCore::ListWorkloads() const {
  // The presets are fixed: their graphs are built once, on the first call.
  static const auto* const kList =
      new absl::StatusOr<v1::ListWorkloadsResponse>(BuildWorkloadList());
  return *kList;
}

absl::StatusOr<v1::GetWorkloadResponse> PlanningCore::GetWorkload(
    const v1::GetWorkloadRequest& req) const {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Graph g, ResolveWorkload(req.workload(), "workload", limits_));
  v1::GetWorkloadResponse resp;
  *resp.mutable_graph() = GraphToProto(g);
  return resp;
}

}  // namespace slackswap
