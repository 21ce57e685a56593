// The graphs requests name by digest, looked up in this replica's store
// (PutGraph) and then, when there is a shared tier, in Redis: a graph
// another replica stored is read back, checked against its digest, parsed,
// validated and indexed like a PutGraph (PlanningCore::PrepareGraph), and
// kept in the local store for the next request. The built-in workloads'
// graphs the core builds are held apart, in this replica only (building
// one is cheaper than reading it from Redis), charged ApproxHeldBytes. So
// are the keep-all device simulations of the graphs it gave out
// (KeepAllResults, at most kKeepAllResults of them).
//
//   SharedGraphSource graphs(&store, shared_tier, /*charge_per_byte=*/4,
//                            [&](const v1::OperatorGraph& g) {
//                              return core.PrepareGraph(g, nullptr);
//                            }, &workload_store);
//   std::shared_ptr<const Graph> g = graphs.Find(digest);  // or null
//
// Thread-safe.
#ifndef SLACKSWAP_SERVER_SHARED_GRAPH_SOURCE_H_
#define SLACKSWAP_SERVER_SHARED_GRAPH_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/graph_source.h"
#include "server/graph_store.h"
#include "server/keep_all_results.h"
#include "server/shared_tier.h"
#include "slackswap/v1/graph.pb.h"

namespace slackswap {

class SharedGraphSource : public GraphSource {
 public:
  using Prepare =
      std::function<absl::StatusOr<Graph>(const v1::OperatorGraph& graph)>;

  // `shared` may be null (no shared tier). `charge_per_byte`: the local
  // store's charge per canonical byte, as PutGraph charges. `workloads`,
  // where built workloads' graphs are held, may be null (none held).
  // REQUIRES: local, shared and workloads outlive this; `prepare` is
  // callable whenever Find is.
  SharedGraphSource(GraphStore* local, SharedTier* shared,
                    int64_t charge_per_byte, Prepare prepare,
                    GraphStore* workloads = nullptr);

  std::shared_ptr<const Graph> Find(const std::string& sha256) override;
  std::shared_ptr<const Graph> FindWorkload(const std::string& key) override;
  void HoldWorkload(const std::string& key,
                    std::shared_ptr<const Graph> graph) override;
  std::shared_ptr<const SimResult> FindKeepAll(
      const std::shared_ptr<const Graph>& graph,
      const std::string& key) override;
  void HoldKeepAll(const std::shared_ptr<const Graph>& graph,
                   const std::string& key,
                   std::shared_ptr<const SimResult> result) override;

  // A keep-all result is about a kilobyte with its key (at most
  // KeepAllResults::kMaxKeyBytes): a few hundred of them stay within a few
  // MB.
  static constexpr size_t kKeepAllResults = 256;

 private:
  // Immutable after construction.
  GraphStore* const local_;
  SharedTier* const shared_;
  const int64_t charge_per_byte_;
  const Prepare prepare_;
  GraphStore* const workloads_;

  KeepAllResults keep_all_{kKeepAllResults};  // thread-safe
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SHARED_GRAPH_SOURCE_H_
