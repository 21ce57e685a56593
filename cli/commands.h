// The `slackswap` subcommands, each declared once: its flags (parsed and
// shown in help from the same list), a synopsis, examples and the function
// that runs it. main() dispatches; `slackswap help COMMAND` and
// `slackswap COMMAND --help` print CommandHelp.
//
//   const Command* c = FindCommand("plan");
//   absl::StatusOr<Flags> flags = Flags::Parse(args, c->flags, c->positional);
//   absl::Status s = c->run(*flags, std::cout);
#ifndef SLACKSWAP_CLI_COMMANDS_H_
#define SLACKSWAP_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/flags.h"

namespace slackswap {

struct Command {
  std::string name;
  std::string summary;
  // What follows the command name in its usage line.
  std::string synopsis;
  FlagSpecs flags;
  std::vector<std::string> examples;
  absl::Status (*run)(const Flags& flags, std::ostream& out);
  // Plain arguments it takes (`list WHAT`).
  int positional = 0;
};

// Every command, in help order.
const std::vector<Command>& Commands();
// nullptr for an unknown name.
const Command* FindCommand(const std::string& name);

// The command's usage line, flags with their defaults, and examples.
std::string CommandHelp(const Command& command);
// The commands, the shared flags, and the registries' names.
std::string GlobalHelp();

// One per command file.
Command SimulateCommand();
Command PlanCommand();
Command FitCommand();
Command SweepCommand();
Command TableCommand();
Command WorkloadCommand();
Command ListCommand();
Command HealthCommand();

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_COMMANDS_H_
