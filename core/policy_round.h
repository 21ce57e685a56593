// How the core runs policies: one policy planned and judged (PolicyRunner),
// and one budget's round of a request's policies (PolicyRound), the loop
// Plan and Sweep share: in registry order, each budgeted plan kept as a seed
// for the policies after it (slackswap, last, starts from the best of them),
// a policy that may be unavailable reported as such, and the plan the LP
// bound starts from chosen among the seeds. Internal to core/.
//
//   PolicyRound round;
//   ctx.seeds = &round.seeds();
//   ctx.judge_memo = round.judge_memo();
//   SLACKSWAP_RETURN_IF_ERROR(round.Run(
//       policies, [&](const PolicyInfo& p, double* seconds) {
//         return PolicyRunner{ctx, observer}.Run(p.name, report, seconds);
//       }));
//   for (const PolicyRound::Entry& e : round.entries()) ...
#ifndef SLACKSWAP_CORE_POLICY_ROUND_H_
#define SLACKSWAP_CORE_POLICY_ROUND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/planning_core.h"
#include "model/plan.h"
#include "planner/budget_search.h"
#include "planner/policy.h"
#include "planner/relaxation.h"
#include "sim/simulator.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Seconds between laps.
class Stopwatch {
 public:
  double Lap();

 private:
  std::chrono::steady_clock::time_point last_ =
      std::chrono::steady_clock::now();
};

// Plans and judges one policy, reporting each run to the observer.
struct PolicyRunner {
  const PlanningContext& ctx;
  CoreObserver* observer;

  // The policy's plan at ctx.budget_bytes, simulated with `report`;
  // `seconds` (may be null) gets the planning and simulation time.
  absl::StatusOr<PlanOutcome> Run(const std::string& policy,
                                  const SimOptions& report,
                                  double* seconds) const;

  // The policy's plan at the largest activation budget up to `start` whose
  // plan `judge` accepts (or a smaller one whose plan is as fast;
  // planner/budget_search.h), with its result; the
  // search's whole time counts as planning.
  absl::StatusOr<PlanOutcome> Search(const std::string& policy,
                                     const Judge& judge, int64_t start,
                                     double* seconds) const;

  // The policy's plan and result at `budget`, no timeline; `seeds` and
  // `judge_memo` as PlanningContext's.
  absl::StatusOr<PlanOutcome> Quiet(const std::string& policy, int64_t budget,
                                    const std::vector<Plan>* seeds = nullptr,
                                    JudgeMemo* judge_memo = nullptr) const;
};

class PolicyRound {
 public:
  // One policy's run: its result and plan, or why it is unavailable.
  struct Entry {
    const PolicyInfo* policy = nullptr;
    // Empty when unavailable.
    std::optional<SimResult> result;
    // On a node: every rank's run of the plan (PlanOutcome::node).
    std::optional<NodeSimResult> node;
    std::string unavailable;
    double seconds = 0;
    // Where its plan is: in seeds() for a budgeted policy, else among the
    // reference's plans; -1 when unavailable.
    int plan_index = -1;
  };
  // Plans and judges one policy; `seconds` (may be null) gets the time it
  // took. Reads the seeds through the context it plans with.
  using RunFn = std::function<absl::StatusOr<PlanOutcome>(
      const PolicyInfo& policy, double* seconds)>;

  PolicyRound() = default;
  PolicyRound(const PolicyRound&) = delete;
  PolicyRound& operator=(const PolicyRound&) = delete;

  // Runs `policies` in order (REQUIRES: registry order, as ResolvePolicies
  // gives them, so that slackswap comes last). A policy that may be
  // unavailable and fails, unless cancelled, gets the error's message as
  // its reason; any other error ends the round.
  absl::Status Run(const std::vector<const PolicyInfo*>& policies,
                   const RunFn& run);

  // The budgeted plans so far, in run order: later policies' seeds. The
  // vector lives as long as the round.
  const std::vector<Plan>& seeds() const { return seeds_; }
  // One more seed that is no policy's entry (a plan made elsewhere, for
  // slackswap to start from if it judges better). REQUIRES: made for the
  // round's graph.
  void AddSeed(Plan plan) { seeds_.push_back(std::move(plan)); }
  // The judgments the round's policies share (PlanningContext::judge_memo):
  // slackswap, last, judges the others' plans again, and runs them itself.
  JudgeMemo* judge_memo() const { return judge_memo_.get(); }
  // The entries in run order.
  const std::vector<Entry>& entries() const { return entries_; }
  // `policy`'s entry. REQUIRES: it ran in this round.
  const Entry& Of(const PolicyInfo* policy) const;
  // `entry`'s plan. REQUIRES: entry.result is set.
  const Plan& PlanOf(const Entry& entry) const;

  // Whether any budgeted policy ran, and whether any of them was feasible.
  bool any_budgeted() const { return any_budgeted_; }
  bool any_feasible() const { return any_feasible_; }

  // The plan the bound's solver starts from: the fastest feasible seed,
  // else the one with the lowest peak (the model, looser than the
  // simulator, may still accept it); null when there is no seed.
  const Plan* BoundStart() const;

 private:
  std::vector<Entry> entries_;
  std::vector<Plan> seeds_;
  const std::shared_ptr<JudgeMemo> judge_memo_ = NewJudgeMemo();
  // The unbudgeted reference's plans (no seeds: they meet no budget).
  std::vector<Plan> references_;
  bool any_budgeted_ = false;
  bool any_feasible_ = false;
  std::optional<size_t> bound_start_;
  std::pair<bool, int64_t> bound_start_key_;
};

// The LP bound at ctx's budget: the retained share no plan beats, or why
// there is none in `unavailable` (never a made-up value; on a node, always
// none: the LP has one GPU's link). CANCELLED passes through. `start` (may be
// null): a plan for the solver to start from. `sweep` (may be null): solved
// there, from the last budget's model and basis (for a sweep's budgets, in
// order; REQUIRES: made for ctx's step).
absl::StatusOr<std::optional<double>> Bound(const PlanningContext& ctx,
                                            const Plan* start,
                                            std::string* unavailable,
                                            BoundSweep* sweep = nullptr);

// Keeping every activation, simulated with `device` and no budget, no
// timeline (on ctx's node when it has one, the reported rank's result).
absl::StatusOr<SimResult> SimulateKeepAll(const PlanningContext& ctx,
                                          const DeviceOptions& device);

// `bytes` as a share of `peak` (at least 1).
double Fraction(int64_t bytes, int64_t peak);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_POLICY_ROUND_H_
