#include "sim/device_memory.h"

#include <cmath>

#include "common/saturating.h"

namespace slackswap {
namespace {

// Steps simulated at most (the first and its replays). Reserved memory
// stops growing once a whole step reserves nothing new (the state at a
// step's end depends only on the segments then held), which on the
// reference workloads takes two or three.
constexpr int32_t kMaxSteps = 8;

}  // namespace

int64_t DeviceCapacityBytes(const Hardware& hw) {
  return static_cast<int64_t>(std::floor(hw.memory_gb * 1e9));
}

DeviceTracker::DeviceTracker(const Graph& g, const Hardware& hw,
                             const DeviceOptions& options,
                             size_t expected_events)
    : hw_(hw),
      options_(options),
      workspace_key_(static_cast<int32_t>(g.tensors.size())),
      allocator_(options.allocator),
      handles_(g.tensors.size() + 1, -1) {
  // Grown by doubling, a large step's log was briefly held twice over: the
  // peak of a whole planning request on a 10^6-op graph.
  log_.reserve(expected_events);
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.index.producer[t] != kNone || g.index.bytes[t] == 0) continue;
    handles_[t] = allocator_.Allocate(g.index.bytes[t]);
    Peaks(0, 1);
  }
}

void DeviceTracker::Peaks(int64_t now, int32_t step) {
  if (allocator_.allocated_bytes() > report_.peak_allocated_bytes) {
    report_.peak_allocated_bytes = allocator_.allocated_bytes();
    report_.peak_allocated_ns = now;
  }
  if (allocator_.reserved_bytes() > report_.peak_reserved_bytes) {
    report_.peak_reserved_bytes = allocator_.reserved_bytes();
    report_.peak_reserved_ns = now;
    report_.peak_reserved_step = step;
    report_.fragmentation_bytes =
        allocator_.reserved_bytes() - allocator_.allocated_bytes();
  }
}

void DeviceTracker::Apply(const Record& r, int32_t step) {
  CachingAllocator::Handle& h = handles_[r.key];
  if (r.bytes >= 0) {
    if (h >= 0) {
      inconsistent_ = true;
      return;
    }
    h = allocator_.Allocate(r.bytes);
    ++live_non_static_;
    Peaks(r.time_ns, step);
  } else if (h >= 0) {
    allocator_.Free(h);
    h = -1;
    --live_non_static_;
  }
}

void DeviceTracker::Allocate(int32_t key, int64_t bytes, int64_t now) {
  if (bytes == 0) return;
  log_.push_back({key, bytes, now});
  Apply(log_.back(), 1);
}

void DeviceTracker::Free(int32_t key, int64_t now) {
  if (handles_[key] < 0) return;  // zero bytes: nothing was allocated
  log_.push_back({key, -1, now});
  Apply(log_.back(), 1);
}

void DeviceTracker::Live(int64_t bytes, int64_t now) {
  if (bytes > report_.peak_live_bytes) {
    report_.peak_live_bytes = bytes;
    report_.peak_live_ns = now;
  }
}

absl::StatusOr<DeviceReport> DeviceTracker::Finish(bool completed,
                                                   const StopFn& stop) {
  report_.segments = allocator_.segments();
  // A step that did not complete (or left a tensor allocated, which the
  // lowering never does) is not replayed: its end is not a step's end.
  if (completed && !inconsistent_ && live_non_static_ == 0) {
    StopPoller poller(stop, 1024);
    for (int32_t step = 2; step <= kMaxSteps; ++step) {
      const int64_t before = allocator_.reserved_bytes();
      for (const Record& r : log_) {
        if (poller.Stop()) {
          return absl::CancelledError("replaying the allocator stopped");
        }
        Apply(r, step);
      }
      report_.steps = step;
      if (allocator_.reserved_bytes() == before) break;
    }
    report_.segments = allocator_.segments();
  }
  report_.capacity_bytes = DeviceCapacityBytes(hw_);
  report_.reserve_bytes = hw_.framework_reserve_bytes;
  report_.headroom_bytes = options_.headroom_bytes;
  report_.expandable_segments = options_.allocator.expandable_segments;
  report_.required_bytes = SaturatingAdd(
      report_.peak_reserved_bytes,
      SaturatingAdd(report_.reserve_bytes, report_.headroom_bytes));
  report_.fits = completed && report_.required_bytes <= report_.capacity_bytes;
  return report_;
}

}  // namespace slackswap
