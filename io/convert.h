// Converts between the wire/file messages (proto/slackswap/v1) and the core's
// domain structs, once, at the boundary. Conversions into the domain validate
// and name the offending message field, op or tensor.
//
//   absl::StatusOr<Graph> g = GraphFromProto(graph_pb);   // indexed, valid
//   v1::SimulationResult out = ResultToProto(result, *g);
#ifndef SLACKSWAP_IO_CONVERT_H_
#define SLACKSWAP_IO_CONVERT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/stop.h"
#include "common/text.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/plan.h"
#include "sim/node_simulator.h"
#include "sim/simulator.h"
#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/hardware.pb.h"
#include "slackswap/v1/node.pb.h"
#include "slackswap/v1/plan.pb.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Maps ids to indices, rejects duplicate and dangling ids and unknown enum
// values, then runs IndexGraph. `stop` is polled: true ends it with
// CANCELLED.
absl::StatusOr<Graph> GraphFromProto(const v1::OperatorGraph& pb,
                                     const StopFn& stop = nullptr);

// GraphFromProto one tensor and one op at a time, for a graph that is never
// a message as a whole (io/graph_file.h streams one from a file):
//
//   GraphConverter c(stop);
//   for (...) SLACKSWAP_RETURN_IF_ERROR(c.AddTensor(tensor_pb));
//   for (...) SLACKSWAP_RETURN_IF_ERROR(c.AddOp(op_pb));
//   absl::StatusOr<Graph> g = std::move(c).Finish();
//
// Given every tensor before any op, the checks run in GraphFromProto's
// order, with its messages (elements are numbered in the order added).
// After an error, the converter is done with.
class GraphConverter {
 public:
  explicit GraphConverter(const StopFn& stop);
  GraphConverter(const GraphConverter&) = delete;
  GraphConverter& operator=(const GraphConverter&) = delete;

  // Room for this many tensors and ops (a hint).
  void Reserve(int64_t tensors, int64_t ops);
  void SetNames(std::string name, std::string description);
  // The next tensor. `t` need not outlive the call. REQUIRES: no op added.
  absl::Status AddTensor(const v1::Tensor& t);
  // The next op; the first one resolves the tensors' rebuild recipes.
  absl::Status AddOp(const v1::Op& o);
  // Indexes the graph (IndexGraph).
  absl::StatusOr<Graph> Finish() &&;

  // Wire ids to indices. Ids are usually 0, 1, 2... in order (or another
  // contiguous run): those need no table. Public for the converter's
  // helpers; not part of its interface.
  class IdIndex {
   public:
    void Reserve(int64_t n);
    // Gives `id` the next index; false (and `*used` its index) if taken.
    bool Add(int64_t id, int32_t* used);
    // The index of `id`, or -1.
    int32_t Find(int64_t id) const;

   private:
    int32_t size_ = 0;
    // While true, the ids so far are first_, first_ + 1, ... in order.
    bool run_ = true;
    int64_t first_ = 0;
    int64_t reserve_ = 0;
    absl::flat_hash_map<int64_t, int32_t> map_;
  };

 private:
  absl::Status ResolveRebuilds();

  StopPoller poller_;
  const StopFn& stop_;
  TextPool text_;
  Graph g_;
  IdIndex tensor_index_;
  IdIndex op_index_;
  // Each tensor's rebuild recipe, resolved once every tensor is known (its
  // inputs may be tensors added after it): tensor index, recipe.
  std::vector<std::pair<int32_t, v1::Rebuild>> rebuilds_;
  bool rebuilds_resolved_ = false;
};
v1::OperatorGraph GraphToProto(const Graph& g);

// Runs ValidateHardware.
absl::StatusOr<Hardware> HardwareFromProto(const v1::HardwareProfile& pb);
v1::HardwareProfile HardwareToProto(const Hardware& hw);

// The GPU from gpu_inline (HardwareFromProto) or gpu_name (the hardware
// catalog), then ValidateNode; errors name the field, e.g.
// `node "x": switches[2].gpus[1]: GPU 9 does not exist (num_gpus 8)`.
absl::StatusOr<Node> NodeFromProto(const v1::NodeProfile& pb);
// The GPU goes inline (gpu_inline), so that the message stands alone.
v1::NodeProfile NodeToProto(const Node& node);

// REQUIRES: g indexed. Tensor and op ids are the graph's external ids.
absl::StatusOr<Plan> PlanFromProto(const v1::Plan& pb, const Graph& g);
// A decision per saved activation, or only per moved one unless
// `include_kept` (a tensor without a decision is kept).
v1::Plan PlanToProto(const Plan& plan, const Graph& g,
                     const std::string& hardware_name,
                     bool include_kept = true);

v1::SimulationResult ResultToProto(const SimResult& r, const Graph& g);
// Each rank's result as ResultToProto (its graph and GPU from `ranks`, the
// steps r was simulated from), the links and the sockets' pinned peaks.
// REQUIRES: r is SimulateNode(node, ranks, ...)'s.
v1::NodeSimulation NodeResultToProto(const NodeSimResult& r, const Node& node,
                                     absl::Span<const RankStep> ranks);
v1::DeviceMemory DeviceToProto(const DeviceReport& d);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_CONVERT_H_
