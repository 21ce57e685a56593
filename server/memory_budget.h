// A bound on the estimated memory of the calls a server holds at once: each
// call reserves its estimate when it arrives and gives it back when it ends;
// a call that does not fit is refused at once (the caller answers
// RESOURCE_EXHAUSTED) rather than queued, so a burst of large requests
// cannot take the process past its memory limit.
//
//   MemoryBudget budget(/*capacity_bytes=*/192 << 20);
//   if (!budget.TryReserve(bytes)) return Refuse();
//   ...
//   budget.Release(bytes);
//
// Thread-safe.
#ifndef SLACKSWAP_SERVER_MEMORY_BUDGET_H_
#define SLACKSWAP_SERVER_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace slackswap {

class MemoryBudget {
 public:
  // REQUIRES: capacity_bytes >= 0; 0 means no limit.
  explicit MemoryBudget(int64_t capacity_bytes)
      : capacity_bytes_(capacity_bytes) {}

  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Reserves `bytes` and returns true if they fit beside what is reserved.
  bool TryReserve(int64_t bytes) {
    MutexLock lock(&mu_);
    if (capacity_bytes_ > 0 && reserved_ + bytes > capacity_bytes_) {
      return false;
    }
    reserved_ += bytes;
    return true;
  }

  // REQUIRES: `bytes` were reserved.
  void Release(int64_t bytes) {
    MutexLock lock(&mu_);
    reserved_ -= bytes;
  }

  int64_t reserved() const {
    MutexLock lock(&mu_);
    return reserved_;
  }
  int64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  // Immutable after construction.
  const int64_t capacity_bytes_;

  mutable Mutex mu_;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_MEMORY_BUDGET_H_
