#include "sim/caching_allocator.h"

#include <algorithm>
#include <iterator>
#include <utility>

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

template <typename T, typename Less>
void CachingAllocator::SortedSet<T, Less>::Insert(const T& v) {
  if (tree_ == nullptr && few_.size() < kFew) {
    // The smallest yet, as most frees in a backward pass are: no search.
    if (few_.empty() || Less()(v, few_.back())) {
      few_.push_back(v);
      return;
    }
    few_.insert(std::lower_bound(few_.begin(), few_.end(), v, Descending()), v);
    return;
  }
  if (tree_ == nullptr) {
    tree_ =
        std::make_unique<absl::btree_set<T, Less>>(few_.begin(), few_.end());
    few_.clear();
  }
  tree_->insert(v);
}

template <typename T, typename Less>
void CachingAllocator::SortedSet<T, Less>::Erase(const T& v) {
  if (tree_ == nullptr) {
    few_.erase(std::lower_bound(few_.begin(), few_.end(), v, Descending()));
    return;
  }
  tree_->erase(v);
  // Small again: back to the vector.
  if (tree_->empty()) tree_.reset();
}

template <typename T, typename Less>
void CachingAllocator::SortedSet<T, Less>::EraseAt(const T* e) {
  if (tree_ != nullptr) {
    Erase(*e);
    return;
  }
  few_.erase(few_.begin() + (e - few_.data()));
}

template <typename T, typename Less>
std::pair<const T*, const T*> CachingAllocator::SortedSet<T, Less>::AtLeast(
    const T& v) const {
  if (tree_ != nullptr) {
    auto it = tree_->lower_bound(v);
    if (it == tree_->end()) return {nullptr, nullptr};
    auto next = std::next(it);
    return {&*it, next == tree_->end() ? nullptr : &*next};
  }
  // Descending: the elements >= v come first, the smallest of them last.
  auto it = std::lower_bound(few_.begin(), few_.end(), v, Descending());
  if (it == few_.end() || Less()(*it, v)) {
    if (it == few_.begin()) return {nullptr, nullptr};
    --it;
  }
  return {&*it, it == few_.begin() ? nullptr : &*std::prev(it)};
}

template <typename T, typename Less>
std::pair<const T*, const T*> CachingAllocator::SortedSet<T, Less>::Smallest()
    const {
  if (tree_ != nullptr) {
    auto it = tree_->begin();
    auto next = std::next(it);
    return {&*it, next == tree_->end() ? nullptr : &*next};
  }
  return {&few_.back(), few_.size() > 1 ? &few_[few_.size() - 2] : nullptr};
}

int32_t CachingAllocator::FreeSet::Insert(int64_t size, int64_t address,
                                          int32_t b, int32_t hint) {
  int32_t slot = hint;
  if (hint < 0 || slot_size_[hint] != size) {
    const std::pair<int64_t, int32_t>* fit = sizes_.AtLeast({size, 0}).first;
    if (fit != nullptr && fit->first == size) {
      slot = fit->second;
    } else {
      if (!spare_.empty()) {
        slot = spare_.back();
        spare_.pop_back();
      } else {
        slot = static_cast<int32_t>(buckets_.size());
        buckets_.emplace_back();
        slot_size_.push_back(-1);
      }
      slot_size_[slot] = size;
      sizes_.Insert({size, slot});
    }
  }
  buckets_[slot].Insert({address, b});
  return slot;
}

void CachingAllocator::FreeSet::Erase(int64_t address, int32_t b,
                                      int32_t slot) {
  Bucket& bucket = buckets_[slot];
  bucket.Erase({address, b});
  if (bucket.empty()) {
    sizes_.Erase({slot_size_[slot], slot});
    slot_size_[slot] = -1;
    spare_.push_back(slot);
  }
}

int32_t CachingAllocator::FreeSet::TakeBestFit(int64_t size,
                                               int32_t last_resort) {
  auto [fit, next_size] = sizes_.AtLeast({size, 0});
  if (fit == nullptr) return -1;
  Bucket* bucket = &buckets_[fit->second];
  auto [taken, next] = bucket->Smallest();
  // The one after it: the next of its size by address, else the lowest
  // address of the next size (PyTorch's order either way).
  if (taken->second == last_resort) {
    if (next != nullptr) {
      taken = next;
    } else if (next_size != nullptr) {
      fit = next_size;
      bucket = &buckets_[fit->second];
      taken = bucket->Smallest().first;
    }
  }
  const int32_t b = taken->second;
  bucket->EraseAt(taken);
  if (bucket->empty()) {
    slot_size_[fit->second] = -1;
    spare_.push_back(fit->second);
    sizes_.EraseAt(fit);
  }
  return b;
}

void CachingAllocator::Insert(int32_t b) {
  Block& block = blocks_[b];
  block.bucket =
      free_[block.small].Insert(block.size, block.address, b, block.bucket);
}

void CachingAllocator::Erase(int32_t b) {
  const Block& block = blocks_[b];
  free_[block.small].Erase(block.address, b, block.bucket);
}

int32_t CachingAllocator::TakeFree(bool small, int64_t size) {
  // PyTorch sizes the free block next to a segment's unmapped rest by what
  // it could grow to: it goes only to a request no other block fits.
  return free_[small].TakeBestFit(
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
  int32_t b = TakeFree(small, size);
  if (b < 0) {
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
