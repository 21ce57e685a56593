// slackswap: plan and simulate activation memory for a training step.
// Errors go to stderr as `CODE: message` with a non-zero exit.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/commands.h"

namespace {

constexpr char kUsage[] = R"(usage: slackswap COMMAND [flags]

commands:
  simulate  (--workload NAME | --graph FILE) [--hardware NAME|FILE]
            [--budget B] [--plan FILE] [--json] [--trace FILE]
            [--timeline-points N] [--budget-all-memory]
  plan      (--workload NAME | --graph FILE) [--hardware NAME|FILE]
            --budget B [--policy NAME[,NAME...]|all] [--out PLAN_FILE]
            [--json] [--timeline-points N] [--reasons]
  sweep     (--workload NAME | --graph FILE) [--hardware NAME|FILE]
            [--budgets FROM:TO:STEP] [--policy NAME[,NAME...]|all]
            [--csv|--json] [--target SHARE]
  table     the reference workloads at half their peak, every policy,
            beside the seed's figures
  workload  --workload NAME [--batch N] [--seq N] [--layers N]
            [--attention flash|unfused] --out FILE
  health    --server HOST:PORT: exit 0 iff the server is SERVING

Every command takes --server HOST:PORT to run on a slackswapd instead of
locally, with [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]
[--auth-token-file FILE] [--timeout SECONDS].

B is a fraction of the unconstrained activation peak (0.5) or bytes with a
unit (20GB, 512MiB). Files are .pb, .txtpb or .json.
Policies: ideal, recompute_only, swap_only, capuchin, slackswap.
Workloads: bert-large, gpt2-xl, llama-7b. Hardware: a100-80gb-pcie4,
a100-40gb-pcie4, h100-pcie5, gh200-c2c.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  absl::Status status;
  if (command == "simulate") {
    status = slackswap::RunSimulate(args, std::cout);
  } else if (command == "plan") {
    status = slackswap::RunPlan(args, std::cout);
  } else if (command == "health") {
    status = slackswap::RunHealth(args, std::cout);
  } else if (command == "sweep") {
    status = slackswap::RunSweep(args, std::cout);
  } else if (command == "table") {
    status = slackswap::RunTable(args, std::cout);
  } else if (command == "workload") {
    status = slackswap::RunWorkload(args, std::cout);
  } else {
    status = absl::InvalidArgumentError("unknown command '" + command +
                                        "' (see slackswap --help)");
  }
  if (!status.ok()) {
    // One line per error, whatever a library put in the message.
    std::string message(status.message());
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::cerr << absl::StatusCodeToString(status.code()) << ": " << message
              << "\n";
    return 1;
  }
  return 0;
}
