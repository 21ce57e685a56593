// Graphs a request may name by digest (StepSpec.graph_sha256) instead of
// carrying them: the service's PutGraph store implements this; the core
// only looks graphs up. A graph here was validated and indexed when it was
// stored (PlanningCore::PrepareGraph).
//
//   class Store : public GraphSource { ... };
//   PlanningCore core(CoreLimits{}, /*observer=*/nullptr, &store);
#ifndef SLACKSWAP_CORE_GRAPH_SOURCE_H_
#define SLACKSWAP_CORE_GRAPH_SOURCE_H_

#include <memory>
#include <string>

#include "model/graph.h"

namespace slackswap {

class GraphSource {
 public:
  virtual ~GraphSource() = default;
  // The graph stored under `sha256` (lower-case hex), or null. Thread-safe.
  virtual std::shared_ptr<const Graph> Find(const std::string& sha256) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_GRAPH_SOURCE_H_
