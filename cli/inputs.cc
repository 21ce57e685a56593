#include "cli/inputs.h"

#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "io/sources.h"
#include "planner/policy.h"

namespace slackswap {

const std::set<std::string>& GraphFlags() {
  static const std::set<std::string> flags = {
      "workload", "graph", "batch", "seq", "layers", "attention", "hardware"};
  return flags;
}

absl::StatusOr<Graph> LoadGraph(const Flags& flags) {
  const bool has_workload = flags.Has("workload");
  if (has_workload == flags.Has("graph")) {
    return absl::InvalidArgumentError(
        "give exactly one of --workload NAME and --graph FILE");
  }
  if (flags.Has("graph")) {
    for (const char* name : {"batch", "seq", "layers", "attention"}) {
      if (flags.Has(name)) {
        return absl::InvalidArgumentError(
            std::string("--") + name + " applies to --workload, not --graph");
      }
    }
    return LoadGraphFile(*flags.Get("graph"));
  }
  WorkloadOverrides o;
  SLACKSWAP_ASSIGN_OR_RETURN(o.batch, flags.GetInt("batch"));
  SLACKSWAP_ASSIGN_OR_RETURN(o.seq, flags.GetInt("seq"));
  SLACKSWAP_ASSIGN_OR_RETURN(o.layers, flags.GetInt("layers"));
  if (flags.Has("attention")) {
    SLACKSWAP_ASSIGN_OR_RETURN(o.attention,
                               ParseAttention(*flags.Get("attention")));
  }
  return BuildWorkload(*flags.Get("workload"), o);
}

absl::StatusOr<Hardware> LoadHardwareFlag(const Flags& flags) {
  return LoadHardware(flags.Get("hardware").value_or("a100-80gb-pcie4"));
}

absl::StatusOr<std::vector<std::string>> ParsePolicies(const Flags& flags) {
  const std::string spec = flags.Get("policy").value_or("all");
  if (spec == "all") return PolicyNames();
  std::vector<std::string> names = absl::StrSplit(spec, ',');
  for (const std::string& name : names) {
    SLACKSWAP_RETURN_IF_ERROR(CreatePolicy(name).status());
  }
  return names;
}

std::set<std::string> Join(std::set<std::string> a,
                           const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

}  // namespace slackswap
