#include "planner/internal/judge_memo.h"

#include <algorithm>
#include <utility>

namespace slackswap {

bool JudgeMemo::Serves(const PlanningContext& ctx) {
  if (graph_ == nullptr) {
    graph_ = &ctx.graph;
    hw_ = &ctx.hw;
    analysis_ = &ctx.analysis;
    budget_bytes_ = ctx.budget_bytes;
    max_recompute_tasks_ = ctx.max_recompute_tasks;
    first_feasible_plan_ = ctx.first_feasible_plan;
    const int64_t elements = static_cast<int64_t>(
        ctx.graph.ops.size() + 2 * ctx.graph.tensors.size() +
        ctx.graph.index.consumers.size());
    max_bytes_ = std::min(max_bytes_, JudgeMemoCapBytes(elements));
    return true;
  }
  return graph_ == &ctx.graph && hw_ == &ctx.hw && analysis_ == &ctx.analysis &&
         budget_bytes_ == ctx.budget_bytes &&
         max_recompute_tasks_ == ctx.max_recompute_tasks &&
         first_feasible_plan_ == ctx.first_feasible_plan;
}

std::string JudgeMemo::Key(Kind kind, const Plan& plan) {
  std::string key(plan.decisions.size() + 1, '\0');
  key[0] = static_cast<char>(kind);
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    key[t + 1] = static_cast<char>(plan.decisions[t].action);
  }
  return key;
}

int64_t JudgeMemo::SizeOf(const Entry& e) {
  auto lists = [](const TaskLists& l) {
    return static_cast<int64_t>((l.offsets.size() + l.items.size()) *
                                sizeof(int32_t));
  };
  const Schedule& s = *e.schedule;
  return static_cast<int64_t>(2 * e.actions.size() +
                              e.prefetch_after_op.size() * sizeof(int32_t) +
                              s.tasks.size() * sizeof(Task) +
                              (s.task_of_op.size() + s.first_need.size()) *
                                  sizeof(int32_t)) +
         lists(s.waits) + lists(s.allocs) + lists(s.frees) +
         lists(s.swap_outs) + lists(s.forward_done) + lists(s.prefetches);
}

std::optional<Judged> JudgeMemo::Recall(const PlanningContext& ctx,
                                        const std::string& key,
                                        const Plan& plan) {
  if (!Serves(ctx)) return std::nullopt;
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  ++hits_;
  // A judgment sets the actions and the swapped tensors' prefetch points; a
  // swap it turned into a recompute loses its point; the rest of the
  // caller's plan passes through.
  Judged judged{plan, e.schedule, e.result};
  judged.plan.budget_bytes = e.budget_bytes;
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    Decision& d = judged.plan.decisions[t];
    const Action was = d.action;
    d.action = static_cast<Action>(e.actions[t]);
    if (d.action == Action::kSwap) {
      d.prefetch_after_op = e.prefetch_after_op[t];
    } else if (was == Action::kSwap) {
      d.prefetch_after_op = kNone;
    }
  }
  return judged;
}

void JudgeMemo::Remember(const PlanningContext& ctx, std::string key,
                         const Judged& judged) {
  if (!Serves(ctx) || bytes_ >= max_bytes_) return;
  Entry e;
  e.actions.resize(judged.plan.decisions.size());
  e.prefetch_after_op.resize(judged.plan.decisions.size());
  for (size_t t = 0; t < judged.plan.decisions.size(); ++t) {
    const Decision& d = judged.plan.decisions[t];
    e.actions[t] = static_cast<char>(d.action);
    e.prefetch_after_op[t] = d.prefetch_after_op;
  }
  e.budget_bytes = judged.plan.budget_bytes;
  e.schedule = judged.schedule;
  e.result = judged.result;
  const int64_t size = SizeOf(e);
  if (bytes_ + size > max_bytes_) {
    bytes_ = max_bytes_;  // full: stop trying
    return;
  }
  // JudgePlan of the plan it returns gives the same judgment again (its
  // swaps all have room for their prefetches, so nothing is converted and
  // the same lowering places the same points): a baseline's plan, judged
  // again by slackswap, is found under its own actions too.
  if (static_cast<Kind>(key[0]) == Kind::kJudgePlan) {
    std::string returned = Key(Kind::kJudgePlan, judged.plan);
    if (returned != key && !entries_.contains(returned)) {
      entries_.emplace(std::move(returned), e);
      bytes_ += size;
    }
  }
  if (entries_.emplace(std::move(key), std::move(e)).second) bytes_ += size;
}

bool JudgeMemo::HoldsPlan(const PlanningContext& ctx, absl::string_view name) {
  if (!Serves(ctx)) return false;
  auto it = plans_.find(name);
  return it != plans_.end() && (!ctx.explain || it->second.explained);
}

std::optional<Plan> JudgeMemo::RecallPlan(const PlanningContext& ctx,
                                          absl::string_view name) {
  if (!HoldsPlan(ctx, name)) return std::nullopt;
  ++plan_hits_;
  Plan plan = plans_.find(name)->second.plan;
  if (!ctx.explain) {
    for (DecisionFacts& f : plan.facts) f.reason.clear();
  }
  return plan;
}

void JudgeMemo::RememberPlan(const PlanningContext& ctx, absl::string_view name,
                             const Plan& plan) {
  // Not counted against the cap: one plan per policy, as many as the
  // round's seeds already hold.
  if (!Serves(ctx)) return;
  Made& made = plans_[name];
  if (made.explained && !ctx.explain) return;  // the explained one serves all
  made = Made{ctx.explain, plan};
}

}  // namespace slackswap
