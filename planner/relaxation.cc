#include "planner/relaxation.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CbcEventHandler.hpp"
#include "CbcModel.hpp"
#include "ClpEventHandler.hpp"
#include "ClpSimplex.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "planner/internal/policies.h"
#include "planner/internal/relaxation_model.h"

namespace slackswap {
namespace {

// The solver's answers are within its tolerances (1e-7): the bound is taken
// this much (relative) below the optimum it reports, so tolerance never
// makes it claim more than is true.
constexpr double kSafetyMargin = 1e-6;
// CLP's perturbation settings: it perturbs costs and bounds against
// degenerate pivots always (50), or when it judges the model needs it (100,
// its default). Either way it takes the perturbation off and cleans up
// before it reports an optimum: the same optimum.
constexpr int kAlwaysPerturb = 50;
constexpr int kPerturbWhenWorthIt = 100;
// The largest MILP (in rows) CBC is given per second of its time limit: one
// of its nodes re-solves the LP from scratch, a second and more at 20,000
// rows (gpt2-xl; measured, planner/relaxation.h).
constexpr double kMilpRowsPerSecond = 2'500;

// The model as CLP and CBC take it: COIN_DBL_MAX for infinity.
struct SolverModel {
  explicit SolverModel(const LpBuilder& lp)
      : matrix(false, lp.entry_rows().data(), lp.entry_cols().data(),
               lp.entry_values().data(),
               static_cast<CoinBigIndex>(lp.entry_values().size())),
        col_lo(Finite(lp.col_lo())),
        col_hi(Finite(lp.col_hi())),
        row_lo(Finite(lp.row_lo())),
        row_hi(Finite(lp.row_hi())) {}

  static std::vector<double> Finite(const std::vector<double>& v) {
    std::vector<double> out = v;
    for (double& x : out) {
      if (x == kInf) x = COIN_DBL_MAX;
      if (x == -kInf) x = -COIN_DBL_MAX;
    }
    return out;
  }

  CoinPackedMatrix matrix;
  std::vector<double> col_lo, col_hi, row_lo, row_hi;
};

// Asks the stop function from inside the solvers' loops.
class ClpStop : public ClpEventHandler {
 public:
  explicit ClpStop(const StopFn* stop) : stop_(stop) {}
  ClpEventHandler* clone() const override { return new ClpStop(*this); }
  int event(Event which) override {
    if (which == endOfIteration && StopRequested(*stop_)) return 0;
    return -1;
  }

 private:
  const StopFn* stop_;
};

class CbcStop : public CbcEventHandler {
 public:
  explicit CbcStop(const StopFn* stop) : stop_(stop) {}
  CbcEventHandler* clone() const override { return new CbcStop(*this); }
  CbcAction event(CbcEvent) override {
    return StopRequested(*stop_) ? stop : noAction;
  }

 private:
  const StopFn* stop_;
};

// The bound from the model's optimum (or best bound), in model units.
void SetBound(const PlanningContext& ctx, double extra_units, Relaxation& out) {
  const double ideal = static_cast<double>(ctx.analysis.durations.total_ns);
  const double extra =
      std::max(0.0, extra_units) * kNsPerUnit * (1 - kSafetyMargin);
  out.step_ns_lower = static_cast<int64_t>(std::floor(ideal + extra));
  out.retained_upper =
      out.step_ns_lower > 0
          ? std::min(1.0, ideal / static_cast<double>(out.step_ns_lower))
          : 1.0;
}

void SetDecisions(const Layout& layout, const double* solution,
                  Relaxation& out) {
  out.swap.resize(layout.swap.size());
  out.recompute.resize(layout.recompute.size());
  for (size_t i = 0; i < layout.swap.size(); ++i) {
    out.swap[i] = solution[layout.swap[i]];
    out.recompute[i] = solution[layout.recompute[i]];
  }
}

// The model's integer decisions for `plan`, as column bounds fixing them:
// the producers of recomputed tensors re-run (and down their chains), and a
// recipe used only where its tensor's producer does not re-run anyway (one
// re-run rebuilds all its outputs), which is at most what the simulator's
// lowering runs.
void FixDecisions(const PlanningContext& ctx, const Layout& layout,
                  const Plan& plan, std::vector<double>& lo,
                  std::vector<double>& hi) {
  const StepAnalysis& a = ctx.analysis;
  std::vector<double> value(lo.size(), -1);
  for (int col : layout.rerun) {
    if (col >= 0) value[col] = 0;
  }
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const Candidate& c = a.candidates[i];
    const Action act = plan.decisions[c.tensor].action;
    value[layout.swap[i]] = act == Action::kSwap;
    value[layout.recompute[i]] = act == Action::kRecompute;
    if (layout.recipe[i] < 0 && act == Action::kRecompute) {
      value[layout.rerun[c.producer]] = 1;
    }
  }
  // Chains were recorded from the last op down: each re-run is known before
  // the re-runs it causes.
  for (const auto& [p, q] : layout.chain) {
    if (value[layout.rerun[p]] > 0) value[layout.rerun[q]] = 1;
  }
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    if (layout.recipe[i] < 0) continue;
    const bool recomputed = value[layout.recompute[i]] > 0;
    const bool rerun = value[layout.rerun[a.candidates[i].producer]] > 0;
    value[layout.recipe[i]] = recomputed && !rerun;
  }
  for (size_t col = 0; col < value.size(); ++col) {
    if (value[col] >= 0) lo[col] = hi[col] = value[col];
  }
}

// `model` with `m` loaded, quiet, asking `stop` from its loops.
void LoadLp(const LpBuilder& lp, const SolverModel& m, const StopFn* stop,
            ClpSimplex& model) {
  model.setLogLevel(0);
  model.loadProblem(m.matrix, m.col_lo.data(), m.col_hi.data(),
                    lp.cost().data(), m.row_lo.data(), m.row_hi.data());
  const ClpStop handler(stop);
  model.passInEventHandler(&handler);  // a copy
}

// CLP's limit for the next solve (it keeps the last one's otherwise).
void SetTimeLimit(const RelaxationOptions& options, ClpSimplex& model) {
  model.setMaximumSeconds(options.time_limit_s > 0 ? options.time_limit_s : -1);
}

// Solves `model` (loaded from `m`) from options.start's decisions, or from
// scratch.
void SolveFromStart(const PlanningContext& ctx,
                    const RelaxationOptions& options, const SolverModel& m,
                    const Layout& layout, ClpSimplex& model) {
  SetTimeLimit(options, model);
  // Presolve first: the model's running sums are chains of equalities it
  // folds away (a third of the time of a plain dual simplex).
  bool solved = false;
  if (options.start != nullptr) {
    // The start plan's decisions fixed, then freed: primal simplex from
    // that point (its values, ifValuesPass) goes the short way to the
    // optimum, the start being close to it when the plan is good.
    std::vector<double> fixed_lo = m.col_lo, fixed_hi = m.col_hi;
    FixDecisions(ctx, layout, *options.start, fixed_lo, fixed_hi);
    model.chgColumnLower(fixed_lo.data());
    model.chgColumnUpper(fixed_hi.data());
    // With the decisions fixed most flows sit at zero, tied: a degenerate
    // LP, where perturbing always halves the bound's time on llama-7b and
    // takes a tenth off bert-large's, but adds 5% to gpt2-xl's and 18% to
    // a 10,000-op step's (docs/PERFORMANCE.md, "The bound and optimal").
    model.setPerturbation(kAlwaysPerturb);
    model.initialSolve();
    model.setPerturbation(kPerturbWhenWorthIt);
    model.chgColumnLower(m.col_lo.data());
    model.chgColumnUpper(m.col_hi.data());
    if (model.status() == 0) {
      model.primal(/*ifValuesPass=*/1);
      solved = true;
    } else {
      // Stopped (the switch below says so), or the model rejects the plan:
      // then from scratch.
      solved = model.status() == 3 || model.status() == 5;
    }
  }
  if (!solved) model.initialSolve();
}

// The answer CLP's status gives.
absl::StatusOr<Relaxation> LpAnswer(const PlanningContext& ctx,
                                    const RelaxationOptions& options,
                                    const Layout& layout,
                                    const ClpSimplex& model) {
  Relaxation out;
  switch (model.status()) {
    case 0:
      SetBound(ctx, model.objectiveValue(), out);
      SetDecisions(layout, model.getColSolution(), out);
      return out;
    case 1:  // primal infeasible: no plan meets the budget
      out.feasible = false;
      return out;
    case 3:
      return absl::DeadlineExceededError(absl::StrCat(
          "the bound's LP did not finish within ", options.time_limit_s, " s"));
    case 5:
      return absl::CancelledError("the bound's LP was stopped");
    default:
      return absl::InternalError(absl::StrCat(
          "the bound's LP solver failed (CLP status ", model.status(), ")"));
  }
}

absl::StatusOr<Relaxation> SolveLp(const PlanningContext& ctx,
                                   const RelaxationOptions& options,
                                   const LpBuilder& lp, const Layout& layout) {
  ClpSimplex model;
  const SolverModel m(lp);
  LoadLp(lp, m, &ctx.should_stop, model);
  SolveFromStart(ctx, options, m, layout, model);
  return LpAnswer(ctx, options, layout, model);
}

// A full solution of the model for the start plan: its decisions fixed,
// the rest (gaps, link flows) by an LP. Empty when the LP finds none.
std::vector<double> StartSolution(const PlanningContext& ctx,
                                  const LpBuilder& lp, const Layout& layout,
                                  const Plan& start, double* objective) {
  SolverModel m(lp);
  FixDecisions(ctx, layout, start, m.col_lo, m.col_hi);
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(m.matrix, m.col_lo.data(), m.col_hi.data(),
                    lp.cost().data(), m.row_lo.data(), m.row_hi.data());
  model.initialSolve();
  if (model.status() != 0) return {};
  *objective = model.objectiveValue();
  const double* x = model.primalColumnSolution();
  return std::vector<double>(x, x + lp.columns());
}

// CBC on the model from the start plan until the deadline (or the node
// limit); `out`, the LP's answer, takes the better of the two bounds and
// CBC's best plan.
absl::Status SolveWithCbc(const PlanningContext& ctx,
                          const RelaxationOptions& options, const LpBuilder& lp,
                          const Layout& layout, absl::Time deadline,
                          Relaxation& out) {
  const StopFn ending = [&] {
    return StopRequested(ctx.should_stop) || absl::Now() >= deadline;
  };
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.getModelPtr()->setLogLevel(0);
  const SolverModel m(lp);
  solver.loadProblem(m.matrix, m.col_lo.data(), m.col_hi.data(),
                     lp.cost().data(), m.row_lo.data(), m.row_hi.data());
  for (int col : lp.integer()) solver.setInteger(col);
  // The LPs CBC solves hear the caller (an interrupted LP would be
  // misread; the answer is then dropped anyway); the deadline is CBC's.
  const ClpStop inner(&ctx.should_stop);
  solver.getModelPtr()->passInEventHandler(&inner);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  if (options.start != nullptr) {
    double objective = 0;
    const std::vector<double> start =
        StartSolution(ctx, lp, layout, *options.start, &objective);
    if (!start.empty()) {
      model.setBestSolution(start.data(), lp.columns(), objective,
                            /*check=*/true);
    }
  }
  if (options.max_nodes > 0) {
    model.setMaximumNodes(static_cast<int>(
        std::min<int64_t>(options.max_nodes, std::numeric_limits<int>::max())));
  }
  model.setUseElapsedTime(true);
  if (deadline != absl::InfiniteFuture()) {
    model.setMaximumSeconds(absl::ToDoubleSeconds(deadline - absl::Now()));
  }
  const CbcStop stop(&ending);
  model.passInEventHandler(&stop);
  model.branchAndBound();
  if (StopRequested(ctx.should_stop)) {
    return absl::CancelledError("the optimal policy's MILP was stopped");
  }
  if (model.isProvenInfeasible()) {
    out.feasible = false;
    return absl::OkStatus();
  }
  out.proven_optimal = model.isProvenOptimal();
  Relaxation cbc;
  SetBound(ctx, model.getBestPossibleObjValue(), cbc);
  out.step_ns_lower = std::max(out.step_ns_lower, cbc.step_ns_lower);
  out.retained_upper = std::min(out.retained_upper, cbc.retained_upper);
  if (model.bestSolution() != nullptr) {
    SetDecisions(layout, model.bestSolution(), out);
    for (double& x : out.swap) x = std::round(x);
    for (double& x : out.recompute) x = std::round(x);
  }
  return absl::OkStatus();
}

// The MILP within its time limit, whole: the LP first (from the start
// plan, quick), whose bound holds whatever CBC gets done; then CBC from the
// start plan until the deadline, if the model is small enough for it.
absl::StatusOr<Relaxation> SolveMilp(const PlanningContext& ctx,
                                     const RelaxationOptions& options,
                                     const LpBuilder& lp,
                                     const Layout& layout) {
  const absl::Time deadline =
      options.time_limit_s > 0
          ? absl::Now() + absl::Seconds(options.time_limit_s)
          : absl::InfiniteFuture();
  absl::StatusOr<Relaxation> relaxed = SolveLp(ctx, options, lp, layout);
  if (absl::IsDeadlineExceeded(relaxed.status())) {
    Relaxation nothing;  // no plan, no bound beyond the ideal step
    SetBound(ctx, 0, nothing);
    return nothing;
  }
  if (!relaxed.ok() || !relaxed->feasible) return relaxed;
  Relaxation out = *relaxed;  // its bound; its fractions are no plan
  out.swap.clear();
  out.recompute.clear();
  const absl::Duration left = deadline - absl::Now();
  // CBC checks its time limit between nodes, but one node of a large model
  // (re-solving its LP from scratch to check an incumbent) can take seconds:
  // only models it can work through in the time left get it.
  if (left <= absl::ZeroDuration() ||
      static_cast<double>(lp.rows()) >
          kMilpRowsPerSecond * absl::ToDoubleSeconds(left)) {
    out.milp_skipped = true;
    return out;
  }
  SLACKSWAP_RETURN_IF_ERROR(
      SolveWithCbc(ctx, options, lp, layout, deadline, out));
  return out;
}

// The answers that need no model: a graph past options.max_ops, a budget
// keeping everything meets, a stop; nothing when the model is needed.
std::optional<absl::StatusOr<Relaxation>> Unmodelled(
    const PlanningContext& ctx, const RelaxationOptions& options) {
  const int64_t ops = static_cast<int64_t>(ctx.graph.ops.size());
  if (ops > options.max_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the graph has ", ops,
                     " ops; the bound's model is built "
                     "for at most ",
                     options.max_ops));
  }
  if (ctx.analysis.unconstrained_peak_bytes <= ctx.budget_bytes) {
    // Keeping everything fits: nothing to move, nothing lost.
    Relaxation keep_all;
    SetBound(ctx, 0, keep_all);
    keep_all.swap.assign(ctx.analysis.candidates.size(), 0);
    keep_all.recompute.assign(ctx.analysis.candidates.size(), 0);
    keep_all.proven_optimal = true;
    return keep_all;
  }
  if (StopRequested(ctx.should_stop)) {
    return absl::CancelledError("the bound was stopped");
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<int64_t> ModelStepNs(const PlanningContext& ctx,
                                    const Plan& plan) {
  try {
    LpBuilder lp;
    SLACKSWAP_ASSIGN_OR_RETURN(
        const Layout layout,
        ModelBuilder(ctx, /*integer=*/false, RelaxationOptions{}.max_steps, lp)
            .Build());
    double objective = 0;
    if (StartSolution(ctx, lp, layout, plan, &objective).empty()) {
      return absl::FailedPreconditionError(
          "the model finds the plan infeasible");
    }
    Relaxation out;
    SetBound(ctx, objective, out);
    return out.step_ns_lower;
  } catch (...) {
    return absl::InternalError("the planning model's solver failed");
  }
}

absl::StatusOr<Relaxation> SolveRelaxation(const PlanningContext& ctx,
                                           const RelaxationOptions& options) {
  if (std::optional<absl::StatusOr<Relaxation>> out =
          Unmodelled(ctx, options)) {
    return *std::move(out);
  }
  // COIN-OR reports some failures by throwing (CoinError); nothing escapes.
  try {
    LpBuilder lp;
    SLACKSWAP_ASSIGN_OR_RETURN(
        const Layout layout,
        ModelBuilder(ctx, options.integer, options.max_steps, lp).Build());
    return options.integer ? SolveMilp(ctx, options, lp, layout)
                           : SolveLp(ctx, options, lp, layout);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("the planning model's solver failed: ", e.what()));
  } catch (...) {
    return absl::InternalError("the planning model's solver failed");
  }
}

// The model of the last budget built for, loaded in CLP, which holds the
// last optimal basis.
struct BoundSweep::Model {
  explicit Model(int64_t budget_bytes) : budget_bytes(budget_bytes) {}

  const int64_t budget_bytes;  // built for
  int32_t max_steps = 0;       // built with
  LpBuilder lp;
  Layout layout;
  // The rows' upper bounds as CLP has them now (its spelling).
  std::vector<double> row_hi;
  ClpSimplex clp;
};

BoundSweep::BoundSweep(const PlanningContext& ctx) : ctx_(ctx) {}

BoundSweep::~BoundSweep() = default;

absl::StatusOr<Relaxation> BoundSweep::Solve(int64_t budget_bytes,
                                             const RelaxationOptions& options) {
  if (options.integer) {
    return absl::InvalidArgumentError("a bound sweep solves the LP only");
  }
  PlanningContext at = ctx_;
  at.budget_bytes = budget_bytes;
  if (std::optional<absl::StatusOr<Relaxation>> out = Unmodelled(at, options)) {
    return *std::move(out);
  }
  try {
    if (model_ != nullptr && budget_bytes >= model_->budget_bytes &&
        options.max_steps == model_->max_steps) {
      // The last optimum stays dual feasible when only the memory rows'
      // bounds rise; a row freed whose dual was not zero makes the dual
      // simplex mend that first (CLP does, within the same call).
      std::vector<double> row_hi = model_->lp.row_hi();
      BudgetRowBounds(model_->layout.memory, budget_bytes, row_hi);
      const std::vector<double> hi = SolverModel::Finite(row_hi);
      for (const MemoryBlock& block : model_->layout.memory) {
        for (int row = block.first_row; row <= block.memory_row; ++row) {
          if (hi[row] != model_->row_hi[row]) {
            model_->clp.setRowUpper(row, hi[row]);
            model_->row_hi[row] = hi[row];
          }
        }
      }
      SetTimeLimit(options, model_->clp);
      // Degenerate too (flows tied at zero): perturbing always takes about
      // a tenth off a sweep's time on every reference and torchvision step.
      model_->clp.setPerturbation(kAlwaysPerturb);
      model_->clp.dual();
      ++warm_solves_;
      const int status = model_->clp.status();
      if (status == 0 || status == 3 || status == 5) {
        absl::StatusOr<Relaxation> out =
            LpAnswer(at, options, model_->layout, model_->clp);
        if (status != 0) model_.reset();
        return out;
      }
      // Anything else (no plan meets the budget, numerical trouble) is
      // judged by a solve of a model built for this budget.
      model_.reset();
    }
    auto model = std::make_unique<Model>(budget_bytes);
    model->max_steps = options.max_steps;
    SLACKSWAP_ASSIGN_OR_RETURN(
        model->layout,
        ModelBuilder(at, /*integer=*/false, options.max_steps, model->lp)
            .Build());
    const SolverModel m(model->lp);
    model->row_hi = m.row_hi;
    LoadLp(model->lp, m, &ctx_.should_stop, model->clp);
    SolveFromStart(at, options, m, model->layout, model->clp);
    absl::StatusOr<Relaxation> out =
        LpAnswer(at, options, model->layout, model->clp);
    // Kept when optimal or infeasible: the next budget's dual simplex
    // starts from the basis CLP ended with (an optimum it reports is one
    // wherever it started).
    if (model->clp.status() == 0 || model->clp.status() == 1) {
      model_ = std::move(model);
    }
    return out;
  } catch (const std::exception& e) {
    model_.reset();
    return absl::InternalError(
        absl::StrCat("the planning model's solver failed: ", e.what()));
  } catch (...) {
    model_.reset();
    return absl::InternalError("the planning model's solver failed");
  }
}

}  // namespace slackswap
