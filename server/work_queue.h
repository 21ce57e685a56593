// A fixed pool of worker threads fed by a bounded FIFO of tasks, for
// admission control in the service: when the queue is full, TrySubmit fails
// at once, and the caller answers RESOURCE_EXHAUSTED instead of waiting.
//
//   WorkQueue queue(/*threads=*/4, /*max_queue=*/64);
//   if (!queue.TrySubmit([&] { Plan(request); })) {
//     return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");
//   }
//   ...
//   queue.Shutdown();  // runs what is queued, then joins the workers
//
// Tasks run in submission order (FIFO) on whichever worker is free; at most
// `threads` run at once. A task counts as waiting (queue_depth) from the
// TrySubmit that accepted it until a worker takes it; a task that is being
// run does not count against max_queue.
//
// Thread-safe: every method may be called from any thread, except that
// Shutdown and the destructor must not be called from inside a task.
#ifndef SLACKSWAP_SERVER_WORK_QUEUE_H_
#define SLACKSWAP_SERVER_WORK_QUEUE_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace slackswap {

class WorkQueue {
 public:
  // Starts `threads` worker threads at once. A `nice` above 0 lowers the
  // workers' scheduling priority by that much (setpriority), so that
  // threads outside the pool (the service's gRPC threads answering cache
  // hits) run first when the cores are busy with tasks; a failure to set it
  // is ignored.
  // REQUIRES: threads >= 1, max_queue >= 1, 0 <= nice <= 19.
  WorkQueue(int threads, int max_queue, int nice = 0);

  // Calls Shutdown().
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `task` to run on a worker and returns true, or returns false at
  // once, without blocking and without running or keeping `task`, when
  // max_queue tasks are already waiting or Shutdown has been called.
  // REQUIRES: task is non-empty.
  bool TrySubmit(std::function<void()> task);
  // Queues the next part of work already admitted (a sweep's next unit) at
  // the back, whatever the queue's length, so that it takes its turn after
  // what arrived meanwhile; false, without keeping `task`, only after
  // Shutdown. REQUIRES: task is non-empty.
  bool Continue(std::function<void()> task);

  // Stops accepting tasks (TrySubmit returns false from now on), runs every
  // task already queued to completion, and joins the worker threads.
  // Idempotent; concurrent callers all return once the workers are joined.
  // REQUIRES: not called from inside a task of this queue.
  void Shutdown();

  // The number of accepted tasks that no worker has taken yet.
  int queue_depth() const;

  // The number of tasks being run right now.
  int running() const;

  int threads() const { return threads_; }
  int max_queue() const { return max_queue_; }

 private:
  // The body of each worker thread: takes tasks until shut down and drained.
  void WorkerLoop();

  // True when a worker has something to do: a task, or exiting.
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  const int threads_;
  const int max_queue_;

  mutable Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Serializes Shutdown's joining of the workers; never held with mu_.
  Mutex join_mu_;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_WORK_QUEUE_H_
