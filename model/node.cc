#include "model/node.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/format.h"
#include "common/status_macros.h"

namespace slackswap {
namespace {

// One second: far beyond any collective's latency, and small enough that
// a step's sum of them stays in int64.
constexpr int64_t kMaxCollectiveLatencyNs = 1'000'000'000;

// The physical ranges ValidateHardware uses for a GPU's link: wide enough
// for any link of today or tomorrow, narrow enough that every copy time
// stays far inside int64.
constexpr double kMinLinkGbps = 0.001;  // 1 MB/s
constexpr double kMaxLinkGbps = 1e5;
constexpr double kMaxPinnedBytes = 1e15;
constexpr int32_t kMaxGpus = 64;
// Bounds on the lists, so that a hostile node costs little to check (a real
// node has a handful of each).
constexpr size_t kMaxSockets = 64;
constexpr size_t kMaxSwitches = 256;
constexpr size_t kMaxNics = 256;

class Checker {
 public:
  explicit Checker(const Node& node)
      : head_(node.name.empty()
                  ? std::string("node <unnamed>: ")
                  : absl::StrCat("node ", QuoteInput(node.name), ": ")) {}

  absl::Status Error(absl::string_view field, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(head_, field, ": ", message));
  }

  // `field` in [kMinLinkGbps, kMaxLinkGbps] GB/s (NaN fails).
  absl::Status Rate(absl::string_view field, double gbps) const {
    if (gbps >= kMinLinkGbps && gbps <= kMaxLinkGbps) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(head_, field, " must be in [", kMinLinkGbps, ", ",
                     kMaxLinkGbps, "] GB/s, got ", gbps));
  }
  // 0, or in the range of Rate.
  absl::Status OptionalRate(absl::string_view field, double gbps) const {
    if (gbps == 0) return absl::OkStatus();
    if (gbps >= kMinLinkGbps && gbps <= kMaxLinkGbps) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(head_, field, " must be 0 or in [", kMinLinkGbps, ", ",
                     kMaxLinkGbps, "] GB/s, got ", gbps));
  }

  absl::Status Link(absl::string_view field, const LinkRates& r) const {
    for (const auto& [name, value] :
         {std::pair<absl::string_view, double>{"h2d_gbps", r.h2d_gbps},
          {"d2h_gbps", r.d2h_gbps},
          {"bidir_h2d_gbps", r.bidir_h2d_gbps},
          {"bidir_d2h_gbps", r.bidir_d2h_gbps}}) {
      absl::Status s = Rate(absl::StrCat(field, ".", name), value);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Non-empty and not used earlier in its list (`list`, e.g. "switches").
  absl::Status Name(absl::string_view list, size_t i, const std::string& name,
                    absl::flat_hash_map<std::string, size_t>& seen) const {
    const std::string field = absl::StrCat(list, "[", i, "].name");
    if (name.empty()) return Error(field, "must not be empty");
    auto [it, inserted] = seen.emplace(name, i);
    if (!inserted) {
      return Error(field, absl::StrCat(QuoteInput(name), " is also ", list, "[",
                                       it->second, "]'s name"));
    }
    return absl::OkStatus();
  }

 private:
  const std::string head_;
};

absl::Status CheckSize(const Checker& c, absl::string_view list, size_t size,
                       size_t max) {
  if (size <= max) return absl::OkStatus();
  return c.Error(list, absl::StrCat("at most ", max, " entries, got ", size));
}

}  // namespace

int32_t Node::SwitchOf(int32_t gpu) const {
  for (size_t s = 0; s < switches.size(); ++s) {
    for (int32_t g : switches[s].gpus) {
      if (g == gpu) return static_cast<int32_t>(s);
    }
  }
  return -1;  // only when the REQUIRES does not hold
}

int32_t Node::SocketOf(int32_t gpu) const {
  const int32_t s = SwitchOf(gpu);
  return s < 0 ? -1 : switches[s].socket;
}

Hardware FairShareGpu(const Node& node, int32_t ranks) {
  std::vector<int32_t> behind_switch(node.switches.size(), 0);
  std::vector<int32_t> on_socket(node.sockets.size(), 0);
  for (int32_t gpu = 0; gpu < ranks; ++gpu) {
    ++behind_switch[static_cast<size_t>(node.SwitchOf(gpu))];
    ++on_socket[static_cast<size_t>(node.SocketOf(gpu))];
  }
  Hardware share = node.gpu;
  // On a node the sockets' budgets hold the pinned memory, not the GPU's.
  share.pinned_host_memory_bytes = std::numeric_limits<int64_t>::max();
  for (int32_t gpu = 0; gpu < ranks; ++gpu) {
    const int32_t sw = node.SwitchOf(gpu);
    const PcieSwitch& pcie = node.switches[static_cast<size_t>(sw)];
    const Socket& socket = node.sockets[static_cast<size_t>(pcie.socket)];
    const double n_switch = behind_switch[static_cast<size_t>(sw)];
    const double n_socket = on_socket[static_cast<size_t>(pcie.socket)];
    const auto limit = [&](double& rate, double uplink, double memory) {
      rate = std::min({rate, uplink / n_switch, memory / n_socket});
    };
    limit(share.h2d_gbps, pcie.uplink.h2d_gbps, socket.memory.h2d_gbps);
    limit(share.d2h_gbps, pcie.uplink.d2h_gbps, socket.memory.d2h_gbps);
    limit(share.bidir_h2d_gbps, pcie.uplink.bidir_h2d_gbps,
          socket.memory.bidir_h2d_gbps);
    limit(share.bidir_d2h_gbps, pcie.uplink.bidir_d2h_gbps,
          socket.memory.bidir_d2h_gbps);
    share.pinned_host_memory_bytes = std::min(
        share.pinned_host_memory_bytes,
        socket.pinned_host_memory_bytes / static_cast<int64_t>(n_socket));
  }
  return share;
}

absl::Status ValidateNode(const Node& node) {
  const Checker c(node);
  if (node.name.empty()) return c.Error("name", "must not be empty");
  if (!(node.num_gpus >= 1 && node.num_gpus <= kMaxGpus)) {
    return c.Error("num_gpus", absl::StrCat("must be in [1, ", kMaxGpus,
                                            "], got ", node.num_gpus));
  }
  if (absl::Status gpu = ValidateHardwareFields(node.gpu, "gpu."); !gpu.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", QuoteInput(node.name), ": ", gpu.message()));
  }

  const int64_t num_sockets = static_cast<int64_t>(node.sockets.size());
  if (node.sockets.empty()) {
    return c.Error("sockets", "a node needs at least one socket");
  }
  SLACKSWAP_RETURN_IF_ERROR(
      CheckSize(c, "sockets", node.sockets.size(), kMaxSockets));
  absl::flat_hash_map<std::string, size_t> names;
  for (size_t i = 0; i < node.sockets.size(); ++i) {
    const Socket& socket = node.sockets[i];
    const std::string field = absl::StrCat("sockets[", i, "]");
    SLACKSWAP_RETURN_IF_ERROR(c.Name("sockets", i, socket.name, names));
    SLACKSWAP_RETURN_IF_ERROR(
        c.Link(absl::StrCat(field, ".memory"), socket.memory));
    const int64_t pinned = socket.pinned_host_memory_bytes;
    if (!(pinned >= 0 && static_cast<double>(pinned) <= kMaxPinnedBytes)) {
      return c.Error(absl::StrCat(field, ".pinned_host_memory_bytes"),
                     absl::StrCat("must be in [0, ", kMaxPinnedBytes,
                                  "] bytes, got ", pinned));
    }
  }

  if (node.switches.empty()) {
    return c.Error("switches", "a node needs at least one PCIe switch");
  }
  SLACKSWAP_RETURN_IF_ERROR(
      CheckSize(c, "switches", node.switches.size(), kMaxSwitches));
  names.clear();
  // The switch each GPU sits behind so far, or -1.
  std::vector<int64_t> switch_of(node.num_gpus, -1);
  for (size_t i = 0; i < node.switches.size(); ++i) {
    const PcieSwitch& sw = node.switches[i];
    const std::string field = absl::StrCat("switches[", i, "]");
    SLACKSWAP_RETURN_IF_ERROR(c.Name("switches", i, sw.name, names));
    if (!(sw.socket >= 0 && sw.socket < num_sockets)) {
      return c.Error(absl::StrCat(field, ".socket"),
                     absl::StrCat("socket ", sw.socket, " does not exist (",
                                  num_sockets, " sockets)"));
    }
    for (size_t j = 0; j < sw.gpus.size(); ++j) {
      const int32_t gpu = sw.gpus[j];
      const std::string gpu_field = absl::StrCat(field, ".gpus[", j, "]");
      if (!(gpu >= 0 && gpu < node.num_gpus)) {
        return c.Error(gpu_field,
                       absl::StrCat("GPU ", gpu, " does not exist (num_gpus ",
                                    node.num_gpus, ")"));
      }
      const int64_t before = switch_of[gpu];
      if (before == static_cast<int64_t>(i)) {
        return c.Error(gpu_field, absl::StrCat("GPU ", gpu, " listed twice"));
      }
      if (before >= 0) {
        return c.Error(
            gpu_field,
            absl::StrCat("GPU ", gpu, " sits behind two switches (switches[",
                         before, "] and switches[", i, "])"));
      }
      switch_of[gpu] = static_cast<int64_t>(i);
    }
    SLACKSWAP_RETURN_IF_ERROR(
        c.Link(absl::StrCat(field, ".uplink"), sw.uplink));
  }
  for (int32_t gpu = 0; gpu < node.num_gpus; ++gpu) {
    if (switch_of[gpu] < 0) {
      return c.Error("switches",
                     absl::StrCat("GPU ", gpu, " sits behind no switch"));
    }
  }

  SLACKSWAP_RETURN_IF_ERROR(c.OptionalRate("nvlink_gbps", node.nvlink_gbps));
  SLACKSWAP_RETURN_IF_ERROR(
      c.OptionalRate("inter_socket_gbps", node.inter_socket_gbps));
  if (num_sockets == 1 && node.inter_socket_gbps != 0) {
    return c.Error("inter_socket_gbps",
                   absl::StrCat("must be 0 with one socket, got ",
                                node.inter_socket_gbps));
  }
  if (num_sockets > 1 && node.nvlink_gbps == 0 && node.inter_socket_gbps == 0) {
    // Without NVLink, GPU-to-GPU traffic between switches of different
    // sockets crosses the socket link: it needs a rate.
    return c.Error("inter_socket_gbps",
                   absl::StrCat("must be > 0 with ", num_sockets,
                                " sockets and no NVLink (nvlink_gbps 0)"));
  }

  for (const auto& [field, ns] :
       {std::pair<absl::string_view, int64_t>{"collective_base_latency_ns",
                                              node.collective_base_latency_ns},
        {"collective_hop_latency_ns", node.collective_hop_latency_ns}}) {
    if (ns < 0 || ns > kMaxCollectiveLatencyNs) {
      return c.Error(field,
                     absl::StrCat("must be in [0, ", kMaxCollectiveLatencyNs,
                                  "] ns, got ", ns));
    }
  }

  SLACKSWAP_RETURN_IF_ERROR(CheckSize(c, "nics", node.nics.size(), kMaxNics));
  names.clear();
  const int64_t num_switches = static_cast<int64_t>(node.switches.size());
  for (size_t i = 0; i < node.nics.size(); ++i) {
    const Nic& nic = node.nics[i];
    const std::string field = absl::StrCat("nics[", i, "]");
    SLACKSWAP_RETURN_IF_ERROR(c.Name("nics", i, nic.name, names));
    if (!(nic.pcie_switch >= 0 && nic.pcie_switch < num_switches)) {
      return c.Error(
          absl::StrCat(field, ".pcie_switch"),
          absl::StrCat("switch ", nic.pcie_switch, " does not exist (",
                       num_switches, " switches)"));
    }
    SLACKSWAP_RETURN_IF_ERROR(c.Rate(absl::StrCat(field, ".gbps"), nic.gbps));
  }
  return absl::OkStatus();
}

std::vector<std::string> NodeNames() {
  std::vector<std::string> names;
  for (const Node& node : NodeCatalog()) names.push_back(node.name);
  return names;
}

absl::StatusOr<Node> FindNode(absl::string_view name) {
  for (const Node& node : NodeCatalog()) {
    if (node.name == name) return node;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown node ", QuoteInput(name),
                   "; known: ", absl::StrJoin(NodeNames(), ", ")));
}

}  // namespace slackswap
