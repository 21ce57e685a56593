// A model of PyTorch's CUDA caching allocator (c10/cuda/
// CUDACachingAllocator.cpp): which device segments a sequence of tensor
// allocations and frees reserves, so that a plan's device footprint counts
// the allocator's rounding, caching and fragmentation, not only the bytes
// that are live. docs/SIMULATOR.md ("The caching allocator") states the
// rules; caching_allocator_test.cc works sequences of them out by hand.
//
//   CachingAllocator a;  // or a({.expandable_segments = true})
//   CachingAllocator::Handle x = a.Allocate(3 << 20);  // a 20 MiB segment
//   a.Free(x);                                // cached: still reserved
//   int64_t reserved = a.reserved_bytes();    // 20 MiB
//
// One stream, no CUDA graphs, no memory fraction, max_split_size and
// roundup_power2_divisions at their defaults (off), and segments are never
// returned to the driver (PyTorch does that only when cudaMalloc fails, or
// on empty_cache()). Deterministic: block addresses are assigned in the
// order segments are made.
#ifndef SLACKSWAP_SIM_CACHING_ALLOCATOR_H_
#define SLACKSWAP_SIM_CACHING_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"

namespace slackswap {

// The allocator's constants, as PyTorch names them.
inline constexpr int64_t kMinBlockSize = 512;
inline constexpr int64_t kSmallSize = int64_t{1} << 20;
inline constexpr int64_t kSmallBuffer = int64_t{2} << 20;
inline constexpr int64_t kLargeBuffer = int64_t{20} << 20;
inline constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
inline constexpr int64_t kRoundLarge = int64_t{2} << 20;

struct AllocatorConfig {
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: one segment per pool
  // that grows by 2 MiB (small pool) or 20 MiB (large pool) pages.
  bool expandable_segments = false;
};

class CachingAllocator {
 public:
  using Handle = int32_t;

  struct BlockInfo {
    int64_t address = 0;
    int64_t size = 0;
    bool allocated = false;
    bool small_pool = false;
  };

  explicit CachingAllocator(AllocatorConfig config = {});

  // A block for a request of `bytes`: the best-fitting cached free block of
  // the request's pool, else a new segment (or, with expandable segments,
  // more of the pool's segment); split when the rest is worth keeping.
  // REQUIRES: 0 <= bytes <= kMaxGraphBytes (model/graph.h).
  Handle Allocate(int64_t bytes);
  // Returns the block to its pool, merged with free neighbours of its
  // segment. REQUIRES: `h` came from Allocate and was not freed since.
  void Free(Handle h);

  // Sum of the allocated blocks' sizes (requests rounded to 512 B, and
  // whole blocks where a remainder was not worth splitting off).
  int64_t allocated_bytes() const { return allocated_; }
  // Device memory the allocator holds: its segments (with expandable
  // segments, the pages mapped).
  int64_t reserved_bytes() const { return reserved_; }
  // cudaMalloc calls (expandable: page mappings) so far.
  int64_t segments() const { return segments_; }
  int64_t BlockSize(Handle h) const { return blocks_[h].size; }
  // Every block (allocated or cached) by address.
  std::vector<BlockInfo> Blocks() const;

  // PyTorch's round_size: at least 512 B, a multiple of 512 B.
  static int64_t RoundSize(int64_t bytes);
  // PyTorch's get_allocation_size: the segment a rounded request that
  // finds no cached block makes.
  static int64_t SegmentSize(int64_t rounded);

 private:
  struct Block {
    int64_t address = 0;
    int64_t size = 0;
    int32_t prev = -1;  // neighbours in the segment, by address
    int32_t next = -1;
    // While free, its bucket's slot in its pool's FreeSet; after, the slot
    // it was last in (a hint), or -1.
    int32_t bucket = -1;
    bool allocated = false;
    bool small = false;
    bool live = false;  // false: a recycled slot
  };
  // A sorted set kept in a vector by descending order while it holds at
  // most kFew elements, and in an ordered tree beyond. A training step's
  // sets are small (llama-7b allocates 12 distinct sizes) and change at
  // their ends: a step frees in about the reverse order it allocates (the
  // backward pass), which appends at the end, where the smallest (the best
  // fit) is; a vector is fastest there. A long step caches hundreds of
  // thousands of blocks of one size, and in a vector each insert moved all
  // of them (77% of a 10^6-op step's time).
  template <typename T, typename Less = std::less<T>>
  class SortedSet {
   public:
    bool empty() const { return tree_ ? tree_->empty() : few_.empty(); }
    void Insert(const T& v);
    // REQUIRES: v is in the set.
    void Erase(const T& v);
    // Erases the element `e` points to: an answer of AtLeast, with no
    // change to the set since.
    void EraseAt(const T* e);
    // The smallest element >= v, and the one after it; null for none.
    std::pair<const T*, const T*> AtLeast(const T& v) const;
    // The smallest element and the one after it (AtLeast of the lowest
    // value there can be). REQUIRES: !empty().
    std::pair<const T*, const T*> Smallest() const;

   private:
    // A vector insert moves at most 16 KiB (of 16-byte elements).
    static constexpr size_t kFew = 1024;
    struct Descending {
      bool operator()(const T& a, const T& b) const { return Less()(b, a); }
    };

    std::vector<T> few_;  // descending; unused once tree_ is set
    std::unique_ptr<absl::btree_set<T, Less>> tree_;
  };
  // Pairs ordered by their first alone, which the sets below keep unique.
  // Comparing one int64_t lets the tree search a node linearly, as it does
  // for integer keys, where comparing pairs made it search by bisection (the
  // tree was about a tenth of a 10^6-op step's whole-device simulation).
  struct ByFirst {
    using absl_btree_prefer_linear_node_search = std::true_type;
    bool operator()(const std::pair<int64_t, int32_t>& a,
                    const std::pair<int64_t, int32_t>& b) const {
      return a.first < b.first;
    }
  };
  // A pool's free blocks, best fit first (by size, then address), bucketed
  // by size.
  class FreeSet {
   public:
    // Adds block b and returns the slot of the bucket it went into; found
    // without a search when `hint` (the slot b was last in, or -1) still
    // holds blocks of `size`.
    int32_t Insert(int64_t size, int64_t address, int32_t b, int32_t hint);
    // REQUIRES: b is free in `slot`, as Insert returned.
    void Erase(int64_t address, int32_t b, int32_t slot);
    // Takes out the best fit for `size` (-1: none); the one after it
    // instead when the best is `last_resort` and there is another.
    int32_t TakeBestFit(int64_t size, int32_t last_resort);

   private:
    // (address, block): a pool's free blocks never share an address.
    using Bucket = SortedSet<std::pair<int64_t, int32_t>, ByFirst>;
    // (size, its bucket's slot in buckets_) for each size with a free
    // block: the best fit and its bucket in one search, where a hash table
    // by size was a lookup more per allocation and free.
    SortedSet<std::pair<int64_t, int32_t>, ByFirst> sizes_;
    std::vector<Bucket> buckets_;
    // The size each slot's bucket holds; -1 for a spare slot.
    std::vector<int64_t> slot_size_;
    // Slots of buckets_ no size holds, each keeping the capacity it had.
    std::vector<int32_t> spare_;
  };
  // An expandable segment: mapped from `base` to `end`; `last` is the
  // block that ends at `end` (next to the unmapped rest), or -1.
  struct Expandable {
    int64_t base = 0;
    int64_t end = 0;
    int32_t last = -1;
  };

  int32_t NewBlock(int64_t address, int64_t size, bool small);
  void Insert(int32_t b);
  void Erase(int32_t b);
  // The cached block a request of `size` takes, out of its free set, or -1.
  int32_t TakeFree(bool small, int64_t size);
  int32_t NewSegment(bool small, int64_t size);
  // Maps more of the pool's expandable segment for a request of `size`.
  int32_t Expand(bool small, int64_t size);
  bool ShouldSplit(const Block& b, int64_t size) const;
  void Split(int32_t b, int64_t size);
  // Absorbs free neighbour `n` (prev or next of `b`) into `b`.
  void Absorb(int32_t b, int32_t n);

  const AllocatorConfig config_;
  std::vector<Block> blocks_;
  std::vector<int32_t> recycled_;
  std::array<FreeSet, 2> free_;  // [small]
  std::array<Expandable, 2> expandable_;
  int64_t next_address_ = 0;
  int64_t allocated_ = 0;
  int64_t reserved_ = 0;
  int64_t segments_ = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_CACHING_ALLOCATOR_H_
