#include "server/work_queue.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <utility>

namespace slackswap {

WorkQueue::WorkQueue(int threads, int max_queue, int nice)
    : threads_(threads), max_queue_(max_queue) {
  assert(threads >= 1);
  assert(max_queue >= 1);
  assert(nice >= 0 && nice <= 19);
  MutexLock lock(&join_mu_);
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this, nice] {
      // Linux: a thread's nice value is its own (the tid is a process id
      // to setpriority).
      if (nice > 0) {
        const int inherited = getpriority(PRIO_PROCESS, gettid());
        setpriority(PRIO_PROCESS, gettid(), std::min(19, inherited + nice));
      }
      WorkerLoop();
    });
  }
}

WorkQueue::~WorkQueue() { Shutdown(); }

bool WorkQueue::TrySubmit(std::function<void()> task) {
  assert(task);
  MutexLock lock(&mu_);
  if (stopping_ || static_cast<int>(queue_.size()) >= max_queue_) {
    return false;
  }
  queue_.push_back(std::move(task));
  return true;
}

bool WorkQueue::Continue(std::function<void()> task) {
  assert(task);
  MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(task));
  return true;
}

void WorkQueue::Shutdown() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  MutexLock lock(&join_mu_);
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

int WorkQueue::queue_depth() const {
  MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int WorkQueue::running() const {
  MutexLock lock(&mu_);
  return running_;
}

bool WorkQueue::HasWorkOrStopping() const {
  return !queue_.empty() || stopping_;
}

void WorkQueue::WorkerLoop() {
  mu_.Lock();
  while (true) {
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return HasWorkOrStopping();
    });
    if (queue_.empty()) break;  // stopping_, and nothing is left to run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    task();
    task = nullptr;  // destroy captured state outside the lock
    mu_.Lock();
    --running_;
  }
  mu_.Unlock();
}

}  // namespace slackswap
