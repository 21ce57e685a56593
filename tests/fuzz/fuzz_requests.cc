// libFuzzer target: service requests through validation, planning with every
// policy, and simulation, exactly as slackswapd runs them (PlanningCore), with
// limits that keep one input fast.
//
// The first input byte picks the RPC (Plan, Simulate, Sweep, GetWorkload);
// the rest is the binary request.
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "core/planning_core.h"

namespace {

using namespace slackswap;  // NOLINT: a fuzz target, not a library

const PlanningCore& Core() {
  static const PlanningCore* core = [] {
    // Inputs up to 4 MiB hold graphs of ~100,000 ops: room for the long
    // chains and wide fan-outs that once broke the planner.
    CoreLimits limits;
    limits.max_graph_ops = 300'000;
    limits.max_graph_tensors = 600'000;
    limits.max_workload_layers = 8;
    limits.max_timeline_points = 64;
    limits.max_sweep_points = 12;
    limits.max_event_ops = 2'000;
    limits.max_recompute_tasks = 2'000'000;
    return new PlanningCore(limits);
  }();
  return *core;
}

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* req) {
  return req->ParseFromArray(data, static_cast<int>(size));
}

// Like the service's --max_request_s: an input may plan for at most 3 s
// (instrumented builds are slow), then it is stopped through the same stop
// function deadlines use. A loop that ignores it still trips libFuzzer's
// -timeout.
StopFn TimeLimit() {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  return [limit] { return std::chrono::steady_clock::now() >= limit; };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t rpc = data[0] % 4;
  ++data;
  --size;
  switch (rpc) {
    case 0: {
      v1::PlanRequest req;
      if (Parse(data, size, &req)) (void)Core().PlanStep(req, TimeLimit());
      return 0;
    }
    case 1: {
      v1::SimulateRequest req;
      if (Parse(data, size, &req)) (void)Core().SimulateStep(req, TimeLimit());
      return 0;
    }
    case 2: {
      v1::SweepRequest req;
      if (Parse(data, size, &req)) {
        (void)Core().SweepBudgets(
            req, TimeLimit(), [](const v1::SweepResponse&) { return true; });
      }
      return 0;
    }
    default: {
      v1::GetWorkloadRequest req;
      if (Parse(data, size, &req)) (void)Core().GetWorkload(req);
      return 0;
    }
  }
}
