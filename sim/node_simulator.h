// The node simulator: every rank of a node runs its own lowered schedule
// under the single-GPU semantics (docs/SIMULATOR.md), all in one event
// loop, and what the ranks share is shared: each host copy is a flow over
// its GPU's link, its PCIe switch's uplink and its socket's memory, at the
// max-min fair rate among the flows in flight (sim/flow_network.h), and the
// host copies of the ranks behind one socket hold that socket's pinned
// memory together.
//
//   std::vector<RankStep> ranks;
//   for (int32_t gpu = 0; gpu < 8; ++gpu) {
//     ranks.push_back({.gpu = gpu, .graph = &g, .durations = &d,
//                      .schedule = &schedule});
//   }
//   absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, opts);
//   if (r.ok() && r->feasible) Print(r->throughput_retained);
//
// One rank on a node whose uplinks and sockets never limit gives what
// Simulate gives for its GPU, bit for bit; ranks whose shared links never
// limit each give their own single-GPU result.
#ifndef SLACKSWAP_SIM_NODE_SIMULATOR_H_
#define SLACKSWAP_SIM_NODE_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/node.h"
#include "sim/link_load_recorder.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace slackswap {

// One rank: the GPU of the node it runs on, and what it runs.
struct RankStep {
  int32_t gpu = 0;
  const Graph* graph = nullptr;
  const OpDurations* durations = nullptr;
  const Schedule* schedule = nullptr;
};

// What one shared link carried over the step.
struct LinkUsage {
  std::string name;  // "GPU 3 link", "switch sw0 uplink", "socket cpu0 memory"
  // The ranks whose host copies cross it (ascending); none for NVLink and
  // the inter-socket link, which carry collectives only.
  std::vector<int32_t> ranks;
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  // Bytes moved over (one-way rate x the node's step): the share of the
  // step's capacity used; 0 for a link that never limits.
  double h2d_utilization = 0;
  double d2h_utilization = 0;
  // With SimOptions::record_link_load: the bytes per ns it carried each way
  // over the step, host copies and collectives' transfers alike (each from
  // the end of its latency); empty otherwise, or when nothing crossed it.
  std::vector<LinkLoadPoint> load;
};

struct NodeSimResult {
  bool feasible = true;
  // Names the rank (and its GPU) whose plan could not run.
  std::string infeasible_reason;
  // The slowest rank's step, and the slowest rank's ideal one.
  int64_t step_ns = 0;
  int64_t ideal_step_ns = 0;
  double throughput_retained = 0;
  // In the order of the ranks given. Each is what Simulate reports for one
  // GPU (its peak_pinned_host_bytes: that rank's own host copies).
  std::vector<SimResult> ranks;
  // The links the ranks' copies crossed: each used GPU's link, then the
  // switches' uplinks, then the sockets' memory, in index order.
  std::vector<LinkUsage> links;
  // Per socket: the most pinned memory its ranks held at once.
  std::vector<int64_t> peak_pinned_bytes_per_socket;
  int64_t events_processed = 0;
};

// REQUIRES: ValidateNode(node) ok; every rank's graph indexed, durations
// for its graph on node.gpu, schedule lowered from a plan for that graph.
// Errors: INVALID_ARGUMENT naming the field for no ranks, more ranks than
// GPUs, a GPU index out of range or used twice, a missing graph, durations
// or schedule; CANCELLED when opts.should_stop said so. An infeasible plan
// on any rank is a result, naming the rank. opts (budget, timeline, events,
// device) applies to every rank; record_link_load to the links.
absl::StatusOr<NodeSimResult> SimulateNode(const Node& node,
                                           absl::Span<const RankStep> ranks,
                                           const SimOptions& opts);

// The rank whose result stands for the node's: the first whose own plan
// could not run when the step is infeasible (the others say they stopped
// with the node), else the slowest (the first of equals). REQUIRES:
// r.ranks not empty.
size_t ReportedRank(const NodeSimResult& r);

// The node's step as one result: the reported rank's, with the node's
// feasibility and reason (and no throughput when infeasible). REQUIRES:
// r.ranks not empty.
SimResult ReportedResult(const NodeSimResult& r);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_NODE_SIMULATOR_H_
