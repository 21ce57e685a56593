// What the request-level fuzz targets (fuzz_requests, fuzz_shapes) share:
// the service's planning core under limits that keep one input fast but
// leave room for the long chains and wide fan-outs that once broke the
// planner, and a per-input time limit like the service's --max_request_s.
//
//   (void)FuzzCore().PlanStep(req, FuzzTimeLimit());
#ifndef SLACKSWAP_TESTS_FUZZ_FUZZ_CORE_H_
#define SLACKSWAP_TESTS_FUZZ_FUZZ_CORE_H_

#include <chrono>

#include "common/stop.h"
#include "core/planning_core.h"

namespace slackswap {

// Inputs up to 4 MiB hold graphs of ~100,000 ops.
inline constexpr int64_t kFuzzMaxOps = 300'000;

// One core for the process, built on first use.
inline const PlanningCore& FuzzCore() {
  static const PlanningCore* core = [] {
    CoreLimits limits;
    limits.max_graph_ops = kFuzzMaxOps;
    limits.max_graph_tensors = 2 * kFuzzMaxOps;
    limits.max_workload_layers = 8;
    limits.max_timeline_points = 64;
    limits.max_sweep_points = 12;
    limits.max_event_ops = 2'000;
    limits.max_recompute_tasks = 2'000'000;
    return new PlanningCore(limits);
  }();
  return *core;
}

// An input plans for at most 3 s, then is stopped through the stop function
// deadlines use.
inline StopFn FuzzTimeLimit() {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  return [limit] { return std::chrono::steady_clock::now() >= limit; };
}

}  // namespace slackswap

#endif  // SLACKSWAP_TESTS_FUZZ_FUZZ_CORE_H_
