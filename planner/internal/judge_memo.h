// What a policy's search has already judged, so that a plan judged twice in
// one request (a level of the slack that picks the same swaps as another,
// a baseline slackswap runs again, a seed that is a baseline's plan) is
// lowered and simulated once. One memo serves one planning context (graph,
// hardware, analysis, budget, limits, first_feasible_plan); a context that
// differs from the one it was first used with bypasses it.
//
//   JudgeMemo memo;
//   PlanningContext searching = ctx;
//   searching.judge_memo = &memo;
//   JudgePlan(searching, plan);  // lowered and simulated
//   JudgePlan(searching, plan);  // the same Judged, from the memo
//
// Inside a judgment:
//   const std::string key = JudgeMemo::Key(JudgeMemo::Kind::kJudgePlan, plan);
//   if (auto known = memo->Recall(ctx, key, plan)) return *known;
//   ... judge ...
//   memo->Remember(ctx, key, judged);
//
// What the memo returns is what the judgment would return, bit for bit:
// the judgments are deterministic functions of the plan's actions (their
// prefetch points are chosen afresh; every other field of the plan passes
// through them unchanged), and Recall rebuilds the answer from the caller's
// own plan. Bounded in bytes: once full it stops remembering.
#ifndef SLACKSWAP_PLANNER_INTERNAL_JUDGE_MEMO_H_
#define SLACKSWAP_PLANNER_INTERNAL_JUDGE_MEMO_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "planner/internal/plan_search.h"
#include "planner/policy.h"

namespace slackswap {

class JudgeMemo {
 public:
  // The judgments remembered, each a function of a plan's actions alone.
  enum class Kind : uint8_t {
    kJudgePlan,                 // JudgePlan
    kRecomputeCheapestThatFit,  // RecomputeCheapestThatFit, per tensor byte
    // RecomputeCheapestThatFit, per byte the re-run restores
    kRecomputeCheapestRestoredThatFit,
  };

  // At most this many bytes per element of the graph served (op, tensor,
  // input or output reference), and kMaxBytes in all: what a request's
  // planning may hold besides its graph, analysis and search
  // (core/admission.cc counts it). One judgment takes about 22 bytes per
  // element on the reference workloads, so a dozen are remembered, the
  // earliest first: the baselines' plans, which slackswap judges again.
  static constexpr int64_t kMaxBytesPerGraphElement =
      kJudgeMemoBytesPerGraphElement;
  static constexpr int64_t kMaxBytes = kJudgeMemoMaxBytes;

  // `max_bytes` caps it further (0: remembers nothing).
  explicit JudgeMemo(int64_t max_bytes = std::numeric_limits<int64_t>::max())
      : max_bytes_(max_bytes) {}
  JudgeMemo(const JudgeMemo&) = delete;
  JudgeMemo& operator=(const JudgeMemo&) = delete;

  // Names a judgment of `kind` of a plan with `plan`'s actions.
  static std::string Key(Kind kind, const Plan& plan);

  // What the judgment `key` of `plan` returned in `ctx`, rebuilt on `plan`;
  // nullopt when not remembered (or ctx is not the memo's).
  std::optional<Judged> Recall(const PlanningContext& ctx,
                               const std::string& key, const Plan& plan);

  // Remembers that the judgment `key` in `ctx` returned `judged`.
  void Remember(const PlanningContext& ctx, std::string key,
                const Judged& judged);

  // The plan policy `name` made in `ctx`, or nullopt. A plan made with
  // reasons serves a context without, reasons cleared (the reasons are all
  // that explain changes).
  // REQUIRES: the policy's PolicyInfo::same_plan_every_time.
  std::optional<Plan> RecallPlan(const PlanningContext& ctx,
                                 absl::string_view name);
  // Whether RecallPlan would return a plan (not counted as a hit).
  bool HoldsPlan(const PlanningContext& ctx, absl::string_view name);
  void RememberPlan(const PlanningContext& ctx, absl::string_view name,
                    const Plan& plan);

  // Judgments and plans served from the memo.
  int64_t hits() const { return hits_; }
  int64_t plan_hits() const { return plan_hits_; }
  int64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string actions;  // what the judgment made of them, one per tensor
    std::vector<int32_t> prefetch_after_op;  // per tensor, for the swapped
    int64_t budget_bytes = 0;
    std::shared_ptr<const Schedule> schedule;
    SimResult result;
  };

  // Whether ctx is the context this memo serves (binding it on first use).
  bool Serves(const PlanningContext& ctx);
  static int64_t SizeOf(const Entry& e);

  // Set when it first serves a context: the lesser of the constructor's cap
  // and kMaxBytesPerGraphElement per element of that context's graph.
  int64_t max_bytes_;

  // The context served, set on first use.
  const Graph* graph_ = nullptr;
  const Hardware* hw_ = nullptr;
  const StepAnalysis* analysis_ = nullptr;
  int64_t budget_bytes_ = 0;
  int64_t max_recompute_tasks_ = 0;
  // A search asked only whether it fits stops early (RecomputeCheapestThatFit
  // among them): its answers are not the full search's.
  bool first_feasible_plan_ = false;

  absl::flat_hash_map<std::string, Entry> entries_;
  struct Made {
    bool explained = false;
    Plan plan;
  };
  absl::flat_hash_map<std::string, Made> plans_;  // by policy
  int64_t bytes_ = 0;
  int64_t hits_ = 0;
  int64_t plan_hits_ = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_INTERNAL_JUDGE_MEMO_H_
