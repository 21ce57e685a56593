// A thread-safe least-recently-used cache of serialized responses, keyed by
// the deterministic serialization of the request, and bounded by the bytes it
// holds. Planning is a pure function of the request, so a repeated request
// can be answered from here.
//
//   PlanCache cache(/*capacity_bytes=*/64 << 20);
//   std::string key;
//   SerializeDeterministic(request, &key);  // io/proto_file.h
//   if (std::optional<std::string> hit = cache.Lookup(key)) {
//     if (response.ParseFromString(*hit)) return response;
//     cache.Discard(key);  // unusable: counted as a miss after all
//   }
//   response = Plan(request);
//   cache.Insert(std::move(key), response.SerializeAsString());
//
// Keys are compared in full (byte for byte) on lookup; absl::Hash only picks
// the bucket. Each entry is charged key.size() + value.size() +
// kEntryOverheadBytes, and the total charge never exceeds capacity_bytes().
// A capacity of 0 disables the cache: every Lookup misses and Insert does
// nothing.
//
// Thread-safe: every method may be called from any thread.
#ifndef SLACKSWAP_SERVER_PLAN_CACHE_H_
#define SLACKSWAP_SERVER_PLAN_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"

namespace slackswap {

class PlanCache {
 public:
  // The fixed charge per entry on top of its key and value bytes: roughly
  // the list node, the index slot and the two strings' headers.
  static constexpr int64_t kEntryOverheadBytes = 128;

  // The charge of an entry with these key and value sizes.
  static int64_t Charge(size_t key_size, size_t value_size) {
    return static_cast<int64_t>(key_size) + static_cast<int64_t>(value_size) +
           kEntryOverheadBytes;
  }

  // REQUIRES: capacity_bytes >= 0.
  explicit PlanCache(int64_t capacity_bytes);

  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // Returns a copy of the value stored under `key` and makes the entry the
  // most recently used, or nullopt. Counts a hit or a miss.
  std::optional<std::string> Lookup(const std::string& key);

  // Stores `value` under `key`, replacing any value already there, as the
  // most recently used entry, then evicts least recently used entries until
  // the total charge is within capacity. An entry whose charge alone exceeds
  // the capacity is not stored (and any old value under `key` is dropped).
  void Insert(std::string key, std::string value);

  // The value the last Lookup of `key` returned could not be used (it did
  // not parse): drops the entry, if still there, and counts that lookup as
  // a miss instead of a hit, so hits() and misses() agree with what callers
  // served. REQUIRES: a Lookup of `key` returned a value.
  void Discard(const std::string& key);

  int64_t capacity_bytes() const { return capacity_bytes_; }

  // The total charge of the entries held; never above capacity_bytes().
  int64_t size_bytes() const;
  int64_t entries() const;

  // Lookups that found a usable value for their key, and those that did not
  // (including those Discard recounted).
  int64_t hits() const;
  int64_t misses() const;
  // Entries removed to make room for others (not replacements).
  int64_t evictions() const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    int64_t charge;
  };
  using EntryList = std::list<Entry>;

  // Removes `it` from the list and the index, and uncharges it.
  void EraseLocked(EntryList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  const int64_t capacity_bytes_;

  mutable Mutex mu_;
  // Most recently used first.
  EntryList lru_ ABSL_GUARDED_BY(mu_);
  // Views of the keys stored in lru_'s nodes, which never move.
  absl::flat_hash_map<absl::string_view, EntryList::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t size_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_PLAN_CACHE_H_
