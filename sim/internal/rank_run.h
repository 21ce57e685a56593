// One GPU's run of a lowered schedule: its compute stream, its two copy
// streams, its memory, under docs/SIMULATOR.md's semantics. The
// single-GPU simulator drives one RankRun; the node simulator drives one
// per rank in a shared event loop, with the ranks' copies as flows on the
// node's links and their host copies in their socket's pinned memory.
//
//   PinnedPool pool{.capacity_bytes = hw.pinned_host_memory_bytes};
//   RankRun run(g, hw, durations, schedule, opts, &pool, nullptr, 0);
//   while (true) {
//     run.StartWhatCan();
//     if (!run.feasible() || run.done()) break;
//     if (!run.busy()) { run.Infeasible(run.DescribeDeadlock()); break; }
//     const int64_t next = run.NextEvent();
//     run.AccountStall(next);
//     run.FinishAt(next);
//   }
//   absl::StatusOr<SimResult> r = run.Finish();
//
// Only sim/ uses it.
#ifndef SLACKSWAP_SIM_INTERNAL_RANK_RUN_H_
#define SLACKSWAP_SIM_INTERNAL_RANK_RUN_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/statusor.h"
#include "common/saturating.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "sim/device_memory.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace slackswap {

inline constexpr int64_t kNeverNs = std::numeric_limits<int64_t>::max();
inline constexpr int kD2HStream = 0;
inline constexpr int kH2DStream = 1;

// One copy in flight. Bytes move at `rate` after the latency; the rate
// changes when another copy on one of its links starts or stops. The bytes
// left are a real number: a rate change keeps the fraction of a byte moved
// so far, so a copy's finish does not depend on how often others start and
// stop.
struct Copy {
  int32_t tensor = kNone;
  int64_t start = 0;
  int64_t data_start = 0;
  double bytes_left = 0;  // as of `updated`
  int64_t updated = 0;
  double rate = 0;  // bytes per ns
  int64_t finish = kNeverNs;

  bool active() const { return tensor != kNone; }

  void Advance(int64_t now) {
    if (now > data_start) {
      const int64_t from = std::max(updated, data_start);
      bytes_left =
          std::max(0.0, bytes_left - static_cast<double>(now - from) * rate);
    }
    updated = now;
  }

  void SetRate(int64_t now, double new_rate) {
    Advance(now);
    rate = new_rate;
    finish = SaturatingAdd(std::max(now, data_start), CopyNs(bytes_left, rate));
  }
};

// Pinned host memory that one or more ranks' swapped tensors share: the
// GPU's own on one GPU, a socket's on a node.
struct PinnedPool {
  int64_t capacity_bytes = 0;
  int64_t in_use_bytes = 0;
  int64_t peak_bytes = 0;
  // Said after the figures when it runs out (" on socket 0, shared by
  // ranks 0-3"); empty for one GPU's own.
  std::string where;
};

// How a rank's copies get their rates when they share links with other
// ranks' copies. Started/Finished set the rate of every copy whose rate
// may change (the started one included), through RankRun::copy().
class SharedLinks {
 public:
  virtual ~SharedLinks() = default;
  virtual void Started(int32_t rank, int stream, int64_t now) = 0;
  virtual void Finished(int32_t rank, int stream, int64_t bytes,
                        int64_t now) = 0;
};

class RankRun {
 public:
  // `links` null: the copies have the GPU's link to themselves (the
  // hardware profile's rates, both-directions while the other is busy).
  // REQUIRES: every argument outlives the run; pool non-null.
  RankRun(const Graph& g, const Hardware& hw, const OpDurations& d,
          const Schedule& s, const SimOptions& opts, PinnedPool* pool,
          SharedLinks* links, int32_t rank);

  // Starts every task and copy that can start now; may make the run
  // infeasible (pinned memory exhausted).
  void StartWhatCan();

  bool feasible() const { return result_.feasible; }
  const std::string& infeasible_reason() const {
    return result_.infeasible_reason;
  }
  // Every task ran, every copy landed, every collective completed.
  bool done() const {
    return task_ == static_cast<int32_t>(s_.tasks.size()) &&
           !copy_[kD2HStream].active() && !copy_[kH2DStream].active() &&
           queue_[kD2HStream].empty() && queue_[kH2DStream].empty() &&
           comm_head_ == comm_queue_.size();
  }
  // A stream is running (compute, a copy in flight, or a collective).
  bool busy() const {
    return compute_busy_ || copy_[kD2HStream].active() ||
           copy_[kH2DStream].active() || comm_running_;
  }
  // When the next task or copy ends; kNeverNs when none runs.
  int64_t NextEvent() const {
    return std::min({compute_busy_ ? compute_end_ : kNeverNs,
                     copy_[kD2HStream].finish, copy_[kH2DStream].finish});
  }
  // Charges the time until `next` to the stall that holds compute back.
  void AccountStall(int64_t next);
  // Moves to `now` and ends the copies and task ending then.
  void FinishAt(int64_t now);
  // Moves to `now`, when nothing of this rank ends then.
  void AdvanceTo(int64_t now) { now_ = now; }
  // If the next event is at `now`: charges the stall since the last one
  // (AccountStall), moves to `now` and ends what ends then (FinishAt), and
  // says true. Else false, and nothing changes. One call where the node's
  // loop asks every rank at every instant.
  bool FinishIfDue(int64_t now);
  void Infeasible(std::string reason);
  std::string DescribeDeadlock() const;
  // The result, the step ending now. Call once, at the end.
  absl::StatusOr<SimResult> Finish();

  // The communication stream (ranks on a node): collectives issued in
  // order, each run when every rank of its group has it first in line.
  // The head's task, or kNone; whether it runs; its start and its end (the
  // node simulator times it).
  int32_t CommHead() const;
  bool comm_running() const { return comm_running_; }
  void StartCommHead(int64_t now);
  void FinishCommHead(int64_t now);
  // How many times a collective was issued, started or finished: a caller
  // that saw no collective ready need not ask again until it grows.
  int64_t comm_changes() const { return comm_changes_; }

  Copy& copy(int stream) { return copy_[stream]; }
  int64_t now() const { return now_; }
  // Host copies this rank holds in pinned memory now.
  int64_t host_bytes() const { return host_; }

 private:
  int64_t Bytes(int32_t t) const { return bytes_[t]; }
  // Counts against the activation budget: a saved activation.
  bool IsActivation(int32_t t) const { return g_.index.is_saved[t]; }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Fits(int64_t activation,
                                         int64_t transient) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Allocate(int32_t t);
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Release(int32_t t);
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Sample();
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Record(StreamId stream, EventType type,
                                           int32_t index, int64_t start);
  std::pair<int64_t, int64_t> TaskNeeds(int32_t i) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE std::pair<int64_t, int64_t> NextNeeds();
  ABSL_ATTRIBUTE_ALWAYS_INLINE int32_t MissingInput() const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool TryStartCompute();
  ABSL_ATTRIBUTE_ALWAYS_INLINE void FinishTask();
  // What ending task `i` does (frees, releases, swap-outs, its event), for
  // compute and collectives alike (one copy each: each is inlined where it
  // is called, in the event loop's hot path).
  template <StreamId stream>
  ABSL_ATTRIBUTE_ALWAYS_INLINE void EndTask(int32_t i, int64_t start);
  // The bodies of StartWhatCan, FinishAt and AccountStall, inlined in
  // RunAlone's loop: one event is a few nanoseconds of work there, and a
  // call per step of it costs a tenth more.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void StartAll();
  ABSL_ATTRIBUTE_ALWAYS_INLINE void FinishAll(int64_t now);
  ABSL_ATTRIBUTE_ALWAYS_INLINE void ChargeStall(int64_t next);
  friend absl::StatusOr<SimResult> RunAlone(const Graph& g, const Hardware& hw,
                                            const OpDurations& d,
                                            const Schedule& s,
                                            const SimOptions& opts);
  bool IsCollective(const Task& task) const;
  // An input of the next task a collective has not written yet, or kNone.
  int32_t PendingCollectiveInput() const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE void ReleaseSwapped(int32_t t);
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool HeadReady(int stream) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool TryStartCopies();
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool StartCopy(int stream);
  ABSL_ATTRIBUTE_ALWAYS_INLINE void FinishCopy(int stream);
  std::string Held() const;

  // Immutable after construction.
  const Graph& g_;
  const Hardware& hw_;
  const OpDurations& d_;
  const Schedule& s_;
  const SimOptions& opts_;
  PinnedPool* const pool_;
  SharedLinks* const links_;
  const int32_t rank_;
  const int64_t* const bytes_;  // g_.index.bytes, read for every allocation
  // Either timeline recorded: one test per change of memory, which every
  // run makes, recorded or not.
  const bool records_timeline_;

  SimResult result_;
  std::optional<DeviceTracker> device_;
  // The timeline's last point, whichever of the two timelines records it:
  // both keep the same points.
  std::optional<MemorySample> last_sample_;
  int64_t now_ = 0;
  int64_t act_ = 0;
  int64_t trans_ = 0;
  int64_t host_ = 0;
  int32_t task_ = 0;
  bool compute_busy_ = false;
  int64_t compute_start_ = 0;
  int64_t compute_end_ = 0;
  Copy copy_[2];
  struct Queued {
    int32_t tensor;
    int64_t issued;
  };
  std::deque<Queued> queue_[2];
  std::vector<bool> d2h_done_;
  std::vector<bool> arrived_;
  std::vector<int8_t> release_pending_;
  // Collectives: whether the graph has any; per tensor, written by a
  // collective that has not completed; the tasks issued to the
  // communication stream, the first not completed at comm_head_.
  bool has_collectives_ = false;
  std::vector<uint8_t> comm_pending_;
  std::vector<int32_t> comm_queue_;
  size_t comm_head_ = 0;
  bool comm_running_ = false;
  int64_t comm_changes_ = 0;
  int64_t comm_start_ = 0;
  // Caches of the next task's needs, arrived waits and written collective
  // inputs (see NextNeeds, MissingInput and PendingCollectiveInput): a
  // blocked task is asked again at every event.
  int32_t needs_of_ = kNone;
  std::pair<int64_t, int64_t> needs_;
  mutable int32_t waits_of_ = kNone;
  mutable size_t waits_seen_ = 0;
  mutable int32_t pending_of_ = kNone;
  mutable size_t pending_seen_ = 0;
};

// Simulated time past this (146 years) means input beyond any physical
// range; sums of times stay far from overflowing below it.
inline constexpr int64_t kTimeHorizonNs = int64_t{1} << 62;

// INVALID_ARGUMENT: the step would last past kTimeHorizonNs.
absl::Status TimeHorizonError(int64_t at);

// One GPU alone: its own link and pinned memory (SimulateSchedule).
absl::StatusOr<SimResult> RunAlone(const Graph& g, const Hardware& hw,
                                   const OpDurations& d, const Schedule& s,
                                   const SimOptions& opts);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_INTERNAL_RANK_RUN_H_
