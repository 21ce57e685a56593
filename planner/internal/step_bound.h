// Lower bounds on the step of plans before they are lowered or simulated, so
// that a search skips what provably cannot beat the best plan it has judged
// (and returns the same plan as without the bounds).
//
//   if (best.result.feasible &&
//       LeastFeasibleStepNs(ctx, swaps) > best.result.step_ns) {
//     // no plan that swaps at most `swaps` and recomputes the rest beats it
//   }
//
// All three rest on docs/SIMULATOR.md's semantics: the compute stream runs
// every op once and every recompute task, one after another, so no step is
// shorter than their sum; a task starts only when its saved outputs fit the
// budget beside the saved activations still allocated; a recomputed tensor
// leaves memory when its last forward reader ends, a swapped one no earlier.
#ifndef SLACKSWAP_PLANNER_INTERNAL_STEP_BOUND_H_
#define SLACKSWAP_PLANNER_INTERNAL_STEP_BOUND_H_

#include <cstdint>

#include "absl/types/span.h"
#include "model/plan.h"
#include "planner/policy.h"

namespace slackswap {

// The least step of any plan that fits ctx.budget_bytes, swaps no tensor
// outside `swaps` and otherwise only keeps or recomputes: when the op where
// memory peaks (ctx.analysis.peak_op) starts, the saved activations
// allocated then, everything kept, must have shrunk to the budget by tensors
// moved before it; the swaps move at most their own bytes, and the rest is
// recomputed, each re-run of an op restoring at most all its saved outputs
// and each rebuild recipe its tensor. The least compute that restores
// enough bytes, taking the cheapest per byte first and the last in part
// (a fractional knapsack: no integral choice costs less), is added to the
// ideal step. INT64_MAX when no such plan fits. REQUIRES: `swaps` are
// tensors of ctx.graph.
int64_t LeastFeasibleStepNs(const PlanningContext& ctx,
                            absl::Span<const int32_t> swaps);

// The least compute of `plan` lowered: every op once, and each tensor that
// must come back at least once (each it recomputes; each input of a re-run
// op that the forward pass made and freed) restored once, as cheaply as
// its producer allows: one re-run when one of its restored outputs has no
// rebuild recipe (a re-run also restores the saved siblings the plan
// recomputes that are still dropped), else the cheaper of one re-run and
// all their recipes. Repeated restores and the recipes' own inputs only
// add. At most what the lowering's tasks sum to. The ideal step for a plan
// without a decision per tensor (which the lowering refuses).
int64_t LeastComputeNs(const PlanningContext& ctx, const Plan& plan);

// False when `plan` provably does not fit ctx.budget_bytes: when some
// forward op starts, the saved activations allocated with everything kept,
// less those the plan moved before it (made before it, their forward
// readers done), exceed the budget. Nothing comes back into memory during
// the forward pass (prefetches and rebuilds wait for the backward pass),
// and a swap's device copy leaves no earlier than its copy ends. True says
// nothing: the plan may still not fit, and a plan without a decision per
// tensor (which the lowering refuses) gets true.
bool MayFitTheBudget(const PlanningContext& ctx, const Plan& plan);

// How much longer than LeastComputeNs the step of `plan` takes at least
// because forward ops wait for swap-outs to release memory. A swap-out is
// issued when its producer ends, no earlier than on the ideal timeline, and
// the D2H stream copies one at a time in issue order, none faster than the
// GPU's own link allows one way (on a node too, where the others' copies
// share the links after it), so the first k swaps are done no earlier than
// a chain of those copies allows. A forward op whose saved activations, swaps
// still allocated, exceed the budget starts only once the first k swaps have
// released enough, and everything after it (the rest of the ops, every
// recompute task: all rebuilds run in the backward pass) still runs then.
// Swaps that judging may turn into recomputes or keeps (those a rebuild for
// the first backward op could need) count as released without a copy.
// INT64_MAX when the swaps can never release enough (MayFitTheBudget is
// then false). A plan without a decision per tensor gets 0.
int64_t LeastSwapOutWaitNs(const PlanningContext& ctx, const Plan& plan);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_STEP_BOUND_H_
