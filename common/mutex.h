// Locking primitives with absl::Mutex's interface and thread-safety
// annotations, built on std::mutex so that ThreadSanitizer understands them.
//
// Why not absl::Mutex: Debian's Abseil is a prebuilt library without
// ThreadSanitizer instrumentation, so TSan cannot see absl::Mutex's
// happens-before edges and reports every access it guards as a race. The
// standard library's locks go through pthreads, which TSan intercepts.
//
//   class Counter {
//    public:
//     void Add() { MutexLock lock(&mu_); ++n_; }
//    private:
//     Mutex mu_;
//     int n_ ABSL_GUARDED_BY(mu_) = 0;
//   };
//
//   mu_.Lock();
//   mu_.Await([this] { return ready_; });   // waits; the lock is held again
//   mu_.Unlock();
#ifndef SLACKSWAP_COMMON_MUTEX_H_
#define SLACKSWAP_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace slackswap {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes every Await so each re-checks its condition, as absl::Mutex does.
  // Notifies before unlocking: a waiter may destroy the Mutex as soon as it
  // can lock it.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    changed_.notify_all();
    mu_.unlock();
  }
  // REQUIRES: held. Releases the lock until `condition` (evaluated with the
  // lock held) is true, then returns with the lock held.
  void Await(const std::function<bool()>& condition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    changed_.wait(lock, condition);
    lock.release();
  }
  // REQUIRES: held. As Await, but gives up after `timeout`; returns whether
  // `condition` held.
  bool AwaitWithTimeout(const std::function<bool()>& condition,
                        std::chrono::nanoseconds timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    const bool met = changed_.wait_for(lock, timeout, condition);
    lock.release();
    return met;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event, like absl::Notification.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  void WaitForNotification() {
    MutexLock lock(&mu_);
    mu_.Await([this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; });
  }

 private:
  Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

// Counts down to zero once; Wait blocks until it gets there, like
// absl::BlockingCounter.
class BlockingCounter {
 public:
  explicit BlockingCounter(int count) : count_(count) {}
  void DecrementCount() {
    MutexLock lock(&mu_);
    --count_;
  }
  void Wait() {
    MutexLock lock(&mu_);
    mu_.Await([this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ <= 0; });
  }

 private:
  Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_);
};

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_MUTEX_H_
