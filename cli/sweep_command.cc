// slackswap sweep (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   [--budgets FROM:TO:STEP] [--policy NAME[,NAME...]|all] [--csv|--json]
//   [--target SHARE]
#include <cmath>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/proto_file.h"
#include "planner/budget.h"
#include "planner/plan_search.h"
#include "planner/policy.h"
#include "slackswap/v1/report.pb.h"

namespace slackswap {
namespace {

absl::StatusOr<std::vector<double>> ParseBudgetRange(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  double v[3];
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &v[0]) ||
      !absl::SimpleAtod(parts[1], &v[1]) ||
      !absl::SimpleAtod(parts[2], &v[2]) || !(v[0] > 0) || !(v[1] >= v[0]) ||
      !(v[2] > 0) || !std::isfinite(v[1])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--budgets '", spec,
        "': expected FROM:TO:STEP fractions with 0 < FROM <= TO, STEP > 0"));
  }
  const int64_t n =
      static_cast<int64_t>(std::floor((v[1] - v[0]) / v[2] + 1e-9)) + 1;
  if (n > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--budgets '", spec, "' has ", n, " points; at most 1000"));
  }
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(v[0] + i * v[2]);
  return out;
}

// Retained throughput of `policy` at `budget` bytes; 0 when infeasible.
absl::StatusOr<SimResult> Evaluate(const std::string& policy,
                                   const PlanningContext& base,
                                   int64_t budget) {
  PlanningContext ctx = base;
  ctx.budget_bytes = budget;
  SimOptions opts;
  opts.record_timeline = false;
  SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome out,
                             PlanAndSimulate(policy, ctx, opts));
  return out.result;
}

// The smallest budget at which `policy` retains `target`: bisection in bytes
// between the last swept point below it and the first at or above it.
absl::Status FindTarget(const std::string& policy, double target,
                        const PlanningContext& ctx,
                        const v1::SweepReport& report, v1::TargetAnswer* out) {
  out->set_policy(policy);
  out->set_target(target);
  const int64_t peak = report.unconstrained_peak_bytes();
  int64_t lo = 0;   // known below target
  int64_t hi = -1;  // known to reach it
  double hi_retained = 0;
  for (const v1::SweepPoint& p : report.points()) {
    if (p.policy() != policy) continue;
    if (p.feasible() && p.throughput_retained() >= target) {
      if (hi < 0 || p.budget_bytes() < hi) {
        hi = p.budget_bytes();
        hi_retained = p.throughput_retained();
      }
    }
  }
  if (hi < 0) {
    // The full peak always retains everything; try it before giving up.
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult r, Evaluate(policy, ctx, peak));
    if (!r.feasible || r.throughput_retained < target) {
      out->set_reached(false);
      return absl::OkStatus();
    }
    hi = peak;
    hi_retained = r.throughput_retained;
  }
  for (const v1::SweepPoint& p : report.points()) {
    if (p.policy() == policy && p.budget_bytes() < hi) {
      lo = std::max(lo, p.budget_bytes());
    }
  }
  // To 0.1% of the peak.
  while (hi - lo > std::max<int64_t>(1, peak / 1000)) {
    const int64_t mid = lo + (hi - lo) / 2;
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult r, Evaluate(policy, ctx, mid));
    if (r.feasible && r.throughput_retained >= target) {
      hi = mid;
      hi_retained = r.throughput_retained;
    } else {
      lo = mid;
    }
  }
  out->set_reached(true);
  out->set_budget_bytes(hi);
  out->set_budget_fraction(static_cast<double>(hi) / peak);
  out->set_throughput_retained(hi_retained);
  return absl::OkStatus();
}

void PrintTable(const v1::SweepReport& report,
                const std::vector<std::string>& policies, std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s: retained throughput (%% of ideal) by activation budget\n"
      "unconstrained peak %s\n",
      report.graph_name(), report.hardware_name(),
      FormatBytes(report.unconstrained_peak_bytes()));
  out << absl::StrFormat("%8s %10s", "budget", "bytes");
  for (const std::string& p : policies) out << absl::StrFormat(" %15s", p);
  out << "\n";
  for (int i = 0; i < report.points_size(); i += policies.size()) {
    const v1::SweepPoint& first = report.points(i);
    out << absl::StrFormat("%8.3f %10s", first.budget_fraction(),
                           FormatBytes(first.budget_bytes()));
    for (size_t j = 0; j < policies.size(); ++j) {
      const v1::SweepPoint& p = report.points(i + j);
      out << (p.feasible()
                  ? absl::StrFormat(" %14.2f%%", 100 * p.throughput_retained())
                  : absl::StrFormat(" %15s", "infeasible"));
    }
    out << "\n";
  }
  for (const v1::PolicyMinimum& m : report.minimums()) {
    out << absl::StrFormat(
        "%s: infeasible below %s (%.3f of the peak), the lowest peak it "
        "reaches\n",
        m.policy(), FormatBytes(m.budget_bytes()), m.budget_fraction());
  }
  for (const v1::TargetAnswer& t : report.targets()) {
    if (!t.reached()) {
      out << absl::StrFormat("%s never reaches %.2f%%\n", t.policy(),
                             100 * t.target());
      continue;
    }
    out << absl::StrFormat(
        "%s reaches %.2f%% from %s (%.3f of the peak): %.2f%%\n", t.policy(),
        100 * t.target(), FormatBytes(t.budget_bytes()), t.budget_fraction(),
        100 * t.throughput_retained());
  }
}

}  // namespace

absl::Status RunSweep(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Flags flags,
      Flags::Parse(args, Join(GraphFlags(), {"budgets", "policy", "target"}),
                   {"csv", "json"}));
  if (flags.Has("csv") && flags.Has("json")) {
    return absl::InvalidArgumentError("give at most one of --csv and --json");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, LoadGraph(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, LoadHardwareFlag(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(
      std::vector<double> fractions,
      ParseBudgetRange(flags.Get("budgets").value_or("0.1:1.0:0.05")));
  SLACKSWAP_ASSIGN_OR_RETURN(std::vector<std::string> policies,
                             ParsePolicies(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> target,
                             flags.GetDouble("target"));
  if (target.has_value() && !(*target > 0 && *target <= 1)) {
    return absl::InvalidArgumentError("--target must be in (0, 1]");
  }

  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw));
  const int64_t peak = g.index.saved_bytes;
  PlanningContext ctx{g, hw, analysis, std::max<int64_t>(1, peak)};
  v1::SweepReport report;
  report.set_graph_name(g.name);
  report.set_hardware_name(hw.name);
  report.set_unconstrained_peak_bytes(peak);
  for (double f : fractions) {
    const int64_t budget = Budget::Fraction(f).Resolve(peak);
    for (const std::string& policy : policies) {
      SLACKSWAP_ASSIGN_OR_RETURN(SimResult r, Evaluate(policy, ctx, budget));
      v1::SweepPoint* p = report.add_points();
      p->set_policy(policy);
      p->set_budget_fraction(f);
      p->set_budget_bytes(budget);
      p->set_feasible(r.feasible);
      p->set_throughput_retained(r.throughput_retained);
      p->set_peak_activation_bytes(r.peak_activation_bytes);
      p->set_infeasible_reason(r.infeasible_reason);
    }
  }
  for (const std::string& policy : policies) {
    bool infeasible = false;
    for (const v1::SweepPoint& p : report.points()) {
      infeasible |= p.policy() == policy && !p.feasible();
    }
    if (!infeasible) continue;
    SLACKSWAP_ASSIGN_OR_RETURN(int64_t minimum,
                               MinimumFeasibleBudget(policy, ctx));
    v1::PolicyMinimum* m = report.add_minimums();
    m->set_policy(policy);
    m->set_budget_bytes(minimum);
    m->set_budget_fraction(static_cast<double>(minimum) / peak);
    for (v1::SweepPoint& p : *report.mutable_points()) {
      if (p.policy() == policy && !p.feasible()) {
        p.set_infeasible_reason(
            absl::StrCat(p.infeasible_reason(), "; ", policy,
                         " needs a budget of at least ", minimum, " bytes"));
      }
    }
  }
  if (target.has_value()) {
    for (const std::string& policy : policies) {
      if (policy == "ideal") continue;  // no budget to find
      SLACKSWAP_RETURN_IF_ERROR(
          FindTarget(policy, *target, ctx, report, report.add_targets()));
    }
  }

  if (flags.Has("json")) {
    out << ToJson(report);
  } else if (flags.Has("csv")) {
    out << "budget_fraction,budget_bytes,policy,feasible,throughput_retained,"
           "peak_activation_bytes\n";
    for (const v1::SweepPoint& p : report.points()) {
      out << absl::StrFormat("%.4f,%d,%s,%d,%.6f,%d\n", p.budget_fraction(),
                             p.budget_bytes(), p.policy(), p.feasible(),
                             p.throughput_retained(),
                             p.peak_activation_bytes());
    }
    if (report.targets_size() > 0) {
      out << "\npolicy,target,reached,budget_fraction,budget_bytes,"
             "throughput_retained\n";
      for (const v1::TargetAnswer& t : report.targets()) {
        out << absl::StrFormat("%s,%.4f,%d,%.4f,%d,%.6f\n", t.policy(),
                               t.target(), t.reached(), t.budget_fraction(),
                               t.budget_bytes(), t.throughput_retained());
      }
    }
  } else {
    PrintTable(report, policies, out);
  }
  return absl::OkStatus();
}

}  // namespace slackswap
