// slackswap table: the three reference workloads on a100-80gb-pcie4 at an
// activation budget of half the unconstrained peak, one row a model, one
// column a policy (simulated throughput retained), the seed's figure beside.
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/sources.h"
#include "planner/budget.h"
#include "planner/policy.h"

namespace slackswap {
namespace {

struct Row {
  const char* workload;
  // What the SlackSwap authors report for their own (unpublished) inputs
  // (shared/seed/SEED-en.md), shown for comparison only.
  double seed_retained;
};

constexpr Row kRows[] = {
    {"bert-large", 0.963}, {"gpt2-xl", 0.976}, {"llama-7b", 0.996}};
constexpr char kHardware[] = "a100-80gb-pcie4";
constexpr double kBudgetFraction = 0.5;

}  // namespace

absl::Status RunTable(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {}, {}));
  SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, FindHardware(kHardware));
  const std::vector<std::string> policies = PolicyNames();
  out << absl::StrFormat(
      "Throughput retained (%% of ideal), simulated on %s, activation budget "
      "%.1f x the unconstrained peak\n",
      kHardware, kBudgetFraction);
  out << absl::StrFormat("%-11s %9s", "model", "budget");
  for (const std::string& p : policies) out << absl::StrFormat(" %14s", p);
  out << absl::StrFormat(" %14s\n", "seed (paper)");
  for (const Row& row : kRows) {
    SLACKSWAP_ASSIGN_OR_RETURN(Graph g, BuildWorkload(row.workload, {}));
    SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw));
    const PlanningContext ctx{
        g, hw, analysis,
        Budget::Fraction(kBudgetFraction).Resolve(g.index.saved_bytes)};
    out << absl::StrFormat("%-11s %9s", row.workload,
                           FormatBytes(ctx.budget_bytes));
    SimOptions opts;
    opts.record_timeline = false;
    for (const std::string& p : policies) {
      SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome o, PlanAndSimulate(p, ctx, opts));
      out << (o.result.feasible
                  ? absl::StrFormat(" %13.2f%%",
                                    100 * o.result.throughput_retained)
                  : absl::StrFormat(" %14s", "infeasible"));
    }
    out << absl::StrFormat(" %13.1f%%\n", 100 * row.seed_retained);
  }
  return absl::OkStatus();
}

}  // namespace slackswap
