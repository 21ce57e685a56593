// The planning model of docs/PLANNERS.md ("The bound") as the rows and
// columns of a sparse LP, built one phase at a time; planner/relaxation.cc
// hands it to the solvers. Internal to planner/: the phases are public so
// that planner/relaxation_test.cc can check each on a graph of a few ops.
//
//   LpBuilder lp;
//   ModelBuilder model(ctx, /*integer=*/false, /*max_steps=*/2048, lp);
//   absl::StatusOr<Layout> layout = model.Build();  // every phase, in order
//   int s0 = layout->swap[0];  // candidate 0's swap fraction: a column of lp
//
// Units: megabytes and microseconds keep the coefficients within a few
// orders of magnitude of each other (bytes and nanoseconds would span 15).
#ifndef SLACKSWAP_PLANNER_INTERNAL_RELAXATION_MODEL_H_
#define SLACKSWAP_PLANNER_INTERNAL_RELAXATION_MODEL_H_

#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/stop.h"
#include "planner/policy.h"

namespace slackswap {

inline constexpr double kBytesPerUnit = 1e6;  // MB
inline constexpr double kNsPerUnit = 1e3;     // us
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Rows and columns of a sparse LP, built by appending. Infinite bounds stay
// infinite here (the solvers' own spelling is planner/relaxation.cc's).
class LpBuilder {
 public:
  int AddColumn(double lo, double hi, double cost);
  int AddRow(double lo, double hi);
  // Coefficient `value` of `col` in `row`; zeros are not stored.
  void Set(int row, int col, double value);
  void MarkInteger(int col);

  int columns() const { return static_cast<int>(cost_.size()); }
  int rows() const { return static_cast<int>(row_lo_.size()); }
  const std::vector<double>& col_lo() const { return col_lo_; }
  const std::vector<double>& col_hi() const { return col_hi_; }
  const std::vector<double>& cost() const { return cost_; }
  const std::vector<double>& row_lo() const { return row_lo_; }
  const std::vector<double>& row_hi() const { return row_hi_; }
  const std::vector<int>& integer() const { return integer_; }
  // The coefficients as triplets, in the order Set stored them.
  const std::vector<int>& entry_rows() const { return rows_; }
  const std::vector<int>& entry_cols() const { return cols_; }
  const std::vector<double>& entry_values() const { return values_; }

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
                                 int32_t max_steps);

// Where the budget enters the model: one of phase 7's blocks over the
// budget the model was built for, and its rows (W's, the copies', then the
// memory row: consecutive, every one an upper bound). At a higher budget
// the same model, with these rows' upper bounds from BudgetRowBounds, is
// the one built there: a block no longer over the budget has its rows
// freed (its GS and GR sums stay, feeding the next block's), and a
// threshold that can no longer bind has its row freed too.
struct MemoryBlock {
  double alive = 0;     // the bytes keeping everything holds at its op (MB)
  int first_row = -1;   // its first row
  int memory_row = -1;  // its last: C_k - GR_k - W_k <= budget
  int stream_row = -1;  // W + latency x rate x n <= M; -1 when none
  // Per threshold that binds at the budget built for: its row, and the
  // bytes larger than the threshold in their gap (the row's bound).
  std::vector<std::pair<int, double>> few;
};

// Where the decisions live in the model.
struct Layout {
  std::vector<int> swap;       // s_i, per candidate
  std::vector<int> recompute;  // r_i, per candidate
  std::vector<int> recipe;     // z_i, per candidate; -1 without a recipe
  std::vector<int> rerun;      // y_p, per op; -1 for ops no decision re-runs
  // (p, q): re-running op p re-runs op q (an unsaved input of p's), p first.
  std::vector<std::pair<int32_t, int32_t>> chain;
  // The blocks over the budget, in order.
  std::vector<MemoryBlock> memory;
};

// The upper bounds of `blocks`' rows at `budget_bytes` (REQUIRES: at least
// the budget the model was built for), written into `row_hi` (indexed by
// row; the other rows' entries untouched). Infinite bounds stay infinite.
void BudgetRowBounds(const std::vector<MemoryBlock>& blocks,
                     int64_t budget_bytes, std::vector<double>& row_hi);

// The model, in MB and us. A copy holds its stream for the latency and then
// its bytes at the link's rate, so on each stream a tensor weighs its bytes
// plus latency x rate ("stream bytes", e_i; its real bytes b_i):
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
//
// Build() runs the seven phases below in order; each reads what the ones
// before it made (REQUIRES: they ran, in order, once each). The column and
// row numbers are the solver's, and its answers (to the last bit) depend on
// their order: a phase adds its rows and columns in the order it always has.
class ModelBuilder {
 public:
  // REQUIRES: ctx and lp outlive the builder; ctx.budget_bytes > 0.
  ModelBuilder(const PlanningContext& ctx, bool integer, int32_t max_steps,
               LpBuilder& lp);

  // Every phase, in order. CANCELLED when ctx.should_stop says so.
  absl::StatusOr<Layout> Build();

  // 1. The decisions: s_i and r_i per candidate with s_i + r_i <= 1, y_p for
  // each producer of a candidate and z_i for each recipe, r_i <= y_p + z_i,
  // and the recompute-fits row (empty of time columns until phase 6).
  void AddDecisions();
  // 2. Re-running a producer needs its inputs resident; a forward input
  // nobody saved was freed after forward, so its own producer re-runs too:
  // y_q >= y_p, down the chain.
  absl::Status AddRerunChains();
  // 3. Per op, what enters and leaves the running sums, and the bytes
  // keeping everything holds (no rows or columns).
  void PlaceCandidates();
  // 4. The copy sizes tau that bound the number of copies releasing bytes
  // takes (no rows or columns).
  void ChooseThresholds();
  // 5. The blocks of ops time steps are made of (no rows or columns).
  void SplitTime();
  // 6. At each block start: the time added and the link flows in the block
  // before it, and the running sums and their bounds.
  absl::Status AddBoundaries();
  // 7. Memory at the op of each block where keeping everything needs the
  // most, where that is over the budget; layout().memory gets their rows.
  absl::Status AddMemoryRows();

  // Phase 3's: per op k (and k = num_ops), the candidates i that enter a
  // running sum there.
  struct Changes {
    std::vector<std::vector<int32_t>> made_before;  // made by op k-1 (P)
    std::vector<std::vector<int32_t>> gap_from;     // their gap opens at k
    std::vector<std::vector<int32_t>> gap_until;    // their gap closes at k
    std::vector<std::vector<int32_t>> needed_by;    // first used by op k (F)
    // The change at op k's start in the bytes keeping everything holds (MB).
    std::vector<double> resident;
  };
  // Phase 6's, per block start: M (D2H stream bytes moved), P (made), D
  // (out before first use), Q and F (real bytes landed and needed), H and E
  // (the same in H2D stream bytes), by the start of that op.
  struct Boundary {
    int moved, made, out_needed, landed, needed, h2d_busy, in_needed;
  };

  // What the phases made so far.
  const Layout& layout() const { return layout_; }
  int recompute_fits() const { return recompute_fits_; }
  const Changes& changes() const { return changes_; }
  const std::vector<double>& thresholds() const { return thresholds_; }
  const std::vector<int32_t>& block_starts() const { return start_; }
  const std::vector<double>& alive_at() const { return alive_at_; }
  const std::vector<Boundary>& boundaries() const { return at_; }

 private:
  // The link flows of the block before block start j, and G, its time.
  struct Flows {
    int moved = -1, landed = -1, h2d_busy = -1;
  };
  // Phase 7's state, from one memory row to the next.
  struct GapSweep {
    int32_t next_op = 0;           // the gaps of the ops before it are counted
    std::multiset<double> ratios;  // Ratio() of the candidates in their gap
    // Per threshold, the bytes of the swappable candidates larger than it
    // in their gap.
    std::vector<double> big_bytes;
  };

  absl::Status Stopped() const;
  // A 0/1 decision column (a fraction unless integer_) at most `hi`.
  int AddDecision(double hi);
  // y_p: its column, added with its cost in the recompute-fits row when
  // first asked for.
  int RerunOf(int32_t op);
  // A cumulative sum defined by a recurrence: the previous value (-1:
  // none), plus a flow column (-1: none), plus and minus weighted decisions.
  int Running(int prev, int add_col, const std::vector<int32_t>& plus,
              const std::vector<int32_t>& minus,
              const std::vector<int>& decision_of,
              const std::vector<double>& weight);
  void AtMost(int x, int y, double times = 1);  // x <= times * y
  // Real bytes per D2H stream byte of candidate i's copy (0: never swapped).
  double Ratio(int32_t i) const;
  Flows AddFlows(int32_t j);
  void AddBoundary(int32_t j, const Flows& flows,
                   const std::vector<int32_t>& made_now,
                   const std::vector<int32_t>& needed_now, double made_ratio);
  // Opens and closes the gaps of ops sweep_.next_op .. r; `opened` and
  // `closed` get the candidates.
  void SweepGaps(int32_t r, std::vector<int32_t>& opened,
                 std::vector<int32_t>& closed);
  void CountBig(int32_t i, double sign);
  // W, the swapped bytes released at the memory row of block j (at op r),
  // and the copies releasing them takes; `block` gets the rows.
  int AddReleased(int32_t j, int32_t r, int gap_swapped, double over,
                  MemoryBlock& block);

  // Immutable after construction.
  const Graph& g_;
  const StepAnalysis& a_;
  const bool integer_;
  const int32_t max_steps_;
  const int32_t num_ops_;
  const int32_t num_candidates_;
  const int32_t first_backward_;
  const double budget_;
  // MB/us, each way alone (the fastest the link ever moves).
  const double d2h_rate_;
  const double h2d_rate_;
  const double rho_;
  // A D2H copy's latency, as the bytes the link would move in it (MB).
  const double latency_bytes_;
  // Per candidate: real bytes, D2H and H2D stream bytes.
  std::vector<double> real_, d2h_weight_, h2d_weight_;

  LpBuilder& lp_;
  StopPoller poller_;

  // Made by the phases: 1 and 2 layout_ and recompute_fits_, 3 changes_,
  // 4 thresholds_, 5 start_ and alive_at_, 6 at_, 7 sweep_.
  Layout layout_;
  int recompute_fits_ = -1;
  Changes changes_;
  std::vector<double> thresholds_;
  std::vector<int32_t> start_;
  std::vector<double> alive_at_;
  std::vector<Boundary> at_;
  GapSweep sweep_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_RELAXATION_MODEL_H_
