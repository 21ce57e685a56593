// slackswap table [--server HOST:PORT ...]: the three reference workloads on
// a100-80gb-pcie4 at an activation budget of half the unconstrained peak,
// one row a model, one column a policy (simulated throughput retained), the
// seed's figure beside.
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "planner/policy.h"

namespace slackswap {
namespace {

struct Row {
  const char* workload;
  // What the SlackSwap paper reports for its own (unpublished) inputs,
  // shown for comparison only (docs/PLANNERS.md, "The reference table").
  double seed_retained;
};

constexpr Row kRows[] = {
    {"bert-large", 0.963}, {"gpt2-xl", 0.976}, {"llama-7b", 0.996}};
constexpr char kHardware[] = "a100-80gb-pcie4";
constexpr double kBudgetFraction = 0.5;

absl::Status RunTable(const Flags& flags, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  out << absl::StrFormat(
      "Throughput retained (%% of ideal), simulated on %s, activation budget "
      "%.1f x the unconstrained peak%s\n",
      kHardware, kBudgetFraction,
      flags.Has("server") ? " (planned by " + *flags.Get("server") + ")" : "");
  out << absl::StrFormat("%-11s %9s", "model", "budget");
  for (const std::string& p : DefaultPolicyNames()) {
    out << absl::StrFormat(" %14s", p);
  }
  out << absl::StrFormat(" %14s %14s\n", "bound", "seed (paper)");
  for (const Row& row : kRows) {
    v1::PlanRequest req;
    req.mutable_step()->mutable_workload()->set_name(row.workload);
    req.mutable_step()->set_hardware_name(kHardware);
    req.set_budget_fraction(kBudgetFraction);
    req.set_include_bound(true);
    SLACKSWAP_ASSIGN_OR_RETURN(v1::PlanResponse resp, backend->Plan(req));
    out << absl::StrFormat("%-11s %9s", row.workload,
                           FormatBytes(resp.report().budget_bytes()));
    for (const v1::PolicyResult& p : resp.report().results()) {
      out << (p.result().feasible()
                  ? absl::StrFormat(" %13.2f%%",
                                    100 * p.result().throughput_retained())
                  : absl::StrFormat(" %14s", "infeasible"));
    }
    out << (resp.report().has_bound_retained()
                ? absl::StrFormat(" %13.2f%%",
                                  100 * resp.report().bound_retained())
                : absl::StrFormat(" %14s", "unavailable"));
    out << absl::StrFormat(" %13.1f%%\n", 100 * row.seed_retained);
  }
  return absl::OkStatus();
}

}  // namespace

Command TableCommand() {
  return {
      .name = "table",
      .summary =
          "every policy on the reference workloads at half their "
          "activation peak, beside the seed paper's figures",
      .synopsis = "[flags]",
      .flags = BackendFlags(),
      .examples = {"slackswap table",
                   "slackswap table --server "
                   "127.0.0.1:50051"},
      .run = &RunTable,
  };
}

}  // namespace slackswap
