#include "planner/internal/relaxation_model.h"

#include <algorithm>

#include "common/saturating.h"
#include "common/status_macros.h"
#include "planner/internal/policies.h"

namespace slackswap {
namespace {

double Mb(int64_t bytes) { return static_cast<double>(bytes) / kBytesPerUnit; }
double Us(int64_t ns) { return static_cast<double>(ns) / kNsPerUnit; }

// How many copy sizes tau bound the copies releasing bytes takes.
constexpr int kThresholds = 6;

}  // namespace

int LpBuilder::AddColumn(double lo, double hi, double cost) {
  col_lo_.push_back(lo);
  col_hi_.push_back(hi);
  cost_.push_back(cost);
  return static_cast<int>(cost_.size()) - 1;
}

int LpBuilder::AddRow(double lo, double hi) {
  row_lo_.push_back(lo);
  row_hi_.push_back(hi);
  return static_cast<int>(row_lo_.size()) - 1;
}

void LpBuilder::Set(int row, int col, double value) {
  if (value == 0) return;
  rows_.push_back(row);
  cols_.push_back(col);
  values_.push_back(value);
}

void LpBuilder::MarkInteger(int col) { integer_.push_back(col); }

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

void BudgetRowBounds(const std::vector<MemoryBlock>& blocks,
                     int64_t budget_bytes, std::vector<double>& row_hi) {
  // As AddMemoryRows and AddReleased compute them, to the bit.
  const double budget = static_cast<double>(budget_bytes) / kBytesPerUnit;
  for (const MemoryBlock& block : blocks) {
    const bool over_budget = block.alive > budget;
    for (int row = block.first_row; row < block.memory_row; ++row) {
      row_hi[row] = over_budget ? 0 : kInf;
    }
    row_hi[block.memory_row] = over_budget ? budget - block.alive : kInf;
    bool any_binds = false;
    for (const auto& [row, big] : block.few) {
      const bool binds = over_budget && big < block.alive - budget;
      row_hi[row] = binds ? big : kInf;
      any_binds |= binds;
    }
    if (block.stream_row >= 0 && !any_binds) row_hi[block.stream_row] = kInf;
  }
}

ModelBuilder::ModelBuilder(const PlanningContext& ctx, bool integer,
                           int32_t max_steps, LpBuilder& lp)
    : g_(ctx.graph),
      a_(ctx.analysis),
      integer_(integer),
      max_steps_(max_steps),
      num_ops_(static_cast<int32_t>(g_.ops.size())),
      num_candidates_(static_cast<int32_t>(a_.candidates.size())),
      first_backward_(g_.index.first_backward_op == kNone
                          ? num_ops_
                          : g_.index.first_backward_op),
      budget_(static_cast<double>(ctx.budget_bytes) / kBytesPerUnit),
      d2h_rate_(ctx.hw.d2h_gbps * kNsPerUnit / kBytesPerUnit),
      h2d_rate_(ctx.hw.h2d_gbps * kNsPerUnit / kBytesPerUnit),
      rho_(std::max(1.0, h2d_rate_ / d2h_rate_)),
      latency_bytes_(Us(ctx.hw.transfer_latency_ns) * d2h_rate_),
      real_(num_candidates_),
      d2h_weight_(num_candidates_),
      h2d_weight_(num_candidates_),
      lp_(lp),
      poller_(ctx.should_stop) {
  const double latency_us = Us(ctx.hw.transfer_latency_ns);
  for (int32_t i = 0; i < num_candidates_; ++i) {
    real_[i] = Mb(a_.candidates[i].bytes);
    d2h_weight_[i] = real_[i] + latency_us * d2h_rate_;
    h2d_weight_[i] = real_[i] + latency_us * h2d_rate_;
  }
}

absl::StatusOr<Layout> ModelBuilder::Build() {
  AddDecisions();
  SLACKSWAP_RETURN_IF_ERROR(AddRerunChains());
  PlaceCandidates();
  ChooseThresholds();
  SplitTime();
  SLACKSWAP_RETURN_IF_ERROR(AddBoundaries());
  SLACKSWAP_RETURN_IF_ERROR(AddMemoryRows());
  return layout_;
}

absl::Status ModelBuilder::Stopped() const {
  return absl::CancelledError("building the bound's model stopped");
}

int ModelBuilder::AddDecision(double hi) {
  const int col = lp_.AddColumn(0, hi, 0);
  if (integer_) lp_.MarkInteger(col);
  return col;
}

int ModelBuilder::RerunOf(int32_t op) {
  int& col = layout_.rerun[op];
  if (col < 0) {
    col = AddDecision(1);
    lp_.Set(recompute_fits_, col, -Us(a_.durations.op_ns[op]));
  }
  return col;
}

void ModelBuilder::AddDecisions() {
  layout_.swap.resize(num_candidates_);
  layout_.recompute.resize(num_candidates_);
  layout_.rerun.assign(num_ops_, -1);
  layout_.recipe.assign(num_candidates_, -1);
  recompute_fits_ = lp_.AddRow(0, kInf);
  for (int32_t i = 0; i < num_candidates_; ++i) {
    const Candidate& c = a_.candidates[i];
    layout_.swap[i] = AddDecision(CanSwap(c) ? 1 : 0);
    layout_.recompute[i] = AddDecision(1);
    const int one = lp_.AddRow(-kInf, 1);
    lp_.Set(one, layout_.swap[i], 1);
    lp_.Set(one, layout_.recompute[i], 1);
    const int rerun = RerunOf(c.producer);
    const int rebuilt = lp_.AddRow(-kInf, 0);
    lp_.Set(rebuilt, layout_.recompute[i], 1);
    lp_.Set(rebuilt, rerun, -1);
    if (g_.tensors[c.tensor].rebuild.has_value()) {
      const int recipe = layout_.recipe[i] = AddDecision(1);
      lp_.Set(rebuilt, recipe, -1);
      lp_.Set(recompute_fits_, recipe, -Us(a_.durations.rebuild_ns[c.tensor]));
    }
  }
}

absl::Status ModelBuilder::AddRerunChains() {
  const GraphIndex& idx = g_.index;
  for (int32_t p = num_ops_ - 1; p >= 0; --p) {
    if (layout_.rerun[p] < 0) continue;
    for (int32_t in : g_.ops[p].inputs) {
      const int32_t q = idx.producer[in];
      if (q == kNone || idx.is_saved[in] ||
          g_.ops[q].phase != Phase::kForward) {
        continue;
      }
      const int rerun_q = RerunOf(q);
      const int chain = lp_.AddRow(-kInf, 0);  // y_p - y_q <= 0
      lp_.Set(chain, layout_.rerun[p], 1);
      lp_.Set(chain, rerun_q, -1);
      layout_.chain.push_back({p, q});
    }
    if (poller_.Stop()) return Stopped();
  }
  return absl::OkStatus();
}

void ModelBuilder::PlaceCandidates() {
  Changes& at = changes_;
  at.made_before.assign(num_ops_ + 1, {});
  at.gap_from.assign(num_ops_ + 1, {});
  at.gap_until.assign(num_ops_ + 1, {});
  at.needed_by.assign(num_ops_ + 1, {});
  at.resident.assign(num_ops_ + 1, 0);
  for (int32_t i = 0; i < num_candidates_; ++i) {
    const Candidate& c = a_.candidates[i];
    at.made_before[c.producer + 1].push_back(i);
    const int32_t last_fwd = std::max(c.producer, c.last_fwd_use);
    if (c.first_bwd_use > last_fwd + 1) {
      at.gap_from[last_fwd + 1].push_back(i);
      at.gap_until[c.first_bwd_use].push_back(i);
    }
    at.needed_by[c.first_bwd_use].push_back(i);
    const int32_t last_use = g_.index.last_use[c.tensor];
    at.resident[c.producer] += Mb(c.bytes);
    at.resident[last_use + 1] -= Mb(c.bytes);
  }
}

// A D2H copy of b real bytes takes b / ratio stream bytes: latency makes
// small copies cost more than their bytes, and many small copies take long:
// releasing W bytes from tensors of at most tau bytes each takes at least
// W / tau copies. The thresholds tau: the distinct sizes of the
// latency-bound tensors (at most 4x latency x rate), a few spread over them.
void ModelBuilder::ChooseThresholds() {
  thresholds_.clear();
  if (latency_bytes_ > 0) {
    std::vector<double> small;
    for (int32_t i = 0; i < num_candidates_; ++i) {
      if (CanSwap(a_.candidates[i]) && real_[i] <= 4 * latency_bytes_) {
        small.push_back(real_[i]);
      }
    }
    std::sort(small.begin(), small.end());
    small.erase(std::unique(small.begin(), small.end()), small.end());
    for (int t = 0; t < kThresholds && !small.empty(); ++t) {
      const double size = small[(small.size() - 1) * t / (kThresholds - 1)];
      if (thresholds_.empty() || thresholds_.back() != size) {
        thresholds_.push_back(size);
      }
    }
  }
  sweep_.big_bytes.assign(thresholds_.size(), 0);
}

// Time steps: the flows and the sums that bound them live at the starts of
// blocks of consecutive ops, memory rows at one op per block.
void ModelBuilder::SplitTime() {
  start_ = BlockStarts(num_ops_, first_backward_, max_steps_);
  alive_at_.assign(num_ops_, 0);
  double alive = 0;
  for (int32_t k = 0; k < num_ops_; ++k) {
    alive_at_[k] = alive += changes_.resident[k];
  }
}

int ModelBuilder::Running(int prev, int add_col,
                          const std::vector<int32_t>& plus,
                          const std::vector<int32_t>& minus,
                          const std::vector<int>& decision_of,
                          const std::vector<double>& weight) {
  const int col = lp_.AddColumn(-kInf, kInf, 0);
  const int row = lp_.AddRow(0, 0);
  lp_.Set(row, col, 1);
  if (prev >= 0) lp_.Set(row, prev, -1);
  if (add_col >= 0) lp_.Set(row, add_col, -1);
  for (int32_t i : plus) lp_.Set(row, decision_of[i], -weight[i]);
  for (int32_t i : minus) lp_.Set(row, decision_of[i], weight[i]);
  return col;
}

void ModelBuilder::AtMost(int x, int y, double times) {
  const int row = lp_.AddRow(-kInf, 0);
  lp_.Set(row, x, 1);
  lp_.Set(row, y, -times);
}

// The real bytes a set of finished copies frees are at most the largest
// ratio among them times the stream bytes they took: per op, the largest
// ratio among the tensors in their gap (what may be released there) and
// among all made so far (what may have come back).
double ModelBuilder::Ratio(int32_t i) const {
  return CanSwap(a_.candidates[i]) ? real_[i] / d2h_weight_[i] : 0.0;
}

absl::Status ModelBuilder::AddBoundaries() {
  const int32_t num_blocks = static_cast<int32_t>(start_.size()) - 1;
  at_.assign(num_blocks + 1, Boundary{});
  double made_ratio = 0;
  std::vector<int32_t> made_now, needed_now;
  for (int32_t j = 0; j <= num_blocks; ++j) {
    const int32_t from = j == 0 ? 0 : start_[j - 1] + 1;
    made_now.clear();
    needed_now.clear();
    for (int32_t k = from; k <= start_[j]; ++k) {
      const std::vector<int32_t>& made = changes_.made_before[k];
      const std::vector<int32_t>& needed = changes_.needed_by[k];
      made_now.insert(made_now.end(), made.begin(), made.end());
      needed_now.insert(needed_now.end(), needed.begin(), needed.end());
    }
    for (int32_t i : made_now) made_ratio = std::max(made_ratio, Ratio(i));
    const Flows flows = j == 0 ? Flows{} : AddFlows(j);
    AddBoundary(j, flows, made_now, needed_now, made_ratio);
    if (poller_.Stop()) return Stopped();
  }
  return absl::OkStatus();
}

// Block j-1 (ops start[j-1] .. start[j]-1) and the time added in it, before
// ops start[j-1]+1 .. start[j]: what each link direction can move.
ModelBuilder::Flows ModelBuilder::AddFlows(int32_t j) {
  int64_t block_ns = 0;
  for (int32_t k = start_[j - 1]; k < start_[j]; ++k) {
    block_ns = SaturatingAdd(block_ns, a_.durations.op_ns[k]);
  }
  const int gap = lp_.AddColumn(0, kInf, 1);  // G
  if (start_[j] >= first_backward_) lp_.Set(recompute_fits_, gap, 1);
  auto link = [&](double rate) {
    const int flow = lp_.AddColumn(0, kInf, 0);
    const int capacity = lp_.AddRow(-kInf, rate * Us(block_ns));
    lp_.Set(capacity, flow, 1);
    lp_.Set(capacity, gap, -rate);
    return flow;
  };
  Flows flows;
  flows.moved = link(d2h_rate_);
  flows.landed = link(h2d_rate_);
  flows.h2d_busy = link(h2d_rate_);
  return flows;
}

void ModelBuilder::AddBoundary(int32_t j, const Flows& flows,
                               const std::vector<int32_t>& made_now,
                               const std::vector<int32_t>& needed_now,
                               double made_ratio) {
  const std::vector<int32_t> none;
  const std::vector<int>& swap = layout_.swap;
  const Boundary prev =
      j == 0 ? Boundary{-1, -1, -1, -1, -1, -1, -1} : at_[j - 1];
  Boundary& now = at_[j];
  now.moved = Running(prev.moved, flows.moved, none, none, swap, d2h_weight_);
  now.made = Running(prev.made, -1, made_now, none, swap, d2h_weight_);
  now.out_needed =
      Running(prev.out_needed, -1, needed_now, none, swap, d2h_weight_);
  now.landed = Running(prev.landed, flows.landed, none, none, swap, real_);
  now.needed = Running(prev.needed, -1, needed_now, none, swap, real_);
  now.h2d_busy =
      Running(prev.h2d_busy, flows.h2d_busy, none, none, swap, h2d_weight_);
  now.in_needed =
      Running(prev.in_needed, -1, needed_now, none, swap, h2d_weight_);
  AtMost(now.moved, now.made);                // M <= P
  AtMost(now.out_needed, now.moved);          // D <= M
  AtMost(now.needed, now.landed);             // F <= Q
  AtMost(now.landed, now.moved, made_ratio);  // Q <= a' M
  AtMost(now.in_needed, now.h2d_busy);        // E <= H
  AtMost(now.h2d_busy, now.moved, rho_);      // H <= rho M
}

void ModelBuilder::CountBig(int32_t i, double sign) {
  if (!CanSwap(a_.candidates[i])) return;
  for (size_t t = 0; t < thresholds_.size(); ++t) {
    if (real_[i] > thresholds_[t]) sweep_.big_bytes[t] += sign * real_[i];
  }
}

void ModelBuilder::SweepGaps(int32_t r, std::vector<int32_t>& opened,
                             std::vector<int32_t>& closed) {
  opened.clear();
  closed.clear();
  for (; sweep_.next_op <= r; ++sweep_.next_op) {
    for (int32_t i : changes_.gap_from[sweep_.next_op]) {
      opened.push_back(i);
      sweep_.ratios.insert(Ratio(i));
      CountBig(i, 1);
    }
    for (int32_t i : changes_.gap_until[sweep_.next_op]) {
      closed.push_back(i);
      sweep_.ratios.erase(sweep_.ratios.find(Ratio(i)));
      CountBig(i, -1);
    }
  }
}

// Memory, at the op of each block where keeping everything needs the most
// (where that is over the budget): GS and GR, the swapped and recomputed
// bytes in their gap there, summed from one such op to the next.
absl::Status ModelBuilder::AddMemoryRows() {
  const int32_t num_blocks = static_cast<int32_t>(start_.size()) - 1;
  int gap_swapped = -1, gap_recomputed = -1;
  std::vector<int32_t> opened, closed;
  for (int32_t j = 0; j < num_blocks; ++j) {
    int32_t r = start_[j];
    for (int32_t k = start_[j]; k < start_[j + 1]; ++k) {
      if (alive_at_[k] > alive_at_[r]) r = k;
    }
    const double alive = alive_at_[r];
    if (alive <= budget_) continue;
    SweepGaps(r, opened, closed);
    gap_swapped = Running(gap_swapped, -1, opened, closed, layout_.swap, real_);
    gap_recomputed =
        Running(gap_recomputed, -1, opened, closed, layout_.recompute, real_);
    MemoryBlock& block = layout_.memory.emplace_back();
    block.alive = alive;
    const int released = AddReleased(j, r, gap_swapped, alive - budget_, block);
    const int memory = block.memory_row = lp_.AddRow(-kInf, budget_ - alive);
    lp_.Set(memory, gap_recomputed, -1);
    lp_.Set(memory, released, -1);
    if (poller_.Stop()) return Stopped();
  }
  return absl::OkStatus();
}

int ModelBuilder::AddReleased(int32_t j, int32_t r, int gap_swapped,
                              double over, MemoryBlock& block) {
  // The block-start values bounding op r's from the loose side: moved and
  // needed by the next start, landed by this one.
  const Boundary& after = r == start_[j] ? at_[j] : at_[j + 1];
  const int moved = after.moved;
  // Released: on the host, not yet brought back early. W <= a M,
  // W <= GS - (Q - F), and W <= GS (Q - F may be negative when read at
  // different ops).
  const int released = lp_.AddColumn(0, kInf, 0);  // W
  block.first_row = lp_.rows();
  AtMost(released, moved, sweep_.ratios.empty() ? 0 : *sweep_.ratios.rbegin());
  const int off = lp_.AddRow(-kInf, 0);
  lp_.Set(off, released, 1);
  lp_.Set(off, gap_swapped, -1);
  lp_.Set(off, at_[j].landed, 1);
  lp_.Set(off, after.needed, -1);
  if (r != start_[j]) AtMost(released, gap_swapped);
  // Copies that many bytes take: W + latency x rate x n <= M, where
  // n >= (W - big) / tau for each threshold that could bind (big below
  // the bytes to release).
  std::vector<size_t> binding;
  for (size_t t = 0; t < thresholds_.size(); ++t) {
    if (sweep_.big_bytes[t] < over) binding.push_back(t);
  }
  if (binding.empty()) return released;
  const int copies = lp_.AddColumn(0, kInf, 0);  // n
  const int stream = block.stream_row = lp_.AddRow(-kInf, 0);
  lp_.Set(stream, released, 1);
  lp_.Set(stream, copies, latency_bytes_);
  lp_.Set(stream, moved, -1);
  for (size_t t : binding) {
    const int few = lp_.AddRow(-kInf, sweep_.big_bytes[t]);
    lp_.Set(few, released, 1);
    lp_.Set(few, copies, -thresholds_[t]);
    block.few.push_back({few, sweep_.big_bytes[t]});
  }
  return released;
}

}  // namespace slackswap
