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

int64_t Plan::CountAction(Action a) const {
  return std::count_if(decisions.begin(), decisions.end(),
                       [a](const Decision& d) { return d.action == a; });
}

}  // namespace slackswap
