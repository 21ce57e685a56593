#include "planner/internal/step_bound.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/numeric/int128.h"
#include "common/saturating.h"

namespace slackswap {
namespace {

bool Recomputable(const StepAnalysis& a, int32_t t) {
  return a.recomputable.empty() || a.recomputable[t];
}

// Compute that restores bytes: an op re-run, or a rebuild recipe.
struct Restorer {
  int64_t cost_ns = 0;
  int64_t bytes = 0;
};

// x restores more bytes per nanosecond than y, compared exactly.
bool CheaperPerByte(const Restorer& x, const Restorer& y) {
  return absl::int128(x.cost_ns) * y.bytes < absl::int128(y.cost_ns) * x.bytes;
}

}  // namespace

int64_t LeastFeasibleStepNs(const PlanningContext& ctx,
                            absl::Span<const int32_t> swaps) {
  const GraphIndex& idx = ctx.graph.index;
  const StepAnalysis& a = ctx.analysis;
  const OpDurations& d = a.durations;
  const int32_t peak = a.peak_op;
  if (ctx.budget_bytes <= 0 || peak == kNone) return d.total_ns;
  // Allocated when the peak op starts with everything kept (its own outputs
  // included): AnalyzeStep's count at peak_op.
  int64_t need = -ctx.budget_bytes;
  for (int32_t t : idx.saved) {
    if (idx.producer[t] <= peak && peak <= idx.last_use[t]) {
      need = SaturatingAdd(need, idx.bytes[t]);
    }
  }
  // Moved before the peak op starts: made before it, its forward readers
  // done (kNone, -1, is none), and so not its own output nor read by it.
  const auto freeable = [&](int32_t t) {
    return idx.producer[t] < peak && idx.last_fwd_use[t] < peak &&
           peak <= idx.last_use[t];
  };
  std::vector<bool> swapped(idx.bytes.size(), false);
  for (int32_t t : swaps) {
    if (swapped[t]) continue;
    swapped[t] = true;
    if (idx.is_saved[t] && freeable(t)) need -= idx.bytes[t];
  }
  if (need <= 0) return d.total_ns;

  std::vector<Restorer> restorers;
  std::vector<int32_t> rerun_of(d.op_ns.size(), kNone);  // by producer
  for (int32_t t : idx.saved) {
    if (swapped[t] || !freeable(t) || !Recomputable(a, t)) continue;
    const int32_t p = idx.producer[t];
    if (rerun_of[p] == kNone) {
      rerun_of[p] = static_cast<int32_t>(restorers.size());
      restorers.push_back({d.op_ns[p], 0});
    }
    // A re-run may restore a recipe's tensor too (as a sibling), so it
    // counts in both.
    restorers[rerun_of[p]].bytes += idx.bytes[t];
    if (idx.has_recipe[t]) restorers.push_back({d.rebuild_ns[t], idx.bytes[t]});
  }
  // What restores nothing helps nothing (and would tie with everything in
  // the order below).
  restorers.erase(
      std::remove_if(restorers.begin(), restorers.end(),
                     [](const Restorer& r) { return r.bytes <= 0; }),
      restorers.end());
  std::sort(restorers.begin(), restorers.end(), CheaperPerByte);
  int64_t least = d.total_ns;
  for (const Restorer& r : restorers) {
    if (r.bytes >= need) {
      // The part of it that restores what is still needed, rounded down.
      const absl::int128 part = absl::int128(r.cost_ns) * need / r.bytes;
      return SaturatingAdd(least, static_cast<int64_t>(part));
    }
    least = SaturatingAdd(least, r.cost_ns);
    need -= r.bytes;
  }
  return std::numeric_limits<int64_t>::max();
}

bool MayFitTheBudget(const PlanningContext& ctx, const Plan& plan) {
  const GraphIndex& idx = ctx.graph.index;
  const int32_t num_ops = static_cast<int32_t>(ctx.graph.ops.size());
  const int32_t forward_ops =
      idx.first_backward_op == kNone ? num_ops : idx.first_backward_op;
  // A plan of another graph is the lowering's to refuse, with its message.
  if (ctx.budget_bytes <= 0 || forward_ops == 0 ||
      plan.decisions.size() != idx.bytes.size()) {
    return true;
  }
  // Allocated at each forward op's start: from a saved tensor's producer to
  // its last use, or, moved, only until its last forward reader is done.
  std::vector<int64_t> change(forward_ops + 1, 0);
  for (int32_t t : idx.saved) {
    const int32_t from = idx.producer[t];
    if (from >= forward_ops) continue;
    int32_t to = std::min(idx.last_use[t], forward_ops - 1);
    if (plan.decisions[t].action != Action::kKeep) {
      to = std::min(to, std::max(from, idx.last_fwd_use[t]));
    }
    change[from] += idx.bytes[t];
    change[to + 1] -= idx.bytes[t];
  }
  int64_t allocated = 0;
  for (int32_t o = 0; o < forward_ops; ++o) {
    allocated += change[o];
    if (allocated > ctx.budget_bytes) return false;
  }
  return true;
}

int64_t LeastComputeNs(const PlanningContext& ctx, const Plan& plan) {
  const GraphIndex& idx = ctx.graph.index;
  const StepAnalysis& a = ctx.analysis;
  int64_t least = a.durations.total_ns;
  if (plan.decisions.size() != idx.bytes.size()) return least;
  std::vector<bool> rerun(a.durations.op_ns.size(), false);
  for (int32_t t : idx.saved) {
    if (plan.decisions[t].action != Action::kRecompute || idx.has_recipe[t] ||
        !Recomputable(a, t)) {
      continue;
    }
    const int32_t p = idx.producer[t];
    if (rerun[p]) continue;
    rerun[p] = true;
    least = SaturatingAdd(least, a.durations.op_ns[p]);
  }
  return least;
}

}  // namespace slackswap
