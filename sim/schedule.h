// Lowers (graph, plan, durations) into the compute-stream task list the
// simulator executes: the graph's ops in launch order, with recompute tasks
// inserted right before the first backward need of each dropped tensor, and
// per task what it allocates, frees, swaps out and prefetches.
//
//   absl::StatusOr<Schedule> s = LowerPlan(graph, plan, durations);
//   for (const Task& task : s->tasks) { ... s->Allocs(i) ... }
//
// Prefetches issued by the same op queue in the order their tensors are
// first needed (a recompute chain's task may need one before its first
// backward use).
//
// Recompute semantics (docs/SIMULATOR.md): a dropped tensor is rebuilt by
// re-running its producer, or its Rebuild recipe, after making each input
// resident: kept and live tensors are used as they are, swapped ones are
// waited for, dropped ones are rebuilt recursively (a chain). Re-running an
// op also restores its other outputs that the plan recomputes and that are
// still dropped, so q, k and v from one projection cost one GEMM. Forward
// tensors nobody saved are rebuilt as temporaries and freed after the last
// recompute task that reads them.
#ifndef SLACKSWAP_SIM_SCHEDULE_H_
#define SLACKSWAP_SIM_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/plan.h"

namespace slackswap {

struct Task {
  int32_t op = kNone;  // the graph op run (or re-run)
  bool recompute = false;
  // For a Rebuild recipe: the tensor it rebuilds; kNone otherwise.
  int32_t rebuild_of = kNone;
  int64_t duration_ns = 0;
  int64_t workspace_bytes = 0;
};

// Lists per task, in CSR layout.
struct TaskLists {
  std::vector<int32_t> offsets;  // size tasks + 1
  std::vector<int32_t> items;
  absl::Span<const int32_t> Of(int32_t task) const {
    return absl::MakeConstSpan(items.data() + offsets[task],
                               offsets[task + 1] - offsets[task]);
  }
};

struct Schedule {
  std::vector<Task> tasks;
  // Swapped tensors the task must wait for (prefetch finished).
  TaskLists waits;
  // Tensors allocated when the task starts.
  TaskLists allocs;
  // Tensors freed when the task ends.
  TaskLists frees;
  // Swapped tensors whose D2H copy is issued when the task ends.
  TaskLists swap_outs;
  // Swapped tensors whose last forward use is this task: one of the two
  // conditions (with the D2H copy finished) that release the device copy.
  TaskLists forward_done;
  // Swapped tensors whose H2D prefetch is issued when the task starts.
  TaskLists prefetches;
  // Per op: its task (the original run, not a recompute).
  std::vector<int32_t> task_of_op;
  // Per tensor: the first task that needs a swapped tensor back; kNone else.
  std::vector<int32_t> first_need;
  int64_t swapped_tensors = 0;
  int64_t recomputed_tensors = 0;
};

// Bounds on lowering: rebuilding a tensor re-runs its chain of dropped
// inputs, so the task list can grow far beyond the graph.
struct LoweringLimits {
  int64_t max_recompute_tasks = 4'000'000;
  // Polled every few thousand tasks; true stops with CANCELLED.
  std::function<bool()> should_stop;
};

// REQUIRES: IndexGraph(g) succeeded; durations from ComputeDurations(g, hw).
// Fails with INVALID_ARGUMENT, naming the tensor, when the plan does not fit
// the graph: wrong size, a decision on a tensor that is not a saved
// activation, a swap without a valid prefetch point (it must come after the
// tensor's last forward use and before its first backward need);
// RESOURCE_EXHAUSTED past limits.max_recompute_tasks; CANCELLED when
// limits.should_stop says so. LowerWithoutPrefetches, then IssuePrefetches.
absl::StatusOr<Schedule> LowerPlan(const Graph& g, const Plan& plan,
                                   const OpDurations& durations,
                                   const LoweringLimits& limits = {});

// For planners that choose prefetch points from when each swapped tensor is
// first needed: lowers `plan` ignoring its prefetch points, with no prefetch
// issued (`prefetches` empty). IssuePrefetches then completes the same
// schedule once the points are chosen, so the plan is lowered once:
//
//   absl::StatusOr<Schedule> s = LowerWithoutPrefetches(g, plan, durations);
//   std::vector<int32_t> need = FirstNeedOps(*s);
//   ... set plan.decisions[t].prefetch_after_op from need[t] ...
//   absl::Status ok = IssuePrefetches(g, plan, *s);
//
// Fails as LowerPlan does, except on prefetch points.
absl::StatusOr<Schedule> LowerWithoutPrefetches(
    const Graph& g, const Plan& plan, const OpDurations& durations,
    const LoweringLimits& limits = {});

// Sets schedule.prefetches from plan's prefetch points: LowerPlan's
// schedule. INVALID_ARGUMENT, naming the tensor, for a prefetch point that
// is not an op after the tensor's last forward use and before its first
// need; the schedule is unchanged then.
// REQUIRES: `schedule` is LowerWithoutPrefetches of a plan with the same
// actions as `plan`.
absl::Status IssuePrefetches(const Graph& g, const Plan& plan,
                             Schedule& schedule);

// Per tensor, the op before which `schedule` first needs each swapped tensor
// back (its own backward use, or a recompute chain that reads it); kNone for
// the others.
std::vector<int32_t> FirstNeedOps(const Schedule& schedule);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_SCHEDULE_H_
