// slackswap simulate (--workload NAME | --graph FILE) --hardware NAME|FILE
//   [--budget B] [--plan FILE] [--json] [--trace FILE] [--timeline-points N]
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/chrome_trace.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "io/sources.h"
#include "planner/budget.h"
#include "sim/simulator.h"

namespace slackswap {
namespace {

std::string Ms(int64_t ns) { return absl::StrFormat("%.3f ms", ns / 1e6); }

void PrintSummary(const Graph& g, const Hardware& hw, const SimResult& r,
                  std::ostream& out) {
  out << absl::StrFormat(
      "%s on %s, budget %s\n", g.name, hw.name,
      r.budget_bytes > 0 ? FormatBytes(r.budget_bytes) : std::string("none"));
  if (!r.feasible) {
    out << "  infeasible: " << r.infeasible_reason << "\n";
    return;
  }
  out << absl::StrFormat("  step              %s (ideal %s)\n", Ms(r.step_ns),
                         Ms(r.ideal_step_ns));
  out << absl::StrFormat("  throughput        %.2f%% of ideal\n",
                         100 * r.throughput_retained);
  out << absl::StrFormat("  peak activation   %s (unconstrained %s)\n",
                         FormatBytes(r.peak_activation_bytes),
                         FormatBytes(r.unconstrained_peak_bytes));
  out << absl::StrFormat("  peak transient    %s, static %s\n",
                         FormatBytes(r.peak_transient_bytes),
                         FormatBytes(r.static_bytes));
  out << absl::StrFormat("  swapped           %d tensors, D2H %s, H2D %s\n",
                         r.swapped_tensors, FormatBytes(r.d2h_bytes),
                         FormatBytes(r.h2d_bytes));
  out << absl::StrFormat("  recomputed        %d tensors, %s of compute\n",
                         r.recomputed_tensors, Ms(r.recompute_ns));
  out << absl::StrFormat(
      "  stalls            prefetch %s, swap-out %s, memory %s\n",
      Ms(r.stall_prefetch_ns), Ms(r.stall_swap_out_ns), Ms(r.stall_memory_ns));
}

}  // namespace

absl::Status RunSimulate(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Flags flags, Flags::Parse(args,
                                Join(GraphFlags(), {"budget", "plan", "trace",
                                                    "timeline-points"}),
                                {"json", "budget-all-memory"}));
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, LoadGraph(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, LoadHardwareFlag(flags));
  Plan plan = Plan::KeepAll(g);
  if (flags.Has("plan")) {
    SLACKSWAP_ASSIGN_OR_RETURN(plan, LoadPlanFile(*flags.Get("plan"), g));
  }
  SimOptions opts;
  if (flags.Has("budget")) {
    SLACKSWAP_ASSIGN_OR_RETURN(Budget budget,
                               ParseBudget(*flags.Get("budget")));
    opts.budget_bytes = budget.Resolve(g.index.saved_bytes);
  } else if (plan.budget_bytes > 0) {
    opts.budget_bytes = plan.budget_bytes;
  }
  opts.budget_covers_all = flags.Has("budget-all-memory");
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> points,
                             flags.GetInt("timeline-points"));
  if (points.has_value()) {
    if (*points < 1 || *points > 1'000'000) {
      return absl::InvalidArgumentError(
          "--timeline-points must be in [1, 1000000]");
    }
    opts.timeline_points = static_cast<int32_t>(*points);
  }
  opts.record_events = flags.Has("trace");
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult r, Simulate(g, hw, plan, opts));
  if (flags.Has("trace")) {
    SLACKSWAP_RETURN_IF_ERROR(
        WriteFile(*flags.Get("trace"), ChromeTraceJson(r, g)));
    r.events.clear();  // the trace has them; keep --json readable
  }
  if (flags.Has("json")) {
    out << ToJson(ResultToProto(r, g));
  } else {
    PrintSummary(g, hw, r, out);
  }
  return absl::OkStatus();
}

}  // namespace slackswap
