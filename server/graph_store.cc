#include "server/graph_store.h"

#include <iterator>
#include <utility>

namespace slackswap {

GraphStore::GraphStore(int64_t capacity_bytes, absl::Duration ttl,
                       std::function<absl::Time()> now)
    : capacity_bytes_(capacity_bytes), ttl_(ttl), now_(std::move(now)) {}

bool GraphStore::Put(const std::string& sha256,
                     std::shared_ptr<const Graph> graph, int64_t charge_bytes) {
  MutexLock lock(&mu_);
  if (auto it = index_.find(sha256); it != index_.end()) {
    EraseLocked(it->second);
  }
  if (charge_bytes > capacity_bytes_) return false;
  MakeRoomLocked(charge_bytes);
  lru_.push_front(Entry{sha256, std::move(graph), charge_bytes, now_() + ttl_});
  index_[sha256] = lru_.begin();
  size_bytes_ += charge_bytes;
  return true;
}

std::shared_ptr<const Graph> GraphStore::Find(const std::string& sha256) {
  MutexLock lock(&mu_);
  auto it = index_.find(sha256);
  if (it == index_.end()) return nullptr;
  const absl::Time now = now_();
  if (it->second->expires <= now) {
    EraseLocked(it->second);
    return nullptr;
  }
  it->second->expires = now + ttl_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return lru_.front().graph;
}

int64_t GraphStore::size_bytes() const {
  MutexLock lock(&mu_);
  return size_bytes_;
}

int64_t GraphStore::entries() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(lru_.size());
}

void GraphStore::MakeRoomLocked(int64_t room) {
  const absl::Time now = now_();
  for (auto it = lru_.begin(); it != lru_.end();) {
    const auto next = std::next(it);
    if (it->expires <= now) EraseLocked(it);
    it = next;
  }
  while (!lru_.empty() && size_bytes_ + room > capacity_bytes_) {
    EraseLocked(std::prev(lru_.end()));
  }
}

void GraphStore::EraseLocked(EntryList::iterator it) {
  size_bytes_ -= it->charge;
  index_.erase(it->sha256);
  lru_.erase(it);
}

}  // namespace slackswap
