// The planning problem as a linear program, relaxed from the simulator's
// semantics so that every plan the simulator accepts is a feasible point of
// it: its optimum is a lower bound on the step time of any plan (an upper
// bound on the throughput retained), and its integer version (a MILP) is
// the `optimal` policy's model. docs/PLANNERS.md ("The bound") has the
// formulation and why each simplification only loosens it.
//
//   RelaxationOptions lp;                       // fractions, COIN-OR CLP
//   absl::StatusOr<Relaxation> bound = SolveRelaxation(ctx, lp);
//   double ceiling = bound->retained_upper;     // no plan retains more
//
//   RelaxationOptions milp;
//   milp.integer = true;                        // COIN-OR CBC
//   milp.time_limit_s = 2;
//   absl::StatusOr<Relaxation> best = SolveRelaxation(ctx, milp);
//   if (best->proven_optimal) ...               // best->swap: a plan
//
//   BoundSweep sweep(ctx);                      // many budgets, one model
//   absl::StatusOr<Relaxation> at = sweep.Solve(budget_bytes, lp);
//
// Deterministic for the LP; for the MILP, when CBC proves optimality within
// its time limit (at the limit, its best plan so far depends on the
// machine's speed).
#ifndef SLACKSWAP_PLANNER_RELAXATION_H_
#define SLACKSWAP_PLANNER_RELAXATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/policy.h"

namespace slackswap {

struct RelaxationOptions {
  // Integer decisions (a MILP, solved by CBC) instead of fractions (an LP,
  // solved by CLP).
  bool integer = false;
  // Seconds the solver may run (wall clock); 0: no limit. An LP stopped
  // there has no bound (DEADLINE_EXCEEDED); a MILP returns its best plan so
  // far (none when it found none) and the best bound it can vouch for.
  double time_limit_s = 0;
  // MILP only: at most this many branch-and-bound nodes (0: no limit).
  // Unlike the time limit, the same on every machine: deterministic.
  int64_t max_nodes = 0;
  // Graphs with more ops get no model (RESOURCE_EXHAUSTED): it grows with
  // the graph.
  int64_t max_ops = 200'000;
  // The model's time steps: a graph with more ops is modelled in blocks of
  // consecutive ops (a looser bound, in bounded time).
  int32_t max_steps = 2048;
  // A plan to start from (a plan the simulator accepts is a feasible point
  // of the model). The LP starts its simplex from the model's best point
  // with the plan's decisions (a third to a half of the iterations); the
  // MILP has an answer to improve from its first second. The bound does not
  // depend on it. Null: none.
  const Plan* start = nullptr;
};

struct Relaxation {
  // False when not even the relaxation meets the budget: then no plan does.
  bool feasible = true;
  // No plan the simulator accepts runs faster than this (ns), nor retains
  // more than ideal / step_ns_lower.
  int64_t step_ns_lower = 0;
  double retained_upper = 0;
  // The solution, per candidate of ctx.analysis (index as in
  // analysis.candidates): the swap and recompute fractions (0 or 1 for a
  // MILP's plan). Empty when none was found.
  std::vector<double> swap;
  std::vector<double> recompute;
  // MILP only: CBC proved its plan optimal for the model (otherwise it
  // stopped at the time limit).
  bool proven_optimal = false;
  // MILP only: the model was too large for CBC within the time limit (2,500
  // rows per second of it; a node of a 20,000-row model takes seconds):
  // only the LP's bound, no plan.
  bool milp_skipped = false;
};

// The model's fastest step for `plan`'s decisions (ns): the LP with them
// fixed. Every plan the simulator accepts runs no faster than this (the
// relaxation's promise, which tests check plan by plan); nothing when the
// model finds the plan infeasible, which would break that promise too;
// CANCELLED when ctx.should_stop said so while the model was built.
// REQUIRES: ctx.budget_bytes > 0; `plan` is for ctx.graph.
absl::StatusOr<int64_t> ModelStepNs(const PlanningContext& ctx,
                                    const Plan& plan);

// REQUIRES: ctx.budget_bytes > 0. Errors: RESOURCE_EXHAUSTED past
// options.max_ops; DEADLINE_EXCEEDED when an LP ran out of time; CANCELLED
// when ctx.should_stop said so; INTERNAL when the solver fails (never an
// exception).
absl::StatusOr<Relaxation> SolveRelaxation(const PlanningContext& ctx,
                                           const RelaxationOptions& options);

// The LP bound of one step at one budget after another, as a sweep asks for
// it (core/sweep_run.cc): the model is built once, at the first budget
// that needs it, and each higher budget changes only the bounds of the rows
// it enters (docs/PLANNERS.md, "Solving it") and re-solves with CLP's dual
// simplex from the last optimal basis, instead of building and solving a
// new model from a plan.
//
//   BoundSweep sweep(ctx);  // ctx.budget_bytes is not read
//   for (int64_t budget : budgets) {                  // ascending
//     RelaxationOptions lp;
//     lp.start = &plan_at_budget;  // used only when the model is built
//     absl::StatusOr<Relaxation> b = sweep.Solve(budget, lp);
//   }
//
// Each answer is SolveRelaxation's for ctx at that budget: the same model
// (every row it has, with the same bounds; the rows it lacks free), the same
// optimum, to within the solver's tolerances, which the bound's safety
// margin covers; its last bits may differ from a solve from scratch's, as a
// solve from another plan's do. Deterministic for the same budgets in the
// same order. A lower budget than the model's, or a warm solve that ends
// neither optimal nor stopped (infeasible, numerical trouble), builds the
// model anew and solves it from options.start.
class BoundSweep {
 public:
  // REQUIRES: ctx outlives the sweep.
  explicit BoundSweep(const PlanningContext& ctx);
  ~BoundSweep();
  BoundSweep(const BoundSweep&) = delete;
  BoundSweep& operator=(const BoundSweep&) = delete;

  // SolveRelaxation(ctx at budget_bytes, options), warm when it can be.
  // REQUIRES: budget_bytes > 0; !options.integer (INVALID_ARGUMENT
  // otherwise).
  absl::StatusOr<Relaxation> Solve(int64_t budget_bytes,
                                   const RelaxationOptions& options);

  // Solves so far that started from the last one's basis (for tests).
  int warm_solves() const { return warm_solves_; }

 private:
  struct Model;

  const PlanningContext& ctx_;
  // The model and CLP's state after its last solve; null before the first
  // and after one that ended neither optimal nor infeasible.
  std::unique_ptr<Model> model_;
  int warm_solves_ = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_RELAXATION_H_
