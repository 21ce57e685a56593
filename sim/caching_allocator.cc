#include "sim/caching_allocator.h"

#include <algorithm>
#include <functional>
#include <iterator>

#include "common/saturating.h"

namespace slackswap {
namespace {

// Where the large pool's expandable segment starts: far past anything the
// small pool's can map (a graph's bytes are capped at 2^60).
constexpr int64_t kLargeExpandableBase = int64_t{1} << 61;

int64_t RoundUp(int64_t bytes, int64_t unit) {
  return SaturatingMul((bytes + unit - 1) / unit, unit);
}

}  // namespace

CachingAllocator::CachingAllocator(AllocatorConfig config) : config_(config) {
  expandable_[0].base = expandable_[0].end = kLargeExpandableBase;
}

int64_t CachingAllocator::RoundSize(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return RoundUp(bytes, kMinBlockSize);
}

int64_t CachingAllocator::SegmentSize(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded, kRoundLarge);
}

int32_t CachingAllocator::NewBlock(int64_t address, int64_t size, bool small) {
  int32_t b;
  if (recycled_.empty()) {
    b = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
  } else {
    b = recycled_.back();
    recycled_.pop_back();
  }
  Block& block = blocks_[b];
  block = Block();
  block.address = address;
  block.size = size;
  block.small = small;
  block.live = true;
  return b;
}

void CachingAllocator::FreeSet::Insert(int64_t size, int64_t address,
                                       int32_t b) {
  Bucket& bucket = buckets_[size];
  if (bucket.empty()) {
    sizes_.insert(std::lower_bound(sizes_.begin(), sizes_.end(), size), size);
  }
  const std::pair<int64_t, int32_t> key = {address, b};
  bucket.insert(
      std::lower_bound(bucket.begin(), bucket.end(), key, std::greater<>()),
      key);
}

void CachingAllocator::FreeSet::Erase(int64_t size, int64_t address,
                                      int32_t b) {
  Bucket& bucket = buckets_.find(size)->second;
  bucket.erase(std::lower_bound(bucket.begin(), bucket.end(),
                                std::make_pair(address, b), std::greater<>()));
  if (bucket.empty()) {
    sizes_.erase(std::lower_bound(sizes_.begin(), sizes_.end(), size));
  }
}

int32_t CachingAllocator::FreeSet::BestFit(int64_t size,
                                           int32_t last_resort) const {
  auto it = std::lower_bound(sizes_.begin(), sizes_.end(), size);
  if (it == sizes_.end()) return -1;
  const Bucket& bucket = buckets_.find(*it)->second;
  const int32_t best = bucket.back().second;
  if (best != last_resort) return best;
  if (bucket.size() > 1) return bucket[bucket.size() - 2].second;
  if (std::next(it) != sizes_.end()) {
    return buckets_.find(*std::next(it))->second.back().second;
  }
  return best;
}

void CachingAllocator::Insert(int32_t b) {
  const Block& block = blocks_[b];
  free_[block.small].Insert(block.size, block.address, b);
}

void CachingAllocator::Erase(int32_t b) {
  const Block& block = blocks_[b];
  free_[block.small].Erase(block.size, block.address, b);
}

int32_t CachingAllocator::FindFree(bool small, int64_t size) const {
  // PyTorch sizes the free block next to a segment's unmapped rest by what
  // it could grow to: it goes only to a request no other block fits.
  return free_[small].BestFit(
      size, config_.expandable_segments ? expandable_[small].last : -1);
}

int32_t CachingAllocator::NewSegment(bool small, int64_t size) {
  const int64_t bytes = SegmentSize(size);
  const int32_t b = NewBlock(next_address_, bytes, small);
  next_address_ = SaturatingAdd(next_address_, bytes);
  reserved_ = SaturatingAdd(reserved_, bytes);
  ++segments_;
  return b;
}

int32_t CachingAllocator::Expand(bool small, int64_t size) {
  Expandable& seg = expandable_[small];
  const int64_t page = small ? kSmallBuffer : kLargeBuffer;
  // The free block before the unmapped rest grows into it; else the new
  // pages are a block of their own.
  const int32_t tail =
      seg.last >= 0 && !blocks_[seg.last].allocated ? seg.last : -1;
  const int64_t have = tail >= 0 ? blocks_[tail].size : 0;
  const int64_t mapped = RoundUp(size - have, page);
  reserved_ = SaturatingAdd(reserved_, mapped);
  ++segments_;
  int32_t b = tail;
  if (tail >= 0) {
    Erase(tail);
    blocks_[tail].size += mapped;
  } else {
    b = NewBlock(seg.end, mapped, small);
    blocks_[b].prev = seg.last;
    if (seg.last >= 0) blocks_[seg.last].next = b;
    seg.last = b;
  }
  seg.end = SaturatingAdd(seg.end, mapped);
  return b;
}

bool CachingAllocator::ShouldSplit(const Block& b, int64_t size) const {
  const int64_t remaining = b.size - size;
  if (b.small || config_.expandable_segments) {
    return remaining >= kMinBlockSize;
  }
  return remaining > kSmallSize;
}

void CachingAllocator::Split(int32_t b, int64_t size) {
  const Block& whole = blocks_[b];
  const int32_t rest =
      NewBlock(whole.address + size, whole.size - size, whole.small);
  // NewBlock may have grown blocks_: take references after it.
  Block& first = blocks_[b];
  Block& second = blocks_[rest];
  second.prev = b;
  second.next = first.next;
  if (first.next >= 0) blocks_[first.next].prev = rest;
  first.next = rest;
  first.size = size;
  Expandable& seg = expandable_[first.small];
  if (config_.expandable_segments && seg.last == b) seg.last = rest;
  Insert(rest);
}

CachingAllocator::Handle CachingAllocator::Allocate(int64_t bytes) {
  const int64_t size = RoundSize(bytes);
  const bool small = size <= kSmallSize;
  int32_t b = FindFree(small, size);
  if (b >= 0) {
    Erase(b);
  } else {
    b = config_.expandable_segments ? Expand(small, size)
                                    : NewSegment(small, size);
  }
  if (ShouldSplit(blocks_[b], size)) Split(b, size);
  blocks_[b].allocated = true;
  allocated_ += blocks_[b].size;
  return b;
}

void CachingAllocator::Absorb(int32_t b, int32_t n) {
  Erase(n);
  Block& block = blocks_[b];
  Block& other = blocks_[n];
  if (other.next == b) {  // [other block]
    block.address = other.address;
    block.prev = other.prev;
    if (block.prev >= 0) blocks_[block.prev].next = b;
  } else {  // [block other]
    block.next = other.next;
    if (block.next >= 0) blocks_[block.next].prev = b;
    Expandable& seg = expandable_[block.small];
    if (config_.expandable_segments && seg.last == n) seg.last = b;
  }
  block.size += other.size;
  other.live = false;
  recycled_.push_back(n);
}

void CachingAllocator::Free(Handle h) {
  Block& block = blocks_[h];
  block.allocated = false;
  allocated_ -= block.size;
  for (int32_t n : {block.prev, block.next}) {
    if (n >= 0 && !blocks_[n].allocated) Absorb(h, n);
  }
  Insert(h);
}

std::vector<CachingAllocator::BlockInfo> CachingAllocator::Blocks() const {
  std::vector<BlockInfo> out;
  for (const Block& b : blocks_) {
    if (b.live) out.push_back({b.address, b.size, b.allocated, b.small});
  }
  std::sort(out.begin(), out.end(), [](const BlockInfo& x, const BlockInfo& y) {
    return x.address < y.address;
  });
  return out;
}

}  // namespace slackswap
