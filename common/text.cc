#include "common/text.h"

#include <cstring>
#include <new>

namespace slackswap {

Text::Block* Text::NewBlock(size_t bytes) {
  void* p = ::operator new(sizeof(Block) + bytes);
  return new (p) Block;
}

void Text::Unref(Block* b) {
  if (b == nullptr || b->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  b->~Block();
  ::operator delete(b);
}

Text::Text(absl::string_view s) {
  if (s.empty()) return;
  block_ = NewBlock(s.size());
  std::memcpy(BytesOf(block_), s.data(), s.size());
  size_ = static_cast<uint32_t>(s.size());
}

Text TextPool::Add(absl::string_view s) {
  if (s.empty()) return Text();
  // Long strings would waste the rest of a block.
  if (s.size() >= kBlockBytes / 8) return Text(s);
  if (block_ == nullptr || used_ + s.size() > kBlockBytes) {
    Text::Unref(block_);
    block_ = Text::NewBlock(kBlockBytes);
    used_ = 0;
  }
  std::memcpy(Text::BytesOf(block_) + used_, s.data(), s.size());
  Text::Ref(block_);
  Text t(block_, static_cast<uint32_t>(used_), static_cast<uint32_t>(s.size()));
  used_ += s.size();
  return t;
}

Text TextPool::Intern(absl::string_view s) {
  auto it = interned_.find(s);
  if (it != interned_.end()) return it->second;
  Text t = Add(s);
  interned_.emplace(t.view(), t);
  return t;
}

}  // namespace slackswap
