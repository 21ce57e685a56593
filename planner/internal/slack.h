// The hidden-transfer capacity ("slack") of a step, as an admission test:
// which swaps the two copy streams can run without anyone waiting.
//
//   SlackFiller filler(analysis, analysis.peak_ns);
//   for (int32_t i : candidates_in_preferred_order) {
//     if (filler.TryAdmit(i)) swap.push_back(i);
//   }
//
// A swap-out must finish by a deadline (the end of the forward pass, or the
// start of the op where memory peaks, which the budget binds hardest); a
// prefetch may start when the backward pass starts and must land before the
// tensor's first backward use. Each stream moves one copy at a time.
//
// One stream with jobs released at r_j and one deadline T: FIFO meets it iff
// for every release r, r + (copy times released at or after r) <= T. With
// deadlines d_j and every job released at T: earliest-deadline-first meets
// them iff for every deadline d, T + (copy times due by d) <= d. Both are
// range minima over the remaining margins, so admitting n candidates costs
// O(n log n).
#ifndef SLACKSWAP_PLANNER_INTERNAL_SLACK_H_
#define SLACKSWAP_PLANNER_INTERNAL_SLACK_H_

#include <cstdint>
#include <vector>

#include "planner/analysis.h"

namespace slackswap {

// Range add, range minimum over a fixed array.
class MinTree {
 public:
  MinTree() = default;  // empty
  explicit MinTree(const std::vector<int64_t>& values);
  // Adds v to [lo, hi].
  void Add(int32_t lo, int32_t hi, int64_t v);
  // Minimum over [lo, hi]; INT64_MAX when empty. Not const: it hands
  // pending adds down the two paths it reads.
  int64_t Min(int32_t lo, int32_t hi);

 private:
  void Apply(int32_t p, int64_t v);
  void Rebuild(int32_t p);
  void Push(int32_t p);

  int32_t n_ = 0;
  int32_t height_ = 0;
  std::vector<int64_t> min_;
  std::vector<int64_t> pending_;
};

class SlackFiller {
 public:
  // Swap-outs must finish by `swap_out_deadline_ns` (on the ideal
  // timeline); prefetches may start from the end of the forward pass.
  // REQUIRES: a outlives the filler.
  SlackFiller(const StepAnalysis& a, int64_t swap_out_deadline_ns);

  // Admits candidate i (an index into a.candidates) if, with it, both
  // streams still meet every deadline of the admitted copies.
  bool TryAdmit(int32_t i);

 private:
  int64_t Release(int32_t i) const;
  int64_t Deadline(int32_t i) const;

  // Immutable after construction.
  const StepAnalysis& a_;
  // A swap-out released with candidate i counts against the D2H margins of
  // every release up to it, [0, last_released_with_[i]] in production order;
  // a prefetch due with it against the H2D margins from first_due_with_[i]
  // on, in deadline rank.
  std::vector<int32_t> last_released_with_;
  std::vector<int32_t> first_due_with_;
  // Margins left, by release (D2H) and by deadline rank (H2D).
  MinTree out_;
  MinTree in_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_SLACK_H_
