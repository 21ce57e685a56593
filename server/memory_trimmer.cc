#include "server/memory_trimmer.h"

#include <malloc.h>

#include <utility>

namespace slackswap {

MemoryTrimmer::MemoryTrimmer(absl::Duration delay, std::function<void()> trim)
    : delay_(delay),
      trim_(trim != nullptr ? std::move(trim) : [] { malloc_trim(0); }),
      thread_([this] { Loop(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void MemoryTrimmer::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

int64_t MemoryTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

void MemoryTrimmer::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](MemoryTrimmer* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
          return t->requested_ || t->stopping_;
        },
        this));
    if (stopping_) return;
    requested_ = false;
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay_)) return;
    mu_.Unlock();
    trim_();
    mu_.Lock();
    ++trims_;
  }
}

}  // namespace slackswap
