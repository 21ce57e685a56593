#include "planner/internal/slack.h"

#include <algorithm>
#include <limits>

namespace slackswap {

MinTree::MinTree(const std::vector<int64_t>& values)
    : n_(static_cast<int32_t>(values.size())),
      min_(4 * std::max(1, n_), 0),
      add_(4 * std::max(1, n_), 0) {
  if (n_ > 0) Build(1, 0, n_ - 1, values);
}

void MinTree::Add(int32_t lo, int32_t hi, int64_t v) {
  if (lo <= hi) Add(1, 0, n_ - 1, lo, hi, v);
}

int64_t MinTree::Min(int32_t lo, int32_t hi) const {
  if (lo > hi) return std::numeric_limits<int64_t>::max();
  return Min(1, 0, n_ - 1, lo, hi);
}

void MinTree::Build(int32_t node, int32_t l, int32_t r,
                    const std::vector<int64_t>& v) {
  if (l == r) {
    min_[node] = v[l];
    return;
  }
  const int32_t m = (l + r) / 2;
  Build(2 * node, l, m, v);
  Build(2 * node + 1, m + 1, r, v);
  min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
}

void MinTree::Add(int32_t node, int32_t l, int32_t r, int32_t lo, int32_t hi,
                  int64_t v) {
  if (hi < l || r < lo) return;
  if (lo <= l && r <= hi) {
    min_[node] += v;
    add_[node] += v;
    return;
  }
  const int32_t m = (l + r) / 2;
  Add(2 * node, l, m, lo, hi, v);
  Add(2 * node + 1, m + 1, r, lo, hi, v);
  min_[node] = std::min(min_[2 * node], min_[2 * node + 1]) + add_[node];
}

int64_t MinTree::Min(int32_t node, int32_t l, int32_t r, int32_t lo,
                     int32_t hi) const {
  if (hi < l || r < lo) return std::numeric_limits<int64_t>::max();
  if (lo <= l && r <= hi) return min_[node];
  const int32_t m = (l + r) / 2;
  return std::min(Min(2 * node, l, m, lo, hi),
                  Min(2 * node + 1, m + 1, r, lo, hi)) +
         add_[node];
}

SlackFiller::SlackFiller(const StepAnalysis& a, int64_t swap_out_deadline_ns)
    : a_(a) {
  const int32_t n = static_cast<int32_t>(a.candidates.size());
  // Candidates are in production order; rank them by deadline for H2D.
  std::vector<int32_t> by_deadline(n);
  for (int32_t i = 0; i < n; ++i) by_deadline[i] = i;
  std::stable_sort(
      by_deadline.begin(), by_deadline.end(),
      [&](int32_t x, int32_t y) { return Deadline(x) < Deadline(y); });
  std::vector<int32_t> deadline_rank(n);
  for (int32_t r = 0; r < n; ++r) deadline_rank[by_deadline[r]] = r;

  std::vector<int64_t> out_margin(n), in_margin(n);
  for (int32_t i = 0; i < n; ++i) {
    out_margin[i] = swap_out_deadline_ns - Release(i);
    in_margin[deadline_rank[i]] = Deadline(i) - a.forward_ns;
  }
  out_ = MinTree(out_margin);
  in_ = MinTree(in_margin);
  last_released_with_.resize(n);
  for (int32_t i = n - 1; i >= 0; --i) {
    last_released_with_[i] = i + 1 < n && Release(i + 1) == Release(i)
                                 ? last_released_with_[i + 1]
                                 : i;
  }
  std::vector<int32_t> first_by_rank(n);
  for (int32_t r = 0; r < n; ++r) {
    first_by_rank[r] =
        r > 0 && Deadline(by_deadline[r - 1]) == Deadline(by_deadline[r])
            ? first_by_rank[r - 1]
            : r;
  }
  first_due_with_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    first_due_with_[i] = first_by_rank[deadline_rank[i]];
  }
}

bool SlackFiller::TryAdmit(int32_t i) {
  const Candidate& c = a_.candidates[i];
  const int32_t n = static_cast<int32_t>(a_.candidates.size());
  const int32_t out_hi = last_released_with_[i];
  const int32_t in_lo = first_due_with_[i];
  if (out_.Min(0, out_hi) < c.d2h_ns || in_.Min(in_lo, n - 1) < c.h2d_ns) {
    return false;
  }
  out_.Add(0, out_hi, -c.d2h_ns);
  in_.Add(in_lo, n - 1, -c.h2d_ns);
  return true;
}

int64_t SlackFiller::Release(int32_t i) const {
  return a_.op_end_ns[a_.candidates[i].producer];
}

int64_t SlackFiller::Deadline(int32_t i) const {
  return a_.op_start_ns[a_.candidates[i].first_bwd_use];
}

}  // namespace slackswap
