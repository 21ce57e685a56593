// slackswap list policies|hardware|workloads [--json] [--server HOST:PORT
// ...]: what the planner (local, or the server's) offers.
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/format.h"
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
        "list needs what to list: policies, hardware or workloads");
  }
  const std::string& what = flags.Positional()[0];
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  const bool json = flags.Has("json");
  if (what == "policies") return ListPolicies(*backend, json, out);
  if (what == "hardware") return ListHardware(*backend, json, out);
  if (what == "workloads") return ListWorkloads(*backend, json, out);
  return absl::InvalidArgumentError(
      absl::StrCat("list: unknown ", QuoteInput(what),
                   "; give policies, hardware or workloads"));
}

}  // namespace

Command ListCommand() {
  return {
      .name = "list",
      .summary = "list the policies, hardware profiles or built-in workloads",
      .synopsis = "policies|hardware|workloads [flags]",
      .flags = Concat({{{"json", "", "print the service's message as JSON"}},
                       BackendFlags()}),
      .examples = {"slackswap list policies",
                   "slackswap list hardware --server 127.0.0.1:50051"},
      .run = &RunList,
      .positional = 1,
  };
}

}  // namespace slackswap
