// Other completions of a plan's swaps with recomputes (TryOtherCompletions,
// planner/internal/policies.h): where the cheapest-per-byte prefix leaves
// rebuild time on the table, as an LP relaxation of the reference workloads
// shows (docs/PLANNERS.md, "How close to the best").
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/internal/step_bound.h"

namespace slackswap {
namespace {

// `plan` without its marginal recompute (the one latest in the cheapest
// per-byte order), and the moves that could free those bytes instead: the
// tensors it keeps, least rebuild time in all first, with free siblings.
// Nothing when the plan recomputes nothing.
std::optional<std::pair<Plan, std::vector<Move>>> WithoutTheLastRecompute(
    const PlanningContext& ctx, const Plan& plan) {
  const StepAnalysis& a = ctx.analysis;
  // The costliest per byte, the later on a tie, as a stable sort orders them.
  const Candidate* last = nullptr;
  for (const Candidate& c : a.candidates) {
    if (plan.decisions[c.tensor].action == Action::kRecompute &&
        (last == nullptr || !CheaperToRebuildPerByte(c, *last))) {
      last = &c;
    }
  }
  if (last == nullptr) return std::nullopt;
  Plan base = plan;
  base.decisions[last->tensor].action = Action::kKeep;
  std::vector<const Candidate*> kept = OrderCandidates(
      a,
      [&base](const Candidate& c) {
        return base.decisions[c.tensor].action == Action::kKeep;
      },
      [](const Candidate& c) { return c.recompute_ns; }, std::less<>());
  std::vector<Move> moves;
  moves.reserve(kept.size());
  for (const Candidate* c : kept) {
    moves.push_back({c->tensor, Action::kRecompute});
  }
  return std::make_pair(std::move(base), WithFreeSiblings(ctx.graph, moves));
}

}  // namespace

std::vector<Move> WithFreeSiblings(const Graph& g,
                                   const std::vector<Move>& moves) {
  std::vector<uint8_t> listed(g.tensors.size(), 0);
  std::vector<uint8_t> placed(g.tensors.size(), 0);
  for (const Move& m : moves) listed[m.tensor] = 1;
  std::vector<Move> out;
  out.reserve(moves.size());
  for (const Move& m : moves) {
    if (placed[m.tensor]) continue;
    placed[m.tensor] = 1;
    out.push_back(m);
    if (g.index.has_recipe[m.tensor]) continue;
    for (int32_t sibling : g.index.OutputsOf(g.index.producer[m.tensor])) {
      if (listed[sibling] && !placed[sibling]) {
        placed[sibling] = 1;
        out.push_back({sibling, m.action});
      }
    }
  }
  return out;
}

absl::StatusOr<Judged> TryOtherCompletions(const PlanningContext& ctx,
                                           Judged judged) {
  // On a node every probe is a simulation of all its ranks: there the
  // search cost 1.04x-1.14x a node plan's CPU (the Fit that multiplies it
  // is over its target already) for 0.1 pp on two of the 24 points of
  // docs/PLANNERS.md's node table (docs/PERFORMANCE.md).
  if (!judged.result.feasible || judged.result.recomputed_tensors == 0 ||
      ctx.node != nullptr) {
    return judged;
  }
  const Plan swaps = SwapsAlone(ctx.graph, judged.plan);
  // No completion of these swaps takes a shorter step than this bound, and a
  // plan that only ties is not worth the search.
  if (ctx.prune_with_bounds) {
    std::vector<int32_t> swapped;
    for (const Candidate& c : ctx.analysis.candidates) {
      if (swaps.decisions[c.tensor].action == Action::kSwap) {
        swapped.push_back(c.tensor);
      }
    }
    if (LeastFeasibleStepNs(ctx, swapped) >= judged.result.step_ns) {
      return judged;
    }
  }
  // Each completion is the fewest moves that fit, searched only while it
  // could take a shorter step than the best so far, then pruned of
  // recomputes the budget does not need; it wins only with a shorter step
  // (a tie is not worth the search, and the bound above skips on ties).
  auto try_moves = [&](const Plan& base,
                       const std::vector<Move>& moves) -> absl::Status {
    SLACKSWAP_ASSIGN_OR_RETURN(
        std::optional<Judged> fit,
        FewestMovesThatBeat(ctx, base, moves, judged.result, Tracing::kOn));
    if (!fit.has_value()) return absl::OkStatus();
    SLACKSWAP_ASSIGN_OR_RETURN(
        Judged kept, KeepNeedlessRecomputes(ctx, *std::move(fit),
                                            ReturnedSchedule::kDropped));
    if (kept.result.feasible && kept.result.step_ns < judged.result.step_ns) {
      judged = std::move(kept);
    }
    return absl::OkStatus();
  };
  // Without a sibling to bring forward, the order is the cheapest per byte,
  // whose completion is RecomputeCheapestThatFit's.
  const std::vector<Move> cheapest =
      CheapestRecomputeMoves(ctx.graph, ctx.analysis, swaps);
  const std::vector<Move> with_siblings = WithFreeSiblings(ctx.graph, cheapest);
  const bool same_order = std::equal(
      cheapest.begin(), cheapest.end(), with_siblings.begin(),
      with_siblings.end(),
      [](const Move& x, const Move& y) { return x.tensor == y.tensor; });
  if (!same_order) SLACKSWAP_RETURN_IF_ERROR(try_moves(swaps, with_siblings));
  std::optional<std::pair<Plan, std::vector<Move>>> boundary =
      WithoutTheLastRecompute(ctx, judged.plan);
  if (boundary.has_value()) {
    SLACKSWAP_RETURN_IF_ERROR(try_moves(boundary->first, boundary->second));
  }
  return judged;
}

}  // namespace slackswap
