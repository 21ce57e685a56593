// slackswap sweep (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   [--budgets FROM:TO:STEP] [--policy NAME[,NAME...]|all] [--csv|--json]
//   [--target SHARE] [--node NAME [--ranks N]] [--server HOST:PORT ...]
//
// With --node every budget's plans are made as plan --node makes them: for
// the node's ranks, each judged by simulating them all.
#include <ostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/inputs.h"
#include "cli/print.h"
#include "common/status_macros.h"
#include "io/proto_file.h"
#include "planner/policy.h"

namespace slackswap {

namespace {

// A budget fraction as help shows it: 0.05, 0.1, 1.0.
std::string HelpFraction(double fraction) {
  std::string out = absl::StrCat(fraction);
  if (!absl::StrContains(out, '.')) out += ".0";
  return out;
}

// --budgets' default, FROM:TO:STEP.
std::string DefaultBudgets() {
  return absl::StrCat(HelpFraction(kDefaultSweepFrom), ":",
                      HelpFraction(kDefaultSweepTo), ":",
                      HelpFraction(kDefaultSweepStep));
}

absl::Status RunSweep(const Flags& flags, std::ostream& out) {
  if (flags.Has("csv") && flags.Has("json")) {
    return absl::InvalidArgumentError("give at most one of --csv and --json");
  }
  v1::SweepRequest req;
  SLACKSWAP_ASSIGN_OR_RETURN(*req.mutable_step(), StepFromFlags(flags));
  SLACKSWAP_RETURN_IF_ERROR(SetNodeFromFlags(flags, req.mutable_step()));
  double v[3] = {kDefaultSweepFrom, kDefaultSweepTo, kDefaultSweepStep};
  if (flags.Has("budgets")) {
    const std::string range = *flags.Get("budgets");
    std::vector<std::string> parts = absl::StrSplit(range, ':');
    if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &v[0]) ||
        !absl::SimpleAtod(parts[1], &v[1]) ||
        !absl::SimpleAtod(parts[2], &v[2])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--budgets '", range, "': expected FROM:TO:STEP fractions"));
    }
  }
  req.set_from(v[0]);
  req.set_to(v[1]);
  req.set_step_fraction(v[2]);
  AddPolicies(flags, req.mutable_policies());
  SLACKSWAP_RETURN_IF_ERROR(SetBoundFlags(flags, &req));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> target,
                             flags.GetDouble("target"));
  if (target.has_value()) {
    if (!(*target > 0 && *target <= 1)) {
      return absl::InvalidArgumentError("--target must be in (0, 1]");
    }
    req.set_target(*target);
  }

  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  v1::SweepReport report;
  report.set_graph_name(StepGraphName(req.step()));
  report.set_hardware_name(StepHardwareName(req.step()));
  SLACKSWAP_RETURN_IF_ERROR(
      backend->Sweep(req, [&](const v1::SweepResponse& msg) {
        if (msg.has_point()) {
          *report.add_points() = msg.point();
          report.set_unconstrained_peak_bytes(msg.unconstrained_peak_bytes());
          report.set_node_name(msg.node_name());
          report.set_ranks(msg.ranks());
          report.set_planned_h2d_gbps(msg.planned_h2d_gbps());
          report.set_planned_d2h_gbps(msg.planned_d2h_gbps());
        }
        if (msg.has_target()) *report.add_targets() = msg.target();
        if (msg.has_minimum()) *report.add_minimums() = msg.minimum();
      }));
  if (flags.Has("json")) {
    out << ToJson(report);
  } else if (flags.Has("csv")) {
    PrintSweepCsv(report, out);
  } else {
    std::vector<std::string> policies(req.policies().begin(),
                                      req.policies().end());
    if (policies.empty()) policies = DefaultPolicyNames();
    PrintSweepTable(report, policies, out);
  }
  return absl::OkStatus();
}

}  // namespace

Command SweepCommand() {
  return {
      .name = "sweep",
      .summary =
          "plan a range of budgets: throughput retained against "
          "memory, per policy",
      .synopsis = "(--workload NAME | --graph FILE) [flags]",
      .flags =
          Concat({StepFlags(),
                  {{"budgets", "FROM:TO:STEP", "budget fractions to plan",
                    DefaultBudgets()},
                   PolicyFlag(),
                   {"csv", "", "print CSV"},
                   {"json", "", "print a SweepReport as JSON"},
                   {"target", "SHARE",
                    "also find the smallest budget retaining SHARE (0.99)"}},
                  BoundFlags(),
                  NodeFlags("every budget's plans for every rank, judged on "
                            "the whole node"),
                  BackendFlags()}),
      .examples = {"slackswap sweep --workload gpt2-xl --target 0.99",
                   "slackswap sweep --workload llama-7b --budgets "
                   "0.3:0.6:0.1 --policy slackswap,capuchin --csv"},
      .run = &RunSweep,
  };
}

}  // namespace slackswap
