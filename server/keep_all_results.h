// What keeping every activation simulates to on the device, for the graphs
// a replica holds (SharedGraphSource; core/graph_source.h, FindKeepAll):
// every Plan request on a held graph and hardware reports it whatever its
// budget, and the simulation is a tenth of a gpt2-xl plan's CPU.
//
//   KeepAllResults results(/*capacity=*/256);
//   results.Hold(graph, key, std::make_shared<const SimResult>(r));
//   std::shared_ptr<const SimResult> held = results.Find(graph, key);
//
// A result belongs to one graph object: it is found only while that graph
// lives, and a later graph at the same address finds nothing (the entry
// holds a weak reference, so it keeps no graph alive either). At most
// `capacity` results are held, the least recently used dropped first; a
// result whose graph is gone is dropped when it is looked up. A key longer
// than kMaxKeyBytes (a hardware profile sent inline with a long name) is
// not held, so that what is held stays bounded in bytes too.
//
// Thread-safe.
#ifndef SLACKSWAP_SERVER_KEEP_ALL_RESULTS_H_
#define SLACKSWAP_SERVER_KEEP_ALL_RESULTS_H_

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "model/graph.h"
#include "sim/simulator.h"

namespace slackswap {

class KeepAllResults {
 public:
  static constexpr size_t kMaxKeyBytes = 4096;

  // capacity 0: nothing is held.
  explicit KeepAllResults(size_t capacity) : capacity_(capacity) {}

  KeepAllResults(const KeepAllResults&) = delete;
  KeepAllResults& operator=(const KeepAllResults&) = delete;

  // The result held for `graph` under `key`, or null.
  std::shared_ptr<const SimResult> Find(
      const std::shared_ptr<const Graph>& graph, const std::string& key);
  // Holds `result` for `graph` under `key`, replacing any; declines a key
  // longer than kMaxKeyBytes.
  void Hold(const std::shared_ptr<const Graph>& graph, const std::string& key,
            std::shared_ptr<const SimResult> result);
  size_t size() const;

 private:
  using Key = std::pair<const Graph*, std::string>;
  struct Entry {
    std::weak_ptr<const Graph> graph;
    std::shared_ptr<const SimResult> result;
    std::list<Key>::iterator recency;
  };

  void Erase(absl::flat_hash_map<Key, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  const size_t capacity_;

  mutable Mutex mu_;
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<Key> recency_ ABSL_GUARDED_BY(mu_);  // most recent first
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_KEEP_ALL_RESULTS_H_
