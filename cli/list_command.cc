// slackswap list policies|hardware|nodes|workloads [--json] [--server
// HOST:PORT ...]: what the planner (local, or the server's) offers.
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/format.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "io/proto_file.h"

namespace slackswap {
namespace {

absl::Status ListPolicies(Backend& backend, bool json, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(v1::ServerInfoResponse info, backend.ServerInfo());
  if (json) {
    v1::ServerInfoResponse policies;
    *policies.mutable_policies() = info.policies();
    out << ToJson(policies);
    return absl::OkStatus();
  }
  for (const v1::PolicyDescription& p : info.policies()) {
    out << absl::StrFormat("%-15s %s%s\n", p.name(), p.summary(),
                           p.unbudgeted_reference() ? " (no budget)" : "");
  }
  return absl::OkStatus();
}

absl::Status ListHardware(Backend& backend, bool json, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(v1::ListHardwareProfilesResponse resp,
                             backend.ListHardwareProfiles());
  if (json) {
    out << ToJson(resp);
    return absl::OkStatus();
  }
  for (const v1::HardwareProfile& hw : resp.profiles()) {
    out << absl::StrFormat("%-16s %5.0f GB  %-16s %s\n", hw.name(),
                           hw.memory_gb(), hw.link(), hw.gpu());
  }
  return absl::OkStatus();
}

// One line per node: its GPUs, what they share, NVLink per GPU and
// direction, and the pinned host memory of the whole node (its sockets').
absl::Status ListNodes(Backend& backend, bool json, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(v1::ListNodesResponse resp, backend.ListNodes());
  if (json) {
    out << ToJson(resp);
    return absl::OkStatus();
  }
  for (const v1::NodeProfile& node : resp.nodes()) {
    int64_t pinned = 0;
    for (const v1::Socket& s : node.sockets()) {
      pinned = SaturatingAdd(pinned, s.pinned_host_memory_bytes());
    }
    const std::string gpu =
        node.has_gpu_inline() ? node.gpu_inline().name() : node.gpu_name();
    const std::string nvlink =
        node.nvlink_gbps() > 0
            ? absl::StrFormat("NVLink %.0f GB/s each way", node.nvlink_gbps())
            : std::string("no NVLink");
    out << absl::StrFormat(
        "%-14s %-20s %d switches, %d sockets, %s, pinned %s, %d NICs\n",
        node.name(), absl::StrCat(node.num_gpus(), "x ", gpu),
        node.switches_size(), node.sockets_size(), nvlink, FormatBytes(pinned),
        node.nics_size());
  }
  return absl::OkStatus();
}

absl::Status ListWorkloads(Backend& backend, bool json, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(v1::ListWorkloadsResponse resp,
                             backend.ListWorkloads());
  if (json) {
    out << ToJson(resp);
    return absl::OkStatus();
  }
  for (const v1::WorkloadInfo& w : resp.workloads()) {
    out << absl::StrFormat(
        "%-11s %3d layers, hidden %5d, batch %3d, seq %5d: %6d ops, %s "
        "saved\n",
        w.name(), w.layers(), w.hidden(), w.batch(), w.seq(), w.ops(),
        FormatBytes(w.saved_activation_bytes()));
  }
  return absl::OkStatus();
}

absl::Status RunList(const Flags& flags, std::ostream& out) {
  if (flags.Positional().size() != 1) {
    return absl::InvalidArgumentError(
        "list needs what to list: policies, hardware, nodes or workloads");
  }
  const std::string& what = flags.Positional()[0];
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  const bool json = flags.Has("json");
  if (what == "policies") return ListPolicies(*backend, json, out);
  if (what == "hardware") return ListHardware(*backend, json, out);
  if (what == "nodes") return ListNodes(*backend, json, out);
  if (what == "workloads") return ListWorkloads(*backend, json, out);
  return absl::InvalidArgumentError(
      absl::StrCat("list: unknown ", QuoteInput(what),
                   "; give policies, hardware, nodes or workloads"));
}

}  // namespace

Command ListCommand() {
  return {
      .name = "list",
      .summary =
          "list the policies, hardware profiles, nodes or built-in workloads",
      .synopsis = "policies|hardware|nodes|workloads [flags]",
      .flags = Concat({{{"json", "", "print the service's message as JSON"}},
                       BackendFlags()}),
      .examples = {"slackswap list policies",
                   "slackswap list hardware --server 127.0.0.1:50051",
                   "slackswap list nodes --json"},
      .run = &RunList,
      .positional = 1,
  };
}

}  // namespace slackswap
