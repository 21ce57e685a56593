// The built-in nodes. Every figure names the measurement or specification
// it comes from; the measurements are those collected, with their sources,
// in the findings the `sources` of each node list.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/hardware.h"
#include "model/node.h"

namespace slackswap {
namespace {

// Each socket's pinned budget: half of its host memory. Page-locked memory
// cannot be paged out, and the rest of the host needs memory too (the OS,
// the data loaders, the page cache, CPU-side optimizer state); the usual
// bug is the opposite, each rank sizing its pinned pool against the whole
// host (sglang issues 35540 and 38157, LMCache 5127, TensorRT-LLM 16106),
// and pools are sized per NUMA node (rapidsmpf issue 1012).
constexpr double kPinnedShareOfSocketMemory = 0.5;

int64_t PinnedBudget(int64_t socket_memory_bytes) {
  return static_cast<int64_t>(static_cast<double>(socket_memory_bytes) *
                              kPinnedShareOfSocketMemory);
}

// A link whose rates are those of one PCIe x16 link as the GPU profile
// measured it (the uplink of a switch is one x16 link of the same
// generation as its GPUs').
LinkRates SameAsGpuLink(const Hardware& gpu) {
  return LinkRates{.h2d_gbps = gpu.h2d_gbps,
                   .d2h_gbps = gpu.d2h_gbps,
                   .bidir_h2d_gbps = gpu.bidir_h2d_gbps,
                   .bidir_d2h_gbps = gpu.bidir_d2h_gbps};
}

// Host memory as a copy sees it: the DRAM channels' theoretical bandwidth
// each way alone, and half of it each way when both run (reads and writes
// share the channels). No published measurement of copies limited by a
// socket's memory was found; on the PCIe nodes below the uplinks bind long
// before these do.
LinkRates DramRates(double gbps) {
  return LinkRates{.h2d_gbps = gbps,
                   .d2h_gbps = gbps,
                   .bidir_h2d_gbps = gbps / 2,
                   .bidir_d2h_gbps = gbps / 2};
}

// The hardware catalog's profile `name`. A name missing from it leaves an
// empty profile, which ValidateNode rejects (node_test checks every node).
Hardware CatalogGpu(absl::string_view name) {
  absl::StatusOr<Hardware> hw = FindHardware(name);
  return hw.ok() ? *std::move(hw) : Hardware{};
}

// Two GPUs behind each switch, switches split evenly between two sockets:
// switch s holds GPUs 2s and 2s+1 and hangs off socket s / (switches / 2).
std::vector<PcieSwitch> PairsOnTwoSockets(int32_t num_switches,
                                          const LinkRates& uplink) {
  std::vector<PcieSwitch> switches;
  for (int32_t s = 0; s < num_switches; ++s) {
    switches.push_back(PcieSwitch{.name = absl::StrCat("pcie-switch-", s),
                                  .gpus = {2 * s, 2 * s + 1},
                                  .socket = s / (num_switches / 2),
                                  .uplink = uplink});
  }
  return switches;
}

std::vector<Nic> NicsPerSwitch(int32_t num_switches, int32_t per_switch,
                               double gbps) {
  std::vector<Nic> nics;
  for (int32_t s = 0; s < num_switches; ++s) {
    for (int32_t k = 0; k < per_switch; ++k) {
      nics.push_back(Nic{.name = absl::StrCat("nic-", s * per_switch + k),
                         .pcie_switch = s,
                         .gbps = gbps});
    }
  }
  return nics;
}

std::vector<Socket> Sockets(int32_t n, const LinkRates& memory,
                            int64_t memory_bytes_each) {
  std::vector<Socket> sockets;
  for (int32_t i = 0; i < n; ++i) {
    sockets.push_back(
        Socket{.name = absl::StrCat("socket-", i),
               .memory = memory,
               .pinned_host_memory_bytes = PinnedBudget(memory_bytes_each)});
  }
  return sockets;
}

// NVLink 3 (A100): 12 links x 50 GB/s = 600 GB/s per GPU, counting both
// directions, so 300 GB/s each way. NVLink 4 (H100, GH200): 18 links,
// 900 GB/s per GPU both ways, 450 each way.
constexpr double kNvlink3GbpsPerDir = 600.0 / 2;
constexpr double kNvlink4GbpsPerDir = 900.0 / 2;

// 200 Gb/s (HDR InfiniBand, ConnectX-6) and 400 Gb/s (NDR, ConnectX-7)
// NICs, per direction: 200 / 8 = 25 GB/s, 400 / 8 = 50 GB/s.
constexpr double kHdrNicGbps = 200.0 / 8;
constexpr double kNdrNicGbps = 400.0 / 8;

// DRAM per socket, theoretical: channels x MT/s x 8 bytes.
//  - AMD EPYC 7742 (DGX A100), Intel Xeon 8380 (the A100 PCIe server
//    below): 8 channels of DDR4-3200 = 8 x 3200e6 x 8 = 204.8 GB/s.
//  - Intel Xeon 8480C (DGX H100): 8 channels of DDR5-4800 = 307.2 GB/s.
//  - Grace (GH200): LPDDR5X, up to 512 GB/s per the GH200 datasheet.
constexpr double kDdr4_3200x8Gbps = 8 * 3200e6 * 8 / 1e9;
constexpr double kDdr5_4800x8Gbps = 8 * 4800e6 * 8 / 1e9;
constexpr double kGraceLpddr5xGbps = 512.0;

constexpr const char* kNodeFindings =
    "node-contention findings (host-link bandwidth alone and all at once; "
    "topology facts for the catalog)";

Node DgxA100_80gb() {
  Node node;
  node.name = "dgx-a100-80gb";
  node.description =
      "NVIDIA DGX A100 640GB: 8x A100-SXM4-80GB on six NVSwitches, 2 AMD "
      "EPYC 7742 sockets, four PCIe 4.0 switches with two GPUs and two "
      "200 Gb/s NICs each, 2 TB host memory";
  // The GPU: a100-80gb-pcie4 is the A100 80GB SXM4 reaching the host over
  // its PCIe 4.0 x16 link (24.8 GB/s host-to-device alone on this very
  // machine, nvbandwidth issue 53).
  node.gpu = CatalogGpu("a100-80gb-pcie4");
  node.num_gpus = 8;
  // Each switch reaches its socket over one PCIe 4.0 x16 link, which the
  // two GPUs behind it share: the GPU profile's measured x16 rates (25 /
  // 25.5 GB/s alone, 13 / 24 GB/s both ways). Cross-check: nvbandwidth
  // issue 11 measured host_to_all_bidirectional at 5-6 GB/s per A100 on
  // PCIe 4.0, i.e. 10-12 GB/s host-to-device per pair of GPUs, about one
  // x16 link's 13 GB/s while the other direction is busy.
  node.switches = PairsOnTwoSockets(4, SameAsGpuLink(node.gpu));
  // 2 TB of DDR4 (the 640GB model; 1 TB on the 320GB one), 1 TB per
  // socket, half of it pinned (kPinnedShareOfSocketMemory): 500 GB per
  // socket, 125 GB per GPU.
  node.sockets = Sockets(2, DramRates(kDdr4_3200x8Gbps), 1'000'000'000'000);
  // 600 GB/s per GPU is the bidirectional figure: 300 GB/s each way.
  node.nvlink_gbps = kNvlink3GbpsPerDir;
  node.collective_hop_latency_ns = kNcclNvlinkHopLatencyNs;
  // GPU-to-GPU traffic goes over NVSwitch, never between the sockets.
  node.inter_socket_gbps = 0;
  // Eight 200 Gb/s HDR NICs for the compute fabric, two per switch.
  node.nics = NicsPerSwitch(4, 2, kHdrNicGbps);
  node.sources = {kNodeFindings, "NVIDIA/nvbandwidth issue 53",
                  "NVIDIA/nvbandwidth issue 11",
                  "NVIDIA DGX A100 system architecture (spec sheet)"};
  return node;
}

Node HgxH100Sxm() {
  Node node;
  node.name = "hgx-h100-sxm";
  node.description =
      "8x H100 SXM (HGX H100) on NVSwitches, 2 Intel Xeon 8480C sockets, "
      "four PCIe 5.0 switches with two GPUs and two 400 Gb/s NICs each, "
      "2 TB host memory";
  // The GPU: the catalog has no H100 SXM profile. h100-pcie5 (the H100
  // PCIe card) has the same PCIe 5.0 x16 host link, which is what a node
  // shares; its compute (756 against 989 dense bf16 TFLOP/s) and HBM
  // (2.0 against 3.35 TB/s) understate the SXM part.
  node.gpu = CatalogGpu("h100-pcie5");
  node.num_gpus = 8;
  // Each switch's uplink is one PCIe 5.0 x16 link shared by its two GPUs:
  // the profile's x16 rates (56.2 / 55.4 GB/s alone, 50.7 each way while
  // both run).
  // Derivation from cuda-samples issue 357 (8 GPUs on PCIe 5.0, all
  // copying host-to-device at once): GPUs 4-7 got 25.3-25.5 GB/s each,
  // 50.6-51 GB/s per pair, which is one x16 Gen5 link shared by two GPUs.
  // GPUs 0-3 got 43.7-44.8 GB/s each there (278 GB/s in total), more than
  // half a link: that machine's topology is not stated, and this catalog
  // entry follows the two-GPUs-per-switch layout, so it reproduces the
  // 4-7 half (8 x 28.1 = 225 GB/s in total at most).
  node.switches = PairsOnTwoSockets(4, SameAsGpuLink(node.gpu));
  // 2 TB of DDR5 (DGX H100), 1 TB per socket, half of it pinned: 500 GB
  // per socket.
  node.sockets = Sockets(2, DramRates(kDdr5_4800x8Gbps), 1'000'000'000'000);
  // 900 GB/s per GPU is the bidirectional figure: 450 GB/s each way.
  node.nvlink_gbps = kNvlink4GbpsPerDir;
  node.collective_hop_latency_ns = kNcclNvlinkHopLatencyNs;
  node.inter_socket_gbps = 0;  // GPU-to-GPU traffic goes over NVSwitch
  // Eight 400 Gb/s NDR NICs (ConnectX-7), two per switch.
  node.nics = NicsPerSwitch(4, 2, kNdrNicGbps);
  node.sources = {kNodeFindings, "NVIDIA/cuda-samples issue 357",
                  "NVIDIA DGX H100 / HGX H100 (spec sheets)"};
  return node;
}

Node A100Pcie8x() {
  Node node;
  node.name = "a100-pcie-8x";
  node.description =
      "8x A100 PCIe cards without NVLink bridges, 2 Intel Xeon 8380 "
      "sockets, four PCIe 4.0 switches with two GPUs each, 1 TB host "
      "memory";
  // The GPU: the catalog has no A100 80GB PCIe card profile.
  // a100-80gb-pcie4 (the SXM4 part) has the same PCIe 4.0 x16 host link
  // and memory size; its HBM (2039 GB/s) is 5% above the card's 1935.
  node.gpu = CatalogGpu("a100-80gb-pcie4");
  node.num_gpus = 8;
  // As in dgx-a100-80gb: one PCIe 4.0 x16 uplink per switch, shared by its
  // two GPUs, at the measured x16 rates (nvbandwidth issue 11: 5-6 GB/s per
  // GPU host_to_all_bidirectional, 10-12 per pair).
  node.switches = PairsOnTwoSockets(4, SameAsGpuLink(node.gpu));
  // 1 TB of DDR4 (a usual configuration for such a server; the findings
  // give none), 500 GB per socket, half of it pinned: 250 GB per socket.
  node.sockets = Sockets(2, DramRates(kDdr4_3200x8Gbps), 500'000'000'000);
  // No NVLink: GPU-to-GPU traffic crosses the switches and, between
  // switches of different sockets, the sockets' link.
  node.nvlink_gbps = 0;
  node.collective_hop_latency_ns = kNcclPcieHopLatencyNs;
  // Xeon 8380: 3 UPI links at 11.2 GT/s, 2 bytes per transfer each way:
  // 3 x 22.4 = 67.2 GB/s each way, theoretical. The one measured copy
  // across sockets in the findings (llama.cpp issue 16000) got 4.5 GB/s
  // from the remote node against 12.7 from the local one, so real
  // cross-socket copies may see far less.
  node.inter_socket_gbps = 3 * 11.2 * 2;
  // The findings name no NICs for this server; none are modelled.
  node.sources = {kNodeFindings, "NVIDIA/nvbandwidth issue 11",
                  "ggml-org/llama.cpp issue 16000",
                  "Intel Xeon Platinum 8380 (spec sheet)"};
  return node;
}

Node Gh200_4x() {
  Node node;
  node.name = "gh200-4x";
  node.description =
      "4x GH200 Grace Hopper superchips, each GPU with its own NVLink-C2C "
      "link to its own Grace (480 GB LPDDR5X), GPUs joined by NVLink";
  node.gpu = CatalogGpu("gh200-c2c");
  node.num_gpus = 4;
  // One "switch" per GPU: its C2C link to its own Grace, which no other GPU
  // shares. Megatron-LM issue 6491 measured 4x GH200 with all four copying
  // at once and saw each GPU's rates unchanged, so the uplink is set to
  // the C2C link's own rates (the GPU profile's) and never binds beyond it.
  for (int32_t g = 0; g < 4; ++g) {
    node.switches.push_back(PcieSwitch{.name = absl::StrCat("c2c-", g),
                                       .gpus = {g},
                                       .socket = g,
                                       .uplink = SameAsGpuLink(node.gpu)});
  }
  // One socket per superchip: 480 GB of LPDDR5X each (the gh200-c2c
  // profile's figure), half of it pinned: 240 GB per socket.
  node.sockets = Sockets(4, DramRates(kGraceLpddr5xGbps), 480'000'000'000);
  // Hopper's 18 NVLink 4 links: 900 GB/s both ways, 450 each way per GPU.
  node.nvlink_gbps = kNvlink4GbpsPerDir;
  node.collective_hop_latency_ns = kNcclNvlinkHopLatencyNs;
  node.inter_socket_gbps = 0;  // GPU-to-GPU traffic goes over NVLink
  // The findings name no NICs for this node; none are modelled.
  node.sources = {kNodeFindings, "NVIDIA/Megatron-LM issue 6491",
                  "NVIDIA GH200 Grace Hopper Superchip (datasheet)"};
  return node;
}

}  // namespace

const std::vector<Node>& NodeCatalog() {
  static const std::vector<Node>* catalog = new std::vector<Node>{
      DgxA100_80gb(),
      HgxH100Sxm(),
      A100Pcie8x(),
      Gh200_4x(),
  };
  return *catalog;
}

}  // namespace slackswap
