// Immutable strings for the millions of names a large graph holds: 16 bytes
// each (a std::string is 32, plus a heap block for anything over 15
// characters), shared by reference count, and, when made by a TextPool,
// packed many to a block (no allocation per string) or interned (a graph's
// few dtypes and shapes, held once).
//
//   Text name = "L0.qkv";                  // a block of its own
//   TextPool pool;
//   Text a = pool.Add("L1.qkv");           // packed with others
//   Text dtype = pool.Intern("bf16");      // one block for every "bf16"
//   absl::string_view v = name;            // reads as a string_view
//   if (name == "L0.qkv") ...
//   absl::StrCat(name.view(), ".bwd");     // StrCat takes a view
//
// Copies share the block (an atomic count): a Text is safe to copy and
// destroy from any thread; blocks are freed with their last Text.
#ifndef SLACKSWAP_COMMON_TEXT_H_
#define SLACKSWAP_COMMON_TEXT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace slackswap {

class Text {
 public:
  Text() = default;
  // A copy of `s` in a block of its own. REQUIRES: s.size() < 4 GiB.
  Text(absl::string_view s);                           // NOLINT: as a string
  Text(const char* s) : Text(absl::string_view(s)) {}  // NOLINT
  Text(const std::string& s) : Text(absl::string_view(s)) {}  // NOLINT
  Text(const Text& o) : block_(o.block_), offset_(o.offset_), size_(o.size_) {
    Ref(block_);
  }
  Text(Text&& o) noexcept
      : block_(std::exchange(o.block_, nullptr)),
        offset_(std::exchange(o.offset_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  Text& operator=(const Text& o) {
    Text copy(o);
    Swap(copy);
    return *this;
  }
  Text& operator=(Text&& o) noexcept {
    Text moved(std::move(o));
    Swap(moved);
    return *this;
  }
  ~Text() { Unref(block_); }

  const char* data() const {
    return block_ == nullptr ? "" : Bytes() + offset_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::string_view view() const { return absl::string_view(data(), size_); }
  operator absl::string_view() const { return view(); }  // NOLINT
  // For std::string(text) (this Abseil's string_view is its own type).
  operator std::string_view() const {  // NOLINT
    return std::string_view(data(), size_);
  }
  std::string str() const { return std::string(view()); }

  // One operator, for Texts, strings and string literals alike (a second
  // for Text and Text would make `text == "x"` ambiguous).
  friend bool operator==(const Text& a, absl::string_view b) {
    return a.view() == b;
  }
  friend std::ostream& operator<<(std::ostream& out, const Text& t) {
    return out << t.view();
  }
  template <typename H>
  friend H AbslHashValue(H h, const Text& t) {
    return H::combine(std::move(h), t.view());
  }

 private:
  friend class TextPool;

  // Where the characters are: a count of the Texts that use it, then the
  // characters of every string in it.
  struct Block {
    std::atomic<int64_t> refs{1};
  };

  // A block of `bytes` characters, one reference held.
  static Block* NewBlock(size_t bytes);
  static void Ref(Block* b) {
    if (b != nullptr) b->refs.fetch_add(1, std::memory_order_relaxed);
  }
  static void Unref(Block* b);
  static char* BytesOf(Block* b) { return reinterpret_cast<char*>(b + 1); }
  const char* Bytes() const { return BytesOf(block_); }

  // Takes over a reference to `block`.
  Text(Block* block, uint32_t offset, uint32_t size)
      : block_(block), offset_(offset), size_(size) {}
  void Swap(Text& o) {
    std::swap(block_, o.block_);
    std::swap(offset_, o.offset_);
    std::swap(size_, o.size_);
  }

  Block* block_ = nullptr;
  uint32_t offset_ = 0;
  uint32_t size_ = 0;
};

// Makes Texts packed into shared blocks. Not thread-safe; the Texts it made
// are, and outlive it.
class TextPool {
 public:
  TextPool() = default;
  TextPool(const TextPool&) = delete;
  TextPool& operator=(const TextPool&) = delete;
  ~TextPool() { Text::Unref(block_); }

  // A copy of `s`, packed with the pool's other strings.
  Text Add(absl::string_view s);
  // The same block for equal strings: for the few values a field takes
  // across a graph (dtypes, shapes).
  Text Intern(absl::string_view s);

  // The characters a shared block holds; strings of an eighth of this or
  // longer get a block of their own.
  static constexpr size_t kBlockBytes = 64 << 10;

 private:
  Text::Block* block_ = nullptr;
  size_t used_ = 0;
  // Keys view their Text's characters.
  absl::flat_hash_map<absl::string_view, Text> interned_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_TEXT_H_
