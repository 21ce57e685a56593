// Graphs a request may name by digest (StepSpec.graph_sha256) instead of
// carrying them: the service's PutGraph store implements this; the core
// only looks graphs up. A graph here was validated and indexed when it was
// stored (PlanningCore::PrepareGraph). A source may also hold the built-in
// workloads' graphs the core built, so that the next request naming the
// same workload skips building it (an eighth of a gpt2-xl plan's CPU), and
// what keeping everything simulates to on the device for a graph it holds,
// which every Plan request on that graph and hardware reports whatever its
// budget (a tenth of a gpt2-xl plan's CPU).
//
//   class Store : public GraphSource { ... };
//   PlanningCore core(CoreLimits{}, /*observer=*/nullptr, &store);
#ifndef SLACKSWAP_CORE_GRAPH_SOURCE_H_
#define SLACKSWAP_CORE_GRAPH_SOURCE_H_

#include <memory>
#include <string>

#include "model/graph.h"

namespace slackswap {

struct SimResult;  // sim/simulator.h

class GraphSource {
 public:
  virtual ~GraphSource() = default;
  // The graph stored under `sha256` (lower-case hex), or null. Thread-safe.
  virtual std::shared_ptr<const Graph> Find(const std::string& sha256) = 0;

  // The graph the core built for a workload under `key` (its name and
  // overrides; core/request_convert.cc), or null. Thread-safe. By default
  // none is held.
  virtual std::shared_ptr<const Graph> FindWorkload(const std::string& key) {
    return nullptr;
  }
  // Offers a workload's graph the core built (validated and indexed) for
  // later FindWorkload calls with `key`; the source may decline it.
  // Thread-safe.
  virtual void HoldWorkload(const std::string& key,
                            std::shared_ptr<const Graph> graph) {}

  // Keeping every activation of `graph` simulated with the device modelled,
  // on the hardware and with the device options `key` names
  // (KeepAllKey, core/plan_step.cc), or null. `graph` is one this source
  // gave out (Find, FindWorkload) or was offered (HoldWorkload); a result
  // is for that graph object only. Thread-safe. By default none is held.
  virtual std::shared_ptr<const SimResult> FindKeepAll(
      const std::shared_ptr<const Graph>& graph, const std::string& key) {
    return nullptr;
  }
  // Offers such a result for later FindKeepAll calls; the source may
  // decline it. Thread-safe.
  virtual void HoldKeepAll(const std::shared_ptr<const Graph>& graph,
                           const std::string& key,
                           std::shared_ptr<const SimResult> result) {}
};

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_GRAPH_SOURCE_H_
