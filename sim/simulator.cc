#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "sim/internal/rank_run.h"

namespace slackswap {

absl::StatusOr<SimResult> SimulateSchedule(const Graph& g, const Hardware& hw,
                                           const OpDurations& durations,
                                           const Schedule& schedule,
                                           const SimOptions& opts) {
  if (opts.budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget_bytes must be >= 0 (0: no limit), got ", opts.budget_bytes));
  }
  return RunAlone(g, hw, durations, schedule, opts);
}

absl::StatusOr<SimResult> Simulate(const Graph& g, const Hardware& hw,
                                   const Plan& plan, const SimOptions& opts) {
  SLACKSWAP_ASSIGN_OR_RETURN(OpDurations durations, ComputeDurations(g, hw));
  LoweringLimits limits;
  limits.max_recompute_tasks = opts.max_recompute_tasks;
  limits.should_stop = opts.should_stop;
  SLACKSWAP_ASSIGN_OR_RETURN(Schedule schedule,
                             LowerPlan(g, plan, durations, limits));
  return SimulateSchedule(g, hw, durations, schedule, opts);
}

std::vector<MemorySample> DownsampleTimeline(
    const std::vector<MemorySample>& timeline, int32_t points) {
  if (points <= 0 || static_cast<int64_t>(timeline.size()) <= points) {
    return timeline;
  }
  const int64_t begin = timeline.front().time_ns;
  const int64_t span = std::max<int64_t>(1, timeline.back().time_ns - begin);
  std::vector<MemorySample> out;
  out.reserve(points);
  int64_t bucket = -1;
  for (const MemorySample& s : timeline) {
    // Bucket b covers [begin + b*span/points, begin + (b+1)*span/points).
    const int64_t b = std::min<int64_t>(
        points - 1,
        static_cast<int64_t>(static_cast<__int128>(s.time_ns - begin) * points /
                             span));
    if (b != bucket) {
      out.push_back(s);
      bucket = b;
      continue;
    }
    MemorySample& m = out.back();
    m.activation_bytes = std::max(m.activation_bytes, s.activation_bytes);
    m.transient_bytes = std::max(m.transient_bytes, s.transient_bytes);
    m.allocated_bytes = std::max(m.allocated_bytes, s.allocated_bytes);
    m.reserved_bytes = std::max(m.reserved_bytes, s.reserved_bytes);
  }
  return out;
}

}  // namespace slackswap
