#include "cli/print.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/format.h"
#include "core/device_fit.h"

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
  if (!r.has_device()) return;
  const v1::DeviceMemory& d = r.device();
  out << absl::StrFormat(
      "  allocator         allocated %s, reserved %s (step %d), "
      "fragmentation %s, %d segments%s\n",
      FormatBytes(d.peak_allocated_bytes()),
      FormatBytes(d.peak_reserved_bytes()), d.peak_reserved_step(),
      FormatBytes(d.fragmentation_bytes()), d.segments(),
      d.expandable_segments() ? " (expandable)" : "");
  out << "  device            " << DeviceSummary(r) << "\n";
}

void PrintNodeSimulation(const v1::NodeSimulation& n, std::ostream& out) {
  out << absl::StrFormat("node %s, %d ranks\n", n.node_name(), n.ranks_size());
  if (n.feasible()) {
    out << absl::StrFormat("  step %s (ideal %s), %.2f%% of ideal\n",
                           FormatMs(n.step_ns()), FormatMs(n.ideal_step_ns()),
                           100 * n.throughput_retained());
  } else {
    out << "  infeasible: " << n.infeasible_reason() << "\n";
  }
  out << absl::StrFormat("  %4s %4s %10s %11s %10s %16s\n", "rank", "gpu",
                         "step ms", "retained %", "stalls ms",
                         "peak activation");
  for (const v1::RankResult& rank : n.ranks()) {
    const v1::SimulationResult& r = rank.result();
    const v1::Stalls& s = r.stalls();
    const int64_t stalls =
        s.prefetch_ns() + s.swap_out_ns() + s.memory_ns() + s.collective_ns();
    out << absl::StrFormat(
        "  %4d %4d %10.3f %11s %10.3f %16s\n", rank.rank(), rank.gpu(),
        r.step_ns() / 1e6,
        r.feasible() ? absl::StrFormat("%.2f", 100 * r.throughput_retained())
                     : std::string("infeasible"),
        stalls / 1e6, FormatBytes(r.peak_activation_bytes()));
  }
  out << absl::StrFormat("  %-28s %8s %8s %7s %7s\n", "link", "H2D GB",
                         "D2H GB", "H2D %", "D2H %");
  for (const v1::LinkUsage& link : n.links()) {
    out << absl::StrFormat("  %-28s %8.3f %8.3f %7.2f %7.2f\n", link.name(),
                           link.h2d_bytes() / 1e9, link.d2h_bytes() / 1e9,
                           100 * link.h2d_utilization(),
                           100 * link.d2h_utilization());
  }
  for (const v1::SocketUsage& socket : n.sockets()) {
    out << absl::StrFormat("  pinned on %s: peak %s of %s\n", socket.name(),
                           FormatBytes(socket.peak_pinned_bytes()),
                           FormatBytes(socket.pinned_capacity_bytes()));
  }
}

namespace {

// "fits" / "no" for a result whose device was modelled, "-" otherwise.
std::string FitsCell(const v1::SimulationResult& r) {
  if (!r.has_device()) return "-";
  return r.device().fits_device() ? "fits" : "no";
}

std::string BudgetLine(const v1::PlanReport& report) {
  if (report.budget_device()) {
    const v1::DeviceFit& d = report.device();
    std::string line =
        absl::StrFormat("budget: the device (%s, less a %s framework reserve",
                        FormatBytes(d.capacity_bytes()),
                        FormatBytes(d.framework_reserve_bytes()));
    if (d.headroom_bytes() > 0) {
      line += absl::StrFormat(" and %s of headroom",
                              FormatBytes(d.headroom_bytes()));
    }
    return line + ")";
  }
  return absl::StrFormat(
      "budget %s%s (%.2f of the %s unconstrained peak)",
      FormatBytes(report.budget_bytes()),
      report.budget_covers_all_memory() ? " of activation and transient memory"
                                        : "",
      report.budget_fraction(), FormatBytes(report.unconstrained_peak_bytes()));
}

}  // namespace

namespace {

// One policy's row: its figures, or why it has none.
void PrintPolicyRow(const v1::PolicyResult& p, bool budgets,
                    std::ostream& out) {
  const v1::SimulationResult& r = p.result();
  if (!p.unavailable().empty()) {
    out << absl::StrFormat("  %-15s unavailable: %s\n", p.policy(),
                           p.unavailable());
    return;
  }
  if (!r.feasible()) {
    out << absl::StrFormat("  %-15s infeasible: %s", p.policy(),
                           r.infeasible_reason());
    if (p.has_min_budget_bytes()) {
      out << absl::StrFormat(
          " (its plans are feasible from %s, %.3f of "
          "the peak)",
          FormatBytes(p.min_budget_bytes()), p.min_budget_fraction());
    }
    out << "\n";
    return;
  }
  out << absl::StrFormat(
      "  %-15s %8.2f%% %10.3f %9s%s %9s %4s %11d %11d %9.1f", p.policy(),
      100 * r.throughput_retained(), r.step_ns() / 1e6,
      FormatBytes(r.peak_activation_bytes()),
      !budgets ? ""
      : p.plan().budget_bytes() == 0
          ? absl::StrFormat(" %9s", "-")
          : absl::StrFormat(" %9s", FormatBytes(p.plan().budget_bytes())),
      r.has_device() ? FormatBytes(r.device().peak_reserved_bytes()) : "-",
      FitsCell(r), r.swapped_tensors(), r.recomputed_tensors(),
      p.planning_seconds() * 1e3);
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

// The lines under the table: the bound, an unmet budget, the device.
void PrintReportNotes(const v1::PlanReport& report, std::ostream& out) {
  if (report.has_bound_retained()) {
    out << absl::StrFormat(
        "  bound: no plan retains more than %.3f%% (a linear-programming "
        "relaxation)\n",
        100 * report.bound_retained());
  } else if (!report.bound_unavailable().empty()) {
    out << "  bound unavailable: " << report.bound_unavailable() << "\n";
  }
  if (!report.budget_unmet().empty()) {
    out << "  budget not met: " << report.budget_unmet() << "\n";
  }
  if (!report.has_device()) return;
  const v1::DeviceFit& d = report.device();
  out << "  device: " << d.summary();
  if (d.fits_device()) {
    out << (d.fits_without_plan() ? " (fits without a plan)"
                                  : " (needs a plan)");
  } else if (report.budget_device()) {
    out << absl::StrFormat(" (no plan fits: the least any needs is %s)",
                           FormatDeviceBytes(d.min_device_bytes()));
  } else {
    out << " (no plan at this budget fits; --budget device searches for "
           "one)";
  }
  out << "\n";
}

// A report's line for plans made on a node: the rates each rank's plans
// counted on, and that every `judged` (result, point) is the node's.
template <typename Report>
void PrintNodeLine(const Report& report, absl::string_view judged,
                   std::ostream& out) {
  if (report.node_name().empty()) return;
  out << absl::StrFormat(
      "on node %s, %d ranks: each rank's plan counts on %.2f GB/s H2D and "
      "%.2f GB/s D2H (its share of the shared links); every %s is the whole "
      "node simulated, its slowest rank's\n",
      report.node_name(), report.ranks(), report.planned_h2d_gbps(),
      report.planned_d2h_gbps(), judged);
}

}  // namespace

void PrintPlanReport(const v1::PlanReport& report, std::ostream& out) {
  out << absl::StrFormat("%s on %s, %s\n", report.graph_name(),
                         report.hardware_name(), BudgetLine(report));
  PrintNodeLine(report, "result", out);
  // A searched budget differs by policy: each row shows its own.
  const bool budgets =
      report.budget_device() || report.budget_covers_all_memory();
  out << absl::StrFormat("  %-15s %9s %10s %9s%s %9s %4s %11s %11s %9s%s\n",
                         "policy", "retained", "step ms", "peak",
                         budgets ? absl::StrFormat(" %9s", "budget") : "",
                         "reserved", "fits", "swapped", "recomputed", "plan ms",
                         report.has_bound_retained() ? "  to bound" : "");
  for (const v1::PolicyResult& p : report.results()) {
    PrintPolicyRow(p, budgets, out);
  }
  PrintReportNotes(report, out);
}

void PrintSweepTable(const v1::SweepReport& report,
                     const std::vector<std::string>& policies,
                     std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s: retained throughput (%% of ideal) by activation budget\n"
      "unconstrained peak %s\n",
      report.graph_name(), report.hardware_name(),
      FormatBytes(report.unconstrained_peak_bytes()));
  PrintNodeLine(report, "point", out);
  // A column when the bound was asked for: each budget's, or unavailable.
  const bool bound = report.points_size() > 0 &&
                     (report.points(0).has_bound_retained() ||
                      !report.points(0).bound_unavailable().empty());
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
  // Why a budget has no bound, once per reason (on a node, one for all).
  std::vector<std::string> reasons;
  for (const v1::SweepPoint& p : report.points()) {
    if (!p.bound_unavailable().empty() &&
        std::find(reasons.begin(), reasons.end(), p.bound_unavailable()) ==
            reasons.end()) {
      reasons.push_back(p.bound_unavailable());
    }
  }
  for (const std::string& r : reasons) {
    out << "bound unavailable: " << r << "\n";
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
