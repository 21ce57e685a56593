#include "planner/internal/slack.h"

#include <algorithm>
#include <limits>

namespace slackswap {

// Bottom-up, without recursion: leaves at [n, 2n), node p's children at 2p
// and 2p + 1. min_[p] is the minimum under p including the adds pending at
// p itself; pending_[p] (internal nodes) is what p has yet to hand down.
MinTree::MinTree(const std::vector<int64_t>& values)
    : n_(static_cast<int32_t>(values.size())),
      min_(2 * static_cast<size_t>(std::max(1, n_)), 0),
      pending_(static_cast<size_t>(std::max(1, n_)), 0) {
  while ((int32_t{1} << height_) < n_) ++height_;
  for (int32_t i = 0; i < n_; ++i) min_[n_ + i] = values[i];
  for (int32_t p = n_ - 1; p > 0; --p) {
    min_[p] = std::min(min_[2 * p], min_[2 * p + 1]);
  }
}

void MinTree::Apply(int32_t p, int64_t v) {
  min_[p] += v;
  if (p < n_) pending_[p] += v;
}

void MinTree::Rebuild(int32_t p) {
  while (p > 1) {
    p >>= 1;
    min_[p] = std::min(min_[2 * p], min_[2 * p + 1]) + pending_[p];
  }
}

void MinTree::Push(int32_t p) {
  for (int32_t s = height_; s > 0; --s) {
    const int32_t i = p >> s;
    if (i > 0 && pending_[i] != 0) {
      Apply(2 * i, pending_[i]);
      Apply(2 * i + 1, pending_[i]);
      pending_[i] = 0;
    }
  }
}

void MinTree::Add(int32_t lo, int32_t hi, int64_t v) {
  if (lo > hi) return;
  int32_t l = lo + n_;
  int32_t r = hi + 1 + n_;
  const int32_t l0 = l;
  const int32_t r0 = r;
  for (; l < r; l >>= 1, r >>= 1) {
    if (l & 1) Apply(l++, v);
    if (r & 1) Apply(--r, v);
  }
  Rebuild(l0);
  Rebuild(r0 - 1);
}

int64_t MinTree::Min(int32_t lo, int32_t hi) {
  int64_t best = std::numeric_limits<int64_t>::max();
  if (lo > hi) return best;
  int32_t l = lo + n_;
  int32_t r = hi + 1 + n_;
  Push(l);
  Push(r - 1);
  for (; l < r; l >>= 1, r >>= 1) {
    if (l & 1) best = std::min(best, min_[l++]);
    if (r & 1) best = std::min(best, min_[--r]);
  }
  return best;
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
