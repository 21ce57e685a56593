#include "planner/internal/step_bound.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/numeric/int128.h"
#include "common/saturating.h"
#include "model/node.h"
#include "planner/analysis.h"

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

// The saved activation bytes allocated when each of the first
// `forward_ops` ops starts: a saved tensor from its producer to its last
// use, or, when `leaves_after_forward(t)`, only until its last forward
// reader is done.
template <typename LeavesAfterForward>
std::vector<int64_t> AllocatedAtForwardStarts(
    const GraphIndex& idx, int32_t forward_ops,
    const LeavesAfterForward& leaves_after_forward) {
  std::vector<int64_t> allocated(forward_ops + 1, 0);  // changes, then sums
  for (int32_t t : idx.saved) {
    const int32_t from = idx.producer[t];
    if (from >= forward_ops) continue;
    int32_t to = std::min(idx.last_use[t], forward_ops - 1);
    if (leaves_after_forward(t)) {
      to = std::min(to, std::max(from, idx.last_fwd_use[t]));
    }
    allocated[from] += idx.bytes[t];
    allocated[to + 1] -= idx.bytes[t];
  }
  for (int32_t o = 1; o < forward_ops; ++o) allocated[o] += allocated[o - 1];
  allocated.pop_back();
  return allocated;
}

// The swaps of `plan` that judging may turn into recomputes (and those into
// keeps): AssignPrefetchPoints converts a swap the first backward op needs,
// itself or through a rebuild, and the rebuild of a converted swap may need
// more. Found by walking back from that op's inputs through every tensor a
// rebuild could have to restore (anything made in the forward pass but a
// kept saved activation), without recursion.
std::vector<bool> SwapsJudgingMayConvert(const Graph& g, const Plan& plan,
                                         int32_t first_backward_op) {
  const GraphIndex& idx = g.index;
  std::vector<bool> may_convert(idx.bytes.size(), false);
  std::vector<bool> walked(idx.bytes.size(), false);
  const absl::Span<const int32_t> first = idx.InputsOf(first_backward_op);
  std::vector<int32_t> stack(first.begin(), first.end());
  while (!stack.empty()) {
    const int32_t t = stack.back();
    stack.pop_back();
    if (walked[t]) continue;
    walked[t] = true;
    const int32_t p = idx.producer[t];
    if (p == kNone || p >= first_backward_op) continue;
    const Action action = plan.decisions[t].action;
    if (idx.is_saved[t] && action == Action::kKeep) continue;
    if (idx.is_saved[t] && action == Action::kSwap) may_convert[t] = true;
    const absl::Span<const int32_t> reads = RebuildInputs(g, t);
    stack.insert(stack.end(), reads.begin(), reads.end());
  }
  return may_convert;
}

// The least time `bytes` take at `bytes_per_ns`. The simulator rounds a
// copy's end up from the bytes left (a double) whenever its rate changes,
// as on a node whenever another rank's copy starts or ends: a billionth of
// the time and a nanosecond are given back for that rounding.
int64_t LeastBytesNs(double bytes_per_ns, int64_t bytes) {
  const double ns = static_cast<double>(bytes) / bytes_per_ns * (1 - 1e-9);
  return std::max<int64_t>(0, SaturatingTrunc(ns) - 1);
}

// The least time a swap-out of `bytes` takes: its latency, then its bytes
// at the GPU's own link rate one way, which no copy exceeds (on a node a
// rank's copy also crosses its switch and socket, shared with the others'
// copies: only slower).
int64_t LeastSwapOutNs(const Hardware& gpu, int64_t bytes) {
  return SaturatingAdd(
      gpu.transfer_latency_ns,
      LeastBytesNs(gpu.Rate(Direction::kD2H, /*both_busy=*/false), bytes));
}

// Bytes released by swaps, indexed by their place in the D2H order: a
// Fenwick tree, to find how many of the first swaps it takes to release a
// given amount.
class ReleasedBytes {
 public:
  explicit ReleasedBytes(size_t n) : tree_(n + 1, 0) {}

  // The swap at `place` (0-based) counts from now on.
  void Add(size_t place, int64_t bytes) {
    total_ += bytes;
    for (size_t i = place + 1; i < tree_.size(); i += i & (~i + 1)) {
      tree_[i] += bytes;
    }
  }

  // The fewest first swaps whose counted bytes reach `need` (> 0), or 0
  // when all of them do not.
  size_t FewestReaching(int64_t need) const {
    if (total_ < need) return 0;
    size_t pos = 0;
    size_t step = 1;
    while (2 * step < tree_.size()) step *= 2;
    for (; step > 0; step /= 2) {
      if (pos + step < tree_.size() && tree_[pos + step] < need) {
        pos += step;
        need -= tree_[pos];
      }
    }
    return pos + 1;
  }

 private:
  std::vector<int64_t> tree_;
  int64_t total_ = 0;
};

// The least compute that restoring tensors costs, per producer: one re-run
// when one of its tensors restored has no rebuild recipe (a re-run restores
// its dropped siblings), else the cheaper of one re-run and all their
// recipes (each comes back by its recipe or by a re-run).
class LeastRestores {
 public:
  LeastRestores(const GraphIndex& idx, const OpDurations& d)
      : idx_(idx), d_(d), restore_ns_(d.op_ns.size(), kUnseen) {}

  // Tensor t (made by an op) comes back at least once.
  void Restore(int32_t t) {
    const int32_t p = idx_.producer[t];
    int64_t& ns = restore_ns_[p];
    if (ns == kRerun) return;
    if (ns == kUnseen) {
      ns = 0;
      producers_.push_back(p);
    }
    if (idx_.has_recipe[t]) {
      ns = SaturatingAdd(ns, d_.rebuild_ns[t]);
    } else {
      ns = kRerun;
      reruns_.push_back(p);
    }
  }
  // Takes a producer newly known to re-run; false when there is none.
  bool NextRerun(int32_t& p) {
    if (reruns_.empty()) return false;
    p = reruns_.back();
    reruns_.pop_back();
    return true;
  }
  int64_t LeastNs() const {
    int64_t sum = 0;
    for (int32_t p : producers_) {
      const int64_t ns = restore_ns_[p];
      sum = SaturatingAdd(
          sum, ns == kRerun ? d_.op_ns[p] : std::min(d_.op_ns[p], ns));
    }
    return sum;
  }

 private:
  static constexpr int64_t kUnseen = -2;
  static constexpr int64_t kRerun = -1;

  const GraphIndex& idx_;
  const OpDurations& d_;
  std::vector<int64_t> restore_ns_;  // by producer: kUnseen, kRerun or ns
  std::vector<int32_t> producers_;   // those seen
  std::vector<int32_t> reruns_;      // newly known to re-run
};

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
  // A moved tensor leaves once its forward readers are done.
  const std::vector<int64_t> allocated = AllocatedAtForwardStarts(
      idx, forward_ops,
      [&](int32_t t) { return plan.decisions[t].action != Action::kKeep; });
  return std::none_of(allocated.begin(), allocated.end(),
                      [&](int64_t bytes) { return bytes > ctx.budget_bytes; });
}

int64_t LeastSwapOutWaitNs(const PlanningContext& ctx, const Plan& plan) {
  const Graph& g = ctx.graph;
  const GraphIndex& idx = g.index;
  const StepAnalysis& a = ctx.analysis;
  const int32_t num_ops = static_cast<int32_t>(g.ops.size());
  const int32_t forward_ops = idx.first_backward_op;
  if (ctx.budget_bytes <= 0 || forward_ops == kNone || forward_ops == 0 ||
      forward_ops >= num_ops || plan.decisions.size() != idx.bytes.size()) {
    return 0;
  }
  // On a node ctx.hw is each rank's fair share of the shared links, slower
  // than a copy that finds them free: the GPU's own link bounds one copy.
  // But the ranks behind a switch, and on a socket, run this plan too, on
  // graphs with the same tensors and ops (NodeRanks), so they issue the
  // same swap-outs no earlier than the ideal timeline; their copies cross
  // the switch's uplink and the socket's memory, which carry all of them
  // together at no more than their one-way rate. So the later of them is
  // done with its first k no earlier than a chain of the copies at the
  // fair share of the most shared link (FairShareGpu's rate, latencies
  // overlapped), and its forward pass waits for that.
  const Hardware& gpu = ctx.node != nullptr ? ctx.node->node->gpu : ctx.hw;
  const double shared_rate =
      ctx.node != nullptr
          ? FairShareGpu(*ctx.node->node,
                         static_cast<int32_t>(ctx.node->graphs.size()))
                .Rate(Direction::kD2H, /*both_busy=*/false)
          : 0;
  const std::vector<bool> may_convert =
      SwapsJudgingMayConvert(g, plan, forward_ops);
  const auto copied = [&](int32_t t) {
    return idx.is_saved[t] && plan.decisions[t].action == Action::kSwap &&
           !may_convert[t];
  };
  // The swaps in D2H order (their producers', then each op's outputs'), the
  // earliest each can be done (issued when its producer ends on the ideal
  // timeline at the earliest), and the first op that can start after it
  // released its bytes (its forward readers done).
  struct SwapOut {
    int64_t done_ns;
    int64_t bytes;
    int32_t releasable_from;
  };
  std::vector<SwapOut> d2h;
  int64_t clock = 0;
  int64_t shared_clock = 0;  // the later rank's, on the most shared link
  for (int32_t o = 0; o < forward_ops; ++o) {
    for (int32_t t : idx.OutputsOf(o)) {
      if (!copied(t)) continue;
      clock = SaturatingAdd(std::max(clock, a.op_end_ns[o]),
                            LeastSwapOutNs(gpu, idx.bytes[t]));
      if (shared_rate > 0) {
        shared_clock = SaturatingAdd(std::max(shared_clock, a.op_end_ns[o]),
                                     LeastBytesNs(shared_rate, idx.bytes[t]));
      }
      d2h.push_back({std::max(clock, shared_clock), idx.bytes[t],
                     std::max(o, idx.last_fwd_use[t]) + 1});
    }
  }
  if (d2h.empty()) return 0;
  // MayFitTheBudget's count, but a copied swap stays to the forward pass's
  // end: its release is what is waited for.
  const std::vector<int64_t> allocated =
      AllocatedAtForwardStarts(idx, forward_ops, [&](int32_t t) {
        return plan.decisions[t].action != Action::kKeep && !copied(t);
      });
  std::vector<int32_t> by_release(d2h.size());
  for (size_t i = 0; i < d2h.size(); ++i) {
    by_release[i] = static_cast<int32_t>(i);
  }
  std::stable_sort(by_release.begin(), by_release.end(),
                   [&](int32_t x, int32_t y) {
                     return d2h[x].releasable_from < d2h[y].releasable_from;
                   });
  ReleasedBytes released(d2h.size());
  size_t next = 0;
  int64_t wait = 0;
  for (int32_t o = 0; o < forward_ops; ++o) {
    for (;
         next < by_release.size() && d2h[by_release[next]].releasable_from <= o;
         ++next) {
      released.Add(by_release[next], d2h[by_release[next]].bytes);
    }
    const int64_t need = allocated[o] - ctx.budget_bytes;
    if (need <= 0) continue;
    const size_t k = released.FewestReaching(need);
    if (k == 0) return std::numeric_limits<int64_t>::max();
    wait = std::max(wait, d2h[k - 1].done_ns - a.op_start_ns[o]);
  }
  return wait;
}

int64_t LeastComputeNs(const PlanningContext& ctx, const Plan& plan) {
  const Graph& g = ctx.graph;
  const GraphIndex& idx = g.index;
  const StepAnalysis& a = ctx.analysis;
  int64_t least = a.durations.total_ns;
  if (plan.decisions.size() != idx.bytes.size()) return least;
  LeastRestores restores(idx, a.durations);
  for (int32_t t : idx.saved) {
    if (plan.decisions[t].action == Action::kRecompute && Recomputable(a, t)) {
      restores.Restore(t);
    }
  }
  // A re-run reads its op's inputs: one the forward pass made and freed (not
  // saved) must be restored too, at least once in the step.
  std::vector<bool> counted;  // those inputs, each restored once
  for (int32_t p; restores.NextRerun(p);) {
    for (int32_t in : idx.InputsOf(p)) {
      if (idx.producer[in] == kNone || idx.is_saved[in]) continue;
      if (counted.empty()) counted.assign(idx.bytes.size(), false);
      if (counted[in]) continue;
      counted[in] = true;
      restores.Restore(in);
    }
  }
  return SaturatingAdd(least, restores.LeastNs());
}

}  // namespace slackswap
