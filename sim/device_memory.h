// The whole device during a simulated step: the simulator reports every
// allocation and free here, and this runs them through the caching-
// allocator model (caching_allocator.h), so a result says what the step
// takes of the GPU (static tensors, activations, transients, the
// allocator's rounding and fragmentation, and the framework's reserve) and
// whether that fits the profile's memory. docs/SIMULATOR.md ("Device
// memory") has the rules.
//
//   DeviceTracker device(graph, hw, options);   // static tensors allocated
//   device.Allocate(tensor, bytes, now_ns);     // as the step allocates
//   device.Free(tensor, now_ns);
//   absl::StatusOr<DeviceReport> r = device.Finish(/*completed=*/true, stop);
//   if (r.ok() && !r->fits) ...                 // reserved + reserve > GPU
//
// The reserved peak reported is the steady state's: after the step, the
// recorded allocations are replayed from the allocator's state at its end
// until a step reserves no new segment (PyTorch's reserved memory grows for
// the first steps of a run, as cached segments are reused in new places).
#ifndef SLACKSWAP_SIM_DEVICE_MEMORY_H_
#define SLACKSWAP_SIM_DEVICE_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/stop.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "sim/caching_allocator.h"

namespace slackswap {

struct DeviceOptions {
  // Model the device. Off (the planners' own simulations), a result has no
  // device report, and the simulation costs what it did without it.
  bool enabled = false;
  AllocatorConfig allocator;
  // Memory to keep free beyond the framework reserve.
  int64_t headroom_bytes = 0;
};

struct DeviceReport {
  // The profile's memory (memory_gb x 10^9 bytes) and framework reserve.
  int64_t capacity_bytes = 0;
  int64_t reserve_bytes = 0;
  int64_t headroom_bytes = 0;
  // Static, activation and transient bytes live at once, at their peak.
  int64_t peak_live_bytes = 0;
  int64_t peak_live_ns = 0;
  // The allocator's allocated blocks and reserved segments at their peaks
  // (the reserved peak in steady state; `peak_reserved_step` says in which
  // step it was first reached, 1 being the first from an empty cache).
  int64_t peak_allocated_bytes = 0;
  int64_t peak_allocated_ns = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t peak_reserved_ns = 0;
  int32_t peak_reserved_step = 1;
  // Reserved minus allocated when the reserved peak was first reached.
  int64_t fragmentation_bytes = 0;
  // Segments made (expandable: page mappings), and the steps simulated to
  // reach the steady state.
  int64_t segments = 0;
  int32_t steps = 1;
  bool expandable_segments = false;
  // peak_reserved_bytes + reserve_bytes + headroom_bytes.
  int64_t required_bytes = 0;
  // The step completed and required_bytes <= capacity_bytes.
  bool fits = false;
};

// The device's size in bytes: memory_gb x 10^9.
int64_t DeviceCapacityBytes(const Hardware& hw);

class DeviceTracker {
 public:
  // Allocates g's static tensors (no op produces them), in tensor order:
  // they are resident before the step starts. `expected_events`: the most
  // allocations and frees the step can make, reserved at once.
  // REQUIRES: IndexGraph(g) succeeded; g and hw outlive the tracker.
  DeviceTracker(const Graph& g, const Hardware& hw,
                const DeviceOptions& options, size_t expected_events);

  // The key of the running task's workspace (tensors are keyed by index).
  int32_t WorkspaceKey() const { return workspace_key_; }
  // A tensor (or the workspace) of `bytes` is allocated / freed at `now`.
  // Zero bytes allocate nothing, as in PyTorch.
  void Allocate(int32_t key, int64_t bytes, int64_t now);
  void Free(int32_t key, int64_t now);
  // Static, activation and transient bytes live at `now`.
  void Live(int64_t bytes, int64_t now);

  int64_t allocated_bytes() const { return allocator_.allocated_bytes(); }
  int64_t reserved_bytes() const { return allocator_.reserved_bytes(); }

  // The report. When the step `completed`, replays it until steady first
  // (polling `stop`: CANCELLED when it says so).
  absl::StatusOr<DeviceReport> Finish(bool completed, const StopFn& stop);

 private:
  struct Record {
    int32_t key;
    int64_t bytes;  // < 0: a free
    int64_t time_ns;
  };

  void Apply(const Record& r, int32_t step);
  void Peaks(int64_t now, int32_t step);

  const Hardware& hw_;
  const DeviceOptions options_;
  const int32_t workspace_key_;
  CachingAllocator allocator_;
  std::vector<CachingAllocator::Handle> handles_;  // by key; -1: none
  std::vector<Record> log_;
  int64_t live_non_static_ = 0;
  // A key allocated twice (a model error): no replays.
  bool inconsistent_ = false;
  DeviceReport report_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_DEVICE_MEMORY_H_
