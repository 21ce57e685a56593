#include "server/single_flight.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace slackswap {
namespace {

struct Outcome {
  absl::Status status;
  std::string bytes;
  int calls = 0;
};

SingleFlight::Waiter Into(Outcome* out, const std::atomic<bool>* gone) {
  return {[gone] { return gone->load(); },
          [out](const absl::Status& s, const std::string& b) {
            out->status = s;
            out->bytes = b;
            ++out->calls;
          }};
}

TEST(SingleFlightTest, FollowersGetTheLeadersAnswerOnce) {
  SingleFlight flights;
  std::atomic<bool> here{false};
  Outcome leader, a, b, other;
  EXPECT_TRUE(flights.Join("k", Into(&leader, &here)));
  EXPECT_FALSE(flights.Join("k", Into(&a, &here)));
  EXPECT_FALSE(flights.Join("k", Into(&b, &here)));
  EXPECT_TRUE(flights.Join("other", Into(&other, &here)));
  flights.Finish("k", absl::OkStatus(), "answer", "answer (shared)");
  EXPECT_EQ(leader.bytes, "answer");
  EXPECT_EQ(a.bytes, "answer (shared)");
  EXPECT_EQ(b.bytes, "answer (shared)");
  EXPECT_EQ(leader.calls + a.calls + b.calls, 3);
  EXPECT_EQ(other.calls, 0);
  EXPECT_EQ(flights.followers(), 2);
  // Finished: the next one leads a new computation.
  Outcome again;
  EXPECT_TRUE(flights.Join("k", Into(&again, &here)));
  flights.Finish("k", absl::InvalidArgumentError("bad"), "", "");
  EXPECT_EQ(again.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(SingleFlightTest, StopsOnlyWhenEveryWaiterHasGone) {
  SingleFlight flights;
  std::atomic<bool> leader_gone{false}, follower_gone{false};
  Outcome leader, follower;
  flights.Join("k", Into(&leader, &leader_gone));
  flights.Join("k", Into(&follower, &follower_gone));
  EXPECT_FALSE(flights.AllGone("k"));
  leader_gone = true;  // the leader's caller cancels: the other still waits
  EXPECT_FALSE(flights.AllGone("k"));
  follower_gone = true;
  EXPECT_TRUE(flights.AllGone("k"));
  EXPECT_TRUE(flights.AllGone("nothing in flight"));
  flights.Finish("k", absl::CancelledError("stopped"), "", "");
  EXPECT_EQ(follower.status.code(), absl::StatusCode::kCancelled);
}

TEST(SingleFlightTest, ManyThreadsOneComputation) {
  SingleFlight flights;
  std::atomic<bool> here{false};
  std::atomic<int> leaders{0}, delivered{0};
  constexpr int kThreads = 16;
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      const bool lead = flights.Join(
          "k", {[&here] { return here.load(); },
                [&delivered](const absl::Status&, const std::string&) {
                  ++delivered;
                }});
      if (lead) ++leaders;
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(leaders, 1);
  flights.Finish("k", absl::OkStatus(), "x", "x");
  EXPECT_EQ(delivered, kThreads);
}

}  // namespace
}  // namespace slackswap
