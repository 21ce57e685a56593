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
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

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
    bool allocated = false;
    bool small = false;
    bool live = false;  // false: a recycled slot
  };
  // A pool's free blocks, best fit first (by size, then address). Bucketed
  // by size in sorted vectors: a training step allocates few distinct
  // sizes (llama-7b: 12), and each bucket is kept by descending address,
  // since a step frees in about the reverse order it allocates (the
  // backward pass), which appends at the end, and the best fit, the lowest
  // address, is the last.
  class FreeSet {
   public:
    void Insert(int64_t size, int64_t address, int32_t b);
    void Erase(int64_t size, int64_t address, int32_t b);
    // The best fit for `size` (-1: none); the one after it instead when
    // the best is `last_resort` and there is another.
    int32_t BestFit(int64_t size, int32_t last_resort) const;

   private:
    // (address, block), by descending address.
    using Bucket = std::vector<std::pair<int64_t, int32_t>>;
    std::vector<int64_t> sizes_;  // those with a free block, ascending
    absl::flat_hash_map<int64_t, Bucket> buckets_;
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
  // The cached block a request of `size` takes, or -1.
  int32_t FindFree(bool small, int64_t size) const;
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
