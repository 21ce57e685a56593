// A plan: what to do with each saved activation.
//
//   Plan plan = Plan::KeepAll(graph);
//   plan.decisions[t] = {.action = Action::kSwap, .prefetch_after_op = k};
#ifndef SLACKSWAP_MODEL_PLAN_H_
#define SLACKSWAP_MODEL_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/boxed.h"
#include "model/graph.h"

namespace slackswap {

enum class Action : uint8_t { kKeep, kSwap, kRecompute };

const char* ActionName(Action a);

struct Decision {
  Action action = Action::kKeep;
  // kSwap: op index whose start issues the prefetch.
  int32_t prefetch_after_op = kNone;
};

// What a decision costs and why it was made, for whoever reads the plan
// (ExplainDecisions sets it on the plan a policy returns). Apart from the
// decisions: a search copies and lowers candidate plans, a decision per
// tensor each, and none of them needs it.
struct DecisionFacts {
  int64_t transfer_ns = 0;
  int64_t recompute_ns = 0;
  // Boxed: most plans have no reasons (only explained ones do).
  BoxedString reason;
};

// What a solver proved about the plan it made (the optimal policy).
struct PlanProof {
  // The plan comes from the model's proven optimum (judged, repaired and
  // refined by the simulator); otherwise the solver stopped at its time
  // limit, had no time for the model, or the start plan simulated better.
  bool optimal = false;
  // The model's bound: no plan runs a step faster than this (ns).
  int64_t step_ns_lower = 0;
};

struct Plan {
  std::string policy;
  int64_t budget_bytes = 0;  // 0: no limit
  // One entry per tensor of the graph; only saved activations may be moved.
  std::vector<Decision> decisions;
  // One entry per decision when the plan was explained (or read with its
  // facts); empty otherwise, which reads as all zero and no reason.
  std::vector<DecisionFacts> facts;
  std::optional<PlanProof> proof;

  static Plan KeepAll(const Graph& g);
  int64_t CountAction(Action a) const;
  // Tensor t's decision's facts; all zero when the plan has none.
  const DecisionFacts& FactsOf(int32_t t) const;
};

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_PLAN_H_
