#include "model/plan.h"

#include <algorithm>

namespace slackswap {

const char* ActionName(Action a) {
  switch (a) {
    case Action::kKeep:
      return "keep";
    case Action::kSwap:
      return "swap";
    case Action::kRecompute:
      return "recompute";
  }
  return "unknown";
}

Plan Plan::KeepAll(const Graph& g) {
  Plan plan;
  plan.decisions.resize(g.tensors.size());
  return plan;
}

const DecisionFacts& Plan::FactsOf(int32_t t) const {
  static const DecisionFacts* const kNone = new DecisionFacts();
  return facts.empty() ? *kNone : facts[static_cast<size_t>(t)];
}

int64_t Plan::CountAction(Action a) const {
  return std::count_if(decisions.begin(), decisions.end(),
                       [a](const Decision& d) { return d.action == a; });
}

}  // namespace slackswap
