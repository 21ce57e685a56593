#include "planner/analysis.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "common/stop.h"

namespace slackswap {
namespace {

// Rebuilding t re-runs its producer (each op once per chain, however many
// outputs it restores) or its Rebuild recipe (each recipe once per chain),
// then the same for every input that is dropped too (`needs_rebuild`).
// Walked with an explicit stack: chains are as long as the graph. `stack` is
// scratch, left empty.
template <typename NeedsRebuildFn>
int64_t Cost(const Graph& g, const OpDurations& d, int32_t t,
             const NeedsRebuildFn& needs_rebuild,
             absl::flat_hash_set<int32_t>& rebuilt,
             std::vector<int32_t>& stack) {
  int64_t total = 0;
  stack.push_back(t);
  while (!stack.empty()) {
    const int32_t x = stack.back();
    stack.pop_back();
    if (g.tensors[x].rebuild.has_value()) {
      // Recipes are keyed apart from ops: -1 - tensor.
      if (!rebuilt.insert(-1 - x).second) continue;
      total = SaturatingAdd(total, d.rebuild_ns[x]);
    } else {
      const int32_t p = g.index.producer[x];
      if (!rebuilt.insert(p).second) continue;
      total = SaturatingAdd(total, d.op_ns[p]);
    }
    for (int32_t in : RebuildInputs(g, x)) {
      if (needs_rebuild(in)) stack.push_back(in);
    }
  }
  return total;
}

int64_t Cost(const Graph& g, const OpDurations& d, const Plan& plan, int32_t t,
             absl::flat_hash_set<int32_t>& rebuilt) {
  std::vector<int32_t> stack;
  return Cost(
      g, d, t, [&](int32_t in) { return NeedsRebuild(g, plan, in); }, rebuilt,
      stack);
}

}  // namespace

bool NeedsRebuild(const Graph& g, const Plan& plan, int32_t t) {
  const GraphIndex& idx = g.index;
  if (idx.producer[t] == kNone) return false;
  if (g.ops[idx.producer[t]].phase != Phase::kForward) return false;
  if (idx.is_saved[t]) return plan.decisions[t].action == Action::kRecompute;
  return true;  // an unsaved forward tensor is freed after forward
}

absl::Span<const int32_t> RebuildInputs(const Graph& g, int32_t t) {
  if (g.index.has_recipe[t]) return g.tensors[t].rebuild->inputs;
  return g.index.InputsOf(g.index.producer[t]);
}

int64_t RecomputeCostNs(const Graph& g, const OpDurations& d, const Plan& plan,
                        int32_t t) {
  absl::flat_hash_set<int32_t> rebuilt;
  return Cost(g, d, plan, t, rebuilt);
}

int64_t RecomputeCostNs(const Graph& g, const OpDurations& d, const Plan& plan,
                        int32_t t, absl::flat_hash_set<int32_t>* rebuilt) {
  return Cost(g, d, plan, t, *rebuilt);
}

std::vector<bool> RecomputableTensors(const Graph& g) {
  const GraphIndex& idx = g.index;
  const size_t n = g.tensors.size();
  constexpr int32_t kNever = std::numeric_limits<int32_t>::max();
  // When a tensor can be read in backward by a chain: [from, to], op
  // indices. Static and kept tensors always: [0, kNever].
  std::vector<int32_t> from(n, 0), to(n, kNever);
  std::vector<bool> recomputable(n, false);
  // A collective's output first: a recipe may read one made later
  // (model/graph.cc, CheckRebuildOrder).
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (!op.collective.has_value()) continue;
    for (int32_t t : op.outputs) {
      if (g.tensors[t].rebuild.has_value()) continue;
      if (op.phase == Phase::kForward) {
        from[t] = kNever;
        to[t] = -1;
      } else {
        from[t] = static_cast<int32_t>(o) + 1;
        to[t] = idx.last_use[t];
      }
    }
  }
  // Then in production order: any other input is made earlier.
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kForward) continue;
    for (int32_t t : op.outputs) {
      if (op.collective.has_value() && !g.tensors[t].rebuild.has_value()) {
        continue;
      }
      int32_t lo = 0, hi = kNever;
      for (int32_t in : RebuildInputs(g, t)) {
        // Kept, swapped, or read from its own window.
        if (idx.is_saved[in] && !recomputable[in]) continue;
        lo = std::max(lo, from[in]);
        hi = std::min(hi, to[in]);
      }
      from[t] = lo;
      to[t] = hi;
      if (idx.is_saved[t]) {
        const int32_t need = idx.first_bwd_use[t];
        recomputable[t] = lo <= need && need <= hi;
      }
    }
  }
  return recomputable;
}

bool KeepUnrecomputable(const StepAnalysis& a, Plan& plan) {
  bool changed = false;
  // No table: a graph without collectives (or an analysis a test made).
  if (a.recomputable.size() != plan.decisions.size()) return false;
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    Decision& d = plan.decisions[t];
    if (d.action != Action::kRecompute || a.recomputable[t]) continue;
    d = Decision{};
    changed = true;
  }
  return changed;
}

absl::StatusOr<StepAnalysis> AnalyzeStep(const Graph& g, const Hardware& hw,
                                         const std::function<bool()>& stop) {
  StepAnalysis a;
  SLACKSWAP_ASSIGN_OR_RETURN(a.durations, ComputeDurations(g, hw));
  const GraphIndex& idx = g.index;
  const int32_t num_ops = static_cast<int32_t>(g.ops.size());
  a.op_start_ns.resize(num_ops);
  a.op_end_ns.resize(num_ops);
  int64_t now = 0;
  for (int32_t o = 0; o < num_ops; ++o) {
    a.op_start_ns[o] = now;
    now += a.durations.op_ns[o];
    a.op_end_ns[o] = now;
  }
  const int32_t first_bwd =
      idx.first_backward_op == kNone ? num_ops : idx.first_backward_op;
  a.forward_ns = first_bwd == 0 ? 0 : a.op_end_ns[first_bwd - 1];
  a.unconstrained_peak_bytes = idx.saved_bytes;

  // Saved bytes allocated at each op's start with everything kept: each is
  // allocated from its producer's start to its last use's end.
  std::vector<int64_t> change(num_ops + 1, 0);
  for (int32_t t : idx.saved) {
    change[idx.producer[t]] += idx.bytes[t];
    change[idx.last_use[t] + 1] -= idx.bytes[t];
  }
  int64_t resident = 0, most = -1;
  for (int32_t o = 0; o < num_ops; ++o) {
    resident = SaturatingAdd(resident, change[o]);
    if (resident > most) {
      most = resident;
      a.peak_op = o;
    }
  }
  a.peak_ns = a.op_start_ns[a.peak_op];
  // Without collectives every tensor may be recomputed: no per-tensor
  // table to build, or to consult in every plan's prefetch assignment.
  if (std::any_of(g.ops.begin(), g.ops.end(),
                  [](const Op& op) { return op.collective.has_value(); })) {
    a.recomputable = RecomputableTensors(g);
  }

  // RecomputeCostNs under the keep-all plan, with no plan made for it (one
  // decision per tensor): only unsaved forward tensors are dropped. The
  // set and the stack are reused: most chains are short.
  const auto dropped = [&](int32_t in) {
    const int32_t p = idx.producer[in];
    return p != kNone && !idx.is_saved[in] && g.ops[p].phase == Phase::kForward;
  };
  absl::flat_hash_set<int32_t> rebuilt;
  std::vector<int32_t> stack;
  a.candidate_of.assign(g.tensors.size(), kNone);
  a.candidates.reserve(idx.saved.size());
  // One chain is linear in the graph; all of them may not be.
  StopPoller poller(stop, 16);
  for (int32_t t : idx.saved) {
    if (poller.Stop()) {
      return absl::CancelledError("analysing the step stopped");
    }
    Candidate c;
    c.tensor = t;
    c.bytes = idx.bytes[t];
    c.producer = idx.producer[t];
    c.last_fwd_use = idx.last_fwd_use[t];
    c.first_bwd_use = idx.first_bwd_use[t];
    c.d2h_ns = hw.TransferNs(c.bytes, Direction::kD2H, false);
    c.h2d_ns = hw.TransferNs(c.bytes, Direction::kH2D, false);
    rebuilt.clear();
    c.recompute_ns = Cost(g, a.durations, t, dropped, rebuilt, stack);
    a.candidate_of[t] = static_cast<int32_t>(a.candidates.size());
    a.candidates.push_back(c);
  }
  return a;
}

}  // namespace slackswap
