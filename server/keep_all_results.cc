#include "server/keep_all_results.h"

namespace slackswap {

std::shared_ptr<const SimResult> KeepAllResults::Find(
    const std::shared_ptr<const Graph>& graph, const std::string& key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(Key(graph.get(), key));
  if (it == entries_.end()) return nullptr;
  // Gone, and `graph` a later one at its address: not this graph's result.
  if (it->second.graph.lock() != graph) {
    Erase(it);
    return nullptr;
  }
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.result;
}

void KeepAllResults::Hold(const std::shared_ptr<const Graph>& graph,
                          const std::string& key,
                          std::shared_ptr<const SimResult> result) {
  if (capacity_ == 0 || key.size() > kMaxKeyBytes) return;
  MutexLock lock(&mu_);
  Key k(graph.get(), key);
  auto it = entries_.find(k);
  if (it != entries_.end()) {
    it->second.graph = graph;
    it->second.result = std::move(result);
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    return;
  }
  while (entries_.size() >= capacity_) Erase(entries_.find(recency_.back()));
  recency_.push_front(k);
  entries_.emplace(std::move(k),
                   Entry{graph, std::move(result), recency_.begin()});
}

size_t KeepAllResults::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

void KeepAllResults::Erase(absl::flat_hash_map<Key, Entry>::iterator it) {
  recency_.erase(it->second.recency);
  entries_.erase(it);
}

}  // namespace slackswap
