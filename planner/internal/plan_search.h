// Tools the policies share: choosing prefetch points, judging a candidate
// plan with the simulator, and finding the fewest moves that meet the budget.
//
//   std::vector<Move> moves = ...;  // in the policy's order of preference
//   absl::StatusOr<Judged> best = FewestMovesThatFit(ctx, base, moves);
#ifndef SLACKSWAP_PLANNER_INTERNAL_PLAN_SEARCH_H_
#define SLACKSWAP_PLANNER_INTERNAL_PLAN_SEARCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/plan.h"
#include "planner/policy.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace slackswap {

// Sets prefetch_after_op for every swapped tensor: as late as the H2D stream
// allows each copy to land before the tensor is first needed on the ideal
// timeline (copies run one at a time, in need order), so prefetched bytes
// hold budget for as short a time as possible; never before the tensor's
// last forward use. A swap needed before any op could issue its prefetch
// becomes a recompute: the plan's decisions can change. Returns the final
// plan lowered without its prefetches (LowerWithoutPrefetches), which
// IssuePrefetches completes.
absl::StatusOr<Schedule> AssignPrefetchPoints(const PlanningContext& ctx,
                                              Plan& plan);

struct Judged {
  Plan plan;
  // What was simulated: `plan` lowered, for replays that record more.
  // Shared: judged plans are copied and remembered often, and never change
  // once lowered.
  std::shared_ptr<const Schedule> schedule;
  // The verdict, without events or timeline.
  SimResult result;
  // What a traced judgment recorded of the run: when each task ran, and the
  // activation bytes at each point of the memory timeline; null otherwise.
  struct Trace {
    std::vector<TaskSpan> task_spans;
    std::vector<ActivationSample> timeline;
  };
  std::shared_ptr<const Trace> trace;
};

// Whether a judgment records the run's trace: KeepNeedlessRecomputes reads
// it, and recording it while judging costs less than replaying the plan.
enum class Tracing : bool { kOff, kOn };

// Assigns prefetch points and simulates under the budget.
absl::StatusOr<Judged> JudgePlan(const PlanningContext& ctx, Plan plan,
                                 Tracing tracing = Tracing::kOff);

// JudgePlan, unless `plan` provably cannot beat `best`: when best is
// feasible and the compute tasks of `plan` lowered take longer in all than
// best's step (one stream runs them one after another, so no step of the
// plan is shorter), or, before lowering, when the bounds of
// planner/internal/step_bound.h say so (LeastComputeNs, MayFitTheBudget),
// nothing is simulated and nullopt comes back.
absl::StatusOr<std::optional<Judged>> JudgeUnlessBeaten(
    const PlanningContext& ctx, Plan plan, const SimResult& best);

// True if a beats b: feasible first, then the shorter step, then fewer
// bytes moved over the link, then less recompute, then the lower activation
// peak.
bool Better(const SimResult& a, const SimResult& b);

struct Move {
  int32_t tensor;
  Action action;
};

// Applies the first k moves to `base` for the smallest k whose simulation
// fits the budget: from the fewest moves that free enough bytes, gallops up,
// then bisects, assuming feasibility is monotone over that useful prefix.
// If even all moves do not fit, returns the all-moves plan, infeasible.
// Each judgment is traced as `tracing` says; a probe MayFitTheBudget rules
// out is not simulated (only whether it fits steers the search).
absl::StatusOr<Judged> FewestMovesThatFit(const PlanningContext& ctx,
                                          const Plan& base,
                                          const std::vector<Move>& moves,
                                          Tracing tracing = Tracing::kOff);

// FewestMovesThatFit's plan when it could take a shorter step than `best`
// (feasible): a probe whose lowered compute alone lasts at least best's step
// is not simulated and steers the search to fewer moves, as one that fits
// does (more moves only add recompute). Nothing when the fewest moves that
// fit cannot, or when no number of them fits. The same plan whether
// ctx.prune_with_bounds is set or not.
absl::StatusOr<std::optional<Judged>> FewestMovesThatBeat(
    const PlanningContext& ctx, const Plan& base,
    const std::vector<Move>& moves, const SimResult& best,
    Tracing tracing = Tracing::kOff);

// Keeps, instead of recomputing, the recomputed tensors of `judged.plan`
// whose memory the budget turns out not to need: replaying the plan, a
// tensor is kept (largest rebuild first) if its bytes fit under the budget
// everywhere between its last forward reader and the task that rebuilds it.
// A prefix of cheapest-per-byte recomputes frees memory wherever it is
// cheap, including where the budget does not bind (after a peak in
// mid-forward, say). The pruned plan is simulated and returned only if it
// fits and beats `judged`; otherwise `judged` comes back. What comes back
// holds no trace: `judged`'s is read, then let go before the pruned plan is
// judged (the callers keep the best judgment while they judge others, and on
// a large graph a trace outweighs the schedule).
// Whether the judgment KeepNeedlessRecomputes returns holds its schedule.
// kDropped, for callers that read only the plan and the verdict afterwards:
// `judged`'s schedule then goes before the pruned plan is lowered, so that
// two schedules are not held at once (on a large graph a schedule is about
// 90 bytes per op).
enum class ReturnedSchedule : bool { kDropped, kKept };

absl::StatusOr<Judged> KeepNeedlessRecomputes(
    const PlanningContext& ctx, Judged judged,
    ReturnedSchedule schedule = ReturnedSchedule::kKept);

// Hill-climbs from a feasible `judged` plan, each change judged by
// simulation and kept when Better. First single-tensor moves: recomputed
// tensors kept or swapped (the costliest rebuilds first), swapped ones kept
// (the smallest first) or recomputed (the cheapest rebuilds first), the
// kinds interleaved. Then prefetch points: a prefetch compute waited for is
// issued that much earlier (the longest waits first). At most `max_trials`
// simulations, so it is deterministic and bounded. An infeasible plan comes
// back unchanged.
absl::StatusOr<Judged> RefineBySimulation(const PlanningContext& ctx,
                                          Judged judged, int max_trials);

// Annotates each decision with its sizes and costs and, when ctx.explain, a
// one-line reason. A
// recomputed tensor's cost is its chain, each op counted for the first
// tensor (in backward order) that re-runs it; kept and swapped tensors show
// what rebuilding them alone would cost. CANCELLED if ctx says stop.
absl::Status ExplainDecisions(const PlanningContext& ctx,
                              absl::string_view why_keep,
                              absl::string_view why_swap,
                              absl::string_view why_recompute, Plan& plan);

// `plan`'s swaps, everything else kept.
Plan SwapsAlone(const Graph& g, const Plan& plan);

// A swap whose prefetch still lands after the op that reads it wanted to
// start becomes a recompute when rebuilding costs less than the compute
// stream waited; the rest of the plan is rebuilt around those swaps
// (RecomputeCheapestThatFit). The repaired plan, or nothing when `judged`
// is infeasible or no prefetch was late.
absl::StatusOr<std::optional<Judged>> RepairLateSwaps(
    const PlanningContext& ctx, const Judged& judged);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_PLAN_SEARCH_H_
