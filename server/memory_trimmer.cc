#include "server/memory_trimmer.h"

#include <malloc.h>

#include <utility>

namespace slackswap {

MemoryTrimmer::MemoryTrimmer(std::chrono::nanoseconds delay,
                             std::function<void()> trim)
    : delay_(delay),
      trim_(trim != nullptr ? std::move(trim) : [] { malloc_trim(0); }),
      thread_([this] { Loop(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void MemoryTrimmer::Request() {
  MutexLock lock(&mu_);
  requested_ = true;
}

int64_t MemoryTrimmer::trims() const {
  MutexLock lock(&mu_);
  return trims_;
}

void MemoryTrimmer::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return requested_ || stopping_;
    });
    if (stopping_) return;
    requested_ = false;
    if (mu_.AwaitWithTimeout(
            [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
            delay_)) {
      return;
    }
    mu_.Unlock();
    trim_();
    mu_.Lock();
    ++trims_;
  }
}

}  // namespace slackswap
