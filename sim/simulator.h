// The discrete-event simulator: executes (graph, plan, hardware) on three
// streams (compute, D2H copy, H2D copy) with the exact semantics of
// docs/SIMULATOR.md, and reports step time, memory and stalls.
//
//   SimOptions opts;
//   opts.budget_bytes = 20'000'000'000;
//   absl::StatusOr<SimResult> r = Simulate(graph, hw, plan, opts);
//   if (r.ok() && r->feasible) Print(r->throughput_retained);
//
// Semantics, in brief (docs/SIMULATOR.md has the whole of it):
//  - Compute runs tasks in order. A task starts when the previous one ended,
//    the swapped tensors it reads have arrived, and its saved-activation
//    outputs fit the budget; it frees what it last reads when it ends.
//  - A swap-out is issued on D2H when its producer ends; the device copy is
//    released when the copy has finished and the last forward reader ended.
//    Its host copy holds pinned memory from the copy's start until the
//    prefetch lands; exceeding the pinned capacity is infeasible.
//  - A prefetch is issued on H2D when its trigger op starts, starts after the
//    tensor's swap-out finished, and reserves device memory when it starts
//    (waiting for budget if needed).
//  - Each copy stream runs its copies one at a time in issue order. While
//    both directions move data, each runs at its bidir_* rate; a half-duplex
//    link (or a single copy engine) runs one direction at a time, the
//    earlier-issued first. A copy takes latency + bytes / rate.
//  - When every stream is blocked and nothing in flight can unblock one, the
//    plan is infeasible: the result says where, instead of hanging.
// Deterministic: the same inputs give the same result, bit for bit.
#ifndef SLACKSWAP_SIM_SIMULATOR_H_
#define SLACKSWAP_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/plan.h"
#include "sim/device_memory.h"
#include "sim/schedule.h"

namespace slackswap {

struct SimOptions {
  // Activation-memory limit in bytes; 0 means no limit.
  int64_t budget_bytes = 0;
  // The budget limits activation plus transient memory, not activations
  // alone.
  bool budget_covers_all = false;
  // Downsample the memory timeline to at most this many points (the maximum
  // of each time bucket, so peaks survive); 0 keeps every change.
  int32_t timeline_points = 0;
  bool record_timeline = true;
  // Record one event per task and copy (for traces).
  bool record_events = false;
  // What a planner reads of a run, in a third of the bytes of the timeline
  // and events: when each task ran (SimResult::task_spans) and the saved
  // activations' bytes at each point of the timeline
  // (SimResult::activation_timeline).
  bool record_task_spans = false;
  bool record_activation_timeline = false;
  // Node runs: record each shared link's load over the step
  // (LinkUsage::load; sim/link_load_recorder.h), at most timeline_points
  // points per link when that is > 0. Off for plan searches, which would
  // pay for a series per candidate.
  bool record_link_load = false;
  // Polled every few thousand events; returning true stops the simulation
  // with CANCELLED (deadlines and cancelled requests).
  std::function<bool()> should_stop;
  // Simulate() lowers the plan under this bound (see LoweringLimits).
  int64_t max_recompute_tasks = LoweringLimits{}.max_recompute_tasks;
  // Whole-device accounting through the caching-allocator model
  // (device_memory.h): off unless asked for, since it costs more than the
  // rest of the simulation (docs/PERFORMANCE.md).
  DeviceOptions device;
};

// kComm: a rank's communication stream (collectives; node runs).
enum class StreamId : uint8_t { kCompute, kD2H, kH2D, kComm };
enum class EventType : uint8_t {
  kOp,
  kRecompute,
  kSwapOut,
  kPrefetch,
  kCollective,
};

struct SimEvent {
  StreamId stream;
  EventType type;
  int32_t index;  // op for compute events, tensor for copies
  int64_t start_ns;
  int64_t end_ns;
};

// When task i of the schedule started and ended, on the compute stream (or
// the communication stream, for a collective).
struct TaskSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// A MemorySample's time and activation bytes: one per point of the full
// timeline (same times; not downsampled), so a range of samples covers the
// same stretch of the step in both.
struct ActivationSample {
  int64_t time_ns = 0;
  int64_t activation_bytes = 0;
};

struct MemorySample {
  int64_t time_ns;
  int64_t activation_bytes;
  int64_t transient_bytes;
  // The caching-allocator model's allocated blocks and reserved segments
  // (0 unless SimOptions::device is enabled; static tensors included).
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
};

struct SimResult {
  bool feasible = true;
  std::string infeasible_reason;
  int64_t step_ns = 0;
  int64_t ideal_step_ns = 0;
  double throughput_retained = 0;
  int64_t peak_activation_bytes = 0;
  // When the activation peak was first reached: where a budget binds.
  int64_t peak_activation_ns = 0;
  int64_t peak_transient_bytes = 0;
  int64_t peak_transient_ns = 0;
  int64_t budget_bytes = 0;
  int64_t d2h_bytes = 0;
  int64_t h2d_bytes = 0;
  int64_t recompute_ns = 0;
  int64_t stall_prefetch_ns = 0;
  int64_t stall_swap_out_ns = 0;
  int64_t stall_memory_ns = 0;
  // Compute waiting for a collective's output (node runs; alone, a
  // collective takes no time).
  int64_t stall_collective_ns = 0;
  int64_t unconstrained_peak_bytes = 0;
  int64_t static_bytes = 0;
  int64_t peak_pinned_host_bytes = 0;
  int64_t swapped_tensors = 0;
  int64_t recomputed_tensors = 0;
  int64_t events_processed = 0;
  std::vector<MemorySample> timeline;
  std::vector<SimEvent> events;
  // Indexed by task; complete when the run is feasible.
  std::vector<TaskSpan> task_spans;
  std::vector<ActivationSample> activation_timeline;
  // With SimOptions::device enabled: the whole device.
  std::optional<DeviceReport> device;
};

// REQUIRES: IndexGraph(g) succeeded and hw passed ValidateHardware.
// Errors: INVALID_ARGUMENT when the plan does not fit the graph (see
// LowerPlan) or a duration overflows; CANCELLED when should_stop said so.
// An infeasible plan is a result (feasible = false), not an error.
absl::StatusOr<SimResult> Simulate(const Graph& g, const Hardware& hw,
                                   const Plan& plan, const SimOptions& opts);

// The same, with durations and schedule already computed (planners that
// simulate many candidate plans reuse the durations).
absl::StatusOr<SimResult> SimulateSchedule(const Graph& g, const Hardware& hw,
                                           const OpDurations& durations,
                                           const Schedule& schedule,
                                           const SimOptions& opts);

// Keeps the maximum of each of `points` equal time buckets.
std::vector<MemorySample> DownsampleTimeline(
    const std::vector<MemorySample>& timeline, int32_t points);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_SIMULATOR_H_
