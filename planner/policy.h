// The planning policies behind one interface, selected by name, and the
// request-level entry point that runs a policy and judges its plan with the
// simulator.
//
//   absl::StatusOr<StepAnalysis> a = AnalyzeStep(graph, hw);
//   PlanningContext ctx{graph, hw, *a, budget_bytes};
//   absl::StatusOr<PlanOutcome> out = PlanAndSimulate("slackswap", ctx, {});
//   double retained = out->result.throughput_retained;  // simulated
//
// The policies are listed in PolicyRegistry(). Every reported result is the
// simulator's, never a policy's own estimate.
#ifndef SLACKSWAP_PLANNER_POLICY_H_
#define SLACKSWAP_PLANNER_POLICY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/plan.h"
#include "planner/analysis.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace slackswap {

// Judgments one budget's policies share (planner/internal/judge_memo.h):
// a plan judged by one is not lowered and simulated again by another.
// It holds at most kJudgeMemoBytesPerGraphElement bytes per element of the
// graph (op, tensor, input or output reference), and kJudgeMemoMaxBytes in
// all.
class JudgeMemo;
std::shared_ptr<JudgeMemo> NewJudgeMemo();
inline constexpr int64_t kJudgeMemoBytesPerGraphElement = 256;
// A judgment remembered takes about 22 bytes per element, so the cap binds
// from about 260,000 elements (gpt2-xl with 1,500 layers) and leaves no
// room for one past 3 million: there a repeat costs a few percent of the
// search to judge again, while remembering a dozen would hold as much as
// the graph (docs/PERFORMANCE.md, "A very large graph").
inline constexpr int64_t kJudgeMemoMaxBytes = int64_t{64} << 20;
// The most the memo holds for a graph of `elements` elements.
inline int64_t JudgeMemoCapBytes(int64_t elements) {
  return elements > kJudgeMemoMaxBytes / kJudgeMemoBytesPerGraphElement
             ? kJudgeMemoMaxBytes
             : elements * kJudgeMemoBytesPerGraphElement;
}

// A plan for a node's ranks: every rank runs it on its graph, all together
// (SimulateNode), so each judgment of a candidate is the node's run.
struct NodeRanks {
  const Node* node = nullptr;
  // Rank r runs graphs[r] on GPU r. Ranks' graphs differ only in their
  // collectives' groups (model/transformer.h), so the plan, the analysis
  // and the lowered schedule of the context's graph serve every rank.
  std::vector<const Graph*> graphs;
};

// Everything a policy sees for one request. Immutable while planning.
struct PlanningContext {
  const Graph& graph;
  const Hardware& hw;
  const StepAnalysis& analysis;
  // Activation budget in bytes; > 0.
  int64_t budget_bytes = 0;
  // Polled inside search loops: true stops planning with CANCELLED.
  std::function<bool()> should_stop;
  // Write each decision's reason (text); the sizes and costs are always set.
  bool explain = true;
  // Plans this request's other policies made (slackswap starts from the best
  // of its own and these); may be null.
  const std::vector<Plan>* seeds = nullptr;
  // Judgments made for this context, shared by the policies that see it
  // (PlanWithPolicy makes one when null).
  JudgeMemo* judge_memo = nullptr;
  // The optimal policy's MILP time limit, seconds.
  static constexpr double kDefaultOptimalTimeLimitS = 2;
  double optimal_time_limit_s = kDefaultOptimalTimeLimitS;
  // Bound on the recompute tasks one plan's lowering may make.
  int64_t max_recompute_tasks = LoweringLimits{}.max_recompute_tasks;
  // Set: the plan is for every rank of a node and judged there (RunSchedule);
  // `hw` is then what each rank can count on of the node's shared links
  // (FairShareGpu), which the policies plan with. Null: one GPU, `hw`.
  const NodeRanks* node = nullptr;
  // Skip candidates that a lower bound on their step shows cannot beat the
  // best plan judged so far (planner/internal/step_bound.h), and let the
  // searches over budgets ask a policy only for its verdict (the two fields
  // below): the same plan with fewer judgments. Tests turn it off to
  // compare.
  bool prune_with_bounds = true;
  // Set: the caller asks only whether the policy fits the budget (a
  // bisection for the smallest feasible budget), not for its best plan. A
  // policy may then return the first feasible plan it judges: its search
  // up to there is the same, and a feasible plan beats every infeasible
  // one, so the plan is feasible exactly when the policy's best would be
  // (slackswap stops there; the other policies ignore it).
  bool first_feasible_plan = false;
  // Set (> 0): the caller asks only whether the policy's plan is feasible
  // and retains at least this share of the ideal throughput (a bisection
  // for the least memory that keeps a target). A policy may then return
  // the first plan that does at a point of its search after which its plan
  // only gets better, so the answer is yes exactly when its best plan's
  // would be (slackswap: between its stages; the others ignore it).
  double enough_retained = 0;

  // Whether `r` answers what a caller asking only for a verdict asked
  // (first_feasible_plan, enough_retained); false when it asked for the
  // best plan.
  bool Answers(const SimResult& r) const {
    return r.feasible &&
           (first_feasible_plan ||
            (enough_retained > 0 && r.throughput_retained >= enough_retained));
  }
  // Whether the caller asks only for a verdict: the plan made is then not
  // the policy's plan for this context.
  bool AsksForAVerdict() const {
    return first_feasible_plan || enough_retained > 0;
  }

  LoweringLimits Lowering() const { return {max_recompute_tasks, should_stop}; }
  // The simulator's options for a plan judged in this context: `report`'s
  // (what to record, the device model) under this budget, stop function and
  // recompute-task bound. The one place they are copied from a context.
  SimOptions Simulation(SimOptions report = {}) const;
};

class Policy {
 public:
  virtual ~Policy() = default;
  // A plan for ctx.budget_bytes. Policies may simulate candidates to choose
  // among them; the plan may still be infeasible when nothing the policy
  // can do meets the budget.
  virtual absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx) const = 0;
};

// One entry of the policy registry: everything the service, the command
// line, the docs and the tests know about a policy comes from here.
struct PolicyInfo {
  const char* name;
  // One line for help texts and listings.
  const char* summary;
  // The unbudgeted reference (ideal): planned and simulated with no memory
  // limit, so it neither meets nor misses a budget and has no minimum one.
  bool unbudgeted_reference = false;
  std::unique_ptr<Policy> (*create)();
  // Its planning time relative to slackswap's on the same graph (measured;
  // core/admission.h estimates a request's cost with it).
  double relative_cost = 1;
  // Planned when a request names no policy. The optimal policy is not: it
  // runs a solver for up to its time limit.
  bool in_default_set = true;
  // Its planning may be unavailable for a graph (a model too large, a
  // solver out of time): the request still gets the other policies' plans.
  bool may_be_unavailable = false;
  // It runs a solver for up to the request's optimal_time_limit_s, on top
  // of its relative cost.
  bool uses_solver_time = false;
  // Its plan is a function of the graph, hardware, analysis, budget and
  // explain flag alone (no seeds read, no solver's time limit): one budget's
  // round plans it once (PlanningContext::judge_memo).
  bool same_plan_every_time = true;
};

// Every policy, in the order requests run them and reports list them
// (slackswap last: it starts from the plans the others made).
const std::vector<PolicyInfo>& PolicyRegistry();
std::vector<std::string> PolicyNames();
// The ones a request that names none gets.
std::vector<std::string> DefaultPolicyNames();
// NOT_FOUND listing the names for an unknown one.
absl::StatusOr<const PolicyInfo*> FindPolicy(absl::string_view name);

struct PlanOutcome {
  Plan plan;
  // On a node, the reported rank's (ReportedRank), with the node's
  // feasibility; `node` has every rank and link.
  SimResult result;
  std::optional<NodeSimResult> node;
};

// `schedule` (lowered from a plan for ctx.graph) run as the context says:
// on ctx.hw alone, or on every rank of ctx.node together, where the result
// is the reported rank's (ReportedRank) with the node's feasibility and
// reason, and `node_run` (may be null) gets the whole node's.
absl::StatusOr<SimResult> RunSchedule(const PlanningContext& ctx,
                                      const Schedule& schedule,
                                      const SimOptions& opts,
                                      NodeSimResult* node_run = nullptr);

// Runs the named policy: its plan for ctx.budget_bytes, prefetch points set,
// decisions explained.
absl::StatusOr<Plan> PlanWithPolicy(absl::string_view policy,
                                    const PlanningContext& ctx);

// The simulator's verdict on a policy's plan, as reported: under
// ctx.budget_bytes (ideal: no limit) with `report` options.
absl::StatusOr<SimResult> SimulatePlan(absl::string_view policy,
                                       const PlanningContext& ctx,
                                       const Plan& plan,
                                       const SimOptions& report,
                                       NodeSimResult* node_run = nullptr);

// PlanWithPolicy, then SimulatePlan. Runs the named policy and simulates its
// plan under ctx.budget_bytes with `report` options (timeline points, events).
// `ideal` is simulated with no limit. Fails with the policy's or simulator's
// error; an infeasible plan is an outcome whose result says so.
absl::StatusOr<PlanOutcome> PlanAndSimulate(absl::string_view policy,
                                            const PlanningContext& ctx,
                                            const SimOptions& report);

// The smallest budget, to 0.1% of the unconstrained peak, at which the
// policy's plan simulates feasible: the lowest activation peak it reaches.
// Bisection, so it assumes a larger budget never makes a plan infeasible.
// Each budget asks the policy only whether it fits (first_feasible_plan,
// with ctx.prune_with_bounds): the same budget as with its best plans.
// REQUIRES: policy is not ideal (which has no budget).
absl::StatusOr<int64_t> MinimumFeasibleBudget(absl::string_view policy,
                                              const PlanningContext& ctx);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_POLICY_H_
