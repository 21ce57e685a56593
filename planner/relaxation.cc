#include "planner/relaxation.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "CbcEventHandler.hpp"
#include "CbcModel.hpp"
#include "ClpEventHandler.hpp"
#include "ClpSimplex.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/saturating.h"
#include "common/stop.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

// Model units: megabytes and microseconds keep the coefficients within a few
// orders of magnitude of each other (bytes and nanoseconds would span 15).
constexpr double kBytesPerUnit = 1e6;
constexpr double kNsPerUnit = 1e3;
constexpr double kInf = std::numeric_limits<double>::infinity();
// The solver's answers are within its tolerances (1e-7): the bound is taken
// this much (relative) below the optimum it reports, so tolerance never
// makes it claim more than is true.
constexpr double kSafetyMargin = 1e-6;
// The largest MILP (in rows) CBC is given per second of its time limit: one
// of its nodes re-solves the LP from scratch, a second and more at 20,000
// rows (gpt2-xl; measured, planner/relaxation.h).
constexpr double kMilpRowsPerSecond = 2'500;

// Rows and columns of a sparse LP, built by appending.
class LpBuilder {
 public:
  int AddColumn(double lo, double hi, double cost) {
    col_lo_.push_back(lo);
    col_hi_.push_back(hi);
    cost_.push_back(cost);
    return static_cast<int>(cost_.size()) - 1;
  }
  int AddRow(double lo, double hi) {
    row_lo_.push_back(lo);
    row_hi_.push_back(hi);
    return static_cast<int>(row_lo_.size()) - 1;
  }
  void Set(int row, int col, double value) {
    if (value == 0) return;
    rows_.push_back(row);
    cols_.push_back(col);
    values_.push_back(value);
  }
  void MarkInteger(int col) { integer_.push_back(col); }

  int columns() const { return static_cast<int>(cost_.size()); }
  int rows() const { return static_cast<int>(row_lo_.size()); }
  CoinPackedMatrix Matrix() const {
    return CoinPackedMatrix(false, rows_.data(), cols_.data(), values_.data(),
                            static_cast<CoinBigIndex>(values_.size()));
  }

  // CLP and CBC take COIN_DBL_MAX for infinity.
  static std::vector<double> Finite(const std::vector<double>& v) {
    std::vector<double> out = v;
    for (double& x : out) {
      if (x == kInf) x = COIN_DBL_MAX;
      if (x == -kInf) x = -COIN_DBL_MAX;
    }
    return out;
  }
  std::vector<double> col_lo() const { return Finite(col_lo_); }
  std::vector<double> col_hi() const { return Finite(col_hi_); }
  std::vector<double> row_lo() const { return Finite(row_lo_); }
  std::vector<double> row_hi() const { return Finite(row_hi_); }
  const std::vector<double>& cost() const { return cost_; }
  const std::vector<int>& integer() const { return integer_; }

 private:
  std::vector<double> col_lo_, col_hi_, cost_, row_lo_, row_hi_;
  std::vector<int> rows_, cols_;
  std::vector<double> values_;
  std::vector<int> integer_;
};

// The first op of each block of consecutive ops, then num_ops: every op its
// own block when there are at most max_steps, else about max_steps blocks
// of equal length, forward and backward shared by their lengths,
// first_backward always starting one.
std::vector<int32_t> BlockStarts(int32_t num_ops, int32_t first_backward,
                                 int32_t max_steps) {
  std::vector<int32_t> start;
  if (num_ops <= max_steps) {
    for (int32_t k = 0; k <= num_ops; ++k) start.push_back(k);
    return start;
  }
  auto split = [&](int32_t from, int32_t to, int64_t blocks) {
    const int64_t ops = to - from;
    blocks = std::clamp<int64_t>(blocks, ops > 0 ? 1 : 0, ops);
    for (int64_t i = 0; i < blocks; ++i) {
      start.push_back(from + static_cast<int32_t>(i * ops / blocks));
    }
  };
  const int64_t forward_blocks =
      static_cast<int64_t>(max_steps) * first_backward / num_ops;
  split(0, first_backward, forward_blocks);
  split(first_backward, num_ops, max_steps - forward_blocks);
  start.push_back(num_ops);
  return start;
}

// Where the decisions live in the model.
struct Layout {
  std::vector<int> swap;       // s_i, per candidate
  std::vector<int> recompute;  // r_i, per candidate
  std::vector<int> recipe;     // z_i, per candidate; -1 without a recipe
  std::vector<int> rerun;      // y_p, per op; -1 for ops no decision re-runs
  // (p, q): re-running op p re-runs op q (an unsaved input of p's), p first.
  std::vector<std::pair<int32_t, int32_t>> chain;
};

// The model of docs/PLANNERS.md ("The bound"), in MB and us. A copy holds
// its stream for the latency and then its bytes at the link's rate, so on
// each stream a tensor weighs its bytes plus latency x rate ("stream
// bytes", e_i; its real bytes b_i):
//   per candidate i: s_i (swapped), r_i (recomputed), s_i + r_i <= 1;
//   per forward op p making a candidate: y_p (re-run), r_i <= y_p (+ z_i,
//     its recipe, when it has one);
//   per op k: g_k >= 0, time added before op k (idle or recompute);
//     u_k, D2H stream bytes moved while op k-1 runs and during g_k,
//     u_k <= rate * (dur_{k-1} + g_k); M_k = M_{k-1} + u_k, moved by the
//     start of op k; P_k, stream bytes of the swapped tensors produced
//     before op k, M_k <= P_k; D_k, those of the swapped tensors first used
//     by op k, D_k <= M_k (out before they come back);
//     GS_k and GR_k, swapped and recomputed real bytes of the tensors op k
//     comes between their last forward use and first backward use (their
//     gap);
//     v_k, Q_k: as u_k, M_k for H2D in real bytes, F_k the real bytes of
//     the swapped tensors first used by op k, F_k <= Q_k;
//     h_k, H_k, E_k: the same in H2D stream bytes, E_k <= H_k <= rho M_k
//     (rho = max(1, H2D rate / D2H rate): a tensor's H2D stream bytes are at
//     most rho times its D2H ones);
//     W_k <= a_k M_k and W_k <= GS_k - (Q_k - F_k), swapped bytes
//     released (on the host, not brought back early), where a_k is the
//     largest b_i / e_i among the tensors in their gap at k (finished
//     copies free at most that share of the stream bytes they took), and
//     likewise Q_k <= a'_k M_k over the tensors made before k; and the
//     copies released bytes take: W_k + latency x rate x n_k <= M_k with
//     n_k >= (W_k - B_k(tau)) / tau for a few sizes tau, B_k(tau) the bytes
//     of the swappable tensors larger than tau in their gap at k; memory at
//     op k's start:
//     C_k - GR_k - W_k <= budget;
//   recompute fits in backward's added time:
//     sum_{k backward} g_k >= sum_p dur_p y_p + sum_i rebuild_i z_i;
//   minimise sum_k g_k.
//
// On a graph of more than max_steps ops, time is coarser: flows and the
// sums that bound them at the starts of blocks of consecutive ops (ops k ..
// k'-1 with G the time added before ops k+1 .. k'), and one memory row per
// block, at the op where keeping everything needs the most, reading M and F
// at the next block start and Q at this one (each the loose side of its
// value at that op). Every constraint of the coarse model is implied by the
// fine one's, so its optimum is lower: still a bound, a looser one.
Layout BuildModel(const PlanningContext& ctx, bool integer, int32_t max_steps,
                  LpBuilder& lp) {
  const Graph& g = ctx.graph;
  const StepAnalysis& a = ctx.analysis;
  const int32_t num_ops = static_cast<int32_t>(g.ops.size());
  const int32_t num_candidates = static_cast<int32_t>(a.candidates.size());
  const int32_t first_backward =
      g.index.first_backward_op == kNone ? num_ops : g.index.first_backward_op;
  const double budget = static_cast<double>(ctx.budget_bytes) / kBytesPerUnit;
  // MB/us, each way alone (the fastest the link ever moves).
  const double d2h_rate = ctx.hw.d2h_gbps * kNsPerUnit / kBytesPerUnit;
  const double h2d_rate = ctx.hw.h2d_gbps * kNsPerUnit / kBytesPerUnit;
  auto mb = [](int64_t bytes) {
    return static_cast<double>(bytes) / kBytesPerUnit;
  };
  auto us = [](int64_t ns) { return static_cast<double>(ns) / kNsPerUnit; };
  const double latency_us = us(ctx.hw.transfer_latency_ns);
  std::vector<double> real(num_candidates), d2h_weight(num_candidates),
      h2d_weight(num_candidates);
  for (int32_t i = 0; i < num_candidates; ++i) {
    real[i] = mb(a.candidates[i].bytes);
    d2h_weight[i] = real[i] + latency_us * d2h_rate;
    h2d_weight[i] = real[i] + latency_us * h2d_rate;
  }
  const double rho = std::max(1.0, h2d_rate / d2h_rate);

  // Decisions.
  Layout layout;
  layout.swap.resize(num_candidates);
  layout.recompute.resize(num_candidates);
  std::vector<int>& rerun = layout.rerun;  // y_p
  rerun.assign(num_ops, -1);
  std::vector<int>& recipe = layout.recipe;  // z_i
  recipe.assign(num_candidates, -1);
  const int recompute_fits = lp.AddRow(0, kInf);
  auto decision = [&](double hi) {
    const int col = lp.AddColumn(0, hi, 0);
    if (integer) lp.MarkInteger(col);
    return col;
  };
  for (int32_t i = 0; i < num_candidates; ++i) {
    const Candidate& c = a.candidates[i];
    layout.swap[i] = decision(CanSwap(c) ? 1 : 0);
    layout.recompute[i] = decision(1);
    const int one = lp.AddRow(-kInf, 1);
    lp.Set(one, layout.swap[i], 1);
    lp.Set(one, layout.recompute[i], 1);
    if (rerun[c.producer] < 0) {
      rerun[c.producer] = decision(1);
      lp.Set(recompute_fits, rerun[c.producer],
             -us(a.durations.op_ns[c.producer]));
    }
    const int rebuilt = lp.AddRow(-kInf, 0);
    lp.Set(rebuilt, layout.recompute[i], 1);
    lp.Set(rebuilt, rerun[c.producer], -1);
    if (g.tensors[c.tensor].rebuild.has_value()) {
      recipe[i] = decision(1);
      lp.Set(rebuilt, recipe[i], -1);
      lp.Set(recompute_fits, recipe[i], -us(a.durations.rebuild_ns[c.tensor]));
    }
  }

  // Re-running a producer needs its inputs resident; a forward input nobody
  // saved was freed after forward, so its own producer re-runs too:
  // y_q >= y_p, down the chain.
  StopPoller poller(ctx.should_stop);
  for (int32_t p = num_ops - 1; p >= 0; --p) {
    if (rerun[p] < 0) continue;
    for (int32_t in : g.ops[p].inputs) {
      const int32_t q = g.index.producer[in];
      if (q == kNone || g.index.is_saved[in] ||
          g.ops[q].phase != Phase::kForward) {
        continue;
      }
      if (rerun[q] < 0) {
        rerun[q] = decision(1);
        lp.Set(recompute_fits, rerun[q], -us(a.durations.op_ns[q]));
      }
      const int chain = lp.AddRow(-kInf, 0);  // y_p - y_q <= 0
      lp.Set(chain, rerun[p], 1);
      lp.Set(chain, rerun[q], -1);
      layout.chain.push_back({p, q});
    }
    poller.Stop();
  }

  // Per op: what enters and leaves the sums, and the resident bytes C_k.
  std::vector<std::vector<int32_t>> made_before(num_ops + 1);  // P: prod < k
  std::vector<std::vector<int32_t>> gap_from(num_ops + 1);
  std::vector<std::vector<int32_t>> gap_until(num_ops + 1);
  std::vector<std::vector<int32_t>> needed_by(num_ops + 1);  // F: first use
  std::vector<double> resident(num_ops + 1, 0);
  for (int32_t i = 0; i < num_candidates; ++i) {
    const Candidate& c = a.candidates[i];
    made_before[c.producer + 1].push_back(i);
    const int32_t last_fwd = std::max(c.producer, c.last_fwd_use);
    if (c.first_bwd_use > last_fwd + 1) {
      gap_from[last_fwd + 1].push_back(i);
      gap_until[c.first_bwd_use].push_back(i);
    }
    needed_by[c.first_bwd_use].push_back(i);
    const int32_t last_use = g.index.last_use[c.tensor];
    resident[c.producer] += mb(c.bytes);
    resident[last_use + 1] -= mb(c.bytes);
  }

  // A D2H copy of b real bytes takes b / ratio stream bytes: latency makes
  // small copies cost more than their bytes. The real bytes a set of
  // finished copies frees are at most the largest ratio among them times
  // the stream bytes they took: per op, the largest ratio among the tensors
  // in their gap (what may be released there) and among all made so far
  // (what may have come back).
  auto ratio = [&](int32_t i) {
    return CanSwap(a.candidates[i]) ? real[i] / d2h_weight[i] : 0.0;
  };
  std::multiset<double> gap_ratios;
  double made_ratio = 0;
  // Latency also makes many small copies take long: releasing W bytes from
  // tensors of at most tau bytes each takes at least W / tau copies. Per
  // threshold tau, big_bytes[t] sums the swappable tensors larger than it in
  // their gap at op k (they may be released without that count), so
  // n_k >= (W_k - big) / tau, with W_k + latency x rate x n_k <= M_k.
  // Thresholds: the distinct sizes of the latency-bound tensors (at most 4x
  // latency x rate), a few spread over them.
  const double latency_bytes = latency_us * d2h_rate;  // MB
  std::vector<double> thresholds;
  if (latency_bytes > 0) {
    std::vector<double> small;
    for (int32_t i = 0; i < num_candidates; ++i) {
      if (CanSwap(a.candidates[i]) && real[i] <= 4 * latency_bytes) {
        small.push_back(real[i]);
      }
    }
    std::sort(small.begin(), small.end());
    small.erase(std::unique(small.begin(), small.end()), small.end());
    constexpr int kThresholds = 6;
    for (int t = 0; t < kThresholds && !small.empty(); ++t) {
      const double size = small[(small.size() - 1) * t / (kThresholds - 1)];
      if (thresholds.empty() || thresholds.back() != size) {
        thresholds.push_back(size);
      }
    }
  }
  std::vector<double> big_bytes(thresholds.size(), 0);
  auto count_big = [&](int32_t i, double sign) {
    if (!CanSwap(a.candidates[i])) return;
    for (size_t t = 0; t < thresholds.size(); ++t) {
      if (real[i] > thresholds[t]) big_bytes[t] += sign * real[i];
    }
  };

  // Time steps: the flows and the sums that bound them live at the starts
  // of blocks of consecutive ops, memory rows at one op per block.
  const std::vector<int32_t> start =
      BlockStarts(num_ops, first_backward, max_steps);
  const int32_t num_blocks = static_cast<int32_t>(start.size()) - 1;
  std::vector<double> alive_at(num_ops);
  {
    double alive = 0;
    for (int32_t k = 0; k < num_ops; ++k) alive_at[k] = alive += resident[k];
  }

  const std::vector<int>& swap = layout.swap;
  // A cumulative sum defined by a recurrence: the previous value (-1:
  // none), plus a flow column (-1: none), plus and minus weighted decisions.
  auto running = [&](int prev, int add_col, const std::vector<int32_t>& plus,
                     const std::vector<int32_t>& minus,
                     const std::vector<int>& decision_of,
                     const std::vector<double>& weight) {
    const int col = lp.AddColumn(-kInf, kInf, 0);
    const int row = lp.AddRow(0, 0);
    lp.Set(row, col, 1);
    if (prev >= 0) lp.Set(row, prev, -1);
    if (add_col >= 0) lp.Set(row, add_col, -1);
    for (int32_t i : plus) lp.Set(row, decision_of[i], -weight[i]);
    for (int32_t i : minus) lp.Set(row, decision_of[i], weight[i]);
    return col;
  };
  auto at_most = [&](int x, int y, double times = 1) {  // x <= times * y
    const int row = lp.AddRow(-kInf, 0);
    lp.Set(row, x, 1);
    lp.Set(row, y, -times);
  };
  const std::vector<int32_t> none;

  // At each block start b (and the step's end): M (D2H stream bytes moved),
  // P (made), D (out before first use), Q and F (real bytes landed and
  // needed), H and E (the same in H2D stream bytes), by the start of op b.
  struct Boundary {
    int moved, made, out_needed, landed, needed, h2d_busy, in_needed;
  };
  std::vector<Boundary> at(num_blocks + 1);
  std::vector<int32_t> made_now, needed_now;
  for (int32_t j = 0; j <= num_blocks; ++j) {
    const int32_t b = start[j];
    const int32_t from = j == 0 ? 0 : start[j - 1] + 1;
    made_now.clear();
    needed_now.clear();
    for (int32_t k = from; k <= b; ++k) {
      made_now.insert(made_now.end(), made_before[k].begin(),
                      made_before[k].end());
      needed_now.insert(needed_now.end(), needed_by[k].begin(),
                        needed_by[k].end());
    }
    for (int32_t i : made_now) made_ratio = std::max(made_ratio, ratio(i));
    int moved_now = -1, landed_now = -1, h2d_busy_now = -1;
    if (j > 0) {
      // Block j-1 (ops start[j-1] .. b-1) and the time added in it, before
      // ops start[j-1]+1 .. b: what each link direction can move.
      int64_t block_ns = 0;
      for (int32_t k = start[j - 1]; k < b; ++k) {
        block_ns = SaturatingAdd(block_ns, a.durations.op_ns[k]);
      }
      const int gap = lp.AddColumn(0, kInf, 1);  // G
      if (b >= first_backward) lp.Set(recompute_fits, gap, 1);
      auto link = [&](double rate) {
        const int flow = lp.AddColumn(0, kInf, 0);
        const int capacity = lp.AddRow(-kInf, rate * us(block_ns));
        lp.Set(capacity, flow, 1);
        lp.Set(capacity, gap, -rate);
        return flow;
      };
      moved_now = link(d2h_rate);
      landed_now = link(h2d_rate);
      h2d_busy_now = link(h2d_rate);
    }
    const Boundary prev =
        j == 0 ? Boundary{-1, -1, -1, -1, -1, -1, -1} : at[j - 1];
    Boundary& now = at[j];
    now.moved = running(prev.moved, moved_now, none, none, swap, d2h_weight);
    now.made = running(prev.made, -1, made_now, none, swap, d2h_weight);
    now.out_needed =
        running(prev.out_needed, -1, needed_now, none, swap, d2h_weight);
    now.landed = running(prev.landed, landed_now, none, none, swap, real);
    now.needed = running(prev.needed, -1, needed_now, none, swap, real);
    now.h2d_busy =
        running(prev.h2d_busy, h2d_busy_now, none, none, swap, h2d_weight);
    now.in_needed =
        running(prev.in_needed, -1, needed_now, none, swap, h2d_weight);
    at_most(now.moved, now.made);                // M <= P
    at_most(now.out_needed, now.moved);          // D <= M
    at_most(now.needed, now.landed);             // F <= Q
    at_most(now.landed, now.moved, made_ratio);  // Q <= a' M
    at_most(now.in_needed, now.h2d_busy);        // E <= H
    at_most(now.h2d_busy, now.moved, rho);       // H <= rho M
    poller.Stop();
  }

  // Memory, at the op of each block where keeping everything needs the
  // most (where that is over the budget): GS and GR, the swapped and
  // recomputed bytes in their gap there, summed from one such op to the
  // next.
  int gap_swapped = -1, gap_recomputed = -1;
  std::vector<int32_t> opened, closed;
  int32_t swept = 0;  // gap events of ops before this one are counted
  for (int32_t j = 0; j < num_blocks; ++j) {
    int32_t r = start[j];
    for (int32_t k = start[j]; k < start[j + 1]; ++k) {
      if (alive_at[k] > alive_at[r]) r = k;
    }
    const double alive = alive_at[r];
    if (alive <= budget) continue;
    opened.clear();
    closed.clear();
    for (; swept <= r; ++swept) {
      for (int32_t i : gap_from[swept]) {
        opened.push_back(i);
        gap_ratios.insert(ratio(i));
        count_big(i, 1);
      }
      for (int32_t i : gap_until[swept]) {
        closed.push_back(i);
        gap_ratios.erase(gap_ratios.find(ratio(i)));
        count_big(i, -1);
      }
    }
    gap_swapped = running(gap_swapped, -1, opened, closed, swap, real);
    gap_recomputed =
        running(gap_recomputed, -1, opened, closed, layout.recompute, real);
    // The block-start values bounding op r's from the loose side: moved and
    // needed by the next start, landed by this one.
    const Boundary& after = r == start[j] ? at[j] : at[j + 1];
    const int moved = after.moved;
    const int needed = after.needed;
    const int landed = at[j].landed;
    // Released: on the host, not yet brought back early.
    // W <= a M, W <= GS - (Q - F), and W <= GS (Q - F may be negative when
    // read at different ops).
    const int released = lp.AddColumn(0, kInf, 0);  // W
    at_most(released, moved, gap_ratios.empty() ? 0 : *gap_ratios.rbegin());
    const int off = lp.AddRow(-kInf, 0);
    lp.Set(off, released, 1);
    lp.Set(off, gap_swapped, -1);
    lp.Set(off, landed, 1);
    lp.Set(off, needed, -1);
    if (r != start[j]) at_most(released, gap_swapped);
    // Copies that many bytes take: W + latency x rate x n <= M, where
    // n >= (W - big) / tau for each threshold that could bind (big below
    // the bytes to release).
    std::vector<size_t> binding;
    for (size_t t = 0; t < thresholds.size(); ++t) {
      if (big_bytes[t] < alive - budget) binding.push_back(t);
    }
    if (!binding.empty()) {
      const int copies = lp.AddColumn(0, kInf, 0);  // n
      const int stream = lp.AddRow(-kInf, 0);
      lp.Set(stream, released, 1);
      lp.Set(stream, copies, latency_bytes);
      lp.Set(stream, moved, -1);
      for (size_t t : binding) {
        const int few = lp.AddRow(-kInf, big_bytes[t]);
        lp.Set(few, released, 1);
        lp.Set(few, copies, -thresholds[t]);
      }
    }
    const int memory = lp.AddRow(-kInf, budget - alive);
    lp.Set(memory, gap_recomputed, -1);
    lp.Set(memory, released, -1);
    poller.Stop();
  }
  return layout;
}

// Asks the stop function from inside the solvers' loops.
class ClpStop : public ClpEventHandler {
 public:
  explicit ClpStop(const StopFn* stop) : stop_(stop) {}
  ClpEventHandler* clone() const override { return new ClpStop(*this); }
  int event(Event which) override {
    if (which == endOfIteration && *stop_ && (*stop_)()) return 0;
    return -1;
  }

 private:
  const StopFn* stop_;
};

class CbcStop : public CbcEventHandler {
 public:
  explicit CbcStop(const StopFn* stop) : stop_(stop) {}
  CbcEventHandler* clone() const override { return new CbcStop(*this); }
  CbcAction event(CbcEvent) override {
    return *stop_ && (*stop_)() ? stop : noAction;
  }

 private:
  const StopFn* stop_;
};

// The bound from the model's optimum (or best bound), in model units.
void SetBound(const PlanningContext& ctx, double extra_units, Relaxation& out) {
  const double ideal = static_cast<double>(ctx.analysis.durations.total_ns);
  const double extra =
      std::max(0.0, extra_units) * kNsPerUnit * (1 - kSafetyMargin);
  out.step_ns_lower = static_cast<int64_t>(std::floor(ideal + extra));
  out.retained_upper =
      out.step_ns_lower > 0
          ? std::min(1.0, ideal / static_cast<double>(out.step_ns_lower))
          : 1.0;
}

void SetDecisions(const Layout& layout, const double* solution,
                  Relaxation& out) {
  out.swap.resize(layout.swap.size());
  out.recompute.resize(layout.recompute.size());
  for (size_t i = 0; i < layout.swap.size(); ++i) {
    out.swap[i] = solution[layout.swap[i]];
    out.recompute[i] = solution[layout.recompute[i]];
  }
}

// The model's integer decisions for `plan`, as column bounds fixing them:
// the producers of recomputed tensors re-run (and down their chains), and a
// recipe used only where its tensor's producer does not re-run anyway (one
// re-run rebuilds all its outputs), which is at most what the simulator's
// lowering runs.
void FixDecisions(const PlanningContext& ctx, const Layout& layout,
                  const Plan& plan, std::vector<double>& lo,
                  std::vector<double>& hi) {
  const StepAnalysis& a = ctx.analysis;
  std::vector<double> value(lo.size(), -1);
  for (int col : layout.rerun) {
    if (col >= 0) value[col] = 0;
  }
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const Candidate& c = a.candidates[i];
    const Action act = plan.decisions[c.tensor].action;
    value[layout.swap[i]] = act == Action::kSwap;
    value[layout.recompute[i]] = act == Action::kRecompute;
    if (layout.recipe[i] < 0 && act == Action::kRecompute) {
      value[layout.rerun[c.producer]] = 1;
    }
  }
  // Chains were recorded from the last op down: each re-run is known before
  // the re-runs it causes.
  for (const auto& [p, q] : layout.chain) {
    if (value[layout.rerun[p]] > 0) value[layout.rerun[q]] = 1;
  }
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    if (layout.recipe[i] < 0) continue;
    const bool recomputed = value[layout.recompute[i]] > 0;
    const bool rerun = value[layout.rerun[a.candidates[i].producer]] > 0;
    value[layout.recipe[i]] = recomputed && !rerun;
  }
  for (size_t col = 0; col < value.size(); ++col) {
    if (value[col] >= 0) lo[col] = hi[col] = value[col];
  }
}

absl::StatusOr<Relaxation> SolveLp(const PlanningContext& ctx,
                                   const RelaxationOptions& options,
                                   const LpBuilder& lp, const Layout& layout) {
  ClpSimplex model;
  model.setLogLevel(0);
  const std::vector<double> col_lo = lp.col_lo(), col_hi = lp.col_hi(),
                            row_lo = lp.row_lo(), row_hi = lp.row_hi();
  model.loadProblem(lp.Matrix(), col_lo.data(), col_hi.data(), lp.cost().data(),
                    row_lo.data(), row_hi.data());
  if (options.time_limit_s > 0) model.setMaximumSeconds(options.time_limit_s);
  const ClpStop stop(&ctx.should_stop);
  model.passInEventHandler(&stop);
  // Presolve first: the model's running sums are chains of equalities it
  // folds away (a third of the time of a plain dual simplex).
  bool solved = false;
  if (options.start != nullptr) {
    // The start plan's decisions fixed, then freed: primal simplex from
    // that point (its values, ifValuesPass) goes the short way to the
    // optimum, the start being close to it when the plan is good.
    std::vector<double> fixed_lo = col_lo, fixed_hi = col_hi;
    FixDecisions(ctx, layout, *options.start, fixed_lo, fixed_hi);
    model.chgColumnLower(fixed_lo.data());
    model.chgColumnUpper(fixed_hi.data());
    model.initialSolve();
    model.chgColumnLower(col_lo.data());
    model.chgColumnUpper(col_hi.data());
    if (model.status() == 0) {
      model.primal(/*ifValuesPass=*/1);
      solved = true;
    } else {
      // Stopped (the switch below says so), or the model rejects the plan:
      // then from scratch.
      solved = model.status() == 3 || model.status() == 5;
    }
  }
  if (!solved) model.initialSolve();
  Relaxation out;
  switch (model.status()) {
    case 0:
      SetBound(ctx, model.objectiveValue(), out);
      SetDecisions(layout, model.primalColumnSolution(), out);
      return out;
    case 1:  // primal infeasible: no plan meets the budget
      out.feasible = false;
      return out;
    case 3:
      return absl::DeadlineExceededError(absl::StrCat(
          "the bound's LP did not finish within ", options.time_limit_s, " s"));
    case 5:
      return absl::CancelledError("the bound's LP was stopped");
    default:
      return absl::InternalError(absl::StrCat(
          "the bound's LP solver failed (CLP status ", model.status(), ")"));
  }
}

// A full solution of the model for the start plan: its decisions fixed,
// the rest (gaps, link flows) by an LP. Empty when the LP finds none.
std::vector<double> StartSolution(const PlanningContext& ctx,
                                  const LpBuilder& lp, const Layout& layout,
                                  const Plan& start, double* objective) {
  std::vector<double> col_lo = lp.col_lo(), col_hi = lp.col_hi();
  FixDecisions(ctx, layout, start, col_lo, col_hi);
  const std::vector<double> row_lo = lp.row_lo(), row_hi = lp.row_hi();
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(lp.Matrix(), col_lo.data(), col_hi.data(), lp.cost().data(),
                    row_lo.data(), row_hi.data());
  model.initialSolve();
  if (model.status() != 0) return {};
  *objective = model.objectiveValue();
  const double* x = model.primalColumnSolution();
  return std::vector<double>(x, x + lp.columns());
}

// The MILP within its time limit, whole: the LP first (from the start
// plan, quick), whose bound holds whatever CBC gets done; then CBC from the
// start plan until the deadline, if the model is small enough for it.
absl::StatusOr<Relaxation> SolveMilp(const PlanningContext& ctx,
                                     const RelaxationOptions& options,
                                     const LpBuilder& lp,
                                     const Layout& layout) {
  const absl::Time deadline =
      options.time_limit_s > 0
          ? absl::Now() + absl::Seconds(options.time_limit_s)
          : absl::InfiniteFuture();
  absl::StatusOr<Relaxation> relaxed = SolveLp(ctx, options, lp, layout);
  if (absl::IsDeadlineExceeded(relaxed.status())) {
    Relaxation nothing;  // no plan, no bound beyond the ideal step
    SetBound(ctx, 0, nothing);
    return nothing;
  }
  if (!relaxed.ok() || !relaxed->feasible) return relaxed;
  Relaxation out = *relaxed;  // its bound; its fractions are no plan
  out.swap.clear();
  out.recompute.clear();
  const absl::Duration left = deadline - absl::Now();
  // CBC checks its time limit between nodes, but one node of a large model
  // (re-solving its LP from scratch to check an incumbent) can take seconds:
  // only models it can work through in the time left get it.
  if (left <= absl::ZeroDuration() ||
      static_cast<double>(lp.rows()) >
          kMilpRowsPerSecond * absl::ToDoubleSeconds(left)) {
    out.milp_skipped = true;
    return out;
  }

  const StopFn stopped = [&] { return ctx.should_stop && ctx.should_stop(); };
  const StopFn ending = [&] { return stopped() || absl::Now() >= deadline; };
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.getModelPtr()->setLogLevel(0);
  const std::vector<double> col_lo = lp.col_lo(), col_hi = lp.col_hi(),
                            row_lo = lp.row_lo(), row_hi = lp.row_hi();
  solver.loadProblem(lp.Matrix(), col_lo.data(), col_hi.data(),
                     lp.cost().data(), row_lo.data(), row_hi.data());
  for (int col : lp.integer()) solver.setInteger(col);
  // The LPs CBC solves hear the caller (an interrupted LP would be
  // misread; the answer is then dropped anyway); the deadline is CBC's.
  const ClpStop inner(&stopped);
  solver.getModelPtr()->passInEventHandler(&inner);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  if (options.start != nullptr) {
    double objective = 0;
    const std::vector<double> start =
        StartSolution(ctx, lp, layout, *options.start, &objective);
    if (!start.empty()) {
      model.setBestSolution(start.data(), lp.columns(), objective,
                            /*check=*/true);
    }
  }
  if (options.max_nodes > 0) {
    model.setMaximumNodes(static_cast<int>(
        std::min<int64_t>(options.max_nodes, std::numeric_limits<int>::max())));
  }
  model.setUseElapsedTime(true);
  if (deadline != absl::InfiniteFuture()) {
    model.setMaximumSeconds(absl::ToDoubleSeconds(deadline - absl::Now()));
  }
  const CbcStop stop(&ending);
  model.passInEventHandler(&stop);
  model.branchAndBound();
  if (ctx.should_stop && ctx.should_stop()) {
    return absl::CancelledError("the optimal policy's MILP was stopped");
  }
  if (model.isProvenInfeasible()) {
    out.feasible = false;
    return out;
  }
  out.proven_optimal = model.isProvenOptimal();
  Relaxation cbc;
  SetBound(ctx, model.getBestPossibleObjValue(), cbc);
  out.step_ns_lower = std::max(out.step_ns_lower, cbc.step_ns_lower);
  out.retained_upper = std::min(out.retained_upper, cbc.retained_upper);
  if (model.bestSolution() != nullptr) {
    SetDecisions(layout, model.bestSolution(), out);
    for (double& x : out.swap) x = std::round(x);
    for (double& x : out.recompute) x = std::round(x);
  }
  return out;
}

}  // namespace

absl::StatusOr<int64_t> ModelStepNs(const PlanningContext& ctx,
                                    const Plan& plan) {
  try {
    LpBuilder lp;
    const Layout layout =
        BuildModel(ctx, /*integer=*/false, RelaxationOptions{}.max_steps, lp);
    double objective = 0;
    if (StartSolution(ctx, lp, layout, plan, &objective).empty()) {
      return absl::FailedPreconditionError(
          "the model finds the plan infeasible");
    }
    Relaxation out;
    SetBound(ctx, objective, out);
    return out.step_ns_lower;
  } catch (...) {
    return absl::InternalError("the planning model's solver failed");
  }
}

absl::StatusOr<Relaxation> SolveRelaxation(const PlanningContext& ctx,
                                           const RelaxationOptions& options) {
  const int64_t ops = static_cast<int64_t>(ctx.graph.ops.size());
  if (ops > options.max_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the graph has ", ops,
                     " ops; the bound's model is built "
                     "for at most ",
                     options.max_ops));
  }
  Relaxation keep_all;
  if (ctx.analysis.unconstrained_peak_bytes <= ctx.budget_bytes) {
    // Keeping everything fits: nothing to move, nothing lost.
    SetBound(ctx, 0, keep_all);
    keep_all.swap.assign(ctx.analysis.candidates.size(), 0);
    keep_all.recompute.assign(ctx.analysis.candidates.size(), 0);
    keep_all.proven_optimal = true;
    return keep_all;
  }
  if (ctx.should_stop && ctx.should_stop()) {
    return absl::CancelledError("the bound was stopped");
  }
  // COIN-OR reports some failures by throwing (CoinError); nothing escapes.
  try {
    LpBuilder lp;
    const Layout layout =
        BuildModel(ctx, options.integer, options.max_steps, lp);
    return options.integer ? SolveMilp(ctx, options, lp, layout)
                           : SolveLp(ctx, options, lp, layout);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("the planning model's solver failed: ", e.what()));
  } catch (...) {
    return absl::InternalError("the planning model's solver failed");
  }
}

}  // namespace slackswap
