// Which sample of a memory timeline is in force at a time, for a caller that
// asks about times in nearly increasing order (a compute stream's tasks).
//
//   SampleInForce at(run.activation_timeline);
//   for (const TaskSpan& s : run.task_spans) {
//     int32_t i = at.At(s.end_ns);  // the last sample at or before end_ns
//   }
//
// Each lookup gallops on from the last answer instead of bisecting the
// whole timeline: on a graph of a million ops every step of a bisection is
// a cache miss, while a gallop from a nearby answer stays in a few lines.
// A time before the last answer is bisected, so any order gives the same
// answers as std::upper_bound.
#ifndef SLACKSWAP_PLANNER_INTERNAL_SAMPLE_IN_FORCE_H_
#define SLACKSWAP_PLANNER_INTERNAL_SAMPLE_IN_FORCE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/simulator.h"

namespace slackswap {

class SampleInForce {
 public:
  // REQUIRES: `timeline` is non-empty, ordered by time, and outlives this.
  explicit SampleInForce(const std::vector<ActivationSample>& timeline)
      : timeline_(timeline) {}

  // The index of the last sample at or before `t`, or 0 when every sample
  // comes after it.
  int32_t At(int64_t t) {
    const int64_t n = static_cast<int64_t>(timeline_.size());
    int64_t lo = 0;    // the answer is at least lo
    int64_t hi = at_;  // the samples from hi on come after t
    if (timeline_[at_].time_ns <= t) {
      lo = at_;
      hi = n;
      for (int64_t step = 1; step < n - lo; step *= 2) {
        if (timeline_[lo + step].time_ns > t) {
          hi = lo + step;
          break;
        }
        lo += step;
      }
    }
    auto after = std::upper_bound(
        timeline_.begin() + lo, timeline_.begin() + hi, t,
        [](int64_t x, const ActivationSample& s) { return x < s.time_ns; });
    at_ = std::max<int32_t>(
        0, static_cast<int32_t>(after - timeline_.begin()) - 1);
    return at_;
  }

 private:
  // Immutable after construction.
  const std::vector<ActivationSample>& timeline_;
  // The last answer.
  int32_t at_ = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_SAMPLE_IN_FORCE_H_
