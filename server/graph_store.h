// The graphs clients stored with PutGraph, by digest, for requests that
// name them (StepSpec.graph_sha256): bounded in bytes (least recently used
// first out) and in time (an entry unused for its time to live expires).
// Each holds the graph converted and indexed, so a request by digest skips
// parsing and validating it again. It is a cache, not state: a client that
// gets NOT_FOUND sends the graph again, to any replica. The service keeps
// the built-in workloads' graphs it built in a second one, keyed by
// workload (SharedGraphSource::HoldWorkload).
//
//   GraphStore store(/*capacity_bytes=*/256 << 20, absl::Hours(1));
//   store.Put(digest, std::make_shared<const Graph>(graph), charge);
//   std::shared_ptr<const Graph> g = store.Find(digest);  // or null
//
// Thread-safe: every method may be called from any thread.
#ifndef SLACKSWAP_SERVER_GRAPH_STORE_H_
#define SLACKSWAP_SERVER_GRAPH_STORE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "core/graph_source.h"

namespace slackswap {

class GraphStore : public GraphSource {
 public:
  // `now` is the clock (tests set it). REQUIRES: capacity_bytes >= 0,
  // ttl > 0. A capacity of 0 stores nothing.
  GraphStore(int64_t capacity_bytes, absl::Duration ttl,
             std::function<absl::Time()> now = &absl::Now);

  // Stores `graph` under `sha256` as the most recently used, charged
  // `charge_bytes`, evicting the least recently used (and the expired) to
  // make room; a graph larger than the capacity is not stored. Returns
  // whether it is held.
  bool Put(const std::string& sha256, std::shared_ptr<const Graph> graph,
           int64_t charge_bytes);

  // The graph, now the most recently used with its time to live restarted;
  // null when absent or expired.
  std::shared_ptr<const Graph> Find(const std::string& sha256) override;

  int64_t capacity_bytes() const { return capacity_bytes_; }
  absl::Duration ttl() const { return ttl_; }
  int64_t size_bytes() const;
  int64_t entries() const;

 private:
  struct Entry {
    std::string sha256;
    std::shared_ptr<const Graph> graph;
    int64_t charge;
    absl::Time expires;
  };
  using EntryList = std::list<Entry>;

  // Drops expired entries (from the least recently used end), then others
  // until `room` more bytes fit.
  void MakeRoomLocked(int64_t room) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(EntryList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  const int64_t capacity_bytes_;
  const absl::Duration ttl_;
  const std::function<absl::Time()> now_;

  mutable Mutex mu_;
  // Most recently used first.
  EntryList lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, EntryList::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t size_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_GRAPH_STORE_H_
