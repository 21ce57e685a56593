// A node: N GPUs of one hardware profile and what they share (PCIe switch
// uplinks, the sockets' host memory and pinned memory, the GPU-to-GPU
// fabric, NICs), in core units (bytes, nanoseconds, bytes per nanosecond),
// and the built-in catalog of nodes. docs/SIMULATOR.md ("The node") says
// how the simulator uses each field.
//
//   absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
//   // The switch GPU 3 sits behind, and the socket that switch hangs off.
//   int32_t sw = node->SwitchOf(3);
//   int32_t socket = node->switches[sw].socket;
//   int64_t pinned = node->sockets[socket].pinned_host_memory_bytes;
#ifndef SLACKSWAP_MODEL_NODE_H_
#define SLACKSWAP_MODEL_NODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/hardware.h"

namespace slackswap {

// NCCL's tuning model (its src/graph/tuning.cc, baseLat and hwLat for the
// ring algorithm and the Simple protocol that carries large buffers): a
// base latency per collective, and a latency per step over NVLink or PCIe.
inline constexpr int64_t kNcclRingBaseLatencyNs = 8'400;
inline constexpr int64_t kNcclNvlinkHopLatencyNs = 3'400;
inline constexpr int64_t kNcclPcieHopLatencyNs = 5'700;

// A shared link's rates per direction, in GB/s (= bytes per nanosecond).
// "h2d" is the direction toward the GPUs, "d2h" toward the host; the bidir_*
// rates hold while the other direction is busy too (equal to the one-way
// rates for a link whose directions do not slow each other).
struct LinkRates {
  double h2d_gbps = 0;
  double d2h_gbps = 0;
  double bidir_h2d_gbps = 0;
  double bidir_d2h_gbps = 0;
};

// A PCIe switch: the GPUs behind it share its uplink to a socket.
struct PcieSwitch {
  std::string name;
  std::vector<int32_t> gpus;  // GPU indices in [0, num_gpus)
  int32_t socket = 0;         // index into Node::sockets
  LinkRates uplink;
};

// A CPU socket (NUMA node): the host memory its switches' copies read and
// write, and the pinned memory the ranks behind it share.
struct Socket {
  std::string name;
  // The host memory bandwidth copies get, per direction.
  LinkRates memory;
  // Page-locked memory the ranks behind this socket's switches may hold
  // together (swapped activations).
  int64_t pinned_host_memory_bytes = 0;
};

// A network card behind a switch, for traffic that leaves the node.
struct Nic {
  std::string name;
  int32_t pcie_switch = 0;  // index into Node::switches
  double gbps = 0;          // per direction
};

struct Node {
  std::string name;
  std::string description;
  // Every GPU's profile. Its h2d/d2h/bidir rates are each GPU's own x16
  // link (or C2C link); its pinned_host_memory_bytes is not used on a node
  // (the sockets' budgets are).
  Hardware gpu;
  int32_t num_gpus = 0;
  std::vector<PcieSwitch> switches;
  std::vector<Socket> sockets;
  // NVLink / NVSwitch bandwidth per GPU and direction; 0: no GPU-to-GPU
  // fabric, so GPU-to-GPU traffic crosses the PCIe switches (and, between
  // switches, the sockets).
  double nvlink_gbps = 0;
  // Between the sockets, per direction (GPU-to-GPU traffic without NVLink
  // between switches of different sockets); 0 with one socket, and may be
  // 0 with NVLink (which then carries GPU-to-GPU traffic).
  double inter_socket_gbps = 0;
  std::vector<Nic> nics;
  // A collective's latency, NCCL's tuning model for its ring algorithm and
  // Simple protocol: a base per call, plus one per step (a ring all-reduce
  // over n ranks takes 2(n-1) steps). In [0, 1 s].
  int64_t collective_base_latency_ns = kNcclRingBaseLatencyNs;
  int64_t collective_hop_latency_ns = 0;
  // Where each figure comes from (published measurements, spec sheets).
  std::vector<std::string> sources;

  // The switch GPU `gpu` sits behind. REQUIRES: ValidateNode(*this) ok and
  // 0 <= gpu < num_gpus.
  int32_t SwitchOf(int32_t gpu) const;
  int32_t SocketOf(int32_t gpu) const;
};

// Rejects a node that does not hold together, naming the field: a GPU
// behind no switch or two, a switch or NIC naming a socket or switch that
// does not exist, rates of zero or outside physical ranges, more than 64
// GPUs, no sockets; and the GPU profile as ValidateHardware does
// (`gpu.` prefixed).
absl::Status ValidateNode(const Node& node);

// The node's GPU as one of ranks 0..ranks-1 sees its host link when they
// all copy at once: each rate the least of the GPU's own link, its share of
// its switch's uplink and its share of its socket's memory (split evenly
// among the running ranks behind each), the worst rank's; and its share of
// its socket's pinned memory. What a plan made for one rank can count on;
// the node simulation (sim/node_simulator.h) is what judges it. REQUIRES:
// ValidateNode(node) ok, 1 <= ranks <= node.num_gpus.
//
//   Hardware share = FairShareGpu(*FindNode("dgx-a100-80gb"), 8);
//   // share.h2d_gbps: half a PCIe 4.0 switch uplink, two GPUs behind each
Hardware FairShareGpu(const Node& node, int32_t ranks);

// The built-in nodes, by name.
const std::vector<Node>& NodeCatalog();
std::vector<std::string> NodeNames();
absl::StatusOr<Node> FindNode(absl::string_view name);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_NODE_H_
