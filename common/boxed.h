// Values kept on the heap behind one pointer, for fields that most of the
// millions of objects holding them leave empty: 8 bytes in the object where
// the value itself would take many more (a tensor's rebuild recipe was 72 of
// its 192 bytes; a decision's reason, 32 of 56). Copies are deep.
//
//   struct Tensor { Boxed<Rebuild> rebuild; };   // as std::optional<Rebuild>
//   if (t.rebuild.has_value()) Use(t.rebuild->inputs);
//   t.rebuild = Rebuild{.inputs = {3}};
//
//   struct DecisionFacts { BoxedString reason; };  // as std::string
//   f.reason = absl::StrCat("keep: ", why);
//   const std::string& text = f.reason;
#ifndef SLACKSWAP_COMMON_BOXED_H_
#define SLACKSWAP_COMMON_BOXED_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace slackswap {

// std::optional<T>'s interface, as the code here uses it.
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(std::nullopt_t) {}  // NOLINT: as std::optional
  Boxed(const T& value)     // NOLINT: as std::optional
      : p_(std::make_unique<T>(value)) {}
  Boxed(T&& value)  // NOLINT: as std::optional
      : p_(std::make_unique<T>(std::move(value))) {}
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(std::nullopt_t) {
    p_.reset();
    return *this;
  }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  // REQUIRES: has_value().
  const T& operator*() const { return *p_; }
  T& operator*() { return *p_; }
  const T* operator->() const { return p_.get(); }
  T* operator->() { return p_.get(); }
  const T& value() const { return *p_; }
  T& value() { return *p_; }

  template <typename... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

// A string, empty without an allocation; reads as a const std::string&.
class BoxedString {
 public:
  BoxedString() = default;
  BoxedString(std::string s)  // NOLINT: as std::string
      : p_(s.empty() ? nullptr : std::make_unique<std::string>(std::move(s))) {}
  BoxedString(const char* s) : BoxedString(std::string(s)) {}  // NOLINT
  BoxedString(const BoxedString& o)
      : p_(o.p_ ? std::make_unique<std::string>(*o.p_) : nullptr) {}
  BoxedString(BoxedString&&) noexcept = default;
  BoxedString& operator=(const BoxedString& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<std::string>(*o.p_) : nullptr;
    return *this;
  }
  BoxedString& operator=(BoxedString&&) noexcept = default;

  const std::string& str() const { return p_ ? *p_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT
  bool empty() const { return p_ == nullptr; }
  void clear() { p_.reset(); }
  size_t size() const { return str().size(); }
  size_t find(absl::string_view s, size_t pos = 0) const {
    return absl::string_view(str()).find(s, pos);
  }

  friend bool operator==(const BoxedString& a, absl::string_view b) {
    return absl::string_view(a.str()) == b;
  }
  friend bool operator!=(const BoxedString& a, absl::string_view b) {
    return !(a == b);
  }

  friend std::ostream& operator<<(std::ostream& out, const BoxedString& s) {
    return out << s.str();
  }

 private:
  static const std::string& Empty() {
    static const std::string* const empty = new std::string;
    return *empty;
  }

  std::unique_ptr<std::string> p_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_BOXED_H_
