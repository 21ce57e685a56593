#include "sim/internal/rank_run.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/format.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "common/stop.h"

namespace slackswap {
namespace {

Direction Dir(int stream) {
  return stream == kD2HStream ? Direction::kD2H : Direction::kH2D;
}

}  // namespace

absl::Status TimeHorizonError(int64_t at) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the step would last ", FormatMs(at),
      " or more: the graph's sizes or durations, or the hardware's rates, "
      "are out of any physical range"));
}

RankRun::RankRun(const Graph& g, const Hardware& hw, const OpDurations& d,
                 const Schedule& s, const SimOptions& opts, PinnedPool* pool,
                 SharedLinks* links, int32_t rank)
    : g_(g),
      hw_(hw),
      d_(d),
      s_(s),
      opts_(opts),
      pool_(pool),
      links_(links),
      rank_(rank),
      bytes_(g.index.bytes.data()),
      records_timeline_(opts.record_timeline ||
                        opts.record_activation_timeline) {
  const size_t num_tensors = g_.tensors.size();
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
  if (opts_.device.enabled) {
    // Each alloc and free in the lists, a prefetch's alloc and a swap-out's
    // free, and a task's workspace alloc and free: the most the step can
    // make, and all of them in a step that completes but for zero-byte
    // tensors' (which allocate nothing).
    size_t events = s_.allocs.items.size() + s_.frees.items.size() +
                    s_.prefetches.items.size() + s_.swap_outs.items.size();
    for (const Task& task : s_.tasks) {
      if (task.workspace_bytes > 0) events += 2;
    }
    device_.emplace(g_, hw_, opts_.device, events);
  }
  // What a traced run records, reserved once: grown by doubling instead,
  // a 10^6-op step's records were copied and their fresh pages faulted in
  // about twice over (30% of a plan search's page faults). A task starts
  // and ends, a swapped tensor is copied out and back; a record per each,
  // and a sample per change of memory at most about as many.
  const size_t copies = 2 * static_cast<size_t>(s_.swapped_tensors);
  if (opts_.record_events) result_.events.reserve(s_.tasks.size() + copies);
  if (opts_.record_timeline) {
    result_.timeline.reserve(2 * s_.tasks.size() + copies + 1);
  }
  if (opts_.record_activation_timeline) {
    result_.activation_timeline.reserve(2 * s_.tasks.size() + copies + 1);
  }
  if (opts_.record_task_spans) result_.task_spans.reserve(s_.tasks.size());
  if (g_.index.collective_ops > 0) {
    comm_pending_ = g_.index.collective_output;
    has_collectives_ = true;
  }
  Sample();
}

void RankRun::StartWhatCan() { StartAll(); }

inline void RankRun::StartAll() {
  bool started = true;
  while (started && result_.feasible) {
    started = TryStartCompute();
    started |= TryStartCopies();
  }
}

int32_t RankRun::CommHead() const {
  return comm_head_ < comm_queue_.size() ? comm_queue_[comm_head_] : kNone;
}

void RankRun::StartCommHead(int64_t now) {
  comm_running_ = true;
  ++comm_changes_;
  comm_start_ = now;
  ++result_.events_processed;
}

void RankRun::FinishCommHead(int64_t now) {
  now_ = now;
  const int32_t task = comm_queue_[comm_head_++];
  comm_running_ = false;
  ++comm_changes_;
  EndTask<StreamId::kComm>(task, comm_start_);
}

void RankRun::FinishAt(int64_t now) { FinishAll(now); }

bool RankRun::FinishIfDue(int64_t now) {
  if (NextEvent() != now) return false;
  ChargeStall(now);
  FinishAll(now);
  return true;
}

inline void RankRun::FinishAll(int64_t now) {
  now_ = now;
  if (copy_[kD2HStream].finish == now_) FinishCopy(kD2HStream);
  if (copy_[kH2DStream].finish == now_) FinishCopy(kH2DStream);
  if (compute_busy_ && compute_end_ == now_) FinishTask();
}

absl::StatusOr<SimResult> RankRun::Finish() {
  result_.step_ns = now_;
  if (result_.feasible && result_.step_ns < result_.ideal_step_ns) {
    return absl::InternalError(absl::StrCat("simulated step ", result_.step_ns,
                                            " ns is shorter than the ideal ",
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

inline bool RankRun::Fits(int64_t activation, int64_t transient) const {
  if (opts_.budget_bytes <= 0) return true;
  if (opts_.budget_covers_all) {
    return act_ + trans_ + activation + transient <= opts_.budget_bytes;
  }
  return act_ + activation <= opts_.budget_bytes;
}

inline void RankRun::Allocate(int32_t t) {
  (IsActivation(t) ? act_ : trans_) += Bytes(t);
  if (device_.has_value()) device_->Allocate(t, Bytes(t), now_);
}
inline void RankRun::Release(int32_t t) {
  (IsActivation(t) ? act_ : trans_) -= Bytes(t);
  if (device_.has_value()) device_->Free(t, now_);
}

inline void RankRun::Sample() {
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
  if (!records_timeline_) return;
  const MemorySample now = {now_, act_, trans_, allocated, reserved};
  bool replace = false;
  if (last_sample_.has_value()) {
    const MemorySample& last = *last_sample_;
    if (last.activation_bytes == act_ && last.transient_bytes == trans_ &&
        last.allocated_bytes == allocated && last.reserved_bytes == reserved) {
      return;
    }
    // Changes at one instant make one point, except that a fall after a
    // rise keeps both (two points at one time): a zero-duration task's
    // allocations must not vanish from the timeline, whose maximum is the
    // reported peak.
    replace = last.time_ns == now_ && act_ >= last.activation_bytes &&
              trans_ >= last.transient_bytes &&
              allocated >= last.allocated_bytes &&
              reserved >= last.reserved_bytes;
  }
  last_sample_ = now;
  // Written out per timeline: one template for both changed how the event
  // loop is inlined (0.7% more instructions on an 8-rank node plan).
  if (opts_.record_timeline) {
    if (replace) {
      result_.timeline.back() = now;
    } else {
      result_.timeline.push_back(now);
    }
  }
  if (opts_.record_activation_timeline) {
    const ActivationSample point = {now_, act_};
    if (replace) {
      result_.activation_timeline.back() = point;
    } else {
      result_.activation_timeline.push_back(point);
    }
  }
}

inline void RankRun::Record(StreamId stream, EventType type, int32_t index,
                            int64_t start) {
  ++result_.events_processed;
  if (opts_.record_events) {
    result_.events.push_back({stream, type, index, start, now_});
  }
}

void RankRun::Infeasible(std::string reason) {
  result_.feasible = false;
  result_.infeasible_reason = std::move(reason);
}

// The activation bytes and other bytes task `i` allocates when it starts.
inline std::pair<int64_t, int64_t> RankRun::TaskNeeds(int32_t i) const {
  int64_t activation = 0;
  int64_t transient = s_.tasks[i].workspace_bytes;
  for (int32_t t : s_.allocs.Of(i)) {
    (IsActivation(t) ? activation : transient) += Bytes(t);
  }
  return {activation, transient};
}

// The next task's needs, computed once per task: a blocked task is asked
// again at every event, and one task may allocate many tensors.
inline std::pair<int64_t, int64_t> RankRun::NextNeeds() {
  if (needs_of_ != task_) {
    needs_ = TaskNeeds(task_);
    needs_of_ = task_;
  }
  return needs_;
}

// The first swapped input of the next task that has not arrived, or kNone.
// Arrivals are final, so the scan resumes where it stopped.
inline int32_t RankRun::MissingInput() const {
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

inline bool RankRun::TryStartCompute() {
  if (compute_busy_ || task_ == static_cast<int32_t>(s_.tasks.size())) {
    return false;
  }
  if (MissingInput() != kNone) return false;
  if (has_collectives_ && PendingCollectiveInput() != kNone) return false;
  const auto [activation, transient] = NextNeeds();
  if (!Fits(activation, transient)) return false;

  const Task& task = s_.tasks[task_];
  const bool collective = has_collectives_ && IsCollective(task);
  for (int32_t t : s_.allocs.Of(task_)) Allocate(t);
  trans_ += task.workspace_bytes;  // none for a collective (IndexGraph)
  if (device_.has_value() && !collective) {
    device_->Allocate(device_->WorkspaceKey(), task.workspace_bytes, now_);
  }
  Sample();
  for (int32_t t : s_.prefetches.Of(task_)) {
    queue_[kH2DStream].push_back({t, now_});
  }
  ++result_.events_processed;
  if (collective) {
    // Issued to the communication stream: compute goes on. Alone, with no
    // other rank to wait for or links to share, it takes no time.
    comm_queue_.push_back(task_++);
    ++comm_changes_;
    if (links_ == nullptr) {
      StartCommHead(now_);
      FinishCommHead(now_);
    }
    return true;
  }
  compute_busy_ = true;
  compute_start_ = now_;
  compute_end_ = SaturatingAdd(now_, task.duration_ns);
  return true;
}

inline void RankRun::FinishTask() {
  // The workspace goes back with the kernel, before the tensors it read.
  if (device_.has_value()) device_->Free(device_->WorkspaceKey(), now_);
  compute_busy_ = false;
  EndTask<StreamId::kCompute>(task_++, compute_start_);
}

template <StreamId stream>
inline void RankRun::EndTask(int32_t i, int64_t start) {
  const Task& task = s_.tasks[i];
  for (int32_t t : s_.frees.Of(i)) Release(t);
  trans_ -= task.workspace_bytes;
  for (int32_t t : s_.forward_done.Of(i)) ReleaseSwapped(t);
  if constexpr (stream == StreamId::kComm) {
    for (int32_t t : g_.ops[task.op].outputs) comm_pending_[t] = false;
  }
  Sample();
  for (int32_t t : s_.swap_outs.Of(i)) {
    queue_[kD2HStream].push_back({t, now_});
  }
  if (task.recompute) result_.recompute_ns += task.duration_ns;
  if (opts_.record_task_spans) {
    // Grown as tasks end, not made whole up front: a run that ends early
    // (infeasible) touches no more pages than it records. A collective may
    // end after tasks behind it on the compute stream.
    std::vector<TaskSpan>& spans = result_.task_spans;
    const size_t k = static_cast<size_t>(i);
    if (k == spans.size()) {
      spans.push_back({start, now_});
    } else {
      if (k > spans.size()) spans.resize(k + 1);
      spans[k] = {start, now_};
    }
  }
  Record(stream,
         stream == StreamId::kComm
             ? EventType::kCollective
             : (task.recompute ? EventType::kRecompute : EventType::kOp),
         task.op, start);
}

inline bool RankRun::IsCollective(const Task& task) const {
  return !task.recompute && g_.ops[task.op].collective.has_value();
}

int32_t RankRun::PendingCollectiveInput() const {
  // A tensor stops being pending once and for all (comm_pending_ only goes
  // from true to false), so the inputs seen written stay so.
  if (pending_of_ != task_) {
    pending_of_ = task_;
    pending_seen_ = 0;
  }
  const Task& task = s_.tasks[task_];
  // An op none of whose inputs a collective writes waits for none (a
  // rebuild recipe's inputs are looked at each).
  if (task.rebuild_of == kNone && !g_.index.reads_collective_output[task.op]) {
    return kNone;
  }
  const absl::Span<const int32_t> inputs =
      task.rebuild_of != kNone
          ? absl::MakeConstSpan(g_.tensors[task.rebuild_of].rebuild->inputs)
          : g_.index.InputsOf(task.op);
  while (pending_seen_ < inputs.size() &&
         !comm_pending_[inputs[pending_seen_]]) {
    ++pending_seen_;
  }
  return pending_seen_ < inputs.size() ? inputs[pending_seen_] : kNone;
}

// One of the two release conditions of a swapped tensor's device copy.
inline void RankRun::ReleaseSwapped(int32_t t) {
  if (--release_pending_[t] == 0) Release(t);
}

// Whether the head of `dir`'s queue could start now, ignoring the link.
inline bool RankRun::HeadReady(int dir) const {
  if (queue_[dir].empty()) return false;
  if (dir == kD2HStream) return true;
  const int32_t t = queue_[dir].front().tensor;
  return d2h_done_[t] && Fits(Bytes(t), 0);
}

inline bool RankRun::TryStartCopies() {
  bool started = false;
  if (hw_.ConcurrentCopies()) {
    for (int dir : {kD2HStream, kH2DStream}) {
      if (!copy_[dir].active() && HeadReady(dir)) {
        started |= StartCopy(dir);
      }
    }
    return started;
  }
  // One direction at a time: the earlier-issued ready head goes first.
  if (copy_[kD2HStream].active() || copy_[kH2DStream].active()) return false;
  const bool d2h = HeadReady(kD2HStream);
  const bool h2d = HeadReady(kH2DStream);
  if (d2h && h2d) {
    return StartCopy(queue_[kH2DStream].front().issued <
                             queue_[kD2HStream].front().issued
                         ? kH2DStream
                         : kD2HStream);
  }
  if (d2h) return StartCopy(kD2HStream);
  if (h2d) return StartCopy(kH2DStream);
  return false;
}

inline bool RankRun::StartCopy(int dir) {
  const int32_t t = queue_[dir].front().tensor;
  const int64_t bytes = Bytes(t);
  if (dir == kD2HStream) {
    if (pool_->in_use_bytes + bytes > pool_->capacity_bytes) {
      Infeasible(absl::StrCat("pinned host memory exhausted: swap-out of ",
                              g_.TensorLabel(t), " needs ", bytes, " bytes at ",
                              FormatMs(now_), " with ", pool_->in_use_bytes,
                              " of ", pool_->capacity_bytes, " bytes in use",
                              pool_->where));
      return false;
    }
    host_ += bytes;
    pool_->in_use_bytes += bytes;
    pool_->peak_bytes = std::max(pool_->peak_bytes, pool_->in_use_bytes);
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
  ++result_.events_processed;
  if (links_ != nullptr) {
    links_->Started(rank_, dir, now_);
    return true;
  }
  c.SetRate(now_, hw_.Rate(Dir(dir), both));
  if (both) copy_[other].SetRate(now_, hw_.Rate(Dir(other), true));
  return true;
}

inline void RankRun::FinishCopy(int dir) {
  Copy& c = copy_[dir];
  const int32_t t = c.tensor;
  if (dir == kD2HStream) {
    d2h_done_[t] = true;
    result_.d2h_bytes += Bytes(t);
    ReleaseSwapped(t);
    Sample();
    Record(StreamId::kD2H, EventType::kSwapOut, t, c.start);
  } else {
    arrived_[t] = true;
    host_ -= Bytes(t);
    pool_->in_use_bytes -= Bytes(t);
    result_.h2d_bytes += Bytes(t);
    Record(StreamId::kH2D, EventType::kPrefetch, t, c.start);
  }
  c = Copy();
  if (links_ != nullptr) {
    links_->Finished(rank_, dir, Bytes(t), now_);
    return;
  }
  const int other = 1 - dir;
  if (copy_[other].active()) {
    copy_[other].SetRate(now_, hw_.Rate(Dir(other), false));
  }
}

void RankRun::AccountStall(int64_t next) { ChargeStall(next); }

inline void RankRun::ChargeStall(int64_t next) {
  if (compute_busy_ || task_ == static_cast<int32_t>(s_.tasks.size())) {
    return;
  }
  const int64_t dt = next - now_;
  const int32_t missing = MissingInput();
  if (missing == kNone && has_collectives_ &&
      PendingCollectiveInput() != kNone) {
    result_.stall_collective_ns += dt;
  } else if (missing == kNone) {
    result_.stall_swap_out_ns += dt;
  } else if (!copy_[kH2DStream].active() && !queue_[kH2DStream].empty() &&
             d2h_done_[queue_[kH2DStream].front().tensor] &&
             !Fits(Bytes(queue_[kH2DStream].front().tensor), 0)) {
    // The H2D stream is idle with a ready head that the budget holds back
    // (not one waiting for a half-duplex link the D2H copy holds).
    result_.stall_memory_ns += dt;
  } else {
    result_.stall_prefetch_ns += dt;
  }
}

std::string RankRun::Held() const {
  const bool all = opts_.budget_covers_all;
  return absl::StrCat(all ? act_ + trans_ : act_, " of the ",
                      opts_.budget_bytes,
                      all ? "-byte memory" : "-byte activation",
                      " budget is held and nothing in flight can release it");
}

std::string RankRun::DescribeDeadlock() const {
  const std::string at = absl::StrCat(" at ", FormatMs(now_), ": ");
  if (task_ < static_cast<int32_t>(s_.tasks.size())) {
    const Task& task = s_.tasks[task_];
    const std::string what = absl::StrCat(task.recompute ? "recompute of " : "",
                                          g_.OpLabel(task.op));
    const int32_t missing = MissingInput();
    const int32_t collective =
        has_collectives_ && missing == kNone ? PendingCollectiveInput() : kNone;
    if (collective != kNone) {
      return absl::StrCat(what, at, "waits for ", g_.TensorLabel(collective),
                          ", which collective ",
                          g_.OpLabel(g_.index.producer[collective]),
                          " has not written yet");
    }
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
  if (!queue_[kH2DStream].empty()) {
    const int32_t t = queue_[kH2DStream].front().tensor;
    return absl::StrCat("prefetch of ", g_.TensorLabel(t), at, "needs ",
                        Bytes(t), " bytes but ", Held());
  }
  return absl::StrCat("no stream can make progress", at);
}

// In this file, where the loop's steps are inlined (StartAll and the
// others).
absl::StatusOr<SimResult> RunAlone(const Graph& g, const Hardware& hw,
                                   const OpDurations& d, const Schedule& s,
                                   const SimOptions& opts) {
  PinnedPool pool{.capacity_bytes = hw.pinned_host_memory_bytes};
  RankRun run(g, hw, d, s, opts, &pool, /*links=*/nullptr, /*rank=*/0);
  StopPoller poller(opts.should_stop, 1024);
  while (true) {
    if (poller.Stop()) {
      return absl::CancelledError(
          absl::StrCat("simulation stopped at ", FormatMs(run.now())));
    }
    run.StartAll();
    if (!run.feasible() || run.done()) break;
    if (!run.busy()) {
      run.Infeasible(run.DescribeDeadlock());
      break;
    }
    const int64_t next = run.NextEvent();
    if (next >= kTimeHorizonNs) return TimeHorizonError(next);
    run.ChargeStall(next);
    run.FinishAll(next);
  }
  return run.Finish();
}

}  // namespace slackswap
