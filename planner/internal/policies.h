// The policy implementations (one file each) and what they share. Callers
// use CreatePolicy (policy.h) instead.
#ifndef SLACKSWAP_PLANNER_INTERNAL_POLICIES_H_
#define SLACKSWAP_PLANNER_INTERNAL_POLICIES_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "planner/analysis.h"
#include "planner/internal/plan_search.h"
#include "planner/policy.h"

namespace slackswap {

std::unique_ptr<Policy> NewIdealPolicy();
std::unique_ptr<Policy> NewRecomputeOnlyPolicy();
std::unique_ptr<Policy> NewSwapOnlyPolicy();
std::unique_ptr<Policy> NewCapuchinPolicy();
std::unique_ptr<Policy> NewSlackSwapPolicy();
std::unique_ptr<Policy> NewOptimalPolicy();

// A swap needs an op between its last forward use and its first backward
// use to issue the prefetch from.
bool CanSwap(const Candidate& c);

// Rebuild time per byte: what recomputing costs for the memory it saves.
double RecomputeNsPerByte(const Candidate& c);

// Orders candidates cheapest rebuild per byte first (most memory saved per
// second of recompute).
bool CheaperToRebuildPerByte(const Candidate& x, const Candidate& y);

// Candidates passing `keep`, ordered by their keys under `less` (ties by
// production order), each key computed once: a sort compares n log n times,
// and on a large step reading two candidates far apart in memory (and
// dividing) for each comparison cost several times what sorting the keys
// does. The ties broken by index make the order total, so an in-place sort
// gives what a stable one would without its buffer. Templates rather than
// std::function, for the same reason.
//
//   OrderCandidates(a, CanSwap, RecomputeNsPerByte, std::greater<>());
template <typename Keep, typename Key, typename Less>
std::vector<const Candidate*> OrderCandidates(const StepAnalysis& a,
                                              const Keep& keep, const Key& key,
                                              const Less& less) {
  using KeyType = std::decay_t<std::invoke_result_t<Key, const Candidate&>>;
  struct Keyed {
    KeyType key;
    int32_t index;  // in a.candidates
  };
  std::vector<Keyed> keyed;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const Candidate& c = a.candidates[i];
    if (keep(c)) keyed.push_back({key(c), static_cast<int32_t>(i)});
  }
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& x, const Keyed& y) {
    if (less(x.key, y.key)) return true;
    if (less(y.key, x.key)) return false;
    return x.index < y.index;
  });
  std::vector<const Candidate*> out;
  out.reserve(keyed.size());
  for (const Keyed& k : keyed) out.push_back(&a.candidates[k.index]);
  return out;
}

// The swaps the slack (planner/internal/slack.h) admits, trying `order` in
// turn, swap-outs due by `swap_out_deadline_ns`, while the host copies fit
// in pinned memory; stops once the admitted bytes reach `enough_bytes`.
absl::StatusOr<std::vector<int32_t>> AdmitToSlack(
    const PlanningContext& ctx, const std::vector<const Candidate*>& order,
    int64_t swap_out_deadline_ns,
    int64_t enough_bytes = std::numeric_limits<int64_t>::max());

// PlanWithPolicy (policy.h) with `make` in place of policy `name`'s
// MakePlan, for a caller that did part of that policy's work already.
// REQUIRES: make(c) returns what the policy's MakePlan(c) would.
absl::StatusOr<Plan> PlanWithPolicyMadeBy(
    absl::string_view name, const PlanningContext& ctx,
    absl::FunctionRef<absl::StatusOr<Plan>(const PlanningContext&)> make);

// Whether PlanWithPolicy(name, ctx) would return the plan this request's
// round made before (held by ctx.judge_memo) instead of making it.
bool PolicyPlanIsRemembered(absl::string_view name, const PlanningContext& ctx);

// The swaps capuchin's plan starts from: the longest free time first, while
// they hide (AdmitToSlack). Its plan swaps no other tensor (it recomputes
// among the rest, and judging turns swaps into recomputes or keeps only),
// so LeastFeasibleStepNs of these bounds its step.
absl::StatusOr<std::vector<int32_t>> CapuchinSwaps(const PlanningContext& ctx);

// capuchin's plan from its swaps (CapuchinSwaps(ctx)): what its MakePlan
// returns.
absl::StatusOr<Plan> CapuchinPlan(const PlanningContext& ctx,
                                  absl::Span<const int32_t> swaps);

// What "cheapest to rebuild per byte" divides a rebuild by.
enum class PerByte : uint8_t {
  // The tensor's own bytes: greedy checkpointing's order.
  kOfTheTensor,
  // The bytes its re-run restores: rebuilding a tensor re-runs its
  // producer, which restores the producer's other outputs the plan keeps
  // (docs/SIMULATOR.md, "Siblings are restored together"), so one rebuild
  // frees them all. Attention's q, k and v cost a third each of what one
  // alone does, and come in a row.
  kRestoredByTheReRun,
};

// Each tensor `base` keeps with its rebuild time per byte, cheapest first
// (ties in production order).
std::vector<std::pair<double, int32_t>> KeptByRebuildNsPerByte(
    const Graph& g, const StepAnalysis& a, const Plan& base, PerByte per);

// The same order over every candidate, as if all were kept: without
// making a keep-all plan (a decision per tensor).
std::vector<std::pair<double, int32_t>> EveryCandidateByRebuildNsPerByte(
    const Graph& g, const StepAnalysis& a, PerByte per);

// Whether `base` keeps two or more outputs of one producer that its re-run
// restores together: only then can the two PerByte orders differ.
bool KeepsSiblings(const Graph& g, const StepAnalysis& a, const Plan& base);

// Recompute moves for the tensors `base` keeps, cheapest rebuild per byte
// first.
std::vector<Move> CheapestRecomputeMoves(const Graph& g, const StepAnalysis& a,
                                         const Plan& base,
                                         PerByte per = PerByte::kOfTheTensor);

// Recomputes as few of the tensors `base` keeps as the budget allows,
// cheapest rebuild per byte first (checked by simulation), then keeps those
// it turns out not to need (KeepNeedlessRecomputes).
absl::StatusOr<Judged> RecomputeCheapestThatFit(
    const PlanningContext& ctx, const Plan& base,
    PerByte per = PerByte::kOfTheTensor);

// `moves` with each move whose rebuild re-runs its tensor's producer
// followed by the producer's other outputs among `moves` (their own moves
// taken from later in the list): the lowering restores those with the same
// re-run (sim/schedule.cc), so once one of them is rebuilt the others free
// their bytes for no compute (a norm's statistics beside its output,
// attention's log-sum-exp beside its output). A tensor rebuilt by its own
// recipe (a dropout mask) brings no sibling.
std::vector<Move> WithFreeSiblings(const Graph& g,
                                   const std::vector<Move>& moves);

// `judged`, or another completion of its swaps with recomputes than
// RecomputeCheapestThatFit's when one simulates to a shorter step; each the
// fewest moves that fit (searched only while it could take a shorter step
// than the best so far), then KeepNeedlessRecomputes:
//  - the cheapest per byte with free siblings (WithFreeSiblings);
//  - the boundary: the shortest prefix that fits often ends with a move that
//    frees far more than the bytes still missing (a 100 MB MLP activation
//    where a few MB were), so the best plan so far without its marginal
//    recompute is completed by the tensors it keeps that cost the least
//    rebuild time in all (with free siblings).
// `judged` comes back when it is infeasible, recomputes nothing, is planned
// for a node (ctx.node), or none is shorter.
absl::StatusOr<Judged> TryOtherCompletions(const PlanningContext& ctx,
                                           Judged judged);

// Swaps as few of the tensors `base` keeps as the budget allows, largest
// first (vDNN-style offload), while the host copies, `base`'s swaps
// included, fit in pinned memory.
absl::StatusOr<Judged> SwapLargestThatFit(const PlanningContext& ctx,
                                          const Plan& base);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_POLICIES_H_
