// What subcommands read from their flags into request messages: the step
// (--workload NAME with --batch/--seq/--layers/--attention overrides, or
// --graph FILE; --hardware NAME|FILE), the budget and the policies.
#ifndef SLACKSWAP_CLI_INPUTS_H_
#define SLACKSWAP_CLI_INPUTS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// Flags StepFromFlags reads.
const std::set<std::string>& StepFlags();

// Exactly one of --workload and --graph; --hardware defaults to
// a100-80gb-pcie4. Files are read here and sent inline.
absl::StatusOr<v1::StepSpec> StepFromFlags(const Flags& flags);
absl::StatusOr<v1::WorkloadRef> WorkloadFromFlags(const Flags& flags);

// --budget B: a fraction (0.5) or bytes with a unit (20GB). Calls exactly one
// of the setters.
absl::Status BudgetFromFlags(const Flags& flags,
                             const std::function<void(int64_t)>& set_bytes,
                             const std::function<void(double)>& set_fraction);

// Flag sets joined.
std::set<std::string> Join(std::set<std::string> a,
                           const std::set<std::string>& b);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_INPUTS_H_
