#include "planner/internal/plan_search.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/format.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "planner/internal/judge_memo.h"
#include "planner/internal/policies.h"
#include "planner/internal/sample_in_force.h"
#include "planner/internal/slack.h"
#include "planner/internal/step_bound.h"
#include "sim/schedule.h"

namespace slackswap {
namespace {

absl::Status CheckStop(const PlanningContext& ctx) {
  if (StopRequested(ctx.should_stop)) {
    return absl::CancelledError("planning stopped");
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// Makes a recompute of every swap in `plan` needed before any op could issue
// its prefetch (`need` from FirstNeedOps; `earliest` the first op that may
// issue it). Rebuilding a converted tensor reads its chain's swapped inputs
// at its own need, so they may fail too: a worklist, the earliest need first,
// settles the whole cascade in one pass instead of one lowering per link.
// Returns whether anything changed.
template <typename Earliest>
absl::StatusOr<bool> ConvertUnprefetchableSwaps(const PlanningContext& ctx,
                                                const Earliest& earliest,
                                                std::vector<int32_t>& need,
                                                Plan& plan) {
  const Graph& g = ctx.graph;
  StopPoller poller(ctx.should_stop, 1024);
  using Item = std::pair<int32_t, int32_t>;  // (need, tensor)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> work;
  auto convert = [&](int32_t t) {
    Decision& d = plan.decisions[t];
    d.action = Action::kRecompute;
    d.prefetch_after_op = kNone;
    work.push({need[t], t});
  };
  for (size_t i = 0; i < plan.decisions.size(); ++i) {
    const int32_t t = static_cast<int32_t>(i);
    if (plan.decisions[t].action != Action::kSwap) continue;
    if (need[t] == kNone) need[t] = g.index.first_bwd_use[t];
    if (need[t] - 1 < earliest(t)) convert(t);
  }
  if (work.empty()) return false;
  std::vector<bool> walked(g.tensors.size(), false);
  std::vector<int32_t> chain;
  while (!work.empty()) {
    if (poller.Stop()) return absl::CancelledError("planning stopped");
    const auto [at, t] = work.top();
    work.pop();
    if (walked[t]) continue;
    walked[t] = true;
    chain.assign(1, t);
    while (!chain.empty()) {
      const int32_t x = chain.back();
      chain.pop_back();
      for (int32_t in : RebuildInputs(g, x)) {
        if (plan.decisions[in].action == Action::kSwap) {
          need[in] = std::min(need[in] == kNone ? at : need[in], at);
          if (need[in] - 1 < earliest(in)) convert(in);
        } else if (NeedsRebuild(g, plan, in) && !walked[in]) {
          walked[in] = true;
          chain.push_back(in);
        }
      }
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<Schedule> AssignPrefetchPoints(const PlanningContext& ctx,
                                              Plan& plan) {
  const Graph& g = ctx.graph;
  const StepAnalysis& a = ctx.analysis;
  // Never during the forward pass, when memory climbs to its peak.
  const int32_t backward_begins = g.index.first_backward_op == kNone
                                      ? static_cast<int32_t>(g.ops.size())
                                      : g.index.first_backward_op;
  auto earliest = [&](int32_t t) {
    const Candidate& c = a.candidates[a.candidate_of[t]];
    return std::max(std::max(c.producer, c.last_fwd_use) + 1, backward_begins);
  };
  // A swap needed before any op could issue its prefetch has no room for a
  // round trip: it becomes a recompute. That can pull other swapped tensors'
  // needs earlier (its chain may read them); the lowering confirms the needs
  // until none changes (once or twice: the worklist follows the chains).
  Schedule lowered;
  std::vector<int32_t> need;
  for (bool changed = true; changed;) {
    SLACKSWAP_RETURN_IF_ERROR(CheckStop(ctx));
    // A swap made a recompute above may be one no chain can rebuild.
    KeepUnrecomputable(a, plan);
    SLACKSWAP_ASSIGN_OR_RETURN(
        lowered, LowerWithoutPrefetches(g, plan, a.durations, ctx.Lowering()));
    need = FirstNeedOps(lowered);
    SLACKSWAP_ASSIGN_OR_RETURN(
        changed, ConvertUnprefetchableSwaps(ctx, earliest, need, plan));
  }
  std::vector<int32_t> swapped;
  for (size_t i = 0; i < plan.decisions.size(); ++i) {
    const int32_t t = static_cast<int32_t>(i);
    if (plan.decisions[t].action != Action::kSwap) continue;
    if (need[t] == kNone) need[t] = g.index.first_bwd_use[t];
    swapped.push_back(t);
  }
  std::sort(swapped.begin(), swapped.end(), [&](int32_t x, int32_t y) {
    return std::pair(need[x], x) < std::pair(need[y], y);
  });
  // As late as possible, walking back from the last needed: each copy must
  // land before its need and before the next copy in the FIFO starts.
  int64_t next_start = std::numeric_limits<int64_t>::max();
  for (auto it = swapped.rbegin(); it != swapped.rend(); ++it) {
    const int32_t t = *it;
    const Candidate& c = a.candidates[a.candidate_of[t]];
    const int64_t finish = std::min(a.op_start_ns[need[t]], next_start);
    const int64_t start = finish - c.h2d_ns;
    next_start = start;
    const int32_t last_starting_by = static_cast<int32_t>(
        std::upper_bound(a.op_start_ns.begin(), a.op_start_ns.end(), start) -
        a.op_start_ns.begin() - 1);
    plan.decisions[t].prefetch_after_op =
        std::clamp(last_starting_by, earliest(t), need[t] - 1);
  }
  // Issue in need order, so the copy at the head of the H2D stream is always
  // the one compute will ask for next.
  int32_t issued = 0;
  for (int32_t t : swapped) {
    Decision& d = plan.decisions[t];
    d.prefetch_after_op = std::max(d.prefetch_after_op, issued);
    issued = d.prefetch_after_op;
  }
  return lowered;
}

namespace {

absl::StatusOr<Judged> SimulateLowered(const PlanningContext& ctx, Plan plan,
                                       Schedule schedule,
                                       Tracing tracing = Tracing::kOff) {
  plan.budget_bytes = ctx.budget_bytes;
  SimOptions opts = ctx.Simulation();
  opts.record_timeline = false;
  opts.record_task_spans = tracing == Tracing::kOn;
  opts.record_activation_timeline = tracing == Tracing::kOn;
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult result,
                             RunSchedule(ctx, schedule, opts));
  std::shared_ptr<Judged::Trace> trace;
  if (tracing == Tracing::kOn) {
    trace = std::make_shared<Judged::Trace>();
    trace->task_spans = std::move(result.task_spans);
    trace->timeline = std::move(result.activation_timeline);
    result.task_spans.clear();
    result.activation_timeline.clear();
  }
  return Judged{std::move(plan),
                std::make_shared<const Schedule>(std::move(schedule)),
                std::move(result), std::move(trace)};
}

}  // namespace

namespace {

// The least step any run of `schedule` takes: its compute tasks, back to
// back.
int64_t ComputeNs(const Schedule& schedule) {
  int64_t sum = 0;
  for (const Task& task : schedule.tasks) {
    sum = SaturatingAdd(sum, task.duration_ns);
  }
  return sum;
}

// JudgePlan, or nullopt (nothing simulated) when `beaten_by` is feasible and
// the lowered plan's compute alone outlasts its step.
absl::StatusOr<std::optional<Judged>> Judge(const PlanningContext& ctx,
                                            Plan plan, Tracing tracing,
                                            const SimResult* beaten_by) {
  SLACKSWAP_RETURN_IF_ERROR(CheckStop(ctx));
  std::string key;
  // A remembered judgment has no trace; whoever needs one replays it.
  if (ctx.judge_memo != nullptr) {
    key = JudgeMemo::Key(JudgeMemo::Kind::kJudgePlan, plan);
    std::optional<Judged> known = ctx.judge_memo->Recall(ctx, key, plan);
    if (known.has_value()) return known;
  }
  // Told before lowering, when the bounds can: the lowered compute is at
  // least LeastComputeNs (the check after lowering, earlier), the step at
  // least that plus LeastSwapOutWaitNs, and a plan MayFitTheBudget rules out
  // is infeasible; none of them can beat `beaten_by`.
  if (ctx.prune_with_bounds && beaten_by != nullptr && beaten_by->feasible) {
    const int64_t compute = LeastComputeNs(ctx, plan);
    if (compute > beaten_by->step_ns || !MayFitTheBudget(ctx, plan) ||
        SaturatingAdd(compute, LeastSwapOutWaitNs(ctx, plan)) >
            beaten_by->step_ns) {
      return std::nullopt;
    }
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Schedule schedule,
                             AssignPrefetchPoints(ctx, plan));
  if (beaten_by != nullptr && beaten_by->feasible &&
      ComputeNs(schedule) > beaten_by->step_ns) {
    return std::nullopt;
  }
  SLACKSWAP_RETURN_IF_ERROR(IssuePrefetches(ctx.graph, plan, schedule));
  SLACKSWAP_ASSIGN_OR_RETURN(
      Judged judged,
      SimulateLowered(ctx, std::move(plan), std::move(schedule), tracing));
  if (ctx.judge_memo != nullptr) {
    ctx.judge_memo->Remember(ctx, std::move(key), judged);
  }
  return judged;
}

}  // namespace

absl::StatusOr<Judged> JudgePlan(const PlanningContext& ctx, Plan plan,
                                 Tracing tracing) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      std::optional<Judged> judged,
      Judge(ctx, std::move(plan), tracing, /*beaten_by=*/nullptr));
  return *std::move(judged);
}

absl::StatusOr<std::optional<Judged>> JudgeUnlessBeaten(
    const PlanningContext& ctx, Plan plan, const SimResult& best) {
  return Judge(ctx, std::move(plan), Tracing::kOff, &best);
}

bool Better(const SimResult& a, const SimResult& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.step_ns != b.step_ns) return a.step_ns < b.step_ns;
  const int64_t moved_a = SaturatingAdd(a.d2h_bytes, a.h2d_bytes);
  const int64_t moved_b = SaturatingAdd(b.d2h_bytes, b.h2d_bytes);
  if (moved_a != moved_b) return moved_a < moved_b;
  if (a.recompute_ns != b.recompute_ns) return a.recompute_ns < b.recompute_ns;
  return a.peak_activation_bytes < b.peak_activation_bytes;
}

namespace {

// FewestMovesThatFit's search; with `beaten_by` set, FewestMovesThatBeat's.
absl::StatusOr<std::optional<Judged>> SearchFewestMoves(
    const PlanningContext& ctx, const Plan& base,
    const std::vector<Move>& moves, Tracing tracing,
    const SimResult* beaten_by) {
  // A probe that cannot fit, one that fits (judged), or one that cannot
  // beat `beaten_by` (not simulated).
  struct Probe {
    std::optional<Judged> judged;
    bool beaten = false;
  };
  // Only whether a probe fits steers the search, so one the budget provably
  // rules out is not simulated, unless it is all the moves: that one comes
  // back when nothing fits (when no plan is to be beaten).
  auto judge = [&](size_t k) -> absl::StatusOr<Probe> {
    Plan plan = base;
    for (size_t i = 0; i < k; ++i) {
      plan.decisions[moves[i].tensor].action = moves[i].action;
    }
    if (beaten_by == nullptr) {
      if (ctx.prune_with_bounds && k < moves.size() &&
          !MayFitTheBudget(ctx, plan)) {
        return Probe{};
      }
      SLACKSWAP_ASSIGN_OR_RETURN(Judged j,
                                 JudgePlan(ctx, std::move(plan), tracing));
      return Probe{std::move(j)};
    }
    // Beaten means the lowered compute alone lasts at least `beaten_by`'s
    // step, whether or not the plan fits, so that the bounds (each implied
    // by what they stand for) steer the search as the simulations would.
    SLACKSWAP_RETURN_IF_ERROR(CheckStop(ctx));
    if (ctx.prune_with_bounds &&
        LeastComputeNs(ctx, plan) >= beaten_by->step_ns) {
      return Probe{std::nullopt, /*beaten=*/true};
    }
    SLACKSWAP_ASSIGN_OR_RETURN(Schedule schedule,
                               AssignPrefetchPoints(ctx, plan));
    if (ComputeNs(schedule) >= beaten_by->step_ns) {
      return Probe{std::nullopt, /*beaten=*/true};
    }
    if (ctx.prune_with_bounds && !MayFitTheBudget(ctx, plan)) return Probe{};
    SLACKSWAP_RETURN_IF_ERROR(IssuePrefetches(ctx.graph, plan, schedule));
    SLACKSWAP_ASSIGN_OR_RETURN(
        Judged j,
        SimulateLowered(ctx, std::move(plan), std::move(schedule), tracing));
    return Probe{std::move(j)};
  };
  // More moves only add recompute tasks, so a probe that cannot beat
  // `beaten_by` says that no longer prefix can either: the search goes down
  // from it as from one that fits.
  const auto fits = [](const Probe& p) {
    return p.beaten || (p.judged.has_value() && p.judged->result.feasible);
  };
  // Fewer moves cannot free enough bytes at the peak.
  int64_t to_free = ctx.analysis.unconstrained_peak_bytes - ctx.budget_bytes;
  for (size_t t = 0; t < base.decisions.size(); ++t) {
    if (base.decisions[t].action != Action::kKeep) {
      to_free -= ctx.graph.index.bytes[t];
    }
  }
  size_t k = 0;
  while (k < moves.size() && to_free > 0) {
    to_free -= ctx.graph.index.bytes[moves[k++].tensor];
  }
  // Gallop up from there, then bisect. Feasibility is monotone over the
  // useful prefix, but not over all moves: dropping everything makes
  // recompute chains reach back through every layer.
  size_t infeasible_below = k;  // k - 1 moves are known not to fit
  size_t step = 1;
  SLACKSWAP_ASSIGN_OR_RETURN(Probe probe, judge(k));
  while (!fits(probe)) {
    if (k == moves.size()) {
      if (beaten_by != nullptr) return std::nullopt;
      return std::move(probe.judged);
    }
    infeasible_below = k + 1;
    k = std::min(moves.size(), k + step);
    step *= 2;
    // Gone before the next is lowered: two schedules held at once, not
    // three (a large graph's schedule is a good part of its memory).
    probe = Probe();
    SLACKSWAP_ASSIGN_OR_RETURN(probe, judge(k));
  }
  // Asked only whether the policy fits (PlanningContext::first_feasible_plan):
  // fewer moves that fit would fit all the same.
  if (ctx.first_feasible_plan && beaten_by == nullptr) {
    return std::move(probe.judged);
  }
  Probe best = std::move(probe);
  size_t lo = infeasible_below;
  size_t hi = k;  // fits
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    SLACKSWAP_ASSIGN_OR_RETURN(Probe j, judge(mid));
    if (fits(j)) {
      hi = mid;
      best = std::move(j);
    } else {
      lo = mid + 1;
    }
  }
  return std::move(best.judged);
}

}  // namespace

absl::StatusOr<Judged> FewestMovesThatFit(const PlanningContext& ctx,
                                          const Plan& base,
                                          const std::vector<Move>& moves,
                                          Tracing tracing) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      std::optional<Judged> judged,
      SearchFewestMoves(ctx, base, moves, tracing, /*beaten_by=*/nullptr));
  return *std::move(judged);
}

absl::StatusOr<std::optional<Judged>> FewestMovesThatBeat(
    const PlanningContext& ctx, const Plan& base,
    const std::vector<Move>& moves, const SimResult& best, Tracing tracing) {
  return SearchFewestMoves(ctx, base, moves, tracing, &best);
}

namespace {

// When each recomputed tensor of a replayed plan is without its device copy,
// as samples of its memory timeline: the sample in force when its last
// forward reader ends and it is freed, and the last before the task that
// rebuilds it starts. kNotYet where a tensor is not dropped.
struct DroppedStretches {
  static constexpr int32_t kNotYet = -1;
  std::vector<int32_t> freed_at;
  std::vector<int32_t> rebuilt_after;
};

absl::StatusOr<DroppedStretches> FindDroppedStretches(
    const PlanningContext& ctx, const Schedule& schedule,
    const std::vector<TaskSpan>& task_spans,
    const std::vector<ActivationSample>& timeline) {
  const Graph& g = ctx.graph;
  StopPoller poller(ctx.should_stop);
  if (task_spans.size() != schedule.tasks.size()) {
    return absl::InternalError(absl::StrCat("replaying a feasible plan timed ",
                                            task_spans.size(), " tasks of its ",
                                            schedule.tasks.size()));
  }
  DroppedStretches d;
  d.freed_at.assign(g.tensors.size(), DroppedStretches::kNotYet);
  d.rebuilt_after.assign(g.tensors.size(), DroppedStretches::kNotYet);
  // One each: task starts are in order, and so are task ends.
  SampleInForce at_start(timeline);
  SampleInForce at_end(timeline);
  for (int32_t k = 0; k < static_cast<int32_t>(schedule.tasks.size()); ++k) {
    if (poller.Stop()) return absl::CancelledError("planning stopped");
    for (int32_t t : schedule.allocs.Of(k)) {
      if (d.freed_at[t] != DroppedStretches::kNotYet &&
          d.rebuilt_after[t] == DroppedStretches::kNotYet) {
        d.rebuilt_after[t] = at_start.At(task_spans[k].start_ns - 1);
      }
    }
    for (int32_t t : schedule.frees.Of(k)) {
      if (d.freed_at[t] == DroppedStretches::kNotYet) {
        d.freed_at[t] = at_end.At(task_spans[k].end_ns);
      }
    }
  }
  return d;
}

// `plan` with each recomputed tensor kept, largest rebuild first, whose
// bytes fit under the budget through the whole stretch the replayed plan
// does without it; the headroom it takes is charged to that stretch.
// Returns whether anything changed.
absl::StatusOr<bool> KeepWhatFitsTheHeadroom(
    const PlanningContext& ctx, const std::vector<ActivationSample>& timeline,
    const DroppedStretches& dropped, Plan& plan) {
  StopPoller poller(ctx.should_stop, 1024);
  // Each recomputed tensor's stretch of samples [first, last]. A tensor never
  // rebuilt (no backward reader ran after it was dropped) has none. What the
  // loop below reads of it is copied in here, in the candidates' order:
  // that loop goes largest rebuild first, and read there each candidate and
  // each end's segment would be a cache miss on a large graph.
  struct Stretch {
    int64_t recompute_ns;
    int64_t bytes;
    int32_t tensor;
    int32_t first;  // then its first segment
    int32_t last;   // then its last segment
  };
  std::vector<Stretch> stretches;
  for (const Candidate& c : ctx.analysis.candidates) {
    if (plan.decisions[c.tensor].action != Action::kRecompute) continue;
    const int32_t freed = dropped.freed_at[c.tensor];
    const int32_t rebuilt = dropped.rebuilt_after[c.tensor];
    if (freed == DroppedStretches::kNotYet ||
        rebuilt == DroppedStretches::kNotYet) {
      continue;
    }
    stretches.push_back({c.recompute_ns, c.bytes, c.tensor, freed, rebuilt});
  }
  // Only the stretches' ends matter: between two consecutive ends (cuts)
  // every sample gets the same charges, so one value (their least headroom)
  // stands for them all, and the tree is as small as the stretches.
  // segment_at[i] is the segment sample i is in, counting cuts as they come
  // instead of sorting them and bisecting for each end.
  const int32_t n = static_cast<int32_t>(timeline.size());
  std::vector<int32_t> segment_at(static_cast<size_t>(n) + 1, 0);
  segment_at[0] = 1;
  segment_at[n] = 1;
  for (const Stretch& s : stretches) {
    segment_at[s.first] = 1;
    segment_at[s.last + 1] = 1;
  }
  int32_t cuts = 0;
  for (int32_t& at : segment_at) {
    cuts += at;
    at = cuts - 1;
  }
  std::vector<int64_t> headroom(cuts - 1, std::numeric_limits<int64_t>::max());
  for (int32_t i = 0; i < n; ++i) {
    int64_t& room = headroom[segment_at[i]];
    room = std::min(room, ctx.budget_bytes - timeline[i].activation_bytes);
  }
  for (Stretch& s : stretches) {
    s.last = segment_at[s.last + 1] - 1;
    s.first = segment_at[s.first];
  }
  segment_at = {};
  std::stable_sort(stretches.begin(), stretches.end(),
                   [](const Stretch& x, const Stretch& y) {
                     return x.recompute_ns > y.recompute_ns;
                   });
  MinTree room(headroom);
  bool changed = false;
  for (const Stretch& s : stretches) {
    if (poller.Stop()) return absl::CancelledError("planning stopped");
    if (room.Min(s.first, s.last) < s.bytes) continue;
    room.Add(s.first, s.last, -s.bytes);
    plan.decisions[s.tensor].action = Action::kKeep;
    changed = true;
  }
  return changed;
}

}  // namespace

absl::StatusOr<Judged> KeepNeedlessRecomputes(const PlanningContext& ctx,
                                              Judged judged,
                                              ReturnedSchedule schedule) {
  const bool drop_schedule = schedule == ReturnedSchedule::kDropped;
  if (!judged.result.feasible || judged.result.recomputed_tensors == 0) {
    judged.trace.reset();
    if (drop_schedule) judged.schedule.reset();
    return judged;
  }
  // The plan's memory over time and when each task ran: traced when it was
  // judged, or replayed. Read only to choose what to keep: gone before the
  // pruned plan is judged (on a large graph a trace outweighs a schedule).
  std::shared_ptr<const Judged::Trace> trace = std::move(judged.trace);
  if (trace == nullptr) {
    SimOptions opts = ctx.Simulation();
    opts.record_timeline = false;
    opts.record_task_spans = true;
    opts.record_activation_timeline = true;
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult run,
                               RunSchedule(ctx, *judged.schedule, opts));
    if (!run.feasible) {
      return absl::InternalError(
          absl::StrCat("replaying a feasible plan gave an infeasible result: ",
                       run.infeasible_reason));
    }
    trace = std::make_shared<const Judged::Trace>(Judged::Trace{
        std::move(run.task_spans), std::move(run.activation_timeline)});
  }
  if (trace->timeline.empty()) {
    return absl::InternalError(
        "a feasible plan's run has an empty memory timeline");
  }
  Plan plan = judged.plan;
  bool changed = false;
  {
    SLACKSWAP_ASSIGN_OR_RETURN(
        const DroppedStretches dropped,
        FindDroppedStretches(ctx, *judged.schedule, trace->task_spans,
                             trace->timeline));
    SLACKSWAP_ASSIGN_OR_RETURN(
        changed, KeepWhatFitsTheHeadroom(ctx, trace->timeline, dropped, plan));
  }
  trace.reset();
  if (drop_schedule) judged.schedule.reset();
  if (!changed) return judged;
  SLACKSWAP_ASSIGN_OR_RETURN(
      std::optional<Judged> pruned,
      JudgeUnlessBeaten(ctx, std::move(plan), judged.result));
  if (pruned.has_value() && pruned->result.feasible &&
      Better(pruned->result, judged.result)) {
    if (drop_schedule) pruned->schedule.reset();
    return *std::move(pruned);
  }
  return judged;
}

namespace {

// Single-tensor changes worth trying on a judged plan, in the order
// RefineBySimulation tries them: the four kinds interleaved, each list
// most promising first.
std::vector<Move> RefinementMoves(const PlanningContext& ctx,
                                  const Plan& plan) {
  const StepAnalysis& a = ctx.analysis;
  std::vector<const Candidate*> recomputed, swapped;
  for (const Candidate& c : a.candidates) {
    const Action act = plan.decisions[c.tensor].action;
    if (act == Action::kRecompute) recomputed.push_back(&c);
    if (act == Action::kSwap) swapped.push_back(&c);
  }
  // The costliest rebuilds first: keeping or swapping them saves the most.
  std::stable_sort(recomputed.begin(), recomputed.end(),
                   [](const Candidate* x, const Candidate* y) {
                     return x->recompute_ns > y->recompute_ns;
                   });
  std::vector<const Candidate*> to_swap;
  for (const Candidate* c : recomputed) {
    if (CanSwap(*c)) to_swap.push_back(c);
  }
  // The smallest swaps first: their copies are mostly latency.
  std::stable_sort(swapped.begin(), swapped.end(),
                   [](const Candidate* x, const Candidate* y) {
                     return x->bytes < y->bytes;
                   });
  // The cheapest rebuilds among the swaps first.
  std::vector<const Candidate*> swap_to_recompute = swapped;
  std::stable_sort(swap_to_recompute.begin(), swap_to_recompute.end(),
                   [](const Candidate* x, const Candidate* y) {
                     return x->recompute_ns < y->recompute_ns;
                   });
  const std::vector<std::pair<const std::vector<const Candidate*>*, Action>>
      lists = {{&recomputed, Action::kKeep},
               {&to_swap, Action::kSwap},
               {&swapped, Action::kKeep},
               {&swap_to_recompute, Action::kRecompute}};
  std::vector<Move> moves;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (const auto& [list, action] : lists) {
      if (i >= list->size()) continue;
      moves.push_back({(*list)[i]->tensor, action});
      any = true;
    }
    if (!any) break;
  }
  return moves;
}

// The compute stream's waits for prefetches in `judged`: (wait, tensor), the
// longest first. A prefetch is the cause when it landed exactly when the op
// that reads its tensor started after the compute stream fell idle.
absl::StatusOr<std::vector<std::pair<int64_t, int32_t>>> LatePrefetches(
    const PlanningContext& ctx, const Judged& judged) {
  std::vector<std::pair<int64_t, int32_t>> late;
  if (judged.result.stall_prefetch_ns == 0) return late;
  SimOptions opts = ctx.Simulation();
  opts.record_timeline = false;
  opts.record_events = true;
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult traced,
                             RunSchedule(ctx, *judged.schedule, opts));
  absl::flat_hash_map<int32_t, int64_t> arrival;
  for (const SimEvent& e : traced.events) {
    if (e.type == EventType::kPrefetch) arrival[e.index] = e.end_ns;
  }
  int64_t compute_free = 0;  // when the previous compute task ended
  for (const SimEvent& e : traced.events) {
    if (e.stream != StreamId::kCompute) continue;
    const int64_t waited = e.start_ns - compute_free;
    compute_free = e.end_ns;
    if (e.type != EventType::kOp || waited <= 0) continue;
    for (int32_t in : ctx.graph.index.InputsOf(e.index)) {
      auto it = arrival.find(in);
      if (it != arrival.end() && it->second == e.start_ns) {
        late.push_back({waited, in});
      }
    }
  }
  std::sort(late.begin(), late.end(), std::greater<>());
  return late;
}

// `plan` with tensor t's prefetch issued `by_ns` earlier on the ideal
// timeline (never before it may be), and every prefetch ahead of it in the
// H2D queue issued no later, so the queue keeps its order; nothing when no
// point moves.
std::optional<Plan> PrefetchEarlier(const PlanningContext& ctx,
                                    const Plan& plan, int32_t t,
                                    int64_t by_ns) {
  const StepAnalysis& a = ctx.analysis;
  const Candidate& c = a.candidates[a.candidate_of[t]];
  const int32_t now = plan.decisions[t].prefetch_after_op;
  const int64_t want = a.op_start_ns[now] - by_ns;
  const int32_t backward_begins = ctx.graph.index.first_backward_op == kNone
                                      ? now
                                      : ctx.graph.index.first_backward_op;
  const int32_t earliest =
      std::max(std::max(c.producer, c.last_fwd_use) + 1, backward_begins);
  const int32_t at = std::clamp<int32_t>(
      static_cast<int32_t>(
          std::upper_bound(a.op_start_ns.begin(), a.op_start_ns.end(), want) -
          a.op_start_ns.begin() - 1),
      std::min(earliest, now), now);
  Plan moved = plan;
  bool changed = false;
  for (Decision& d : moved.decisions) {
    if (d.action == Action::kSwap && d.prefetch_after_op <= now &&
        d.prefetch_after_op > at) {
      d.prefetch_after_op = at;
      changed = true;
    }
  }
  if (!changed) return std::nullopt;
  return moved;
}

}  // namespace

absl::StatusOr<Judged> RefineBySimulation(const PlanningContext& ctx,
                                          Judged judged, int max_trials) {
  if (!judged.result.feasible) return judged;
  const std::vector<Move> moves = RefinementMoves(ctx, judged.plan);
  int trials = 0;
  for (const Move& m : moves) {
    if (trials >= max_trials) break;
    // An earlier accepted move may have changed this tensor already.
    if (judged.plan.decisions[m.tensor].action == m.action) continue;
    Plan plan = judged.plan;
    Decision& d = plan.decisions[m.tensor];
    d.action = m.action;
    d.prefetch_after_op = kNone;
    ++trials;
    SLACKSWAP_ASSIGN_OR_RETURN(
        std::optional<Judged> tried,
        JudgeUnlessBeaten(ctx, std::move(plan), judged.result));
    if (tried.has_value() && Better(tried->result, judged.result)) {
      judged = *std::move(tried);
    }
  }
  // Then prefetch points: the longest waits first, each prefetch issued as
  // much earlier as compute waited for it (the ideal timeline the points
  // were placed on is not the planned one).
  SLACKSWAP_ASSIGN_OR_RETURN(const auto late, LatePrefetches(ctx, judged));
  for (const auto& [waited, t] : late) {
    if (trials >= max_trials) break;
    std::optional<Plan> plan = PrefetchEarlier(ctx, judged.plan, t, waited);
    if (!plan.has_value()) continue;
    ++trials;
    // The same actions: only the prefetches of the lowered plan change.
    Schedule schedule = *judged.schedule;
    SLACKSWAP_RETURN_IF_ERROR(IssuePrefetches(ctx.graph, *plan, schedule));
    SLACKSWAP_ASSIGN_OR_RETURN(
        Judged tried,
        SimulateLowered(ctx, *std::move(plan), std::move(schedule)));
    if (Better(tried.result, judged.result)) judged = std::move(tried);
  }
  return judged;
}

// `plan`'s swaps, everything else kept.
Plan SwapsAlone(const Graph& g, const Plan& plan) {
  Plan swaps = Plan::KeepAll(g);
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    if (plan.decisions[t].action == Action::kSwap) {
      swaps.decisions[t].action = Action::kSwap;
    }
  }
  return swaps;
}

// A swap whose prefetch still lands after its op wanted it becomes a
// recompute when rebuilding costs less than the compute stream waited; the
// repaired plan, or nothing when there is nothing to repair.
absl::StatusOr<std::optional<Judged>> RepairLateSwaps(
    const PlanningContext& ctx, const Judged& judged) {
  if (!judged.result.feasible) return std::nullopt;
  SLACKSWAP_ASSIGN_OR_RETURN(const auto late, LatePrefetches(ctx, judged));
  const StepAnalysis& a = ctx.analysis;
  Plan base = SwapsAlone(ctx.graph, judged.plan);
  bool changed = false;
  for (const auto& [waited, t] : late) {
    if (a.candidates[a.candidate_of[t]].recompute_ns < waited) {
      base.decisions[t].action = Action::kRecompute;
      changed = true;
    }
  }
  if (!changed) return std::nullopt;
  return RecomputeCheapestThatFit(ctx, base);
}

absl::Status ExplainDecisions(const PlanningContext& ctx,
                              absl::string_view why_keep,
                              absl::string_view why_swap,
                              absl::string_view why_recompute, Plan& plan) {
  const StepAnalysis& a = ctx.analysis;
  absl::flat_hash_set<int32_t> rebuilt;
  // Facts a plan already has are kept where nothing below replaces them (a
  // reason, when none is asked for).
  plan.facts.resize(plan.decisions.size());
  // Backward order: the chains rebuilt first get the shared ops.
  for (auto it = a.candidates.rbegin(); it != a.candidates.rend(); ++it) {
    const Candidate& c = *it;
    if ((it - a.candidates.rbegin()) % 256 == 0) {
      SLACKSWAP_RETURN_IF_ERROR(CheckStop(ctx));
    }
    const Decision& d = plan.decisions[c.tensor];
    DecisionFacts& f = plan.facts[c.tensor];
    f.transfer_ns = c.d2h_ns + c.h2d_ns;
    f.recompute_ns =
        d.action == Action::kRecompute
            ? RecomputeCostNs(ctx.graph, a.durations, plan, c.tensor, &rebuilt)
            : c.recompute_ns;
    if (!ctx.explain) continue;
    // One string, written once: the reasons are a request's largest text.
    const absl::string_view why = d.action == Action::kKeep   ? why_keep
                                  : d.action == Action::kSwap ? why_swap
                                                              : why_recompute;
    std::string reason = absl::StrCat(
        ActionName(d.action), ": ", FormatBytes(c.bytes), "; copies ",
        FormatMs(c.d2h_ns), " out + ", FormatMs(c.h2d_ns), " back; rebuild ",
        FormatMs(f.recompute_ns), " (",
        FormatDecimal(RecomputeNsPerByte(c) * 1e3, 2), " us/MB); ", why);
    if (d.action == Action::kSwap) {
      absl::StrAppend(&reason, "; prefetch when ",
                      ShortName(ctx.graph.ops[d.prefetch_after_op].name),
                      " starts");
    }
    f.reason = std::move(reason);
  }
  return absl::OkStatus();
}

}  // namespace slackswap
