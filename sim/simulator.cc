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

namespace slackswap {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// Simulated time past this (146 years) means input beyond any physical
// range; sums of times stay far from overflowing below it.
constexpr int64_t kTimeHorizonNs = int64_t{1} << 62;
constexpr int kD2H = 0;
constexpr int kH2D = 1;

// One copy in flight. Bytes move at `rate` after the latency; the rate
// changes when the other direction starts or stops. The bytes left are a
// real number: a rate change keeps the fraction of a byte moved so far, so
// a copy's finish does not depend on how often the other direction starts
// and stops.
struct Copy {
  int32_t tensor = kNone;
  int64_t start = 0;
  int64_t data_start = 0;
  double bytes_left = 0;  // as of `updated`
  int64_t updated = 0;
  double rate = 0;  // bytes per ns
  int64_t finish = kNever;

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

struct Queued {
  int32_t tensor;
  int64_t issued;
};

class Engine {
 public:
  Engine(const Graph& g, const Hardware& hw, const OpDurations& d,
         const Schedule& s, const SimOptions& opts)
      : g_(g), hw_(hw), d_(d), s_(s), opts_(opts) {}

  absl::StatusOr<SimResult> Run() {
    const size_t num_tensors = g_.tensors.size();
    // Sizes packed together: the event loop reads them for every allocation,
    // and Tensor is a large struct.
    bytes_.resize(num_tensors);
    for (size_t t = 0; t < num_tensors; ++t) bytes_[t] = g_.tensors[t].bytes;
    d2h_done_.assign(num_tensors, false);
    arrived_.assign(num_tensors, false);
    release_pending_.assign(num_tensors, 1);
    for (int32_t t : s_.forward_done.items) ++release_pending_[t];
    result_.budget_bytes = opts_.budget_bytes;
    result_.ideal_step_ns = d_.total_ns;
    result_.unconstrained_peak_bytes = g_.index.saved_bytes;
    result_.static_bytes = g_.index.static_bytes;
    result_.swapped_tensors = s_.swapped_tensors;
    result_.recomputed_tensors = s_.recomputed_tensors;
    if (opts_.device.enabled) device_.emplace(g_, hw_, opts_.device);
    Sample();

    const int32_t num_tasks = static_cast<int32_t>(s_.tasks.size());
    StopPoller poller(opts_.should_stop, 1024);
    while (true) {
      if (poller.Stop()) {
        return absl::CancelledError(
            absl::StrCat("simulation stopped at ", FormatMs(now_)));
      }
      bool started = true;
      while (started && result_.feasible) {
        started = TryStartCompute();
        started |= TryStartCopies();
      }
      if (!result_.feasible) break;
      if (task_ == num_tasks && !copy_[kD2H].active() &&
          !copy_[kH2D].active() && queue_[kD2H].empty() &&
          queue_[kH2D].empty()) {
        break;
      }
      if (!compute_busy_ && !copy_[kD2H].active() && !copy_[kH2D].active()) {
        Infeasible(DescribeDeadlock());
        break;
      }
      const int64_t next = std::min({compute_busy_ ? compute_end_ : kNever,
                                     copy_[kD2H].finish, copy_[kH2D].finish});
      if (next >= kTimeHorizonNs) return TimeHorizonError(next);
      AccountStall(next);
      now_ = next;
      if (copy_[kD2H].finish == now_) FinishCopy(kD2H);
      if (copy_[kH2D].finish == now_) FinishCopy(kH2D);
      if (compute_busy_ && compute_end_ == now_) FinishTask();
    }

    result_.step_ns = now_;
    if (result_.feasible && result_.step_ns < result_.ideal_step_ns) {
      return absl::InternalError(absl::StrCat(
          "simulated step ", result_.step_ns, " ns is shorter than the ideal ",
          result_.ideal_step_ns, " ns"));
    }
    if (result_.feasible && result_.step_ns > 0) {
      result_.throughput_retained =
          static_cast<double>(result_.ideal_step_ns) / result_.step_ns;
    }
    if (opts_.timeline_points > 0) {
      result_.timeline =
          DownsampleTimeline(result_.timeline, opts_.timeline_points);
    }
    if (device_.has_value()) {
      SLACKSWAP_ASSIGN_OR_RETURN(
          result_.device, device_->Finish(result_.feasible, opts_.should_stop));
    }
    return std::move(result_);
  }

 private:
  static absl::Status TimeHorizonError(int64_t at) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the step would last ", FormatMs(at),
        " or more: the graph's sizes or durations, or the hardware's rates, "
        "are out of any physical range"));
  }

  int64_t Bytes(int32_t t) const { return bytes_[t]; }
  bool IsActivation(int32_t t) const { return s_.is_activation[t]; }

  bool Fits(int64_t activation, int64_t transient) const {
    if (opts_.budget_bytes <= 0) return true;
    if (opts_.budget_covers_all) {
      return act_ + trans_ + activation + transient <= opts_.budget_bytes;
    }
    return act_ + activation <= opts_.budget_bytes;
  }

  void Allocate(int32_t t) {
    (IsActivation(t) ? act_ : trans_) += Bytes(t);
    if (device_.has_value()) device_->Allocate(t, Bytes(t), now_);
  }
  void Release(int32_t t) {
    (IsActivation(t) ? act_ : trans_) -= Bytes(t);
    if (device_.has_value()) device_->Free(t, now_);
  }

  void Sample() {
    if (act_ > result_.peak_activation_bytes) {
      result_.peak_activation_bytes = act_;
      result_.peak_activation_ns = now_;
    }
    if (trans_ > result_.peak_transient_bytes) {
      result_.peak_transient_bytes = trans_;
      result_.peak_transient_ns = now_;
    }
    int64_t allocated = 0;
    int64_t reserved = 0;
    if (device_.has_value()) {
      device_->Live(result_.static_bytes + act_ + trans_, now_);
      allocated = device_->allocated_bytes();
      reserved = device_->reserved_bytes();
    }
    if (!opts_.record_timeline) return;
    std::vector<MemorySample>& tl = result_.timeline;
    const MemorySample now = {now_, act_, trans_, allocated, reserved};
    if (!tl.empty()) {
      MemorySample& last = tl.back();
      if (last.activation_bytes == act_ && last.transient_bytes == trans_ &&
          last.allocated_bytes == allocated &&
          last.reserved_bytes == reserved) {
        return;
      }
      // Changes at one instant make one point, except that a fall after a
      // rise keeps both (two points at one time): a zero-duration task's
      // allocations must not vanish from the timeline, whose maximum is the
      // reported peak.
      if (last.time_ns == now_ && act_ >= last.activation_bytes &&
          trans_ >= last.transient_bytes && allocated >= last.allocated_bytes &&
          reserved >= last.reserved_bytes) {
        last = now;
        return;
      }
    }
    tl.push_back(now);
  }

  void Record(StreamId stream, EventType type, int32_t index, int64_t start) {
    ++result_.events_processed;
    if (opts_.record_events) {
      result_.events.push_back({stream, type, index, start, now_});
    }
  }

  void Infeasible(std::string reason) {
    result_.feasible = false;
    result_.infeasible_reason = std::move(reason);
  }

  // The activation bytes and other bytes task `i` allocates when it starts.
  std::pair<int64_t, int64_t> TaskNeeds(int32_t i) const {
    int64_t activation = 0;
    int64_t transient = s_.tasks[i].workspace_bytes;
    for (int32_t t : s_.allocs.Of(i)) {
      (IsActivation(t) ? activation : transient) += Bytes(t);
    }
    return {activation, transient};
  }

  // The next task's needs, computed once per task: a blocked task is asked
  // again at every event, and one task may allocate many tensors.
  std::pair<int64_t, int64_t> NextNeeds() {
    if (needs_of_ != task_) {
      needs_ = TaskNeeds(task_);
      needs_of_ = task_;
    }
    return needs_;
  }

  // The first swapped input of the next task that has not arrived, or kNone.
  // Arrivals are final, so the scan resumes where it stopped.
  int32_t MissingInput() const {
    if (waits_of_ != task_) {
      waits_of_ = task_;
      waits_seen_ = 0;
    }
    const absl::Span<const int32_t> waits = s_.waits.Of(task_);
    while (waits_seen_ < waits.size() && arrived_[waits[waits_seen_]]) {
      ++waits_seen_;
    }
    return waits_seen_ < waits.size() ? waits[waits_seen_] : kNone;
  }

  bool TryStartCompute() {
    if (compute_busy_ || task_ == static_cast<int32_t>(s_.tasks.size())) {
      return false;
    }
    if (MissingInput() != kNone) return false;
    const auto [activation, transient] = NextNeeds();
    if (!Fits(activation, transient)) return false;

    const Task& task = s_.tasks[task_];
    for (int32_t t : s_.allocs.Of(task_)) Allocate(t);
    trans_ += task.workspace_bytes;
    if (device_.has_value()) {
      device_->Allocate(device_->WorkspaceKey(), task.workspace_bytes, now_);
    }
    Sample();
    for (int32_t t : s_.prefetches.Of(task_)) {
      queue_[kH2D].push_back({t, now_});
    }
    ++result_.events_processed;
    compute_busy_ = true;
    compute_start_ = now_;
    compute_end_ = SaturatingAdd(now_, task.duration_ns);
    return true;
  }

  void FinishTask() {
    const Task& task = s_.tasks[task_];
    // The workspace goes back with the kernel, before the tensors it read.
    if (device_.has_value()) device_->Free(device_->WorkspaceKey(), now_);
    for (int32_t t : s_.frees.Of(task_)) Release(t);
    trans_ -= task.workspace_bytes;
    for (int32_t t : s_.forward_done.Of(task_)) ReleaseSwapped(t);
    Sample();
    for (int32_t t : s_.swap_outs.Of(task_)) {
      queue_[kD2H].push_back({t, now_});
    }
    if (task.recompute) result_.recompute_ns += task.duration_ns;
    Record(StreamId::kCompute,
           task.recompute ? EventType::kRecompute : EventType::kOp, task.op,
           compute_start_);
    compute_busy_ = false;
    ++task_;
  }

  // One of the two release conditions of a swapped tensor's device copy.
  void ReleaseSwapped(int32_t t) {
    if (--release_pending_[t] == 0) Release(t);
  }

  // Whether the head of `dir`'s queue could start now, ignoring the link.
  bool HeadReady(int dir) const {
    if (queue_[dir].empty()) return false;
    if (dir == kD2H) return true;
    const int32_t t = queue_[dir].front().tensor;
    return d2h_done_[t] && Fits(Bytes(t), 0);
  }

  bool TryStartCopies() {
    bool started = false;
    if (hw_.ConcurrentCopies()) {
      for (int dir : {kD2H, kH2D}) {
        if (!copy_[dir].active() && HeadReady(dir)) {
          started |= StartCopy(dir);
        }
      }
      return started;
    }
    // One direction at a time: the earlier-issued ready head goes first.
    if (copy_[kD2H].active() || copy_[kH2D].active()) return false;
    const bool d2h = HeadReady(kD2H);
    const bool h2d = HeadReady(kH2D);
    if (d2h && h2d) {
      return StartCopy(queue_[kH2D].front().issued < queue_[kD2H].front().issued
                           ? kH2D
                           : kD2H);
    }
    if (d2h) return StartCopy(kD2H);
    if (h2d) return StartCopy(kH2D);
    return false;
  }

  bool StartCopy(int dir) {
    const int32_t t = queue_[dir].front().tensor;
    const int64_t bytes = Bytes(t);
    if (dir == kD2H) {
      if (host_ + bytes > hw_.pinned_host_memory_bytes) {
        Infeasible(absl::StrCat(
            "pinned host memory exhausted: swap-out of ", g_.TensorLabel(t),
            " needs ", bytes, " bytes at ", FormatMs(now_), " with ", host_,
            " of ", hw_.pinned_host_memory_bytes, " bytes in use"));
        return false;
      }
      host_ += bytes;
      result_.peak_pinned_host_bytes =
          std::max(result_.peak_pinned_host_bytes, host_);
    } else {
      Allocate(t);  // reserved when the prefetch starts
      Sample();
    }
    queue_[dir].pop_front();
    const int other = 1 - dir;
    const bool both = copy_[other].active();
    Copy& c = copy_[dir];
    c.tensor = t;
    c.start = now_;
    c.data_start = now_ + hw_.transfer_latency_ns;
    c.bytes_left = bytes;
    c.updated = now_;
    c.SetRate(now_, hw_.Rate(Dir(dir), both));
    if (both) copy_[other].SetRate(now_, hw_.Rate(Dir(other), true));
    ++result_.events_processed;
    return true;
  }

  static Direction Dir(int dir) {
    return dir == kD2H ? Direction::kD2H : Direction::kH2D;
  }

  void FinishCopy(int dir) {
    Copy& c = copy_[dir];
    const int32_t t = c.tensor;
    if (dir == kD2H) {
      d2h_done_[t] = true;
      result_.d2h_bytes += Bytes(t);
      ReleaseSwapped(t);
      Sample();
      Record(StreamId::kD2H, EventType::kSwapOut, t, c.start);
    } else {
      arrived_[t] = true;
      host_ -= Bytes(t);
      result_.h2d_bytes += Bytes(t);
      Record(StreamId::kH2D, EventType::kPrefetch, t, c.start);
    }
    c = Copy();
    const int other = 1 - dir;
    if (copy_[other].active()) {
      copy_[other].SetRate(now_, hw_.Rate(Dir(other), false));
    }
  }

  void AccountStall(int64_t next) {
    if (compute_busy_ || task_ == static_cast<int32_t>(s_.tasks.size())) {
      return;
    }
    const int64_t dt = next - now_;
    const int32_t missing = MissingInput();
    if (missing == kNone) {
      result_.stall_swap_out_ns += dt;
    } else if (!copy_[kH2D].active() && !queue_[kH2D].empty() &&
               d2h_done_[queue_[kH2D].front().tensor] &&
               !Fits(Bytes(queue_[kH2D].front().tensor), 0)) {
      // The H2D stream is idle with a ready head that the budget holds back
      // (not one waiting for a half-duplex link the D2H copy holds).
      result_.stall_memory_ns += dt;
    } else {
      result_.stall_prefetch_ns += dt;
    }
  }

  std::string Held() const {
    const bool all = opts_.budget_covers_all;
    return absl::StrCat(all ? act_ + trans_ : act_, " of the ",
                        opts_.budget_bytes,
                        all ? "-byte memory" : "-byte activation",
                        " budget is held and nothing in flight can release it");
  }

  std::string DescribeDeadlock() const {
    const std::string at = absl::StrCat(" at ", FormatMs(now_), ": ");
    if (task_ < static_cast<int32_t>(s_.tasks.size())) {
      const Task& task = s_.tasks[task_];
      const std::string what = absl::StrCat(
          task.recompute ? "recompute of " : "", g_.OpLabel(task.op));
      const int32_t missing = MissingInput();
      if (missing == kNone) {
        const auto [activation, transient] = TaskNeeds(task_);
        return absl::StrCat(
            what, at, "needs ",
            opts_.budget_covers_all ? activation + transient : activation,
            " bytes but ", Held());
      }
      return absl::StrCat(what, at, "waits for the prefetch of ",
                          g_.TensorLabel(missing), " (", Bytes(missing),
                          " bytes), which cannot start: ", Held());
    }
    if (!queue_[kH2D].empty()) {
      const int32_t t = queue_[kH2D].front().tensor;
      return absl::StrCat("prefetch of ", g_.TensorLabel(t), at, "needs ",
                          Bytes(t), " bytes but ", Held());
    }
    return absl::StrCat("no stream can make progress", at);
  }

  const Graph& g_;
  const Hardware& hw_;
  const OpDurations& d_;
  const Schedule& s_;
  const SimOptions& opts_;

  SimResult result_;
  std::optional<DeviceTracker> device_;
  int64_t now_ = 0;
  int64_t act_ = 0;
  int64_t trans_ = 0;
  int64_t host_ = 0;
  int32_t task_ = 0;
  bool compute_busy_ = false;
  int64_t compute_start_ = 0;
  int64_t compute_end_ = 0;
  Copy copy_[2];
  std::deque<Queued> queue_[2];
  std::vector<int64_t> bytes_;
  std::vector<bool> d2h_done_;
  std::vector<bool> arrived_;
  std::vector<int8_t> release_pending_;
  int32_t needs_of_ = kNone;
  std::pair<int64_t, int64_t> needs_;
  // Caches of the next task's needs and arrived waits (see NextNeeds and
  // MissingInput).
  mutable int32_t waits_of_ = kNone;
  mutable size_t waits_seen_ = 0;
};

}  // namespace

absl::StatusOr<SimResult> SimulateSchedule(const Graph& g, const Hardware& hw,
                                           const OpDurations& durations,
                                           const Schedule& schedule,
                                           const SimOptions& opts) {
  if (opts.budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget_bytes must be >= 0 (0: no limit), got ", opts.budget_bytes));
  }
  return Engine(g, hw, durations, schedule, opts).Run();
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
