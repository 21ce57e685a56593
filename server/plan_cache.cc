#include "server/plan_cache.h"

#include <cassert>
#include <iterator>
#include <utility>

namespace slackswap {

PlanCache::PlanCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {
  assert(capacity_bytes >= 0);
}

std::optional<std::string> PlanCache::Lookup(const std::string& key) {
  MutexLock lock(&mu_);
  auto found = index_.find(absl::string_view(key));
  if (found == index_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  EntryList::iterator it = found->second;
  lru_.splice(lru_.begin(), lru_, it);  // iterators stay valid
  return it->value;
}

void PlanCache::Insert(std::string key, std::string value) {
  const int64_t charge = Charge(key.size(), value.size());
  MutexLock lock(&mu_);
  if (capacity_bytes_ == 0) return;
  auto found = index_.find(absl::string_view(key));
  if (found != index_.end()) EraseLocked(found->second);
  if (charge > capacity_bytes_) return;

  lru_.push_front(Entry{std::move(key), std::move(value), charge});
  index_.emplace(absl::string_view(lru_.front().key), lru_.begin());
  size_bytes_ += charge;
  while (size_bytes_ > capacity_bytes_) {
    // The new entry fits alone, so the loop stops before reaching it.
    EraseLocked(std::prev(lru_.end()));
    ++evictions_;
  }
}

void PlanCache::Discard(const std::string& key) {
  MutexLock lock(&mu_);
  --hits_;
  ++misses_;
  auto found = index_.find(absl::string_view(key));
  if (found != index_.end()) EraseLocked(found->second);
}

void PlanCache::EraseLocked(EntryList::iterator it) {
  size_bytes_ -= it->charge;
  index_.erase(absl::string_view(it->key));
  lru_.erase(it);
}

int64_t PlanCache::size_bytes() const {
  MutexLock lock(&mu_);
  return size_bytes_;
}

int64_t PlanCache::entries() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(lru_.size());
}

int64_t PlanCache::hits() const {
  MutexLock lock(&mu_);
  return hits_;
}

int64_t PlanCache::misses() const {
  MutexLock lock(&mu_);
  return misses_;
}

int64_t PlanCache::evictions() const {
  MutexLock lock(&mu_);
  return evictions_;
}

}  // namespace slackswap
