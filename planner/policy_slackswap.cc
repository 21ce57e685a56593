// slackswap: the seed's planner.
//  1. Slack: the D2H stream can hide swap-outs under the forward pass (each
//     must finish before the forward pass ends, when memory peaks), the H2D
//     stream prefetches under the backward pass (each must land before its
//     first backward use). Each stream moves one copy at a time.
//  2. Fill that slack with the swaps that save the most recompute time per
//     byte transferred, admitting a swap only while every admitted copy
//     still meets its deadline on both streams and the host copies fit in
//     pinned memory. "Save" is measured two ways, each judged: the seed's
//     rebuild time per byte, and the recompute a swap displaces (its own
//     rebuild, or the marginal rebuild its bytes spare) per unit of link
//     time including latency, which matters on graphs with many tiny
//     tensors; the marginal rebuild both per byte of a tensor and per byte
//     its re-run restores (PerByte).
//  3. Recompute the rest, cheapest rebuild per byte first, as few as the
//     budget allows (checked by simulation), then keep those the budget
//     turns out not to need: the cheapest-per-byte prefix also frees memory
//     where the budget does not bind (after a peak in mid-forward, say).
//     Per byte of the tensor, and apart, per byte its re-run restores.
//  4. Repair, judged by simulation: a swap whose prefetch still arrives late
//     becomes a recompute when rebuilding costs less than the stall, and the
//     slack filled is tried at a few levels (all of it, just the bytes the
//     budget asks to free, and shares down to none; a level that a lower
//     bound on its step shows cannot beat the best is skipped); the best
//     simulated plan wins. If none fits, swapping beyond the slack (largest
//     first, stalls accepted) is the last resort, rather than an infeasible
//     plan.
//  5. The other policies' plans are compared (recompute_only's and
//     capuchin's not made when a lower bound on their steps shows they
//     cannot win). After the best is refined, two other completions of its
//     swaps with recomputes (TryOtherCompletions: a re-run's other outputs
//     rebuilt beside it, and the last bytes freed at the least rebuild
//     time), kept only with a shorter step.
//  6. Steps 2-5 as planner version 3 made them run unchanged; the levels
//     beyond them (the third swap order, the completions per restored
//     byte) are refined and completed apart, and their plan wins only with
//     a shorter step (SlackLevels; docs/PLANNERS.md, "Siblings rebuilt
//     together").
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/internal/step_bound.h"

namespace slackswap {
namespace {

constexpr char kWhySwap[] =
    "fills D2H/H2D slack; spares the most recompute per byte or link time";
constexpr char kWhySwapBeyond[] =
    "no plan within the D2H/H2D slack fits the budget; swapped beyond it, "
    "largest first, stalls accepted";
constexpr char kWhyRecompute[] =
    "outside the slack; cheapest rebuild per byte first";
constexpr char kWhyRecomputeOtherwise[] =
    "outside the slack; rebuilt beside a sibling's re-run or to free the "
    "last bytes the budget needs at the least rebuild time";
constexpr char kWhyRecomputeRestored[] =
    "outside the slack; cheapest rebuild per byte its re-run restores first";
constexpr char kWhyKeepAll[] = "the budget covers the whole activation peak";
// The swap orders of planner version 3, first in SwapOrders.
constexpr size_t kVersion3SwapOrders = 2;
// Single-tensor changes tried on the best plan (RefineBySimulation).
constexpr int kRefineTrials = 16;

class SlackSwapPolicy : public Policy {
 public:
  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    // When keeping everything fits, nothing is worth moving.
    if (ctx.analysis.unconstrained_peak_bytes <= ctx.budget_bytes) {
      Plan plan = Plan::KeepAll(ctx.graph);
      SLACKSWAP_RETURN_IF_ERROR(
          ExplainDecisions(ctx, kWhyKeepAll, "", "", plan));
      return plan;
    }
    SLACKSWAP_ASSIGN_OR_RETURN(SlackLevels levels, BestWithinTheSlack(ctx));
    Judged best = std::move(levels.best);
    std::string why_swap = kWhySwap;
    std::string why_recompute = kWhyRecompute;
    // Asked only for a verdict (PlanningContext::Answers): each stage below
    // only ever replaces the plan with a better one, so once the plan
    // answers, the best would.
    const auto answered = [&ctx, &best] { return ctx.Answers(best.result); };
    const auto explained = [&]() -> absl::StatusOr<Plan> {
      SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(
          ctx, "fits the budget", why_swap, why_recompute, best.plan));
      return std::move(best.plan);
    };
    if (answered()) return explained();
    SLACKSWAP_ASSIGN_OR_RETURN(std::optional<Judged> repaired,
                               RepairLateSwaps(ctx, best));
    if (repaired.has_value() && Better(repaired->result, best.result)) {
      best = *std::move(repaired);
    }
    if (answered()) return explained();
    // The other heuristics' plans, and those this request's other policies
    // made: slackswap's answer is never worse than any of them.
    std::vector<Plan> others;
    PlanningContext quiet = ctx;  // their reasons are not slackswap's
    quiet.explain = false;
    // recompute_only swaps nothing: when no such plan can beat the best,
    // its search is skipped.
    const bool recompute_only_cannot_win =
        ctx.prune_with_bounds && best.result.feasible &&
        LeastFeasibleStepNs(ctx, {}) > best.result.step_ns;
    const auto add = [&others](absl::StatusOr<Plan> plan) -> absl::Status {
      if (!plan.ok()) return plan.status();
      others.push_back(*std::move(plan));
      return absl::OkStatus();
    };
    if (!recompute_only_cannot_win) {
      SLACKSWAP_RETURN_IF_ERROR(add(PlanWithPolicy("recompute_only", quiet)));
    }
    SLACKSWAP_RETURN_IF_ERROR(add(PlanWithPolicy("swap_only", quiet)));
    // capuchin swaps no tensor outside CapuchinSwaps: nor is its search run
    // when no plan with at most those swaps can beat the best, and when it
    // is, it starts from the swaps the bound took. A plan this request's
    // round made already is taken as it is, without the bound.
    if (!ctx.prune_with_bounds || !best.result.feasible ||
        PolicyPlanIsRemembered("capuchin", quiet)) {
      SLACKSWAP_RETURN_IF_ERROR(add(PlanWithPolicy("capuchin", quiet)));
    } else {
      SLACKSWAP_ASSIGN_OR_RETURN(const std::vector<int32_t> capuchin_swaps,
                                 CapuchinSwaps(quiet));
      if (LeastFeasibleStepNs(ctx, capuchin_swaps) <= best.result.step_ns) {
        SLACKSWAP_RETURN_IF_ERROR(add(PlanWithPolicyMadeBy(
            "capuchin", quiet, [&](const PlanningContext& c) {
              return CapuchinPlan(c, capuchin_swaps);
            })));
      }
    }
    if (ctx.seeds != nullptr) {
      for (const Plan& seed : *ctx.seeds) others.push_back(seed);
    }
    for (Plan& other : others) {
      const std::string from = other.policy;
      other.proof.reset();  // what a solver proved of its plan is not ours
      SLACKSWAP_ASSIGN_OR_RETURN(
          std::optional<Judged> j,
          JudgeUnlessBeaten(ctx, std::move(other), best.result));
      if (j.has_value() && Better(j->result, best.result)) {
        best = *std::move(j);
        why_swap = why_recompute =
            absl::StrCat("as in ", from, "'s plan, which simulated best");
      }
      if (answered()) return explained();
    }
    if (!best.result.feasible) {
      SLACKSWAP_ASSIGN_OR_RETURN(Judged beyond, SwapBeyondTheSlack(ctx, best));
      if (Better(beyond.result, best.result)) {
        best = std::move(beyond);
        why_swap = kWhySwapBeyond;
      }
    }
    if (answered()) return explained();
    SLACKSWAP_ASSIGN_OR_RETURN(
        best, RefineBySimulation(ctx, std::move(best), kRefineTrials));
    if (answered()) return explained();
    // Last, so that what it finds is only ever better than the plan so far.
    // From here on only the best's plan and verdict are read: its schedule
    // would be held through the completions' judgments for nothing.
    best.schedule.reset();
    const int64_t step_before = best.result.step_ns;
    SLACKSWAP_ASSIGN_OR_RETURN(best, TryOtherCompletions(ctx, std::move(best)));
    if (best.result.step_ns < step_before) {
      why_recompute = kWhyRecomputeOtherwise;
    }
    // The levels' other plan, if still shorter than this answer, is lowered
    // again (its schedule was not kept), refined and completed as this one
    // was, and wins with a shorter step.
    if (levels.other.has_value() &&
        levels.other->result.step_ns < best.result.step_ns) {
      SLACKSWAP_ASSIGN_OR_RETURN(Judged lowered,
                                 JudgePlan(ctx, std::move(levels.other->plan)));
      SLACKSWAP_ASSIGN_OR_RETURN(
          Judged other,
          RefineBySimulation(ctx, std::move(lowered), kRefineTrials));
      other.schedule.reset();
      const int64_t other_step_before = other.result.step_ns;
      SLACKSWAP_ASSIGN_OR_RETURN(other,
                                 TryOtherCompletions(ctx, std::move(other)));
      if (other.result.feasible && other.result.step_ns < best.result.step_ns) {
        why_swap = kWhySwap;
        why_recompute = other.result.step_ns < other_step_before
                            ? kWhyRecomputeOtherwise
                            : kWhyRecomputeRestored;
        best = std::move(other);
      }
    }
    return explained();
  }

 private:
  // Measures of a swap's worth, each judged by simulation:
  //  - the seed's: rebuild time per byte (most expensive to rebuild first);
  //  - the recompute it displaces per unit of link time: its own rebuild if
  //    it would be rebuilt anyway, else the marginal rebuild its bytes spare,
  //    over its copy time with latency. This one does not spend the link on
  //    tiny tensors (norm statistics) whose copies are all latency and free
  //    almost nothing. The marginal rebuild is taken both per byte of the
  //    tensor and per byte its re-run restores (PerByte): where siblings
  //    are rebuilt together (attention's q, k and v) the second is lower,
  //    and the link goes to large tensors (gpt2-xl's MLP activations) rather
  //    than to siblings whose rebuild one re-run shares. Neither is the
  //    better on every step.
  // The first kVersion3SwapOrders are version 3's; `all` adds the rest.
  static std::vector<std::vector<const Candidate*>> SwapOrders(
      const PlanningContext& ctx, bool all) {
    const StepAnalysis& a = ctx.analysis;
    const int64_t to_free =
        std::max<int64_t>(0, a.unconstrained_peak_bytes - ctx.budget_bytes);
    std::vector<std::vector<const Candidate*>> orders = {
        OrderCandidates(a, CanSwap, RecomputeNsPerByte, std::greater<>())};
    std::optional<double> last_marginal;
    for (PerByte per : {PerByte::kOfTheTensor, PerByte::kRestoredByTheReRun}) {
      if (per == PerByte::kRestoredByTheReRun && !all) break;
      const double marginal =
          MarginalRecomputeNsPerByte(ctx.graph, a, to_free, per);
      if (last_marginal == marginal) continue;  // the same order
      last_marginal = marginal;
      auto displaced_per_link_ns = [marginal](const Candidate& c) {
        const double spared =
            std::min(static_cast<double>(c.recompute_ns), marginal * c.bytes);
        return spared /
               static_cast<double>(std::max<int64_t>(1, c.d2h_ns + c.h2d_ns));
      };
      // The most displaced per link time first, then the costliest rebuild
      // per byte.
      orders.push_back(OrderCandidates(
          a, CanSwap,
          [&](const Candidate& c) {
            return std::make_pair(displaced_per_link_ns(c),
                                  RecomputeNsPerByte(c));
          },
          [](const std::pair<double, double>& x,
             const std::pair<double, double>& y) {
            if (x.first != y.first) return x.first > y.first;
            return x.second > y.second;
          }));
    }
    return orders;
  }

  // The slack's levels: `best` is the search of planner version 3 (the
  // first two swap orders, each level completed cheapest per tensor byte);
  // `other` the best of the rest (the third order's levels, and every
  // level completed cheapest per byte its re-run restores) when its step is
  // shorter still. `best` goes through the later stages as in version 3,
  // so that what it becomes is what version 3 made; `other` through
  // refinement and the other completions apart, and wins only with a
  // shorter step: a plan found sooner changes what every later stage
  // starts from, and on some steps ends slower.
  struct SlackLevels {
    Judged best;
    std::optional<Judged> other;
  };

  // The best simulated plans over the swap orders and several levels of
  // fill of the slack (all of it, just the bytes the budget asks to free,
  // and less: fewer transfers to compete with), each completed by
  // recomputing the cheapest per byte, both ways (PerByte).
  static absl::StatusOr<SlackLevels> BestWithinTheSlack(
      const PlanningContext& ctx) {
    const int64_t to_free = std::max<int64_t>(
        0, ctx.analysis.unconstrained_peak_bytes - ctx.budget_bytes);
    std::optional<Judged> best;
    std::optional<Judged> other;
    // Levels often pick the same swaps (no swaps at all, in both orders);
    // each set is judged once.
    absl::flat_hash_set<std::vector<int32_t>> judged_swaps;
    // On a node every probe is a simulation of all its ranks, and a Fit
    // multiplies a node plan's cost: there only version 3's search runs,
    // as the other completions do not (TryOtherCompletions).
    const bool search_other = ctx.node == nullptr;
    const std::vector<std::vector<const Candidate*>> orders =
        SwapOrders(ctx, search_other);
    for (size_t o = 0; o < orders.size(); ++o) {
      SLACKSWAP_ASSIGN_OR_RETURN(
          const std::vector<int32_t> admitted,
          AdmitToSlack(ctx, orders[o], ctx.analysis.peak_ns));
      std::vector<int64_t> limits = {to_free};
      int64_t total = 0;
      for (int32_t t : admitted) total += ctx.graph.index.bytes[t];
      for (double share : {1.0, 0.75, 0.5, 0.25, 0.0}) {
        limits.push_back(static_cast<int64_t>(share * total));
      }
      for (int64_t limit : limits) {
        std::vector<int32_t> swaps = FirstWithin(ctx.graph, admitted, limit);
        std::sort(swaps.begin(), swaps.end());
        if (!judged_swaps.insert(swaps).second) continue;
        // A level that cannot beat the best so far is not planned: its
        // plan would not be chosen. Version 3's search prunes against its
        // own best, as it did.
        const auto feasible = [](const std::optional<Judged>& j) {
          return j.has_value() && j->result.feasible;
        };
        const int64_t least_step_ns =
            ctx.prune_with_bounds && (feasible(best) || feasible(other))
                ? LeastFeasibleStepNs(ctx, swaps)
                : 0;
        const auto cannot_beat = [&](const std::optional<Judged>& j) {
          return ctx.prune_with_bounds && feasible(j) &&
                 least_step_ns > j->result.step_ns;
        };
        const bool in_version3 = o < kVersion3SwapOrders;
        Plan base = Plan::KeepAll(ctx.graph);
        for (int32_t t : swaps) base.decisions[t].action = Action::kSwap;
        for (PerByte per :
             {PerByte::kOfTheTensor, PerByte::kRestoredByTheReRun}) {
          std::optional<Judged>& slot =
              in_version3 && per == PerByte::kOfTheTensor ? best : other;
          if (&slot == &other && !search_other) continue;
          if (cannot_beat(best) || (&slot == &other && cannot_beat(other))) {
            continue;
          }
          if (per == PerByte::kRestoredByTheReRun &&
              !KeepsSiblings(ctx.graph, ctx.analysis, base)) {
            continue;
          }
          // Outside version 3's search only a shorter step than the
          // leader's is worth finding: the fewest moves that beat it.
          const std::optional<Judged>& leader =
              feasible(other) && other->result.step_ns < best->result.step_ns
                  ? other
                  : best;
          std::optional<Judged> j;
          if (&slot == &other && feasible(leader)) {
            SLACKSWAP_ASSIGN_OR_RETURN(
                std::optional<Judged> fit,
                FewestMovesThatBeat(
                    ctx, base,
                    CheapestRecomputeMoves(ctx.graph, ctx.analysis, base, per),
                    leader->result, Tracing::kOn));
            if (!fit.has_value()) continue;
            SLACKSWAP_ASSIGN_OR_RETURN(
                j, KeepNeedlessRecomputes(ctx, *std::move(fit),
                                          ReturnedSchedule::kDropped));
          } else {
            SLACKSWAP_ASSIGN_OR_RETURN(
                j, RecomputeCheapestThatFit(ctx, base, per));
          }
          // Asked only for a verdict: the best level is at least this one.
          if (ctx.Answers(j->result)) return SlackLevels{*std::move(j), {}};
          if (!slot.has_value() || Better(j->result, slot->result)) {
            // Held through the rest of the levels beside version 3's best,
            // and seldom refined: lowered again if it is (a schedule is
            // about 90 bytes per op).
            if (&slot == &other) j->schedule.reset();
            slot = std::move(j);
          }
        }
      }
    }
    if (other.has_value() &&
        !(other->result.feasible &&
          (!best->result.feasible ||
           other->result.step_ns < best->result.step_ns))) {
      other.reset();
    }
    return SlackLevels{*std::move(best), std::move(other)};
  }

  // The rebuild cost per byte of the last tensor that recomputing alone
  // (cheapest per byte first, `per` byte) would drop to free `to_free`
  // bytes: what one more freed byte is worth.
  static double MarginalRecomputeNsPerByte(const Graph& g,
                                           const StepAnalysis& a,
                                           int64_t to_free, PerByte per) {
    double rate = 0;
    for (const auto& [ns_per_byte, tensor] :
         EveryCandidateByRebuildNsPerByte(g, a, per)) {
      if (to_free <= 0) break;
      rate = ns_per_byte;
      to_free -= g.index.bytes[tensor];
    }
    return rate;
  }

  // The admitted tensors, in order, while their bytes stay within `limit`.
  static std::vector<int32_t> FirstWithin(const Graph& g,
                                          const std::vector<int32_t>& admitted,
                                          int64_t limit) {
    std::vector<int32_t> swaps;
    int64_t used = 0;
    for (int32_t t : admitted) {
      if (used + g.index.bytes[t] > limit) break;
      swaps.push_back(t);
      used += g.index.bytes[t];
    }
    return swaps;
  }

  // When no plan within the slack fits (recompute chains that need more
  // memory in the backward pass than the budget leaves, say), swapping more
  // than the slack hides costs stalls but may fit: the largest of the rest
  // on top of the plan so far, of its swaps alone, or of nothing (plain
  // offload), as few as fit.
  static absl::StatusOr<Judged> SwapBeyondTheSlack(const PlanningContext& ctx,
                                                   const Judged& judged) {
    std::optional<Judged> best;
    for (const Plan& base : {judged.plan, SwapsAlone(ctx.graph, judged.plan),
                             Plan::KeepAll(ctx.graph)}) {
      SLACKSWAP_ASSIGN_OR_RETURN(Judged j, SwapLargestThatFit(ctx, base));
      if (!best.has_value() || Better(j.result, best->result)) {
        best = std::move(j);
      }
    }
    return *std::move(best);
  }
};

}  // namespace

std::unique_ptr<Policy> NewSlackSwapPolicy() {
  return std::make_unique<SlackSwapPolicy>();
}

}  // namespace slackswap
