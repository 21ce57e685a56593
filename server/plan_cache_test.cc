#include "server/plan_cache.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::Optional;

// The charge of an entry stored under `key` with a value of `value_size`.
int64_t ChargeOf(const std::string& key, size_t value_size) {
  return PlanCache::Charge(key.size(), value_size);
}

TEST(PlanCacheTest, MissThenHit) {
  PlanCache cache(/*capacity_bytes=*/1 << 20);
  EXPECT_EQ(cache.Lookup("k"), std::nullopt);
  cache.Insert("k", "value");
  EXPECT_THAT(cache.Lookup("k"), Optional(std::string("value")));
  EXPECT_EQ(cache.Lookup("other"), std::nullopt);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.evictions(), 0);
  EXPECT_EQ(cache.entries(), 1);
  EXPECT_EQ(cache.size_bytes(), ChargeOf("k", 5));
  EXPECT_EQ(cache.capacity_bytes(), 1 << 20);
}

TEST(PlanCacheTest, DiscardDropsTheEntryAndRecountsTheHitAsAMiss) {
  PlanCache cache(/*capacity_bytes=*/1 << 20);
  cache.Insert("k", "garbage");
  ASSERT_THAT(cache.Lookup("k"), Optional(std::string("garbage")));
  cache.Discard("k");
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
  EXPECT_EQ(cache.Lookup("k"), std::nullopt);
  EXPECT_EQ(cache.misses(), 2);
}

TEST(PlanCacheTest, ChargesKeyValueAndOverhead) {
  EXPECT_EQ(PlanCache::Charge(3, 10), 13 + PlanCache::kEntryOverheadBytes);
  PlanCache cache(/*capacity_bytes=*/1 << 20);
  cache.Insert("abc", std::string(10, 'x'));
  cache.Insert("de", "");
  EXPECT_EQ(cache.size_bytes(), 15 + 2 * PlanCache::kEntryOverheadBytes);
}

TEST(PlanCacheTest, ComparesWholeKeys) {
  PlanCache cache(/*capacity_bytes=*/1 << 20);
  const std::string a("req\0a", 5);
  const std::string b("req\0b", 5);
  cache.Insert(a, "A");
  cache.Insert(b, "B");
  EXPECT_THAT(cache.Lookup(a), Optional(std::string("A")));
  EXPECT_THAT(cache.Lookup(b), Optional(std::string("B")));
  EXPECT_EQ(cache.Lookup(std::string("req")), std::nullopt);
  EXPECT_EQ(cache.Lookup(std::string("req\0", 4)), std::nullopt);
  EXPECT_EQ(cache.Lookup(std::string("req\0ab", 6)), std::nullopt);
  EXPECT_EQ(cache.entries(), 2);
}

TEST(PlanCacheTest, EvictsLeastRecentlyUsedFirst) {
  const int64_t entry = ChargeOf("k1", 100);
  PlanCache cache(/*capacity_bytes=*/3 * entry);
  cache.Insert("k1", std::string(100, '1'));
  cache.Insert("k2", std::string(100, '2'));
  cache.Insert("k3", std::string(100, '3'));
  EXPECT_EQ(cache.entries(), 3);
  EXPECT_EQ(cache.size_bytes(), 3 * entry);

  // Using k1 makes k2 the least recently used.
  ASSERT_TRUE(cache.Lookup("k1").has_value());
  cache.Insert("k4", std::string(100, '4'));
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_EQ(cache.Lookup("k2"), std::nullopt);
  EXPECT_TRUE(cache.Lookup("k1").has_value());
  EXPECT_TRUE(cache.Lookup("k3").has_value());
  EXPECT_TRUE(cache.Lookup("k4").has_value());

  // The lookups above left k1, k3, k4 from oldest to newest, so the next
  // insert evicts k1.
  cache.Insert("k5", std::string(100, '5'));
  EXPECT_EQ(cache.evictions(), 2);
  EXPECT_EQ(cache.Lookup("k1"), std::nullopt);
  EXPECT_TRUE(cache.Lookup("k3").has_value());
  EXPECT_EQ(cache.size_bytes(), 3 * entry);
}

TEST(PlanCacheTest, LargeInsertEvictsSeveralEntries) {
  const int64_t small = ChargeOf("k1", 10);
  PlanCache cache(/*capacity_bytes=*/4 * small);
  for (int i = 1; i <= 4; ++i) {
    cache.Insert(absl::StrCat("k", i), std::string(10, 'x'));
  }
  ASSERT_EQ(cache.entries(), 4);
  // Charged exactly three small entries: evicts k1, k2 and k3, keeps k4.
  const size_t big_value = 3 * small - PlanCache::kEntryOverheadBytes - 2;
  cache.Insert("kb", std::string(big_value, 'b'));
  EXPECT_EQ(cache.evictions(), 3);
  EXPECT_EQ(cache.entries(), 2);
  EXPECT_TRUE(cache.Lookup("k4").has_value());
  EXPECT_TRUE(cache.Lookup("kb").has_value());
  EXPECT_EQ(cache.size_bytes(), cache.capacity_bytes());

  // An entry one byte larger than k4 does not fit in the room k4 leaves:
  // it evicts k4, then kb.
  cache.Insert("kc",
               std::string(small - PlanCache::kEntryOverheadBytes - 1, 'c'));
  EXPECT_EQ(cache.evictions(), 5);
  EXPECT_EQ(cache.Lookup("k4"), std::nullopt);
  EXPECT_EQ(cache.Lookup("kb"), std::nullopt);
  EXPECT_EQ(cache.size_bytes(), small + 1);
}

TEST(PlanCacheTest, ReplacesExistingKey) {
  PlanCache cache(/*capacity_bytes=*/1 << 20);
  cache.Insert("k", "old");
  cache.Insert("other", "x");
  cache.Insert("k", "newer value");
  EXPECT_THAT(cache.Lookup("k"), Optional(std::string("newer value")));
  EXPECT_EQ(cache.entries(), 2);
  EXPECT_EQ(cache.size_bytes(), ChargeOf("k", 11) + ChargeOf("other", 1));
  EXPECT_EQ(cache.evictions(), 0);
}

TEST(PlanCacheTest, ReplacementBecomesMostRecent) {
  const int64_t entry = ChargeOf("k1", 4);
  PlanCache cache(/*capacity_bytes=*/2 * entry);
  cache.Insert("k1", "aaaa");
  cache.Insert("k2", "bbbb");
  cache.Insert("k1", "cccc");  // k2 is now the least recently used
  cache.Insert("k3", "dddd");
  EXPECT_EQ(cache.Lookup("k2"), std::nullopt);
  EXPECT_THAT(cache.Lookup("k1"), Optional(std::string("cccc")));
  EXPECT_THAT(cache.Lookup("k3"), Optional(std::string("dddd")));
}

TEST(PlanCacheTest, ZeroCapacityDisablesTheCache) {
  PlanCache cache(/*capacity_bytes=*/0);
  cache.Insert("k", "v");
  EXPECT_EQ(cache.Lookup("k"), std::nullopt);
  EXPECT_EQ(cache.Lookup("k"), std::nullopt);
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.evictions(), 0);
}

TEST(PlanCacheTest, DoesNotStoreAnEntryLargerThanTheCapacity) {
  const int64_t capacity = ChargeOf("small", 10) * 2;
  PlanCache cache(capacity);
  cache.Insert("small", std::string(10, 's'));
  cache.Insert("huge", std::string(capacity, 'h'));
  EXPECT_EQ(cache.Lookup("huge"), std::nullopt);
  // Nothing was evicted for it.
  EXPECT_TRUE(cache.Lookup("small").has_value());
  EXPECT_EQ(cache.evictions(), 0);
  EXPECT_EQ(cache.entries(), 1);

  // An entry charged exactly the capacity fits.
  const std::string key = "exact";
  cache.Insert(key, std::string(capacity - ChargeOf(key, 0), 'e'));
  EXPECT_TRUE(cache.Lookup(key).has_value());
  EXPECT_EQ(cache.size_bytes(), capacity);
  EXPECT_EQ(cache.evictions(), 1);
}

TEST(PlanCacheTest, OversizedReplacementDropsTheOldValue) {
  PlanCache cache(/*capacity_bytes=*/1024);
  cache.Insert("k", "small");
  cache.Insert("k", std::string(2048, 'x'));
  EXPECT_EQ(cache.Lookup("k"), std::nullopt);
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
}

TEST(PlanCacheTest, ByteBoundIsNeverExceeded) {
  const int64_t capacity = 10'000;
  PlanCache cache(capacity);
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (int i = 0; i < 5000; ++i) {
    std::string key = absl::StrCat("key-", next() % 200);
    if (next() % 3 == 0) {
      cache.Lookup(key);
    } else {
      cache.Insert(std::move(key), std::string(next() % 3000, 'v'));
    }
    ASSERT_LE(cache.size_bytes(), capacity) << "after step " << i;
    ASSERT_GE(cache.size_bytes(), 0);
  }
  EXPECT_GT(cache.evictions(), 0);
  EXPECT_GT(cache.hits(), 0);
}

TEST(PlanCacheTest, ConcurrentLookupAndInsert) {
  constexpr int kThreads = 8;
  constexpr int kOps = 5000;
  constexpr int kKeys = 64;
  const int64_t capacity = 40 * ChargeOf("key-00", 64);
  PlanCache cache(capacity);
  std::atomic<int64_t> lookups{0};
  std::atomic<bool> bad_value{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const int k = (i * 7 + t * 13) % kKeys;
        const std::string key = absl::StrCat("key-", k < 10 ? "0" : "", k);
        // Each key always maps to the same value, so any hit can be checked.
        const std::string value(64, static_cast<char>('A' + k % 26));
        if ((i + t) % 2 == 0) {
          cache.Insert(key, value);
        } else {
          lookups.fetch_add(1);
          std::optional<std::string> got = cache.Lookup(key);
          if (got.has_value() && *got != value) bad_value.store(true);
        }
        if (cache.size_bytes() > capacity) bad_value.store(true);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(bad_value.load());
  EXPECT_EQ(cache.hits() + cache.misses(), lookups.load());
  EXPECT_LE(cache.size_bytes(), capacity);
  EXPECT_LE(cache.entries(), 40);
  EXPECT_EQ(cache.size_bytes(), cache.entries() * ChargeOf("key-00", 64));
}

}  // namespace
}  // namespace slackswap
