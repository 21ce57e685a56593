// Hand-worked allocation sequences for the caching-allocator model: each
// comment works out, from PyTorch's rules (docs/SIMULATOR.md, "The caching
// allocator"), what the allocator reserves and where each block lands.
#include "sim/caching_allocator.h"

#include <random>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

constexpr int64_t KiB = int64_t{1} << 10;
constexpr int64_t MiB = int64_t{1} << 20;

using Block = CachingAllocator::BlockInfo;

// The layout as (offset, size, allocated) in MiB, offsets from the lowest
// block's address.
std::vector<std::tuple<int64_t, int64_t, bool>> Layout(
    const CachingAllocator& a) {
  std::vector<std::tuple<int64_t, int64_t, bool>> out;
  const std::vector<Block> blocks = a.Blocks();
  for (const Block& b : blocks) {
    out.emplace_back((b.address - blocks[0].address) / MiB, b.size / MiB,
                     b.allocated);
  }
  return out;
}

TEST(CachingAllocatorTest, RoundsRequestsTo512Bytes) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024);
  CachingAllocator a;
  // 1 B and 513 B take 512 B and 1 KiB of one 2 MiB small segment.
  CachingAllocator::Handle x = a.Allocate(1);
  CachingAllocator::Handle y = a.Allocate(513);
  EXPECT_EQ(a.BlockSize(x), 512);
  EXPECT_EQ(a.BlockSize(y), 1024);
  EXPECT_EQ(a.allocated_bytes(), 1536);
  EXPECT_EQ(a.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(a.segments(), 1);
}

TEST(CachingAllocatorTest, SmallRequestsShareTwoMiBSegments) {
  CachingAllocator a;
  // Four 512 KiB requests fill one 2 MiB segment (each split leaves a rest
  // of at least 512 B, so it is split off); the fifth needs a second one.
  for (int i = 0; i < 4; ++i) a.Allocate(512 * KiB);
  EXPECT_EQ(a.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 2 * MiB);
  a.Allocate(512 * KiB);
  EXPECT_EQ(a.reserved_bytes(), 4 * MiB);
  EXPECT_EQ(a.segments(), 2);
  // 1 MiB is still small: SegmentSize says so.
  EXPECT_EQ(CachingAllocator::SegmentSize(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(1 * MiB + 512), 20 * MiB);
}

TEST(CachingAllocatorTest, LargeRequestsBelow10MiBShareA20MiBSegment) {
  CachingAllocator a;
  // 3 MiB: a 20 MiB segment, split (17 MiB > 1 MiB left); 5 MiB then takes
  // the cached 17 MiB rest, split again: one segment, 12 MiB free.
  a.Allocate(3 * MiB);
  a.Allocate(5 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 8 * MiB);
  EXPECT_THAT(Layout(a), ::testing::ElementsAre(std::make_tuple(0, 3, true),
                                                std::make_tuple(3, 5, true),
                                                std::make_tuple(8, 12, false)));
}

TEST(CachingAllocatorTest, ALargeRemainderOfAtMost1MiBIsNotSplitOff) {
  CachingAllocator a;
  // 9 MiB: a 20 MiB segment, split, 11 MiB cached. 10 MiB then takes the
  // 11 MiB block whole: the 1 MiB rest is not more than kSmallSize.
  a.Allocate(9 * MiB);
  CachingAllocator::Handle x = a.Allocate(10 * MiB);
  EXPECT_EQ(a.BlockSize(x), 11 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 20 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 20 * MiB);
  // 19.5 MiB makes a segment rounded to 20 MiB; 0.5 MiB left stays in it.
  CachingAllocator::Handle y = a.Allocate(19 * MiB + 512 * KiB);
  EXPECT_EQ(a.BlockSize(y), 20 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 40 * MiB);
}

TEST(CachingAllocatorTest, OversizeRequestsGetSegmentsRoundedTo2MiB) {
  CachingAllocator a;
  // 100 MiB + 1 B rounds to 100 MiB + 512 B; its segment to 102 MiB; the
  // 2 MiB - 512 B rest is more than 1 MiB, so it is split off and cached.
  CachingAllocator::Handle x = a.Allocate(100 * MiB + 1);
  EXPECT_EQ(a.BlockSize(x), 100 * MiB + 512);
  EXPECT_EQ(a.reserved_bytes(), 102 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 100 * MiB + 512);
  // A request larger than anything cached makes a segment of its own.
  a.Allocate(64 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 166 * MiB);
  EXPECT_EQ(a.segments(), 2);
}

TEST(CachingAllocatorTest, BestFitReusesTheSmallestFreeBlockThatFits) {
  CachingAllocator a;
  // Three segments of their own (multiples of 2 MiB, nothing split off):
  // 30, 12 and 50 MiB, all freed and cached.
  CachingAllocator::Handle x = a.Allocate(30 * MiB);
  CachingAllocator::Handle y = a.Allocate(12 * MiB);
  CachingAllocator::Handle z = a.Allocate(50 * MiB);
  a.Free(x);
  a.Free(y);
  a.Free(z);
  EXPECT_EQ(a.allocated_bytes(), 0);
  // 11 MiB takes the 12 MiB block (at address 30 MiB), whole: 1 MiB left.
  CachingAllocator::Handle w = a.Allocate(11 * MiB);
  EXPECT_EQ(a.BlockSize(w), 12 * MiB);
  EXPECT_EQ(a.Blocks()[1].address, 30 * MiB);
  EXPECT_TRUE(a.Blocks()[1].allocated);
  EXPECT_EQ(a.reserved_bytes(), 92 * MiB);
  EXPECT_EQ(a.segments(), 3);
}

TEST(CachingAllocatorTest, FreeBlocksOfDifferentSegmentsNeverCoalesce) {
  CachingAllocator a;
  // Two 12 MiB segments side by side, both freed: 24 MiB cached, but in
  // two blocks, so 24 MiB needs a third segment.
  CachingAllocator::Handle x = a.Allocate(12 * MiB);
  CachingAllocator::Handle y = a.Allocate(12 * MiB);
  a.Free(x);
  a.Free(y);
  EXPECT_THAT(Layout(a),
              ::testing::ElementsAre(std::make_tuple(0, 12, false),
                                     std::make_tuple(12, 12, false)));
  a.Allocate(24 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 48 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 24 * MiB);
}

TEST(CachingAllocatorTest, AdjacentFreeBlocksOfOneSegmentMerge) {
  CachingAllocator a;
  // 3, 4 and 5 MiB carved from one 20 MiB segment, 8 MiB left.
  CachingAllocator::Handle x = a.Allocate(3 * MiB);
  CachingAllocator::Handle y = a.Allocate(4 * MiB);
  a.Allocate(5 * MiB);
  a.Free(y);  // [3 used][4 free][5 used][8 free]
  a.Free(x);  // merges with its free neighbour: [7 free][5 used][8 free]
  EXPECT_THAT(Layout(a), ::testing::ElementsAre(std::make_tuple(0, 7, false),
                                                std::make_tuple(7, 5, true),
                                                std::make_tuple(12, 8, false)));
  // 7 MiB fits the merged block exactly (best fit over the 8 MiB one).
  a.Allocate(7 * MiB);
  EXPECT_EQ(a.Blocks()[0].allocated, true);
  EXPECT_EQ(a.reserved_bytes(), 20 * MiB);
}

TEST(CachingAllocatorTest, SmallAndLargePoolsDoNotShareBlocks) {
  CachingAllocator a;
  // A freed 20 MiB large segment cannot serve a 512 KiB request: the small
  // pool makes its own 2 MiB segment.
  a.Free(a.Allocate(3 * MiB));
  a.Allocate(512 * KiB);
  EXPECT_EQ(a.reserved_bytes(), 22 * MiB);
  EXPECT_EQ(a.segments(), 2);
  // And a freed small segment cannot serve 1 MiB + 512 B (a large request).
  CachingAllocator b;
  b.Free(b.Allocate(100 * KiB));
  b.Allocate(1 * MiB + 512);
  EXPECT_EQ(b.reserved_bytes(), 22 * MiB);
}

TEST(CachingAllocatorTest, AFreedSmallBlockIsReusedAfterMerging) {
  CachingAllocator a;
  // 100 KiB, freed: merges back into the whole 2 MiB segment, which then
  // serves 200 KiB and 1 MiB without a new segment.
  a.Free(a.Allocate(100 * KiB));
  a.Allocate(200 * KiB);
  a.Allocate(1 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 1 * MiB + 200 * KiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsGrowByPagesInsteadOfNewSegments) {
  CachingAllocator a({.expandable_segments = true});
  // 3 MiB maps one 20 MiB page of the large pool's segment (17 MiB left,
  // split off: any rest of 512 B or more is). 30 MiB: nothing cached fits,
  // so the 17 MiB free block next to the unmapped rest grows by one more
  // page (13 MiB short -> 20 MiB mapped) to 37 MiB, and is split.
  a.Allocate(3 * MiB);
  a.Allocate(30 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 40 * MiB);
  EXPECT_THAT(Layout(a), ::testing::ElementsAre(std::make_tuple(0, 3, true),
                                                std::make_tuple(3, 30, true),
                                                std::make_tuple(33, 7, false)));
  // The same two requests with segments: 20 MiB + 30 MiB.
  CachingAllocator b;
  b.Allocate(3 * MiB);
  b.Allocate(30 * MiB);
  EXPECT_EQ(b.reserved_bytes(), 50 * MiB);
  // The small pool's pages are 2 MiB.
  a.Allocate(1 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 42 * MiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsCoalesceWhatSegmentsCannot) {
  // FreeBlocksOfDifferentSegmentsNeverCoalesce with expandable segments:
  // the two 12 MiB blocks are neighbours in one segment (12 + 8 free in the
  // first page; 8 is short of 12, so one more page: 12 + 16 free), merge
  // when freed, and 24 MiB fits without mapping more.
  CachingAllocator a({.expandable_segments = true});
  CachingAllocator::Handle x = a.Allocate(12 * MiB);
  CachingAllocator::Handle y = a.Allocate(12 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 40 * MiB);
  a.Free(x);
  a.Free(y);
  EXPECT_THAT(Layout(a), ::testing::ElementsAre(std::make_tuple(0, 40, false)));
  a.Allocate(24 * MiB);
  EXPECT_EQ(a.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 24 * MiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsUseTheGrowableBlockLast) {
  CachingAllocator a({.expandable_segments = true});
  // [12 used][4 used][4 free, next to the unmapped rest]; free the 12.
  CachingAllocator::Handle x = a.Allocate(12 * MiB);
  a.Allocate(4 * MiB);
  a.Free(x);
  // 3 MiB fits both free blocks; the 4 MiB one could grow, so PyTorch
  // counts it as larger than the 12 MiB one and takes that instead.
  a.Allocate(3 * MiB);
  EXPECT_THAT(Layout(a), ::testing::ElementsAre(std::make_tuple(0, 3, true),
                                                std::make_tuple(3, 9, false),
                                                std::make_tuple(12, 4, true),
                                                std::make_tuple(16, 4, false)));
  // Segments' best fit takes the 4 MiB block.
  CachingAllocator b;
  CachingAllocator::Handle z = b.Allocate(12 * MiB);
  b.Allocate(5 * MiB);  // a 20 MiB segment: [5 used][15 free]
  b.Free(z);            // [12 free] in its own segment
  b.Allocate(3 * MiB);  // best fit: the 12 MiB block over the 15 MiB one
  EXPECT_EQ(b.Blocks()[0].allocated, true);
  EXPECT_EQ(b.Blocks()[0].size, 3 * MiB);
}

// The free block a request takes, from the layout alone: in the request's
// pool, the smallest free block that fits, the lowest address among equals;
// null when none fits.
const Block* ExpectedFit(const std::vector<Block>& blocks, int64_t bytes) {
  const int64_t size = CachingAllocator::RoundSize(bytes);
  const bool small = size <= kSmallSize;
  const Block* best = nullptr;
  for (const Block& b : blocks) {
    if (b.allocated || b.small_pool != small || b.size < size) continue;
    if (best == nullptr || b.size < best->size) best = &b;
  }
  return best;
}

const Block* At(const std::vector<Block>& blocks, int64_t address) {
  for (const Block& b : blocks) {
    if (b.address == address) return &b;
  }
  return nullptr;
}

// Random allocations and frees, each allocation checked against the best
// fit read off the layout, with thousands of free blocks of one size (the
// free lists' ordered-tree form, past 1,024 blocks) and a few of others
// (their vector form). A fixed seed: the same sequence every run.
TEST(CachingAllocatorTest, EveryRequestTakesTheBestFitOfItsPool) {
  CachingAllocator a;
  std::mt19937_64 rng(20261207);
  std::vector<CachingAllocator::Handle> live;
  // Two 2 MiB small segments of 512 B blocks, every other one freed:
  // 4,096 free 512 B blocks that cannot merge.
  std::vector<CachingAllocator::Handle> filler;
  for (int i = 0; i < 2 * 4096; ++i) filler.push_back(a.Allocate(512));
  for (size_t i = 0; i < filler.size(); ++i) {
    if (i % 2 == 0) {
      a.Free(filler[i]);
    } else {
      live.push_back(filler[i]);
    }
  }
  const std::vector<int64_t> sizes = {1,       512,      700,     1536,
                                      4 * KiB, 96 * KiB, 1 * MiB, 1 * MiB + 1,
                                      3 * MiB, 12 * MiB, 25 * MiB};
  int checked = 0;
  for (int step = 0; step < 1500; ++step) {
    if (!live.empty() && rng() % 5 < 2) {
      const size_t i = rng() % live.size();
      a.Free(live[i]);
      live[i] = live.back();
      live.pop_back();
      continue;
    }
    const int64_t bytes = sizes[rng() % sizes.size()];
    const std::vector<Block> before = a.Blocks();
    const Block* fit = ExpectedFit(before, bytes);
    const int64_t address = fit != nullptr ? fit->address : -1;
    live.push_back(a.Allocate(bytes));
    if (address < 0) continue;
    const std::vector<Block> after = a.Blocks();
    const Block* taken = At(after, address);
    ASSERT_NE(taken, nullptr) << "step " << step;
    EXPECT_TRUE(taken->allocated) << "step " << step << ", " << bytes << " B";
    EXPECT_EQ(after.size(), before.size() + (taken->size < fit->size ? 1 : 0))
        << "step " << step << ": a new segment where a cached block fit";
    ++checked;
  }
  // Most requests found a cached block: the check ran.
  EXPECT_GT(checked, 600);
}

}  // namespace
}  // namespace slackswap
