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
//     tensors.
//  3. Recompute the rest, cheapest rebuild per byte first, as few as the
//     budget allows (checked by simulation).
//  4. Repair, judged by simulation: a swap whose prefetch still arrives late
//     becomes a recompute when rebuilding costs less than the stall, and the
//     slack filled is tried at a few levels (all of it, just the bytes the
//     budget asks to free, and shares down to none); the best simulated plan
//     wins.
#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "common/status_macros.h"
#include "planner/plan_search.h"
#include "planner/policies.h"
#include "planner/slack.h"

namespace slackswap {
namespace {

constexpr char kWhySwap[] =
    "fills D2H/H2D slack; spares the most recompute per byte or link time";
constexpr char kWhyRecompute[] =
    "outside the slack; cheapest rebuild per byte first";

class SlackSwapPolicy : public Policy {
 public:
  const char* name() const override { return "slackswap"; }

  absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const override {
    const StepAnalysis& a = ctx.analysis;
    const int64_t to_free =
        std::max<int64_t>(0, a.unconstrained_peak_bytes - ctx.budget_bytes);
    const double marginal = MarginalRecomputeNsPerByte(a, to_free);

    // Two measures of a swap's worth, both judged by simulation below:
    //  - the seed's: rebuild time per byte (most expensive to rebuild first);
    //  - the recompute it displaces per unit of link time: its own rebuild if
    //    it would be rebuilt anyway, else the marginal rebuild its bytes
    //    spare, over its copy time with latency. This one does not spend the
    //    link on tiny tensors (norm statistics) whose copies are all latency
    //    and free almost nothing.
    auto displaced_per_link_ns = [marginal](const Candidate& c) {
      const double spared =
          std::min(static_cast<double>(c.recompute_ns), marginal * c.bytes);
      return spared /
             static_cast<double>(std::max<int64_t>(1, c.d2h_ns + c.h2d_ns));
    };
    const std::vector<std::vector<const Candidate*>> orders = {
        OrderCandidates(a, CanSwap,
                        [](const Candidate& x, const Candidate& y) {
                          return RecomputeNsPerByte(x) > RecomputeNsPerByte(y);
                        }),
        OrderCandidates(a, CanSwap,
                        [&](const Candidate& x, const Candidate& y) {
                          const double vx = displaced_per_link_ns(x);
                          const double vy = displaced_per_link_ns(y);
                          if (vx != vy) return vx > vy;
                          return RecomputeNsPerByte(x) > RecomputeNsPerByte(y);
                        }),
    };

    std::optional<Judged> best;
    for (const std::vector<const Candidate*>& order : orders) {
      const std::vector<int32_t> admitted = Admit(ctx, order);
      // Levels of fill, judged by simulation: all the slack, just what the
      // budget asks to free, and less (fewer transfers to compete with).
      std::vector<int64_t> limits = {to_free};
      int64_t total = 0;
      for (int32_t t : admitted) total += ctx.graph.tensors[t].bytes;
      for (double share : {1.0, 0.75, 0.5, 0.25, 0.0}) {
        limits.push_back(static_cast<int64_t>(share * total));
      }
      for (int64_t limit : limits) {
        SLACKSWAP_ASSIGN_OR_RETURN(Judged j,
                                   PlanWithSwaps(ctx, admitted, limit));
        if (!best.has_value() || Better(j.result, best->result)) {
          best = std::move(j);
        }
      }
    }
    SLACKSWAP_ASSIGN_OR_RETURN(Judged repaired, RepairLateSwaps(ctx, *best));
    if (Better(repaired.result, best->result)) best = std::move(repaired);
    SLACKSWAP_RETURN_IF_ERROR(ExplainDecisions(ctx, "fits the budget", kWhySwap,
                                               kWhyRecompute, best->plan));
    return best->plan;
  }

 private:
  // The rebuild cost per byte of the last tensor checkpointing alone
  // (cheapest per byte first) would drop to free `to_free` bytes: what one
  // more freed byte is worth.
  static double MarginalRecomputeNsPerByte(const StepAnalysis& a,
                                           int64_t to_free) {
    std::vector<double> rates;
    std::vector<const Candidate*> order = OrderCandidates(
        a, [](const Candidate&) { return true; },
        [](const Candidate& x, const Candidate& y) {
          return RecomputeNsPerByte(x) < RecomputeNsPerByte(y);
        });
    double rate = 0;
    for (const Candidate* c : order) {
      if (to_free <= 0) break;
      rate = RecomputeNsPerByte(*c);
      to_free -= c->bytes;
    }
    return rate;
  }

  // The swaps the slack admits, in `order`, within pinned host memory.
  static std::vector<int32_t> Admit(
      const PlanningContext& ctx, const std::vector<const Candidate*>& order) {
    const StepAnalysis& a = ctx.analysis;
    std::vector<int32_t> admitted;
    SlackFiller filler(a);
    int64_t host_bytes = 0;
    for (const Candidate* c : order) {
      if (host_bytes + c->bytes > ctx.hw.pinned_host_memory_bytes) continue;
      if (filler.TryAdmit(a.candidate_of[c->tensor])) {
        admitted.push_back(c->tensor);
        host_bytes += c->bytes;
      }
    }
    return admitted;
  }

  // Swaps admitted tensors in order while their bytes stay within `limit`,
  // then recomputes as few of the rest as the budget allows.
  static absl::StatusOr<Judged> PlanWithSwaps(
      const PlanningContext& ctx, const std::vector<int32_t>& admitted,
      int64_t limit) {
    const Graph& g = ctx.graph;
    Plan base = Plan::KeepAll(g);
    int64_t used = 0;
    for (int32_t t : admitted) {
      if (used + g.tensors[t].bytes > limit) break;
      base.decisions[t].action = Action::kSwap;
      used += g.tensors[t].bytes;
    }
    return RecomputeTheRest(ctx, base);
  }

  static absl::StatusOr<Judged> RecomputeTheRest(const PlanningContext& ctx,
                                                 const Plan& base) {
    std::vector<Move> moves;
    for (const Candidate* c : OrderCandidates(
             ctx.analysis,
             [&](const Candidate&c) {
               return base.decisions[c.tensor].action == Action::kKeep;
             },
             [](const Candidate&x, const Candidate&y) {
               return RecomputeNsPerByte(x) < RecomputeNsPerByte(y);
             })) {
      moves.push_back({c->tensor, Action::kRecompute});
    }
    return FewestMovesThatFit(ctx, base, moves);
  }

  // A swap whose prefetch still lands after its op wanted it becomes a
  // recompute when rebuilding costs less than the compute stream waited.
  static absl::StatusOr<Judged> RepairLateSwaps(const PlanningContext& ctx,
                                                const Judged& judged) {
    if (!judged.result.feasible || judged.result.stall_prefetch_ns == 0) {
      return judged;
    }
    SimOptions opts;
    opts.budget_bytes = ctx.budget_bytes;
    opts.record_timeline = false;
    opts.record_events = true;
    opts.should_stop = ctx.should_stop;
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult traced,
                               Simulate(ctx.graph, ctx.hw, judged.plan, opts));
    absl::flat_hash_map<int32_t, int64_t> arrival;
    for (const SimEvent& e : traced.events) {
      if (e.type == EventType::kPrefetch) arrival[e.index] = e.end_ns;
    }
    const StepAnalysis& a = ctx.analysis;
    Plan base = Plan::KeepAll(ctx.graph);
    for (size_t t = 0; t < base.decisions.size(); ++t) {
      if (judged.plan.decisions[t].action == Action::kSwap) {
        base.decisions[t].action = Action::kSwap;
      }
    }
    bool changed = false;
    int64_t compute_free = 0;  // when the previous compute task ended
    for (const SimEvent& e : traced.events) {
      if (e.stream != StreamId::kCompute) continue;
      const int64_t waited = e.start_ns - compute_free;
      compute_free = e.end_ns;
      if (e.type != EventType::kOp || waited <= 0) continue;
      for (int32_t in : ctx.graph.ops[e.index].inputs) {
        auto it = arrival.find(in);
        if (it == arrival.end() || it->second != e.start_ns) continue;
        if (a.candidates[a.candidate_of[in]].recompute_ns < waited) {
          base.decisions[in].action = Action::kRecompute;
          changed = true;
        }
      }
    }
    if (!changed) return judged;
    return RecomputeTheRest(ctx, base);
  }
};

}  // namespace

std::unique_ptr<Policy> NewSlackSwapPolicy() {
  return std::make_unique<SlackSwapPolicy>();
}

}  // namespace slackswap
