// slackswap: plan and simulate activation memory for a training step.
// Errors go to stderr as `CODE: message` with exit status 1; a command line
// that cannot be run (no command) exits 2.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
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
