#include "cli/commands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/backend.h"
#include "model/hardware.h"
#include "model/workloads.h"
#include "planner/policy.h"

namespace slackswap {

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = new std::vector<Command>{
      SimulateCommand(), PlanCommand(),     FitCommand(),  SweepCommand(),
      TableCommand(),    WorkloadCommand(), ListCommand(), HealthCommand(),
  };
  return *commands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

namespace {

// `text` in lines of at most `width` characters, each after the first
// indented by `indent` spaces.
std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::string out;
  size_t column = indent;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > indent && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
  }
  return out;
}

constexpr size_t kHelpWidth = 79;

}  // namespace

std::string CommandHelp(const Command& command) {
  std::string out = absl::StrCat(
      "usage: slackswap ", command.name, " ", command.synopsis, "\n\n",
      Wrap(command.summary, 0, kHelpWidth), "\n\nflags:\n");
  size_t width = 0;
  auto head = [](const FlagSpec& f) {
    return absl::StrCat("--", f.name, f.is_switch() ? "" : " ", f.value);
  };
  for (const FlagSpec& f : command.flags) {
    width = std::max(width, head(f).size());
  }
  for (const FlagSpec& f : command.flags) {
    const std::string h = head(f);
    const std::string help = absl::StrCat(
        f.help, f.default_text.empty()
                    ? ""
                    : absl::StrCat(" (default: ", f.default_text, ")"));
    absl::StrAppend(&out, "  ", h, std::string(width - h.size() + 2, ' '),
                    Wrap(help, width + 4, kHelpWidth), "\n");
  }
  absl::StrAppend(&out, "\nexamples:\n");
  for (const std::string& e : command.examples) {
    absl::StrAppend(&out, "  ", e, "\n");
  }
  return out;
}

std::string GlobalHelp() {
  std::string out =
      "usage: slackswap COMMAND [flags]\n"
      "       slackswap help COMMAND | COMMAND --help\n"
      "       slackswap --version\n\ncommands:\n";
  for (const Command& c : Commands()) {
    absl::StrAppend(&out, "  ", c.name, std::string(10 - c.name.size(), ' '),
                    c.summary, "\n");
  }
  absl::StrAppend(
      &out,
      "\nEvery command takes --server HOST:PORT to run on a slackswapd "
      "instead of\nlocally (with --tls-ca, --tls-cert, --tls-key, "
      "--auth-token-file, --timeout).\n\n",
      "Policies:  ", absl::StrJoin(PolicyNames(), ", "), "\n",
      "Workloads: ", absl::StrJoin(WorkloadNames(), ", "), "\n",
      "Hardware:  ", absl::StrJoin(HardwareNames(), ", "), "\n");
  return out;
}

}  // namespace slackswap
