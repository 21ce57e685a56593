#include "planner/internal/sample_in_force.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace slackswap {
namespace {

// What a bisection of the whole timeline answers.
int32_t Bisected(const std::vector<ActivationSample>& timeline, int64_t t) {
  auto after = std::upper_bound(
      timeline.begin(), timeline.end(), t,
      [](int64_t x, const ActivationSample& s) { return x < s.time_ns; });
  return std::max<int32_t>(0,
                           static_cast<int32_t>(after - timeline.begin()) - 1);
}

TEST(SampleInForceTest, TheLastSampleAtOrBeforeATime) {
  const std::vector<ActivationSample> timeline = {
      {10, 0}, {20, 0}, {20, 0}, {35, 0}};
  SampleInForce at(timeline);
  EXPECT_EQ(at.At(5), 0);  // before every sample
  EXPECT_EQ(at.At(10), 0);
  EXPECT_EQ(at.At(19), 0);
  EXPECT_EQ(at.At(20), 2);  // the last of two at one time
  EXPECT_EQ(at.At(34), 2);
  EXPECT_EQ(at.At(35), 3);
  EXPECT_EQ(at.At(1000), 3);
  EXPECT_EQ(at.At(12), 0);  // back again
  EXPECT_EQ(at.At(20), 2);
}

// Timelines of every length up to 70 with runs of equal times, asked about
// times that mostly rise (short and long steps, as task ends do) and now and
// then fall back: every answer is the bisection's.
TEST(SampleInForceTest, AgreesWithABisectionInAnyOrder) {
  std::mt19937 rng(7);
  for (int32_t n = 1; n <= 70; ++n) {
    std::vector<ActivationSample> timeline;
    int64_t time = 0;
    for (int32_t i = 0; i < n; ++i) {
      time += std::uniform_int_distribution<int64_t>(0, 3)(rng);
      timeline.push_back({time, i});
    }
    SampleInForce at(timeline);
    int64_t t = -2;
    for (int32_t q = 0; q < 200; ++q) {
      const int32_t kind = std::uniform_int_distribution<int32_t>(0, 9)(rng);
      if (kind == 0) {
        t = std::uniform_int_distribution<int64_t>(-2, time + 2)(rng);
      } else if (kind == 1) {
        t += std::uniform_int_distribution<int64_t>(0, time + 2)(rng);
      } else {
        t += std::uniform_int_distribution<int64_t>(0, 2)(rng);
      }
      ASSERT_EQ(at.At(t), Bisected(timeline, t))
          << "n=" << n << " query " << q << " t=" << t;
    }
  }
}

}  // namespace
}  // namespace slackswap
