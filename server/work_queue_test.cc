#include "server/work_queue.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

TEST(WorkQueueTest, RunsEveryTask) {
  constexpr int kTasks = 100;
  std::atomic<int> ran{0};
  BlockingCounter done(kTasks);
  WorkQueue queue(/*threads=*/3, /*max_queue=*/kTasks);
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&] {
      ran.fetch_add(1);
      done.DecrementCount();
    }));
  }
  done.Wait();
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_EQ(queue.queue_depth(), 0);
}

TEST(WorkQueueTest, ReportsSizes) {
  WorkQueue queue(/*threads=*/2, /*max_queue=*/5);
  EXPECT_EQ(queue.threads(), 2);
  EXPECT_EQ(queue.max_queue(), 5);
  EXPECT_EQ(queue.queue_depth(), 0);
  EXPECT_EQ(queue.running(), 0);
}

TEST(WorkQueueTest, RunsTasksInSubmissionOrderOnOneThread) {
  constexpr int kTasks = 20;
  std::vector<int> order;  // written by the only worker
  WorkQueue queue(/*threads=*/1, /*max_queue=*/kTasks);
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&order, i] { order.push_back(i); }));
  }
  queue.Shutdown();
  ASSERT_EQ(order.size(), kTasks);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkQueueTest, RunsAtMostThreadsTasksAtOnce) {
  constexpr int kThreads = 3;
  constexpr int kTasks = 12;
  std::atomic<int> active{0};
  std::atomic<int> max_active{0};
  BlockingCounter first_wave(kThreads);
  Notification release;
  WorkQueue queue(kThreads, /*max_queue=*/kTasks);
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&, i] {
      int now = active.fetch_add(1) + 1;
      int seen = max_active.load();
      while (now > seen && !max_active.compare_exchange_weak(seen, now)) {
      }
      if (i < kThreads) {
        first_wave.DecrementCount();
        release.WaitForNotification();
      }
      active.fetch_sub(1);
    }));
  }
  // The first kThreads tasks hold every worker; the rest must wait.
  first_wave.Wait();
  EXPECT_EQ(queue.running(), kThreads);
  EXPECT_EQ(queue.queue_depth(), kTasks - kThreads);
  EXPECT_EQ(active.load(), kThreads);
  release.Notify();
  queue.Shutdown();
  EXPECT_EQ(max_active.load(), kThreads);
  EXPECT_EQ(queue.running(), 0);
  EXPECT_EQ(queue.queue_depth(), 0);
}

TEST(WorkQueueTest, RejectsWhenFullAndAcceptsAfterDraining) {
  constexpr int kThreads = 2;
  constexpr int kMaxQueue = 3;
  WorkQueue queue(kThreads, kMaxQueue);

  // Occupy both workers with tasks that block until released.
  BlockingCounter started(kThreads);
  Notification release;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&] {
      started.DecrementCount();
      release.WaitForNotification();
    }));
  }
  started.Wait();
  EXPECT_EQ(queue.running(), kThreads);
  EXPECT_EQ(queue.queue_depth(), 0);

  // Running tasks do not count against max_queue: kMaxQueue more fit.
  BlockingCounter queued_done(kMaxQueue);
  for (int i = 0; i < kMaxQueue; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&] { queued_done.DecrementCount(); }));
    EXPECT_EQ(queue.queue_depth(), i + 1);
  }
  bool rejected_ran = false;
  EXPECT_FALSE(queue.TrySubmit([&] { rejected_ran = true; }));
  EXPECT_FALSE(queue.TrySubmit([] {}));
  EXPECT_EQ(queue.queue_depth(), kMaxQueue);
  EXPECT_EQ(queue.running(), kThreads);

  // Drain: once every queued task has run, the queue is empty again.
  release.Notify();
  queued_done.Wait();
  EXPECT_EQ(queue.queue_depth(), 0);

  Notification later_ran;
  EXPECT_TRUE(queue.TrySubmit([&] { later_ran.Notify(); }));
  later_ran.WaitForNotification();
  queue.Shutdown();
  EXPECT_FALSE(rejected_ran);
}

// Continuations of admitted work queue behind what arrived meanwhile, even
// past max_queue; only a shut-down queue refuses them.
TEST(WorkQueueTest, ContinuationsGoToTheBackWhateverTheLength) {
  WorkQueue queue(/*threads=*/1, /*max_queue=*/1);
  Notification release;
  Notification running;
  ASSERT_TRUE(queue.TrySubmit([&] {
    running.Notify();
    release.WaitForNotification();
  }));
  running.WaitForNotification();
  std::vector<int> order;
  Mutex mu;
  auto record = [&](int i) {
    return [&, i] {
      MutexLock lock(&mu);
      order.push_back(i);
    };
  };
  ASSERT_TRUE(queue.TrySubmit(record(1)));
  EXPECT_FALSE(queue.TrySubmit(record(99)));  // full for new work
  EXPECT_TRUE(queue.Continue(record(2)));     // but not for continuations
  EXPECT_EQ(queue.queue_depth(), 2);
  release.Notify();
  queue.Shutdown();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_FALSE(queue.Continue(record(3)));
}

TEST(WorkQueueTest, ShutdownRunsQueuedTasksThenRejects) {
  constexpr int kQueued = 5;
  // A large bound, so that TrySubmit only fails once Shutdown has begun.
  WorkQueue queue(/*threads=*/1, /*max_queue=*/1 << 20);
  Notification started;
  Notification release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(queue.TrySubmit([&] {
    started.Notify();
    release.WaitForNotification();
    ran.fetch_add(1);
  }));
  started.WaitForNotification();
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&] { ran.fetch_add(1); }));
  }
  EXPECT_EQ(queue.queue_depth(), kQueued);

  std::thread shutdown([&] { queue.Shutdown(); });
  // Shutdown stops accepting before it waits for the blocked task; every
  // task accepted until then must still run.
  int accepted_meanwhile = 0;
  while (queue.TrySubmit([&] { ran.fetch_add(1); })) {
    ++accepted_meanwhile;
    std::this_thread::yield();
  }
  EXPECT_EQ(ran.load(), 0);
  release.Notify();
  shutdown.join();

  EXPECT_EQ(ran.load(), 1 + kQueued + accepted_meanwhile);
  EXPECT_EQ(queue.queue_depth(), 0);
  EXPECT_EQ(queue.running(), 0);
  EXPECT_FALSE(queue.TrySubmit([] {}));
}

TEST(WorkQueueTest, ShutdownIsIdempotentAndConcurrentCallersAllReturn) {
  std::atomic<int> ran{0};
  WorkQueue queue(/*threads=*/2, /*max_queue=*/10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(queue.TrySubmit([&] { ran.fetch_add(1); }));
  }
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) callers.emplace_back([&] { queue.Shutdown(); });
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(ran.load(), 10);
  queue.Shutdown();
  EXPECT_FALSE(queue.TrySubmit([] {}));
}

TEST(WorkQueueTest, DestructorRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    WorkQueue queue(/*threads=*/1, /*max_queue=*/50);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(queue.TrySubmit([&] { ran.fetch_add(1); }));
    }
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(WorkQueueTest, TaskStateIsReleasedAfterRunning) {
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> weak = token;
  Notification ran;
  WorkQueue queue(/*threads=*/1, /*max_queue=*/1);
  ASSERT_TRUE(queue.TrySubmit([token = std::move(token), &ran] {
    EXPECT_EQ(*token, 7);
    ran.Notify();
  }));
  ran.WaitForNotification();
  queue.Shutdown();
  EXPECT_TRUE(weak.expired());
}

TEST(WorkQueueTest, RejectedTaskIsNotKept) {
  Notification started;
  Notification release;
  WorkQueue queue(/*threads=*/1, /*max_queue=*/1);
  ASSERT_TRUE(queue.TrySubmit([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  ASSERT_TRUE(queue.TrySubmit([] {}));

  auto token = std::make_shared<int>(1);
  std::weak_ptr<int> weak = token;
  EXPECT_FALSE(queue.TrySubmit([token = std::move(token)] {}));
  EXPECT_TRUE(weak.expired());
  release.Notify();
}

TEST(WorkQueueTest, ManySubmittersKeepTheBound) {
  constexpr int kSubmitters = 4;
  constexpr int kPerSubmitter = 500;
  constexpr int kMaxQueue = 8;
  std::atomic<int> ran{0};
  std::atomic<int> accepted{0};
  WorkQueue queue(/*threads=*/2, kMaxQueue);
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&] {
      for (int i = 0; i < kPerSubmitter; ++i) {
        if (queue.TrySubmit([&] { ran.fetch_add(1); })) accepted.fetch_add(1);
        EXPECT_LE(queue.queue_depth(), kMaxQueue);
        EXPECT_LE(queue.running(), 2);
      }
    });
  }
  for (std::thread& submitter : submitters) submitter.join();
  queue.Shutdown();
  EXPECT_EQ(ran.load(), accepted.load());
  EXPECT_GT(accepted.load(), 0);
}

// Workers run at the nice value asked for, above the caller's, which
// keeps its own.
TEST(WorkQueueTest, WorkersRunAtTheNiceValueAskedFor) {
  const int caller = getpriority(PRIO_PROCESS, gettid());
  if (caller > 14) GTEST_SKIP() << "already at nice " << caller;
  std::atomic<int> seen{-100};
  {
    WorkQueue queue(1, 1, /*nice=*/5);
    ASSERT_TRUE(
        queue.TrySubmit([&] { seen = getpriority(PRIO_PROCESS, gettid()); }));
    queue.Shutdown();
  }
  EXPECT_EQ(seen.load(), caller + 5);
  EXPECT_EQ(getpriority(PRIO_PROCESS, gettid()), caller);
}

}  // namespace
}  // namespace slackswap
