// Converts between the wire/file messages (proto/slackswap/v1) and the core's
// domain structs, once, at the boundary. Conversions into the domain validate
// and name the offending message field, op or tensor.
//
//   absl::StatusOr<Graph> g = GraphFromProto(graph_pb);   // indexed, valid
//   v1::SimulationResult out = ResultToProto(result, *g);
#ifndef SLACKSWAP_IO_CONVERT_H_
#define SLACKSWAP_IO_CONVERT_H_

#include "absl/status/statusor.h"
#include "common/stop.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/plan.h"
#include "sim/simulator.h"
#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/hardware.pb.h"
#include "slackswap/v1/plan.pb.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Maps ids to indices, rejects duplicate and dangling ids and unknown enum
// values, then runs IndexGraph. `stop` is polled: true ends it with
// CANCELLED.
absl::StatusOr<Graph> GraphFromProto(const v1::OperatorGraph& pb,
                                     const StopFn& stop = nullptr);
v1::OperatorGraph GraphToProto(const Graph& g);

// Runs ValidateHardware.
absl::StatusOr<Hardware> HardwareFromProto(const v1::HardwareProfile& pb);
v1::HardwareProfile HardwareToProto(const Hardware& hw);

// REQUIRES: g indexed. Tensor and op ids are the graph's external ids.
absl::StatusOr<Plan> PlanFromProto(const v1::Plan& pb, const Graph& g);
// A decision per saved activation, or only per moved one unless
// `include_kept` (a tensor without a decision is kept).
v1::Plan PlanToProto(const Plan& plan, const Graph& g,
                     const std::string& hardware_name,
                     bool include_kept = true);

v1::SimulationResult ResultToProto(const SimResult& r, const Graph& g);
v1::DeviceMemory DeviceToProto(const DeviceReport& d);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_CONVERT_H_
