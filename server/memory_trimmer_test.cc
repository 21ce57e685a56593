#include "server/memory_trimmer.h"

#include <atomic>
#include <chrono>

#include "common/mutex.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

TEST(MemoryTrimmerTest, ARequestIsFollowedByATrim) {
  Notification trimmed;
  MemoryTrimmer trimmer(std::chrono::nanoseconds(0), [&] { trimmed.Notify(); });
  EXPECT_EQ(trimmer.trims(), 0);
  trimmer.Request();
  trimmed.WaitForNotification();
}

TEST(MemoryTrimmerTest, NothingIsTrimmedUnasked) {
  std::atomic<int> trims{0};
  {
    MemoryTrimmer trimmer(std::chrono::nanoseconds(0), [&] { ++trims; });
  }
  EXPECT_EQ(trims.load(), 0);
}

// Shutting down does not wait out the delay, and drops the pending trim.
TEST(MemoryTrimmerTest, ShutdownDuringTheDelayDropsTheTrim) {
  std::atomic<int> trims{0};
  {
    MemoryTrimmer trimmer(std::chrono::hours(1), [&] { ++trims; });
    trimmer.Request();
  }
  EXPECT_EQ(trims.load(), 0);
}

// A request made while a trim runs gets a trim of its own after it.
TEST(MemoryTrimmerTest, ARequestDuringATrimGetsAnotherTrim) {
  Notification in_first, release_first, second;
  std::atomic<int> calls{0};
  MemoryTrimmer trimmer(std::chrono::nanoseconds(0), [&] {
    const int n = ++calls;
    if (n == 1) {
      in_first.Notify();
      release_first.WaitForNotification();
    } else if (n == 2) {
      second.Notify();
    }
  });
  trimmer.Request();
  in_first.WaitForNotification();
  trimmer.Request();
  release_first.Notify();
  second.WaitForNotification();
  EXPECT_GE(calls.load(), 2);
}

}  // namespace
}  // namespace slackswap
