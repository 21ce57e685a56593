#include "planner/policy.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "planner/internal/judge_memo.h"
#include "planner/internal/plan_search.h"
#include "planner/internal/policies.h"
#include "planner/internal/slack.h"

namespace slackswap {

bool CanSwap(const Candidate& c) {
  return c.first_bwd_use > std::max(c.producer, c.last_fwd_use) + 1;
}

double RecomputeNsPerByte(const Candidate& c) {
  return static_cast<double>(c.recompute_ns) /
         static_cast<double>(std::max<int64_t>(1, c.bytes));
}

bool CheaperToRebuildPerByte(const Candidate& x, const Candidate& y) {
  return RecomputeNsPerByte(x) < RecomputeNsPerByte(y);
}

absl::StatusOr<std::vector<int32_t>> AdmitToSlack(
    const PlanningContext& ctx, const std::vector<const Candidate*>& order,
    int64_t swap_out_deadline_ns, int64_t enough_bytes) {
  const StepAnalysis& a = ctx.analysis;
  std::vector<int32_t> admitted;
  SlackFiller filler(a, swap_out_deadline_ns);
  int64_t host_bytes = 0;
  StopPoller poller(ctx.should_stop, 1024);
  for (const Candidate* c : order) {
    if (poller.Stop()) return absl::CancelledError("filling the slack stopped");
    if (host_bytes >= enough_bytes) break;
    if (host_bytes + c->bytes > ctx.hw.pinned_host_memory_bytes) continue;
    if (filler.TryAdmit(a.candidate_of[c->tensor])) {
      admitted.push_back(c->tensor);
      host_bytes += c->bytes;
    }
  }
  return admitted;
}

namespace {

template <typename Kept>
std::vector<std::pair<double, int32_t>> KeptByRebuildNsPerByteIf(
    const Graph& g, const StepAnalysis& a, const Kept& kept, PerByte per) {
  // Each key computed once: every level of slackswap's search sorts them
  // again.
  std::vector<std::pair<double, int32_t>> order;  // (ns per byte, tensor)
  const std::vector<Candidate>& cs = a.candidates;
  // A producer's outputs are produced together: its candidates are a run.
  for (size_t begin = 0; begin < cs.size();) {
    size_t end = begin + 1;
    while (end < cs.size() && cs[end].producer == cs[begin].producer) ++end;
    int64_t restored = 0;
    for (size_t i = begin; i < end; ++i) {
      if (kept(cs[i]) && !g.index.has_recipe[cs[i].tensor]) {
        restored += cs[i].bytes;
      }
    }
    for (size_t i = begin; i < end; ++i) {
      const Candidate& c = cs[i];
      if (!kept(c)) continue;
      const int64_t bytes =
          per == PerByte::kRestoredByTheReRun && !g.index.has_recipe[c.tensor]
              ? restored
              : c.bytes;
      order.push_back({static_cast<double>(c.recompute_ns) /
                           static_cast<double>(std::max<int64_t>(1, bytes)),
                       c.tensor});
    }
    begin = end;
  }
  std::stable_sort(
      order.begin(), order.end(),
      [](const std::pair<double, int32_t>& x,
         const std::pair<double, int32_t>& y) { return x.first < y.first; });
  return order;
}

}  // namespace

std::vector<std::pair<double, int32_t>> KeptByRebuildNsPerByte(
    const Graph& g, const StepAnalysis& a, const Plan& base, PerByte per) {
  return KeptByRebuildNsPerByteIf(
      g, a,
      [&](const Candidate& c) {
        return base.decisions[c.tensor].action == Action::kKeep;
      },
      per);
}

std::vector<std::pair<double, int32_t>> EveryCandidateByRebuildNsPerByte(
    const Graph& g, const StepAnalysis& a, PerByte per) {
  return KeptByRebuildNsPerByteIf(
      g, a, [](const Candidate&) { return true; }, per);
}

bool KeepsSiblings(const Graph& g, const StepAnalysis& a, const Plan& base) {
  int32_t producer = kNone;
  int kept_outputs = 0;
  for (const Candidate& c : a.candidates) {
    if (base.decisions[c.tensor].action != Action::kKeep ||
        g.index.has_recipe[c.tensor]) {
      continue;
    }
    kept_outputs = c.producer == producer ? kept_outputs + 1 : 1;
    producer = c.producer;
    if (kept_outputs > 1) return true;
  }
  return false;
}

std::vector<Move> CheapestRecomputeMoves(const Graph& g, const StepAnalysis& a,
                                         const Plan& base, PerByte per) {
  const std::vector<std::pair<double, int32_t>> kept =
      KeptByRebuildNsPerByte(g, a, base, per);
  std::vector<Move> moves;
  moves.reserve(kept.size());
  for (const auto& [ns_per_byte, tensor] : kept) {
    moves.push_back({tensor, Action::kRecompute});
  }
  return moves;
}

absl::StatusOr<Judged> RecomputeCheapestThatFit(const PlanningContext& ctx,
                                                const Plan& base, PerByte per) {
  std::string key;
  if (ctx.judge_memo != nullptr) {
    key =
        JudgeMemo::Key(per == PerByte::kOfTheTensor
                           ? JudgeMemo::Kind::kRecomputeCheapestThatFit
                           : JudgeMemo::Kind::kRecomputeCheapestRestoredThatFit,
                       base);
    std::optional<Judged> known = ctx.judge_memo->Recall(ctx, key, base);
    if (known.has_value()) return *std::move(known);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(
      Judged fit,
      FewestMovesThatFit(
          ctx, base, CheapestRecomputeMoves(ctx.graph, ctx.analysis, base, per),
          Tracing::kOn));
  // Asked only whether it fits: keeping what the budget does not need
  // would only make a plan that fits faster.
  if (ctx.first_feasible_plan && fit.result.feasible) {
    fit.trace.reset();
    return fit;
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Judged kept,
                             KeepNeedlessRecomputes(ctx, std::move(fit)));
  if (ctx.judge_memo != nullptr) {
    ctx.judge_memo->Remember(ctx, std::move(key), kept);
  }
  return kept;
}

absl::StatusOr<Judged> SwapLargestThatFit(const PlanningContext& ctx,
                                          const Plan& base) {
  int64_t host_bytes = 0;
  for (const Candidate& c : ctx.analysis.candidates) {
    if (base.decisions[c.tensor].action == Action::kSwap) {
      host_bytes += c.bytes;
    }
  }
  std::vector<Move> moves;
  for (const Candidate* c : OrderCandidates(
           ctx.analysis,
           [&](const Candidate& c) {
             return CanSwap(c) &&
                    base.decisions[c.tensor].action == Action::kKeep;
           },
           [](const Candidate& c) { return c.bytes; }, std::greater<>())) {
    if (host_bytes + c->bytes > ctx.hw.pinned_host_memory_bytes) continue;
    host_bytes += c->bytes;
    moves.push_back({c->tensor, Action::kSwap});
  }
  return FewestMovesThatFit(ctx, base, moves);
}

const std::vector<PolicyInfo>& PolicyRegistry() {
  static const std::vector<PolicyInfo>* const registry =
      new std::vector<PolicyInfo>{
          {"ideal", "keeps everything with no memory limit: the 100% reference",
           /*unbudgeted_reference=*/true, &NewIdealPolicy, 0.25},
          {"recompute_only",
           "checkpointing: the better of greedy (cheapest rebuild per byte) "
           "and layer-wise",
           false, &NewRecomputeOnlyPolicy, 0.5},
          {"swap_only", "vDNN-style offload: largest first, as few as fit",
           false, &NewSwapOnlyPolicy, 0.35},
          {"capuchin",
           "Capuchin: swaps by longest free time, recomputes by memory saved "
           "per second",
           false, &NewCapuchinPolicy, 0.4},
          {"optimal",
           "the planning model's integer optimum (COIN-OR CBC, time-limited), "
           "judged and polished by simulation",
           false, &NewOptimalPolicy, 4.0, /*in_default_set=*/false,
           /*may_be_unavailable=*/true, /*uses_solver_time=*/true,
           /*same_plan_every_time=*/false},
          {"slackswap",
           "fills the hidden-transfer slack with the swaps most expensive to "
           "rebuild, recomputes the rest, then the best of every heuristic's "
           "plan, polished by simulation",
           false, &NewSlackSwapPolicy, 1.0, /*in_default_set=*/true,
           /*may_be_unavailable=*/false, /*uses_solver_time=*/false,
           /*same_plan_every_time=*/false},
      };
  return *registry;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const PolicyInfo& p : PolicyRegistry()) names.push_back(p.name);
  return names;
}

std::vector<std::string> DefaultPolicyNames() {
  std::vector<std::string> names;
  for (const PolicyInfo& p : PolicyRegistry()) {
    if (p.in_default_set) names.push_back(p.name);
  }
  return names;
}

absl::StatusOr<const PolicyInfo*> FindPolicy(absl::string_view name) {
  for (const PolicyInfo& p : PolicyRegistry()) {
    if (p.name == name) return &p;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown policy ", QuoteInput(name), " (",
                   absl::StrJoin(PolicyNames(), ", "), ")"));
}

std::shared_ptr<JudgeMemo> NewJudgeMemo() {
  return std::make_shared<JudgeMemo>();
}

SimOptions PlanningContext::Simulation(SimOptions report) const {
  report.budget_bytes = budget_bytes;
  report.should_stop = should_stop;
  report.max_recompute_tasks = max_recompute_tasks;
  return report;
}

namespace {

// Whether PlanWithPolicy shares policy `info`'s plan through ctx's memo:
// only a memo that outlives the call can hold a baseline slackswap runs
// again after the round ran it, and a plan made for a verdict is not the
// policy's plan for this context.
bool SharesPlans(const PolicyInfo& info, const PlanningContext& ctx) {
  return info.same_plan_every_time && ctx.judge_memo != nullptr &&
         !ctx.AsksForAVerdict();
}

// PlanWithPolicy for a policy found already, its plan made by `make`.
absl::StatusOr<Plan> PlanWithPolicyInfo(
    const PolicyInfo& info, const PlanningContext& ctx,
    absl::FunctionRef<absl::StatusOr<Plan>(const PlanningContext&)> make) {
  if (ctx.budget_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget_bytes must be > 0, got ", ctx.budget_bytes));
  }
  std::optional<JudgeMemo> own_memo;
  std::optional<PlanningContext> with_memo;
  if (ctx.judge_memo == nullptr) {
    with_memo.emplace(ctx);
    with_memo->judge_memo = &own_memo.emplace();
  }
  const PlanningContext& planning = with_memo ? *with_memo : ctx;
  const bool shares_plans = SharesPlans(info, ctx);
  if (shares_plans) {
    std::optional<Plan> known =
        planning.judge_memo->RecallPlan(planning, info.name);
    if (known.has_value()) return *std::move(known);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Plan plan, make(planning));
  // The policies choose among saved activations as if each could be
  // rebuilt; where a collective's output stands in the way (FSDP), the
  // plan keeps the tensor instead (planner/analysis.h).
  KeepUnrecomputable(planning.analysis, plan);
  plan.policy = info.name;
  plan.budget_bytes = info.unbudgeted_reference ? 0 : ctx.budget_bytes;
  if (shares_plans) {
    planning.judge_memo->RememberPlan(planning, info.name, plan);
  }
  return plan;
}

}  // namespace

bool PolicyPlanIsRemembered(absl::string_view name,
                            const PlanningContext& ctx) {
  const absl::StatusOr<const PolicyInfo*> info = FindPolicy(name);
  return info.ok() && SharesPlans(**info, ctx) &&
         ctx.judge_memo->HoldsPlan(ctx, (*info)->name);
}

absl::StatusOr<Plan> PlanWithPolicy(absl::string_view name,
                                    const PlanningContext& ctx) {
  SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* info, FindPolicy(name));
  return PlanWithPolicyInfo(*info, ctx, [info](const PlanningContext& c) {
    return info->create()->MakePlan(c);
  });
}

absl::StatusOr<Plan> PlanWithPolicyMadeBy(
    absl::string_view name, const PlanningContext& ctx,
    absl::FunctionRef<absl::StatusOr<Plan>(const PlanningContext&)> make) {
  SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* info, FindPolicy(name));
  return PlanWithPolicyInfo(*info, ctx, make);
}

absl::StatusOr<SimResult> RunSchedule(const PlanningContext& ctx,
                                      const Schedule& schedule,
                                      const SimOptions& opts,
                                      NodeSimResult* node_run) {
  if (ctx.node == nullptr) {
    return SimulateSchedule(ctx.graph, ctx.hw, ctx.analysis.durations, schedule,
                            opts);
  }
  std::vector<RankStep> ranks;
  ranks.reserve(ctx.node->graphs.size());
  for (size_t r = 0; r < ctx.node->graphs.size(); ++r) {
    ranks.push_back({.gpu = static_cast<int32_t>(r),
                     .graph = ctx.node->graphs[r],
                     .durations = &ctx.analysis.durations,
                     .schedule = &schedule});
  }
  SLACKSWAP_ASSIGN_OR_RETURN(NodeSimResult run,
                             SimulateNode(*ctx.node->node, ranks, opts));
  if (run.ranks.empty()) {
    return absl::InvalidArgumentError("a node plan needs at least one rank");
  }
  SimResult reported = ReportedResult(run);
  if (node_run != nullptr) *node_run = std::move(run);
  return reported;
}

absl::StatusOr<SimResult> SimulatePlan(absl::string_view name,
                                       const PlanningContext& ctx,
                                       const Plan& plan,
                                       const SimOptions& report,
                                       NodeSimResult* node_run) {
  SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* info, FindPolicy(name));
  SimOptions opts = ctx.Simulation(report);
  if (info->unbudgeted_reference) opts.budget_bytes = 0;
  // The durations are the analysis's: no need to run the cost model again.
  SLACKSWAP_ASSIGN_OR_RETURN(
      Schedule schedule,
      LowerPlan(ctx.graph, plan, ctx.analysis.durations, ctx.Lowering()));
  return RunSchedule(ctx, schedule, opts, node_run);
}

absl::StatusOr<PlanOutcome> PlanAndSimulate(absl::string_view name,
                                            const PlanningContext& ctx,
                                            const SimOptions& report) {
  SLACKSWAP_ASSIGN_OR_RETURN(Plan plan, PlanWithPolicy(name, ctx));
  std::optional<NodeSimResult> node;
  SLACKSWAP_ASSIGN_OR_RETURN(
      SimResult result,
      SimulatePlan(name, ctx, plan, report,
                   ctx.node != nullptr ? &node.emplace() : nullptr));
  return PlanOutcome{std::move(plan), std::move(result), std::move(node)};
}

absl::StatusOr<int64_t> MinimumFeasibleBudget(absl::string_view policy,
                                              const PlanningContext& ctx) {
  const int64_t peak = ctx.analysis.unconstrained_peak_bytes;
  SimOptions quiet;
  quiet.record_timeline = false;
  auto fits = [&](int64_t budget) -> absl::StatusOr<bool> {
    PlanningContext at = ctx;
    at.budget_bytes = budget;
    at.first_feasible_plan = ctx.prune_with_bounds;
    SLACKSWAP_ASSIGN_OR_RETURN(PlanOutcome o,
                               PlanAndSimulate(policy, at, quiet));
    return o.result.feasible;
  };
  int64_t lo = 0;                           // does not fit
  int64_t hi = std::max<int64_t>(1, peak);  // keeping everything fits
  while (hi - lo > std::max<int64_t>(1, peak / 1000)) {
    const int64_t mid = lo + (hi - lo) / 2;
    SLACKSWAP_ASSIGN_OR_RETURN(bool ok, fits(mid));
    (ok ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace slackswap
