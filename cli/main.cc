// slackswap: plan and simulate activation memory for a training step.
// Errors go to stderr as `CODE: message` with exit status 1; a command line
// that cannot be run (no command) exits 2.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#if defined(__GLIBC__)  // defined by the headers above
#include <malloc.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "common/version.h"

namespace {

bool AsksForHelp(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--help" || a == "-h";
  });
}

absl::Status Run(const std::string& name,
                 const std::vector<std::string>& args) {
  if (name == "help") {
    if (args.empty()) {
      std::cout << slackswap::GlobalHelp();
      return absl::OkStatus();
    }
    const slackswap::Command* c = slackswap::FindCommand(args[0]);
    if (c == nullptr || args.size() > 1) {
      return absl::InvalidArgumentError(
          "help takes one command name (see slackswap --help)");
    }
    std::cout << slackswap::CommandHelp(*c);
    return absl::OkStatus();
  }
  const slackswap::Command* command = slackswap::FindCommand(name);
  if (command == nullptr) {
    return absl::InvalidArgumentError("unknown command '" + name +
                                      "' (see slackswap --help)");
  }
  if (AsksForHelp(args)) {
    std::cout << slackswap::CommandHelp(*command);
    return absl::OkStatus();
  }
  absl::StatusOr<slackswap::Flags> flags =
      slackswap::Flags::Parse(args, command->flags, command->positional);
  if (!flags.ok()) {
    return absl::Status(flags.status().code(),
                        absl::StrCat(flags.status().message(),
                                     " (see slackswap ", name, " --help)"));
  }
  return command->run(*flags, std::cout);
}

// One command runs and the process ends, so what it frees need not go back
// to the system before then. glibc's default maps each block over its
// mmap threshold (which grows with what is freed, to 32 MB at most) afresh
// and unmaps it when freed: on a graph of a million ops every judgment of
// the plan search allocates a lowering of tens of MB, and each time the
// kernel faults its pages in zeroed again (docs/PERFORMANCE.md, "malloc
// kept from giving back what the search frees"). The server does not do
// this: it gives memory back between requests.
void KeepFreedMemoryUntilExit() {
#if defined(__GLIBC__)
  // Fixing either threshold stops glibc moving the other, so both are set,
  // or neither: a glibc that refused the first (older ones capped it at 32
  // MiB) keeps its defaults. A block over 256 MiB (a graph far beyond a
  // million ops) is still mapped on its own.
  if (mallopt(M_MMAP_THRESHOLD, 256 << 20) == 1) {
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  KeepFreedMemoryUntilExit();
  if (argc < 2) {
    std::cout << slackswap::GlobalHelp();
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h") {
    std::cout << slackswap::GlobalHelp();
    return 0;
  }
  if (first == "--version" || first == "version") {
    std::cout << slackswap::VersionLine("slackswap");
    return 0;
  }
  const absl::Status status =
      Run(first, std::vector<std::string>(argv + 2, argv + argc));
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
