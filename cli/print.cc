#include "cli/print.h"

#include "absl/strings/str_format.h"
#include "common/format.h"

namespace slackswap {

void PrintSimulation(const std::string& title, const v1::SimulationResult& r,
                     std::ostream& out) {
  out << absl::StrFormat("%s, budget %s\n", title,
                         r.budget_bytes() > 0 ? FormatBytes(r.budget_bytes())
                                              : std::string("none"));
  if (!r.feasible()) {
    out << "  infeasible: " << r.infeasible_reason() << "\n";
    return;
  }
  out << absl::StrFormat("  step              %s (ideal %s)\n",
                         FormatMs(r.step_ns()), FormatMs(r.ideal_step_ns()));
  out << absl::StrFormat("  throughput        %.2f%% of ideal\n",
                         100 * r.throughput_retained());
  out << absl::StrFormat("  peak activation   %s at %s (unconstrained %s)\n",
                         FormatBytes(r.peak_activation_bytes()),
                         FormatMs(r.peak_activation_ns()),
                         FormatBytes(r.unconstrained_peak_bytes()));
  out << absl::StrFormat("  peak transient    %s, static %s\n",
                         FormatBytes(r.peak_transient_bytes()),
                         FormatBytes(r.static_bytes()));
  out << absl::StrFormat("  swapped           %d tensors, D2H %s, H2D %s\n",
                         r.swapped_tensors(), FormatBytes(r.d2h_bytes()),
                         FormatBytes(r.h2d_bytes()));
  out << absl::StrFormat("  recomputed        %d tensors, %s of compute\n",
                         r.recomputed_tensors(), FormatMs(r.recompute_ns()));
  out << absl::StrFormat(
      "  stalls            prefetch %s, swap-out %s, memory %s\n",
      FormatMs(r.stalls().prefetch_ns()), FormatMs(r.stalls().swap_out_ns()),
      FormatMs(r.stalls().memory_ns()));
}

void PrintPlanReport(const v1::PlanReport& report, std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s, budget %s (%.2f of the %s unconstrained peak)\n",
      report.graph_name(), report.hardware_name(),
      FormatBytes(report.budget_bytes()), report.budget_fraction(),
      FormatBytes(report.unconstrained_peak_bytes()));
  const bool bound = report.has_bound_retained();
  out << absl::StrFormat("  %-15s %9s %10s %9s %11s %11s %9s%s\n", "policy",
                         "retained", "step ms", "peak", "swapped", "recomputed",
                         "plan ms", bound ? "  to bound" : "");
  for (const v1::PolicyResult& p : report.results()) {
    const v1::SimulationResult& r = p.result();
    if (!p.unavailable().empty()) {
      out << absl::StrFormat("  %-15s unavailable: %s\n", p.policy(),
                             p.unavailable());
      continue;
    }
    if (!r.feasible()) {
      out << absl::StrFormat("  %-15s infeasible: %s\n", p.policy(),
                             r.infeasible_reason());
      continue;
    }
    out << absl::StrFormat(
        "  %-15s %8.2f%% %10.3f %9s %11d %11d %9.1f", p.policy(),
        100 * r.throughput_retained(), r.step_ns() / 1e6,
        FormatBytes(r.peak_activation_bytes()), r.swapped_tensors(),
        r.recomputed_tensors(), p.planning_seconds() * 1e3);
    if (p.has_gap_to_bound()) {
      out << absl::StrFormat(" %8.3f pp", 100 * p.gap_to_bound());
    }
    if (p.has_optimal_proven()) {
      out << absl::StrFormat("  (%s; the model's bound %.3f%%)",
                             p.optimal_proven()
                                 ? "proven optimal for the model"
                                 : "not proven optimal for the model",
                             100 * p.model_bound_retained());
    }
    out << "\n";
  }
  if (bound) {
    out << absl::StrFormat(
        "  bound: no plan retains more than %.3f%% (a linear-programming "
        "relaxation)\n",
        100 * report.bound_retained());
  } else if (!report.bound_unavailable().empty()) {
    out << "  bound unavailable: " << report.bound_unavailable() << "\n";
  }
}

void PrintSweepTable(const v1::SweepReport& report,
                     const std::vector<std::string>& policies,
                     std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s: retained throughput (%% of ideal) by activation budget\n"
      "unconstrained peak %s\n",
      report.graph_name(), report.hardware_name(),
      FormatBytes(report.unconstrained_peak_bytes()));
  const bool bound =
      report.points_size() > 0 && report.points(0).has_bound_retained();
  out << absl::StrFormat("%8s %10s", "budget", "bytes");
  for (const std::string& p : policies) out << absl::StrFormat(" %15s", p);
  if (bound) out << absl::StrFormat(" %15s", "bound");
  out << "\n";
  for (int i = 0;
       i + policies.size() <= static_cast<size_t>(report.points_size());
       i += policies.size()) {
    const v1::SweepPoint& first = report.points(i);
    out << absl::StrFormat("%8.3f %10s", first.budget_fraction(),
                           FormatBytes(first.budget_bytes()));
    for (size_t j = 0; j < policies.size(); ++j) {
      const v1::SweepPoint& p = report.points(i + j);
      out << (!p.unavailable().empty() ? absl::StrFormat(" %15s", "unavailable")
              : p.feasible()
                  ? absl::StrFormat(" %14.2f%%", 100 * p.throughput_retained())
                  : absl::StrFormat(" %15s", "infeasible"));
    }
    if (bound) {
      out << (first.has_bound_retained()
                  ? absl::StrFormat(" %14.2f%%", 100 * first.bound_retained())
                  : absl::StrFormat(" %15s", "unavailable"));
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

void PrintSweepCsv(const v1::SweepReport& report, std::ostream& out) {
  out << "budget_fraction,budget_bytes,policy,feasible,throughput_retained,"
         "peak_activation_bytes,bound_retained,gap_to_bound\n";
  for (const v1::SweepPoint& p : report.points()) {
    // Empty fields where there is no bound (or the policy had no result).
    const std::string bound = p.has_bound_retained()
                                  ? absl::StrFormat("%.6f", p.bound_retained())
                                  : "";
    const std::string gap =
        p.has_gap_to_bound() ? absl::StrFormat("%.6f", p.gap_to_bound()) : "";
    out << absl::StrFormat("%.4f,%d,%s,%d,%.6f,%d,%s,%s\n", p.budget_fraction(),
                           p.budget_bytes(), p.policy(), p.feasible(),
                           p.throughput_retained(), p.peak_activation_bytes(),
                           bound, gap);
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
}

}  // namespace slackswap
