// Max-min fair rates worked by hand, and a randomized comparison with a
// brute-force progressive filling written here from scratch (every round
// recounts every link-direction's flows and remainder over all flows), with
// the max-min properties checked directly.
#include "sim/flow_network.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr double kInf = std::numeric_limits<double>::infinity();

LinkCapacity Symmetric(double rate) { return {rate, rate, rate, rate}; }

std::vector<int32_t> TouchedOf(const FlowNetwork& net) {
  absl::Span<const int32_t> t = net.Touched();
  return std::vector<int32_t>(t.begin(), t.end());
}

TEST(FlowNetworkTest, TheHeaderExample) {
  FlowNetwork net;
  const int32_t uplink =
      net.AddLink({.h2d = 25, .d2h = 25, .both_h2d = 20, .both_d2h = 20});
  const int32_t a = net.StartFlow({{uplink, LinkDir::kH2D}});
  const int32_t b = net.StartFlow({{uplink, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(a), 12.5);
  EXPECT_EQ(net.Rate(b), 12.5);
  net.EndFlow(b);
  EXPECT_EQ(net.Rate(a), 25);
  EXPECT_EQ(net.num_active_flows(), 1);
  EXPECT_EQ(net.num_links(), 1);
}

TEST(FlowNetworkTest,
     TwoFlowsOnOneUplinkSplitItAndOneSpeedsUpWhenTheOtherEnds) {
  FlowNetwork net;
  const int32_t uplink = net.AddLink(Symmetric(24));
  const int32_t a = net.StartFlow({{uplink, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(a), 24);
  const int32_t b = net.StartFlow({{uplink, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(a), 12);
  EXPECT_EQ(net.Rate(b), 12);
  EXPECT_THAT(TouchedOf(net), ElementsAre(a, b));
  net.EndFlow(a);
  EXPECT_EQ(net.Rate(b), 24);
  EXPECT_THAT(TouchedOf(net), ElementsAre(b));
}

TEST(FlowNetworkTest, AFlowAloneGetsExactlyTheCapacity) {
  // Not c * (1 / 1) through some other rounding: the same double, so a copy
  // alone on its link moves as in the single-GPU simulator.
  const double c = 0.1 + 0.2;  // 0.30000000000000004
  FlowNetwork net;
  const int32_t link = net.AddLink({c, c / 3, c / 7, c / 11});
  const int32_t a = net.StartFlow({{link, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(a), c);
  const int32_t b = net.StartFlow({{link, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(a), c / 7);
  EXPECT_EQ(net.Rate(b), c / 11);
  net.EndFlow(a);
  EXPECT_EQ(net.Rate(b), c / 3);
}

TEST(FlowNetworkTest, ThreeFlowsWithDifferentBottlenecks) {
  // Link A: 10 B/ns, link B: 4 B/ns (one direction used).
  //   flow1: A      flow2: A and B      flow3: B
  // Round 1: A's share 10 / 2 = 5, B's 4 / 2 = 2: B is the bottleneck;
  //   flow2 = flow3 = 2, and A has 10 - 2 = 8 left for its one unfrozen flow.
  // Round 2: A's share 8 / 1 = 8: flow1 = 8.
  // Max-min: flow1 cannot grow (A is full and flow1 is its largest), nor can
  // flow2 or flow3 (B is full, 2 = 2).
  FlowNetwork net;
  const int32_t link_a = net.AddLink(Symmetric(10));
  const int32_t link_b = net.AddLink(Symmetric(4));
  const int32_t f1 = net.StartFlow({{link_a, LinkDir::kH2D}});
  const int32_t f2 =
      net.StartFlow({{link_a, LinkDir::kH2D}, {link_b, LinkDir::kH2D}});
  const int32_t f3 = net.StartFlow({{link_b, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(f1), 8);
  EXPECT_EQ(net.Rate(f2), 2);
  EXPECT_EQ(net.Rate(f3), 2);
  EXPECT_THAT(TouchedOf(net), ElementsAre(f1, f2, f3));
  // Without flow3, B's share is 4 / 1 = 4 and A's 10 / 2 = 5: B still
  // binds, flow2 = 4, and flow1 gets A's remaining 10 - 4 = 6.
  net.EndFlow(f3);
  EXPECT_EQ(net.Rate(f1), 6);
  EXPECT_EQ(net.Rate(f2), 4);
  EXPECT_THAT(TouchedOf(net), ElementsAre(f1, f2));
}

TEST(FlowNetworkTest, TheOtherDirectionDropsALinkToItsBothFigure) {
  FlowNetwork net;
  const int32_t link =
      net.AddLink({.h2d = 25, .d2h = 24, .both_h2d = 20, .both_d2h = 18});
  const int32_t up = net.StartFlow({{link, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(up), 25);
  const int32_t down = net.StartFlow({{link, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(up), 20);
  EXPECT_EQ(net.Rate(down), 18);
  // A second H2D flow splits both_h2d; D2H keeps its whole both_d2h.
  const int32_t up2 = net.StartFlow({{link, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(up), 10);
  EXPECT_EQ(net.Rate(up2), 10);
  EXPECT_EQ(net.Rate(down), 18);
  net.EndFlow(down);
  EXPECT_EQ(net.Rate(up), 12.5);
  EXPECT_EQ(net.Rate(up2), 12.5);
  EXPECT_THAT(TouchedOf(net), ElementsAre(up, up2));
  net.EndFlow(up2);
  EXPECT_EQ(net.Rate(up), 25);
}

TEST(FlowNetworkTest, InfiniteLinksNeverLimit) {
  FlowNetwork net;
  const int32_t nvlink = net.AddLink(Symmetric(kInf));
  const int32_t pcie =
      net.AddLink({.h2d = 25, .d2h = 25, .both_h2d = 20, .both_d2h = 20});
  const int32_t free1 = net.StartFlow({{nvlink, LinkDir::kH2D}});
  const int32_t free2 = net.StartFlow({{nvlink, LinkDir::kH2D}});
  const int32_t back = net.StartFlow({{nvlink, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(free1), kInf);
  EXPECT_EQ(net.Rate(free2), kInf);
  EXPECT_EQ(net.Rate(back), kInf);
  // A flow over the infinite link and PCIe gets PCIe's rate, and the
  // infinite link's remainder stays infinite (no inf - inf = NaN).
  const int32_t both =
      net.StartFlow({{nvlink, LinkDir::kH2D}, {pcie, LinkDir::kD2H}});
  EXPECT_EQ(net.Rate(both), 25);
  EXPECT_EQ(net.Rate(free1), kInf);
  EXPECT_EQ(net.Rate(free2), kInf);
  EXPECT_EQ(net.Rate(back), kInf);
  const int32_t pcie_up = net.StartFlow({{pcie, LinkDir::kH2D}});
  EXPECT_EQ(net.Rate(both), 20);
  EXPECT_EQ(net.Rate(pcie_up), 20);
  EXPECT_EQ(net.Rate(free1), kInf);
  for (int32_t f : TouchedOf(net)) EXPECT_FALSE(std::isnan(net.Rate(f)));
  // A path with no links is not limited either.
  const int32_t nowhere = net.StartFlow({});
  EXPECT_EQ(net.Rate(nowhere), kInf);
  EXPECT_THAT(TouchedOf(net), ElementsAre(nowhere));
}

TEST(FlowNetworkTest, TouchedIsTheChangedFlowsComponents) {
  FlowNetwork net;
  const int32_t l0 = net.AddLink({10, 10, 6, 6});
  const int32_t l1 = net.AddLink({10, 10, 6, 6});
  const int32_t l2 = net.AddLink({10, 10, 6, 6});
  const int32_t x = net.StartFlow({{l0, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(x));
  const int32_t y = net.StartFlow({{l1, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(y));
  // The first flow the other way on l0 lowers x's capacity: x is touched,
  // y is not.
  const int32_t z = net.StartFlow({{l0, LinkDir::kD2H}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(x, z));
  EXPECT_EQ(net.Rate(x), 6);
  // A second one shares z's direction only: x keeps its capacity.
  const int32_t v = net.StartFlow({{l0, LinkDir::kD2H}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(z, v));
  EXPECT_EQ(net.Rate(v), 3);
  EXPECT_EQ(net.Rate(x), 6);
  // A flow over l1 and l2 is the first the other way on l1 (y): 6 each.
  const int32_t w = net.StartFlow({{l1, LinkDir::kD2H}, {l2, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(y, w));
  EXPECT_EQ(net.Rate(w), 6);
  // A bridge over l2 and l0 shares l0's D2H with z and v, and is the first
  // D2H on l2, which lowers w's l2 H2D: all four are touched.
  const int32_t bridge =
      net.StartFlow({{l2, LinkDir::kD2H}, {l0, LinkDir::kD2H}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(z, v, w, bridge));
  EXPECT_EQ(net.Rate(bridge), 2);  // l0 D2H: 6 with x the other way, / 3
  net.EndFlow(bridge);
  EXPECT_THAT(TouchedOf(net), ElementsAre(z, v, w));
  // y's end gives w the whole of l1's D2H; the last flow on its links
  // touches nothing when it ends.
  net.EndFlow(y);
  EXPECT_THAT(TouchedOf(net), ElementsAre(w));
  EXPECT_EQ(net.Rate(w), 10);
  net.EndFlow(w);
  EXPECT_THAT(TouchedOf(net), IsEmpty());
  // Rates of untouched flows stay as they were.
  EXPECT_EQ(net.Rate(x), 6);
  EXPECT_EQ(net.Rate(z), 3);
}

TEST(FlowNetworkTest, DirectionsThatDoNotSlowEachOtherAreApart) {
  FlowNetwork net;
  const int32_t port = net.AddLink(Symmetric(10));
  const int32_t pcie = net.AddLink({10, 10, 6, 6});
  const int32_t x = net.StartFlow({{port, LinkDir::kD2H}});
  // The other direction of the port: x keeps its rate and is not touched.
  const int32_t y = net.StartFlow({{port, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(y));
  EXPECT_EQ(net.Rate(x), 10);
  EXPECT_EQ(net.Rate(y), 10);
  // The same direction is shared as on any link.
  const int32_t z = net.StartFlow({{port, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(y, z));
  EXPECT_EQ(net.Rate(y), 5);
  // A link whose directions slow each other ties them when one starts.
  const int32_t a =
      net.StartFlow({{pcie, LinkDir::kD2H}, {port, LinkDir::kD2H}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(x, a));
  const int32_t b = net.StartFlow({{pcie, LinkDir::kH2D}});
  EXPECT_THAT(TouchedOf(net), ElementsAre(x, a, b));
  EXPECT_EQ(net.Rate(a), 5);  // the port's D2H, halved with x
  EXPECT_EQ(net.Rate(b), 6);  // pcie H2D while D2H is busy
  net.EndFlow(z);
  EXPECT_THAT(TouchedOf(net), ElementsAre(y));
  EXPECT_EQ(net.Rate(y), 10);
}

TEST(FlowNetworkTest, EndedIdsAreReusedSmallestFirst) {
  FlowNetwork net;
  const int32_t link = net.AddLink(Symmetric(6));
  const Hop hop{link, LinkDir::kH2D};
  EXPECT_EQ(net.StartFlow({hop}), 0);
  EXPECT_EQ(net.StartFlow({hop}), 1);
  EXPECT_EQ(net.StartFlow({hop}), 2);
  EXPECT_EQ(net.Rate(1), 2);
  net.EndFlow(2);
  net.EndFlow(0);
  EXPECT_EQ(net.num_active_flows(), 1);
  EXPECT_EQ(net.Rate(1), 6);
  EXPECT_EQ(net.StartFlow({hop}), 0);
  EXPECT_EQ(net.StartFlow({hop}), 2);
  EXPECT_EQ(net.StartFlow({hop}), 3);
  EXPECT_EQ(net.num_active_flows(), 4);
  EXPECT_EQ(net.Rate(3), 1.5);
}

// The reference: progressive filling on all active flows, recounting every
// link-direction from scratch each round.
struct RefFlow {
  int32_t id;
  std::vector<Hop> path;
};

int32_t Ld(const Hop& h) {
  return 2 * h.link + (h.dir == LinkDir::kH2D ? 1 : 0);
}

double RefCapacity(const std::vector<LinkCapacity>& links,
                   const std::vector<RefFlow>& flows, int32_t ld) {
  const int32_t link = ld / 2;
  const bool h2d = ld % 2 == 1;
  bool other = false;
  for (const RefFlow& f : flows) {
    for (const Hop& h : f.path) {
      if (h.link == link && (h.dir == LinkDir::kH2D) != h2d) other = true;
    }
  }
  const LinkCapacity& c = links[link];
  if (h2d) return other ? c.both_h2d : c.h2d;
  return other ? c.both_d2h : c.d2h;
}

// Rates by flow id (NaN for inactive ids).
std::vector<double> ReferenceRates(const std::vector<LinkCapacity>& links,
                                   const std::vector<RefFlow>& flows,
                                   int32_t max_id) {
  std::vector<double> rate(max_id, std::nan(""));
  std::vector<bool> frozen(max_id, false);
  for (const RefFlow& f : flows) {
    if (f.path.empty()) {
      rate[f.id] = kInf;
      frozen[f.id] = true;
    }
  }
  while (true) {
    double best_share = kInf;
    int32_t best_ld = -1;
    for (int32_t ld = 0; ld < 2 * static_cast<int32_t>(links.size()); ++ld) {
      int32_t unfrozen = 0;
      double used = 0;
      for (const RefFlow& f : flows) {
        for (const Hop& h : f.path) {
          if (Ld(h) != ld) continue;
          if (frozen[f.id]) {
            used += rate[f.id];
          } else {
            ++unfrozen;
          }
        }
      }
      if (unfrozen == 0) continue;
      const double cap = RefCapacity(links, flows, ld);
      const double share =
          cap == kInf ? kInf : std::max(0.0, cap - used) / unfrozen;
      if (best_ld < 0 || share < best_share) {
        best_ld = ld;
        best_share = share;
      }
    }
    if (best_ld < 0) break;
    for (const RefFlow& f : flows) {
      if (frozen[f.id]) continue;
      for (const Hop& h : f.path) {
        if (Ld(h) == best_ld) {
          frozen[f.id] = true;
          rate[f.id] = best_share;
        }
      }
    }
  }
  return rate;
}

bool Near(double a, double b) {
  if (a == b) return true;  // infinities
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

bool SlowedByOther(const std::vector<LinkCapacity>& links, int32_t ld) {
  const LinkCapacity& c = links[ld / 2];
  return ld % 2 == 1 ? c.both_h2d != c.h2d : c.both_d2h != c.d2h;
}

// The flows in the components (over link-directions) of `changed`, the
// path of the flow started (`started`, its id) or ended: its
// link-directions, and the other direction of each it took from no flow
// or to none where that changes a capacity. `flows` are the active flows
// after the change.
std::vector<int32_t> ReferenceComponent(const std::vector<LinkCapacity>& links,
                                        const std::vector<RefFlow>& flows,
                                        int32_t started,
                                        const std::vector<Hop>& changed) {
  const auto count = [&flows](int32_t ld) {
    int32_t n = 0;
    for (const RefFlow& f : flows) {
      for (const Hop& h : f.path) n += Ld(h) == ld;
    }
    return n;
  };
  std::vector<int32_t> lds;
  for (const Hop& h : changed) {
    lds.push_back(Ld(h));
    const bool first_or_last = count(Ld(h)) == (started >= 0 ? 1 : 0);
    const int32_t other = Ld(h) ^ 1;
    if (first_or_last && SlowedByOther(links, other) && count(other) > 0) {
      lds.push_back(other);
    }
  }
  std::vector<int32_t> out;
  if (started >= 0) out.push_back(started);
  bool grew = true;
  while (grew) {
    grew = false;
    for (const RefFlow& f : flows) {
      bool in = std::find(out.begin(), out.end(), f.id) != out.end();
      for (const Hop& h : f.path) {
        if (std::find(lds.begin(), lds.end(), Ld(h)) != lds.end()) in = true;
      }
      if (!in) continue;
      if (std::find(out.begin(), out.end(), f.id) == out.end()) {
        out.push_back(f.id);
        grew = true;
      }
      for (const Hop& h : f.path) {
        if (std::find(lds.begin(), lds.end(), Ld(h)) == lds.end()) {
          lds.push_back(Ld(h));
          grew = true;
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void CheckMaxMin(const std::vector<LinkCapacity>& links,
                 const std::vector<RefFlow>& flows, const FlowNetwork& net) {
  const int32_t num_ld = 2 * static_cast<int32_t>(links.size());
  std::vector<double> used(num_ld, 0);
  std::vector<double> largest(num_ld, 0);
  for (const RefFlow& f : flows) {
    const double r = net.Rate(f.id);
    ASSERT_FALSE(std::isnan(r));
    ASSERT_GT(r, 0);
    for (const Hop& h : f.path) {
      used[Ld(h)] += r;
      largest[Ld(h)] = std::max(largest[Ld(h)], r);
    }
  }
  std::vector<bool> saturated(num_ld, false);
  for (int32_t ld = 0; ld < num_ld; ++ld) {
    if (used[ld] == 0) continue;
    const double cap = RefCapacity(links, flows, ld);
    if (cap == kInf) continue;
    EXPECT_LE(used[ld], cap * (1 + 1e-9)) << "link-direction " << ld;
    saturated[ld] = used[ld] >= cap * (1 - 1e-9);
  }
  // Every flow has a bottleneck: a saturated link-direction where no flow
  // is faster than it.
  for (const RefFlow& f : flows) {
    const double r = net.Rate(f.id);
    if (r == kInf) continue;
    bool bottleneck = false;
    for (const Hop& h : f.path) {
      if (saturated[Ld(h)] && r >= largest[Ld(h)] * (1 - 1e-9)) {
        bottleneck = true;
      }
    }
    EXPECT_TRUE(bottleneck) << "flow " << f.id << " at " << r;
  }
}

TEST(FlowNetworkTest, MatchesABruteForceReferenceOnRandomNetworks) {
  // std::mt19937's outputs are fixed by the standard (distributions are
  // not), so the cases are the same on every platform.
  std::mt19937 rng(20240601);
  auto uniform = [&rng](uint32_t n) { return static_cast<int32_t>(rng() % n); };
  int64_t checked = 0;
  for (int round = 0; round < 40; ++round) {
    const int32_t num_links = 1 + uniform(8);
    std::vector<LinkCapacity> links;
    FlowNetwork net;
    for (int32_t l = 0; l < num_links; ++l) {
      LinkCapacity c;
      if (uniform(10) == 0) {
        c = Symmetric(kInf);
      } else {
        c.h2d = 1 + uniform(50) + uniform(1000) / 1000.0;
        c.d2h = 1 + uniform(50) + uniform(1000) / 1000.0;
        c.both_h2d = c.h2d * (0.5 + uniform(6) / 10.0);
        c.both_d2h = c.d2h * (0.5 + uniform(6) / 10.0);
      }
      links.push_back(c);
      ASSERT_EQ(net.AddLink(c), l);
    }
    std::vector<RefFlow> flows;
    for (int step = 0; step < 60; ++step) {
      const bool start = flows.empty() || uniform(3) != 0;
      std::vector<int32_t> expected_touched;
      if (start) {
        // One to three distinct links, random directions.
        std::vector<Hop> path;
        const int32_t hops = 1 + uniform(3);
        for (int32_t h = 0; h < hops; ++h) {
          const int32_t link = uniform(num_links);
          bool dup = false;
          for (const Hop& p : path) dup = dup || p.link == link;
          if (dup) continue;
          path.push_back(
              {link, uniform(2) == 0 ? LinkDir::kH2D : LinkDir::kD2H});
        }
        // The expected id: the smallest one not active.
        int32_t id = 0;
        while (std::any_of(flows.begin(), flows.end(),
                           [id](const RefFlow& f) { return f.id == id; })) {
          ++id;
        }
        ASSERT_EQ(net.StartFlow(path), id);
        flows.push_back({id, path});
        expected_touched = ReferenceComponent(links, flows, id, path);
      } else {
        const size_t k = uniform(static_cast<uint32_t>(flows.size()));
        const RefFlow ended = flows[k];
        flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(k));
        net.EndFlow(ended.id);
        expected_touched = ReferenceComponent(links, flows, -1, ended.path);
      }
      ASSERT_EQ(net.num_active_flows(), static_cast<int32_t>(flows.size()));
      ASSERT_EQ(TouchedOf(net), expected_touched)
          << "round " << round << " step " << step;
      int32_t max_id = 0;
      for (const RefFlow& f : flows) max_id = std::max(max_id, f.id + 1);
      const std::vector<double> want = ReferenceRates(links, flows, max_id);
      for (const RefFlow& f : flows) {
        ASSERT_TRUE(Near(net.Rate(f.id), want[f.id]))
            << "round " << round << " step " << step << " flow " << f.id << ": "
            << net.Rate(f.id) << " vs " << want[f.id];
        ++checked;
      }
      CheckMaxMin(links, flows, net);
    }
  }
  EXPECT_GT(checked, 10'000);
}

// A random link: infinite now and then, else one-way rates with their
// both-directions figures lower.
LinkCapacity RandomLink(const std::function<int32_t(uint32_t)>& uniform) {
  if (uniform(8) == 0) return Symmetric(kInf);
  LinkCapacity c;
  c.h2d = 1 + uniform(30) + uniform(1000) / 1000.0;
  c.d2h = 1 + uniform(30) + uniform(1000) / 1000.0;
  c.both_h2d = c.h2d * (0.3 + uniform(8) / 10.0);
  c.both_d2h = c.d2h * (0.3 + uniform(8) / 10.0);
  return c;
}

// 200 rounds of 80 random starts and ends, the same calls on two networks
// whose links `add_links(num_links, a, b)` adds alike; after each call
// `check(a, b, active flows)` compares them (gtest assertions; a failure
// stops the run).
void SameRandomCalls(
    uint32_t seed,
    const std::function<void(std::function<int32_t(uint32_t)>&, int32_t,
                             FlowNetwork&, FlowNetwork&)>& add_links,
    const std::function<void(const FlowNetwork&, const FlowNetwork&,
                             const std::vector<RefFlow>&)>& check) {
  std::mt19937 rng(seed);
  std::function<int32_t(uint32_t)> uniform = [&rng](uint32_t n) {
    return static_cast<int32_t>(rng() % n);
  };
  for (int round = 0; round < 200; ++round) {
    const int32_t num_links = 1 + uniform(6);
    FlowNetwork a;
    FlowNetwork b;
    add_links(uniform, num_links, a, b);
    std::vector<RefFlow> flows;
    for (int step = 0; step < 80; ++step) {
      SCOPED_TRACE(::testing::Message()
                   << "round " << round << " step " << step);
      if (flows.empty() || uniform(2) == 0) {
        std::vector<Hop> path;
        const int32_t hops = uniform(4);  // an empty path now and then
        for (int32_t h = 0; h < hops; ++h) {
          const int32_t link = uniform(num_links);
          bool dup = false;
          for (const Hop& p : path) dup = dup || p.link == link;
          if (dup) continue;
          path.push_back(
              {link, uniform(2) == 0 ? LinkDir::kH2D : LinkDir::kD2H});
        }
        const int32_t id = a.StartFlow(path);
        ASSERT_EQ(b.StartFlow(path), id);
        flows.push_back({id, path});
      } else {
        const size_t k = uniform(static_cast<uint32_t>(flows.size()));
        a.EndFlow(flows[k].id);
        b.EndFlow(flows[k].id);
        flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(k));
      }
      check(a, b, flows);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void ExpectSameBits(const FlowNetwork& a, const FlowNetwork& b,
                    const std::vector<RefFlow>& flows) {
  for (const RefFlow& f : flows) {
    const double x = a.Rate(f.id);
    const double y = b.Rate(f.id);
    ASSERT_EQ(std::memcmp(&x, &y, sizeof(double)), 0)
        << "flow " << f.id << ": " << x << " vs " << y;
  }
}

// The shortcuts (a flow alone on its link-directions takes the smallest of
// their capacities; a component of one flow, started or left after an end,
// or of two, is not searched) against the progressive filling of every
// flow: the same calls on two networks, one with the shortcuts off, give
// the same bits and the same touched flows.
TEST(FlowNetworkTest, TheShortcutsGiveTheFillingsBits) {
  int64_t alone = 0;
  int64_t alone_both = 0;
  int64_t shared = 0;
  int64_t one_left = 0;
  int64_t pairs_sharing = 0;
  size_t active = 0;
  SameRandomCalls(
      20261203,
      [](std::function<int32_t(uint32_t)>& uniform, int32_t num_links,
         FlowNetwork& fast, FlowNetwork& full) {
        full.DisableFastPathsForTesting();
        for (int32_t l = 0; l < num_links; ++l) {
          const LinkCapacity c = RandomLink(uniform);
          ASSERT_EQ(fast.AddLink(c), l);
          ASSERT_EQ(full.AddLink(c), l);
        }
      },
      [&](const FlowNetwork& fast, const FlowNetwork& full,
          const std::vector<RefFlow>& flows) {
        ASSERT_EQ(TouchedOf(fast), TouchedOf(full));
        ExpectSameBits(fast, full, flows);
        // An end after which one flow is its component alone, and a start
        // or end whose component is two flows sharing a link-direction.
        const std::vector<int32_t> touched = TouchedOf(fast);
        one_left += flows.size() < active && touched.size() == 1;
        active = flows.size();
        if (touched.size() == 2) {
          const auto path_of = [&flows](int32_t id) {
            return std::find_if(flows.begin(), flows.end(),
                                [id](const RefFlow& f) { return f.id == id; })
                ->path;
          };
          bool share = false;
          for (const Hop& a : path_of(touched[0])) {
            for (const Hop& b : path_of(touched[1])) {
              share |= a.link == b.link && a.dir == b.dir;
            }
          }
          pairs_sharing += share;
        }
        // Which case each flow is: alone on its link-directions (with the
        // other direction of one of its links busy, or not), or sharing.
        for (const RefFlow& f : flows) {
          bool is_alone = true;
          bool other_way = false;
          for (const Hop& h : f.path) {
            for (const RefFlow& g : flows) {
              if (g.id == f.id) continue;
              for (const Hop& gh : g.path) {
                if (gh.link != h.link) continue;
                if (gh.dir == h.dir) is_alone = false;
                if (gh.dir != h.dir) other_way = true;
              }
            }
          }
          if (!is_alone) {
            ++shared;
          } else if (other_way) {
            ++alone_both;
          } else {
            ++alone;
          }
        }
      });
  // Each case often enough that a wrong shortcut shows.
  EXPECT_GT(alone, 1'000);
  EXPECT_GT(alone_both, 1'000);
  EXPECT_GT(shared, 1'000);
  EXPECT_GT(one_left, 500);
  EXPECT_GT(pairs_sharing, 400);
}

// Only the components a start or end can change are refilled: against a
// network that refills every flow at every start and end, the same calls
// give the same bits (the flows left out kept theirs), and fewer flows are
// touched.
TEST(FlowNetworkTest, RefillingOnlyTheChangedComponentsGivesTheSameBits) {
  int64_t fewer_touched = 0;
  int64_t symmetric = 0;
  SameRandomCalls(
      20261206,
      [&symmetric](std::function<int32_t(uint32_t)>& uniform, int32_t num_links,
                   FlowNetwork& parts, FlowNetwork& all) {
        all.RecomputeEverythingForTesting();
        for (int32_t l = 0; l < num_links; ++l) {
          LinkCapacity c = RandomLink(uniform);
          // Now and then one whose directions do not slow each other.
          if (c.h2d != kInf && uniform(4) == 0) {
            c = Symmetric(c.h2d);
            ++symmetric;
          }
          ASSERT_EQ(parts.AddLink(c), l);
          ASSERT_EQ(all.AddLink(c), l);
        }
      },
      [&](const FlowNetwork& parts, const FlowNetwork& all,
          const std::vector<RefFlow>& flows) {
        const std::vector<int32_t> a = TouchedOf(parts);
        const std::vector<int32_t> b = TouchedOf(all);
        ASSERT_TRUE(std::includes(b.begin(), b.end(), a.begin(), a.end()));
        fewer_touched += a.size() < b.size();
        ExpectSameBits(parts, all, flows);
      });
  // Often enough that the two networks' searches did differ.
  EXPECT_GT(fewer_touched, 5'000);
  EXPECT_GT(symmetric, 50);
}

TEST(FlowNetworkTest, TheSameCallsGiveTheSameBits) {
  auto run = [] {
    FlowNetwork net;
    std::vector<double> out;
    const int32_t a = net.AddLink({3, 7, 1.1, 2.3});
    const int32_t b = net.AddLink({0.7, 0.9, 0.3, 0.5});
    const int32_t f = net.StartFlow({{a, LinkDir::kH2D}, {b, LinkDir::kD2H}});
    const int32_t g = net.StartFlow({{a, LinkDir::kD2H}});
    const int32_t h = net.StartFlow({{b, LinkDir::kH2D}, {a, LinkDir::kH2D}});
    for (int32_t x : {f, g, h}) out.push_back(net.Rate(x));
    net.EndFlow(f);
    for (int32_t x : {g, h}) out.push_back(net.Rate(x));
    return out;
  };
  const std::vector<double> first = run();
  const std::vector<double> second = run();
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(std::memcmp(&first[i], &second[i], sizeof(double)), 0);
  }
}

}  // namespace
}  // namespace slackswap
