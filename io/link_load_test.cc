// A link's load from a result without the simulator's series: the copies of
// the ranks it carries at their average rates, summed per instant, back to
// exactly 0 at the end, and bounded whatever a file claims.
#include "io/link_load.h"

#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/stream_events.h"

namespace slackswap {

// Beside the type, for gtest to find.
void PrintTo(const LinkLoadSample& s, std::ostream* os) {
  *os << "{" << s.time_ns << " ns, h2d " << s.h2d_bytes_per_s << ", d2h "
      << s.d2h_bytes_per_s << "}";
}

namespace {

using ::slackswap::testutil::AddStreamEvent;

// A node of two ranks whose one link carries both.
v1::NodeSimulation TwoRanksOnALink() {
  v1::NodeSimulation n;
  n.add_ranks();
  n.add_ranks();
  v1::LinkUsage* link = n.add_links();
  link->add_ranks(0);
  link->add_ranks(1);
  return n;
}

TEST(LinkLoadTest, CopiesOfEveryRankAddUpPerInstant) {
  v1::NodeSimulation n = TwoRanksOnALink();
  v1::SimulationResult& r0 = *n.mutable_ranks(0)->mutable_result();
  v1::SimulationResult& r1 = *n.mutable_ranks(1)->mutable_result();
  // 1000 bytes over 1000 ns is 1e9 bytes/s.
  AddStreamEvent(r0, v1::STREAM_H2D, v1::EVENT_KIND_PREFETCH, "a", 0, 1000,
                 1000);
  AddStreamEvent(r1, v1::STREAM_H2D, v1::EVENT_KIND_PREFETCH, "b", 500, 1500,
                 2000);
  AddStreamEvent(r1, v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, "c", 500, 1000,
                 500);
  // Compute moves nothing over the link.
  AddStreamEvent(r0, v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "op", 0, 1500);
  const std::vector<LinkLoadSample> expected = {
      {0, 1'000'000'000, 0},
      {500, 3'000'000'000, 1'000'000'000},
      {1000, 2'000'000'000, 0},
      {1500, 0, 0}};
  EXPECT_EQ(LinkLoad(n.links(0), n), expected);
  EXPECT_TRUE(HasLinkLoad(n.links(0)));
  // A link carrying no rank has nothing to show.
  EXPECT_FALSE(HasLinkLoad(v1::LinkUsage{}));
}

TEST(LinkLoadTest, ClaimsAtTheInt64LimitsStayBoundedAndEndAtZero) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  v1::NodeSimulation n = TwoRanksOnALink();
  for (int rank : {0, 1}) {
    v1::SimulationResult& r = *n.mutable_ranks(rank)->mutable_result();
    AddStreamEvent(r, v1::STREAM_H2D, v1::EVENT_KIND_PREFETCH, "huge", 0, 1,
                   kMax);
    AddStreamEvent(r, v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, "long", kMin,
                   kMax, kMax);
  }
  const std::vector<LinkLoadSample> load = LinkLoad(n.links(0), n);
  ASSERT_FALSE(load.empty());
  for (const LinkLoadSample& s : load) {
    EXPECT_GE(s.h2d_bytes_per_s, 0);
    EXPECT_GE(s.d2h_bytes_per_s, 0);
  }
  EXPECT_EQ(load.front().time_ns, kMin);
  EXPECT_EQ(load.back(), (LinkLoadSample{kMax, 0, 0}));
  // Two copies each at int64's largest rate: the sum is shown at the limit.
  EXPECT_EQ(load[1].h2d_bytes_per_s, kMax);
}

}  // namespace
}  // namespace slackswap
