// What every subcommand reads from its flags: the graph (--workload NAME with
// --batch/--seq/--layers/--attention overrides, or --graph FILE) and the
// hardware (--hardware NAME|FILE).
#ifndef SLACKSWAP_CLI_INPUTS_H_
#define SLACKSWAP_CLI_INPUTS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "planner/graph.h"
#include "planner/hardware.h"

namespace slackswap {

// Flags LoadGraph reads.
const std::set<std::string>& GraphFlags();

// Exactly one of --workload and --graph.
absl::StatusOr<Graph> LoadGraph(const Flags& flags);
// --hardware, default a100-80gb-pcie4.
absl::StatusOr<Hardware> LoadHardwareFlag(const Flags& flags);

// --policy: a name, a comma-separated list, or all (the default).
absl::StatusOr<std::vector<std::string>> ParsePolicies(const Flags& flags);

// Flag sets joined.
std::set<std::string> Join(std::set<std::string> a,
                           const std::set<std::string>& b);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_INPUTS_H_
