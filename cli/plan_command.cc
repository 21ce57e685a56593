// slackswap plan (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   --budget B [--policy NAME|all] [--out PLAN_FILE] [--json]
//   [--timeline-points N]
#include <chrono>
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "planner/budget.h"
#include "planner/policy.h"
#include "slackswap/v1/report.pb.h"

namespace slackswap {

void PrintPolicyTable(const v1::PlanReport& report, std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s, budget %s (%.2f of the %s unconstrained peak)\n",
      report.graph_name(), report.hardware_name(),
      FormatBytes(report.budget_bytes()), report.budget_fraction(),
      FormatBytes(report.unconstrained_peak_bytes()));
  out << absl::StrFormat("  %-15s %9s %10s %9s %11s %11s %9s\n", "policy",
                         "retained", "step ms", "peak", "swapped", "recomputed",
                         "plan ms");
  for (const v1::PolicyResult& p : report.results()) {
    const v1::SimulationResult& r = p.result();
    if (!r.feasible()) {
      out << absl::StrFormat("  %-15s infeasible: %s\n", p.policy(),
                             r.infeasible_reason());
      continue;
    }
    out << absl::StrFormat(
        "  %-15s %8.2f%% %10.3f %9s %11d %11d %9.1f\n", p.policy(),
        100 * r.throughput_retained(), r.step_ns() / 1e6,
        FormatBytes(r.peak_activation_bytes()), r.swapped_tensors(),
        r.recomputed_tensors(), p.planning_seconds() * 1e3);
  }
}

absl::Status RunPlan(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Flags flags, Flags::Parse(args,
                                Join(GraphFlags(), {"budget", "policy", "out",
                                                    "timeline-points"}),
                                {"json"}));
  if (!flags.Has("budget")) {
    return absl::InvalidArgumentError(
        "plan needs --budget (a fraction such as 0.5, or bytes such as 20GB)");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, LoadGraph(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, LoadHardwareFlag(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(Budget budget, ParseBudget(*flags.Get("budget")));
  SLACKSWAP_ASSIGN_OR_RETURN(std::vector<std::string> policies,
                             ParsePolicies(flags));
  if (flags.Has("out") && policies.size() != 1) {
    return absl::InvalidArgumentError("--out needs exactly one --policy");
  }
  SimOptions report_opts;
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> points,
                             flags.GetInt("timeline-points"));
  if (points.has_value()) {
    if (*points < 1 || *points > 1'000'000) {
      return absl::InvalidArgumentError(
          "--timeline-points must be in [1, 1000000]");
    }
    report_opts.timeline_points = static_cast<int32_t>(*points);
  } else {
    report_opts.record_timeline = false;
  }

  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw));
  const PlanningContext ctx{g, hw, analysis,
                            budget.Resolve(g.index.saved_bytes)};
  v1::PlanReport report;
  report.set_graph_name(g.name);
  report.set_hardware_name(hw.name);
  report.set_budget_bytes(ctx.budget_bytes);
  report.set_unconstrained_peak_bytes(g.index.saved_bytes);
  report.set_budget_fraction(static_cast<double>(ctx.budget_bytes) /
                             std::max<int64_t>(1, g.index.saved_bytes));
  for (const std::string& name : policies) {
    const auto start = std::chrono::steady_clock::now();
    SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome outcome,
                               PlanAndSimulate(name, ctx, report_opts));
    const std::chrono::duration<double> spent =
        std::chrono::steady_clock::now() - start;
    v1::PolicyResult* p = report.add_results();
    p->set_policy(name);
    *p->mutable_result() = ResultToProto(outcome.result, g);
    *p->mutable_plan() = PlanToProto(outcome.plan, g, hw.name);
    p->set_planning_seconds(spent.count());
    if (flags.Has("out")) {
      SLACKSWAP_RETURN_IF_ERROR(WriteProtoFile(*flags.Get("out"), p->plan()));
    }
  }
  if (flags.Has("json")) {
    out << ToJson(report);
  } else {
    PrintPolicyTable(report, out);
  }
  return absl::OkStatus();
}

}  // namespace slackswap
