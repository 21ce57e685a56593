// The `slackswap` subcommands. Each parses its own flags, writes its output
// to `out`, and returns an error status for main to print as `CODE: message`.
#ifndef SLACKSWAP_CLI_COMMANDS_H_
#define SLACKSWAP_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace slackswap {

using Args = std::vector<std::string>;

absl::Status RunSimulate(const Args& args, std::ostream& out);
absl::Status RunWorkload(const Args& args, std::ostream& out);
absl::Status RunPlan(const Args& args, std::ostream& out);
absl::Status RunSweep(const Args& args, std::ostream& out);
absl::Status RunTable(const Args& args, std::ostream& out);
absl::Status RunHealth(const Args& args, std::ostream& out);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_COMMANDS_H_
