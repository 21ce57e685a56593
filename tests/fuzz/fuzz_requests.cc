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
#include "tests/fuzz/fuzz_core.h"

namespace {

using namespace slackswap;  // NOLINT: a fuzz target, not a library

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* req) {
  return req->ParseFromArray(data, static_cast<int>(size));
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
      if (Parse(data, size, &req))
        (void)FuzzCore().PlanStep(req, FuzzTimeLimit());
      return 0;
    }
    case 1: {
      v1::SimulateRequest req;
      if (Parse(data, size, &req))
        (void)FuzzCore().SimulateStep(req, FuzzTimeLimit());
      return 0;
    }
    case 2: {
      v1::SweepRequest req;
      if (Parse(data, size, &req)) {
        (void)FuzzCore().SweepBudgets(
            req, FuzzTimeLimit(),
            [](const v1::SweepResponse&) { return true; });
      }
      return 0;
    }
    default: {
      v1::GetWorkloadRequest req;
      if (Parse(data, size, &req)) (void)FuzzCore().GetWorkload(req);
      return 0;
    }
  }
}
