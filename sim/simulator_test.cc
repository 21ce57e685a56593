// Simulator tests on graphs small enough that every time and memory figure
// is worked out by hand below. Ops carry measured durations, and the link
// moves 1 byte/ns each way alone (0.8 while both directions are busy) with
// no latency, so a 1000-byte copy takes 1000 ns alone.
#include "sim/simulator.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/graph_builder.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testutil::GraphBuilder;
using testutil::TestLink;

SimResult Sim(const Graph& g, const Plan& plan, int64_t budget = 0,
              const Hardware& hw = TestLink()) {
  SimOptions opts;
  opts.budget_bytes = budget;
  opts.record_events = true;
  absl::StatusOr<SimResult> r = Simulate(g, hw, plan, opts);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

Plan Swap(const Graph& g, std::vector<std::pair<int32_t, int32_t>> swaps) {
  Plan plan = Plan::KeepAll(g);
  for (auto [t, after] : swaps) {
    plan.decisions[t].action = Action::kSwap;
    plan.decisions[t].prefetch_after_op = after;
  }
  return plan;
}

// The event of that type and index; null when there is none, so check it
// (ASSERT_NE) before reading it: a regression then fails one test instead
// of crashing the binary.
const SimEvent* FindEvent(const SimResult& r, EventType type, int32_t index) {
  for (const SimEvent& e : r.events) {
    if (e.type == type && e.index == index) return &e;
  }
  return nullptr;
}

// The tensors prefetched, in the order their copies started.
std::vector<int32_t> PrefetchOrder(const SimResult& r) {
  std::vector<const SimEvent*> prefetches;
  for (const SimEvent& e : r.events) {
    if (e.type == EventType::kPrefetch) prefetches.push_back(&e);
  }
  std::stable_sort(prefetches.begin(), prefetches.end(),
                   [](const SimEvent* x, const SimEvent* y) {
                     return x->start_ns < y->start_ns;
                   });
  std::vector<int32_t> order;
  for (const SimEvent* e : prefetches) order.push_back(e->index);
  return order;
}

// f_a makes `a` (1000 B, read only by b_a); f_long and b_long give the copies
// compute to hide under.
struct SwapGraph {
  Graph g;
  int32_t a, f_long, b_long;
};
SwapGraph MakeSwapGraph(int64_t b_long_ns) {
  GraphBuilder b;
  SwapGraph s;
  s.a = b.Tensor("a", 1000);
  b.Forward("f_a", 100, {}, {s.a});
  s.f_long = b.Forward("f_long", 2000, {}, {});
  s.b_long = b.Backward("b_long", b_long_ns, {});
  b.Backward("b_a", 100, {s.a});
  s.g = b.Build();
  return s;
}

TEST(SimulatorTest, NoPlanRunsAtIdealSpeed) {
  SwapGraph s = MakeSwapGraph(2000);
  SimResult r = Sim(s.g, Plan::KeepAll(s.g));
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(r.step_ns, 4200);
  EXPECT_EQ(r.ideal_step_ns, 4200);
  EXPECT_DOUBLE_EQ(r.throughput_retained, 1.0);
  EXPECT_EQ(r.peak_activation_bytes, 1000);
  EXPECT_EQ(r.unconstrained_peak_bytes, 1000);
  EXPECT_EQ(r.d2h_bytes, 0);
}

TEST(SimulatorTest, SwapThatHidesCostsNothing) {
  // D2H of a: 100..1100 under f_long (100..2100); the prefetch issued when
  // b_long starts (2100) lands at 3100, before b_a starts at 4100.
  SwapGraph s = MakeSwapGraph(2000);
  SimResult r = Sim(s.g, Swap(s.g, {{s.a, s.b_long}}), /*budget=*/1000);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  EXPECT_EQ(r.step_ns, 4200);
  EXPECT_DOUBLE_EQ(r.throughput_retained, 1.0);
  EXPECT_EQ(r.d2h_bytes, 1000);
  EXPECT_EQ(r.h2d_bytes, 1000);
  EXPECT_EQ(r.stall_prefetch_ns, 0);
  const SimEvent* out = FindEvent(r, EventType::kSwapOut, s.a);
  const SimEvent* in = FindEvent(r, EventType::kPrefetch, s.a);
  ASSERT_NE(out, nullptr);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(out->start_ns, 100);
  EXPECT_EQ(out->end_ns, 1100);
  EXPECT_EQ(in->start_ns, 2100);
  EXPECT_EQ(in->end_ns, 3100);
  // Activation memory: a from 0, released at 1100, back at 2100, freed 4200.
  ASSERT_EQ(r.timeline.size(), 4u);
  EXPECT_EQ(r.timeline[1].time_ns, 1100);
  EXPECT_EQ(r.timeline[1].activation_bytes, 0);
  EXPECT_EQ(r.timeline[2].time_ns, 2100);
  EXPECT_EQ(r.timeline[2].activation_bytes, 1000);
  EXPECT_EQ(r.timeline[3].activation_bytes, 0);
}

TEST(SimulatorTest, SwapThatStallsCostsExactlyTheUncoveredCopy) {
  // b_long runs 2100..2500 but the prefetch lands at 3100: b_a waits 600 ns.
  SwapGraph s = MakeSwapGraph(400);
  SimResult r = Sim(s.g, Swap(s.g, {{s.a, s.b_long}}));
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.ideal_step_ns, 2600);
  EXPECT_EQ(r.step_ns, 3200);
  EXPECT_EQ(r.stall_prefetch_ns, 600);
  EXPECT_EQ(r.stall_swap_out_ns + r.stall_memory_ns, 0);
  EXPECT_DOUBLE_EQ(r.throughput_retained, 2600.0 / 3200.0);
}

TEST(SimulatorTest, TransferLatencyIsAddedToEachCopy) {
  SwapGraph s = MakeSwapGraph(400);
  Hardware hw = TestLink();
  hw.transfer_latency_ns = 50;
  SimResult r = Sim(s.g, Swap(s.g, {{s.a, s.b_long}}), 0, hw);
  // Prefetch 2100 + 50 + 1000 = 3150; b_a 3150..3250.
  EXPECT_EQ(r.step_ns, 3250);
}

TEST(SimulatorTest, RecomputeChainRerunsEachDroppedLink) {
  // x -> f1 -> y (not saved) -> f2 -> z. Recomputing z needs y, which was
  // freed after forward, so f1 and f2 both re-run: 20 + 30 ns.
  GraphBuilder b;
  int32_t x = b.Tensor("x", 100);
  int32_t y = b.Tensor("y", 200);
  int32_t z = b.Tensor("z", 300);
  b.Forward("f0", 10, {}, {x});
  b.Forward("f1", 20, {x}, {y});
  b.Forward("f2", 30, {y}, {z});
  b.Backward("b_z", 5, {z});
  b.Backward("b_x", 5, {x});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[z].action = Action::kRecompute;
  SimResult r = Sim(g, plan, /*budget=*/400);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  EXPECT_EQ(r.ideal_step_ns, 70);
  EXPECT_EQ(r.recompute_ns, 50);
  EXPECT_EQ(r.step_ns, 120);
  EXPECT_EQ(r.peak_activation_bytes, 400);  // x + z
  EXPECT_EQ(r.peak_activation_ns, 30);      // first reached when f2 starts
  EXPECT_EQ(r.peak_transient_bytes, 200);   // y, in forward and in the chain
  int recomputes = 0;
  for (const SimEvent& e : r.events)
    recomputes += e.type == EventType::kRecompute;
  EXPECT_EQ(recomputes, 2);
}

TEST(SimulatorTest, RecomputeRerunsASharedProducerOnce) {
  // q and k come from one op; recomputing both costs one re-run.
  GraphBuilder b;
  int32_t q = b.Tensor("q", 100);
  int32_t k = b.Tensor("k", 100);
  b.Forward("proj", 40, {}, {q, k});
  b.Backward("b_qk", 5, {q, k});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[q].action = Action::kRecompute;
  plan.decisions[k].action = Action::kRecompute;
  SimResult r = Sim(g, plan);
  EXPECT_EQ(r.recompute_ns, 40);
  EXPECT_EQ(r.step_ns, 85);
}

TEST(SimulatorTest, PrefetchWaitsForMemory) {
  // Budget 1000: c cannot be made until a's swap-out frees the memory
  // (f_c waits 100..1100), and a's prefetch, issued when b_c starts at 3100,
  // waits until b_c frees c at 4100.
  GraphBuilder b;
  int32_t a = b.Tensor("a", 1000);
  int32_t c = b.Tensor("c", 1000);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_c", 2000, {}, {c});
  int32_t b_c = b.Backward("b_c", 1000, {c});
  b.Backward("b_a", 100, {a});
  Graph g = b.Build();
  SimResult r = Sim(g, Swap(g, {{a, b_c}}), /*budget=*/1000);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  EXPECT_EQ(r.stall_swap_out_ns, 1000);
  const SimEvent* in = FindEvent(r, EventType::kPrefetch, a);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->start_ns, 4100);
  EXPECT_EQ(in->end_ns, 5100);
  EXPECT_EQ(r.stall_prefetch_ns, 1000);
  EXPECT_EQ(r.step_ns, 5200);
  EXPECT_EQ(r.peak_activation_bytes, 1000);
}

TEST(SimulatorTest, StallOnABudgetBlockedPrefetchIsAMemoryStall) {
  // Budget 1000. a: made at 0, swapped out 100..1100 under f_mid. late: made
  // at 1200 (filling the budget), swapped out 1300..2300. a's prefetch,
  // issued when f_late starts (1200), cannot reserve memory until late's
  // swap-out releases it at 2300, and runs 2300..3300. b_a could start at
  // 1300: it waits 1300..2300 on memory, then 2300..3300 on the copy. late's
  // prefetch (issued when b_a starts) waits for b_a to free a at 3400, runs
  // 3400..4400, and b_late waits for it: another 1000 ns on a copy.
  GraphBuilder b;
  int32_t a = b.Tensor("a", 1000);
  int32_t late = b.Tensor("late", 1000);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_mid", 1100, {}, {});
  int32_t f_late = b.Forward("f_late", 100, {}, {late});
  int32_t b_a = b.Backward("b_a", 100, {a});
  b.Backward("b_late", 100, {late});
  Graph g = b.Build();
  SimResult r = Sim(g, Swap(g, {{a, f_late}, {late, b_a}}), /*budget=*/1000);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  const SimEvent* in = FindEvent(r, EventType::kPrefetch, a);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->start_ns, 2300);
  EXPECT_EQ(in->end_ns, 3300);
  EXPECT_EQ(r.stall_memory_ns, 1000);
  EXPECT_EQ(r.stall_prefetch_ns, 2000);
  EXPECT_EQ(r.step_ns, 4500);
}

// f_a, f_mid, f_b, f_long, then b_a and b_b: a's prefetch overlaps b's
// swap-out, so the link's duplex mode decides the step time.
struct DuplexGraph {
  Graph g;
  int32_t a, b, f_long;
};
// When b's swap-out, a's prefetch and b's prefetch ended (-1: never ran).
std::vector<int64_t> CopyEnds(const SimResult& r, const DuplexGraph& d) {
  std::vector<int64_t> ends;
  for (const SimEvent* e : {FindEvent(r, EventType::kSwapOut, d.b),
                            FindEvent(r, EventType::kPrefetch, d.a),
                            FindEvent(r, EventType::kPrefetch, d.b)}) {
    ends.push_back(e == nullptr ? -1 : e->end_ns);
  }
  return ends;
}

DuplexGraph MakeDuplexGraph() {
  GraphBuilder bl;
  DuplexGraph d;
  d.a = bl.Tensor("a", 1000);
  d.b = bl.Tensor("b", 1000);
  bl.Forward("f_a", 10, {}, {d.a});
  bl.Forward("f_mid", 2000, {}, {});
  bl.Forward("f_b", 10, {}, {d.b});
  d.f_long = bl.Forward("f_long", 2000, {}, {});
  bl.Backward("b_a", 10, {d.a});
  bl.Backward("b_b", 10, {d.b});
  d.g = bl.Build();
  return d;
}

TEST(SimulatorTest, FullDuplexOverlapsBothDirectionsAtBidirRates) {
  // At 2020 b's swap-out and a's prefetch start together at 0.8 B/ns: both
  // end at 3270; b's prefetch then runs alone 3270..4270. b_a runs
  // 4020..4030, and b_b waits for b until 4270.
  DuplexGraph d = MakeDuplexGraph();
  SimResult r = Sim(d.g, Swap(d.g, {{d.a, d.f_long}, {d.b, d.f_long}}), 0,
                    TestLink(Duplex::kFull));
  EXPECT_THAT(CopyEnds(r, d), ElementsAre(3270, 3270, 4270));
  EXPECT_EQ(r.ideal_step_ns, 4040);
  EXPECT_EQ(r.step_ns, 4280);
  EXPECT_EQ(r.stall_prefetch_ns, 240);
}

TEST(SimulatorTest, HalfDuplexRunsOneDirectionAtATime) {
  // b's swap-out (issued first) 2020..3020, then a's prefetch 3020..4020,
  // then b's 4020..5020.
  DuplexGraph d = MakeDuplexGraph();
  SimResult r = Sim(d.g, Swap(d.g, {{d.a, d.f_long}, {d.b, d.f_long}}), 0,
                    TestLink(Duplex::kHalf));
  EXPECT_THAT(CopyEnds(r, d), ElementsAre(3020, 4020, 5020));
  EXPECT_EQ(r.step_ns, 5030);
}

TEST(SimulatorTest, OneCopyEngineActsAsHalfDuplex) {
  DuplexGraph d = MakeDuplexGraph();
  Hardware hw = TestLink(Duplex::kFull);
  hw.copy_engines = 1;
  SimResult r = Sim(d.g, Swap(d.g, {{d.a, d.f_long}, {d.b, d.f_long}}), 0, hw);
  EXPECT_EQ(r.step_ns, 5030);
}

TEST(SimulatorTest, PrefetchesIssuedTogetherQueueInNeedOrder) {
  // Both issued when f_long starts; b is needed first, so it goes first
  // even though a was decided first.
  GraphBuilder bl;
  int32_t a = bl.Tensor("a", 1000);
  int32_t b = bl.Tensor("b", 1000);
  bl.Forward("f_a", 10, {}, {a});
  bl.Forward("f_b", 10, {}, {b});
  int32_t f_long = bl.Forward("f_long", 5000, {}, {});
  bl.Backward("b_b", 10, {b});
  bl.Backward("b_a", 10, {a});
  Graph g = bl.Build();
  SimResult r = Sim(g, Swap(g, {{a, f_long}, {b, f_long}}));
  EXPECT_THAT(PrefetchOrder(r), ElementsAre(b, a));
}

TEST(SimulatorTest, PrefetchesIssuedTogetherQueueInFirstNeedOrder) {
  // x and w are both prefetched when f_long starts. x's first backward use
  // (b_x) comes after w's (b_w), but the rebuild of z, before b_z, reads x
  // first: x must go first.
  GraphBuilder bl;
  int32_t x = bl.Tensor("x", 1000);
  int32_t w = bl.Tensor("w", 1000);
  int32_t z = bl.Tensor("z", 10);
  bl.Forward("f_x", 10, {}, {x});
  bl.Forward("f_w", 10, {}, {w});
  bl.Forward("f_z", 10, {x}, {z});
  int32_t f_long = bl.Forward("f_long", 5000, {}, {});
  bl.Backward("b_z", 10, {z});
  bl.Backward("b_w", 10, {w});
  bl.Backward("b_x", 10, {x});
  Graph g = bl.Build();
  Plan plan = Swap(g, {{w, f_long}, {x, f_long}});
  plan.decisions[z].action = Action::kRecompute;
  SimResult r = Sim(g, plan);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  EXPECT_THAT(PrefetchOrder(r), ElementsAre(x, w));
}

// The choices docs/SIMULATOR.md states ("Choices at one instant"), each
// worked out by hand.

TEST(SimulatorTest, ACopyKeepsItsFractionalBytesAcrossRateChanges) {
  // Ten 3-byte prefetches run back to back 31..71 while the 4000-byte
  // swap-out of A, issued at 31, shares the link: 40 ns at 0.8 B/ns move
  // 32 bytes, the other 3968 move at 1 B/ns, so A's copy ends at
  // 31 + 40 + 3968 = 4039 (a copy of 4008 ns). Dropping the fraction of a
  // byte at each of the ten rate changes would make it 4010 ns.
  GraphBuilder b;
  std::vector<int32_t> tiny;
  for (int i = 0; i < 10; ++i) {
    tiny.push_back(b.Tensor(absl::StrCat("t", i), 3));
  }
  const int32_t big = b.Tensor("A", 4000);
  b.Forward("f_tiny", 1, {}, tiny);  // their swap-outs: 1..31
  b.Forward("f_A", 30, {}, {big});   // ends at 31
  const int32_t b0 = b.Backward("b0", 5000, {});
  std::vector<int32_t> all = tiny;
  all.push_back(big);
  b.Backward("b_all", 10, all);
  Graph g = b.Build();
  std::vector<std::pair<int32_t, int32_t>> swaps;
  for (int32_t t : tiny) swaps.push_back({t, b0});
  swaps.push_back({big, b0});
  Plan plan = Swap(g, swaps);
  // A's prefetch goes after its swap-out; it is first needed with the rest.
  SimResult r = Sim(g, plan);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  const SimEvent* out = FindEvent(r, EventType::kSwapOut, big);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->start_ns, 31);
  EXPECT_EQ(out->end_ns, 4039);
  const SimEvent* last_tiny = FindEvent(r, EventType::kPrefetch, tiny.back());
  ASSERT_NE(last_tiny, nullptr);
  EXPECT_EQ(last_tiny->end_ns, 71);
}

TEST(SimulatorTest, WaitingForAHalfDuplexLinkIsAPrefetchStallNotMemory) {
  // No budget. x's swap-out runs 1..101, then y's (issued at 11, like x's
  // prefetch, and a swap-out wins the tie) holds the half-duplex link
  // 101..5101; x's prefetch runs 5101..5201. b_x waits 12..5201, all of it
  // for the prefetch; y's prefetch, issued when b_x starts, runs
  // 5201..10201 and b_y waits 5202..10201.
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 100);
  const int32_t y = b.Tensor("y", 5000);
  b.Forward("f_x", 1, {}, {x});
  b.Forward("f_y", 10, {}, {y});
  const int32_t b0 = b.Backward("b0", 1, {});
  const int32_t b_x = b.Backward("b_x", 1, {x});
  b.Backward("b_y", 1, {y});
  Graph g = b.Build();
  SimResult r = Sim(g, Swap(g, {{x, b0}, {y, b_x}}), /*budget=*/0,
                    TestLink(Duplex::kHalf));
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  const SimEvent* in = FindEvent(r, EventType::kPrefetch, x);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->start_ns, 5101);
  EXPECT_EQ(in->end_ns, 5201);
  EXPECT_EQ(r.stall_memory_ns, 0);
  EXPECT_EQ(r.stall_prefetch_ns, (5201 - 12) + (10201 - 5202));
  EXPECT_EQ(r.step_ns, 10202);
}

TEST(SimulatorTest, AKeptTensorARecomputeReadsAfterItsLastUseIsRebuilt) {
  // k is kept and last read by b_k; r, recomputed, is rebuilt for b_r after
  // that, from k: k was freed at its last use, so f_k re-runs too (a
  // temporary) instead of k being held for the rebuild.
  GraphBuilder b;
  const int32_t k = b.Tensor("k", 100);
  const int32_t r_t = b.Tensor("r", 100);
  b.Forward("f_k", 10, {}, {k});
  b.Forward("f_r", 20, {k}, {r_t});
  b.Backward("b_k", 5, {k});
  b.Backward("b_r", 5, {r_t});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[r_t].action = Action::kRecompute;
  SimResult r = Sim(g, plan);
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.recompute_ns, 10 + 20);
  EXPECT_EQ(r.step_ns, 40 + 30);
}

TEST(SimulatorTest, ComputeStartsBeforeAPrefetchCompetesForFreedMemory) {
  // Budget 1000. b0 ends at 3100 and frees z (q, 200 B, stays): 800 free.
  // The recompute of r (500 B) and the prefetch of x (500 B, waiting since
  // b0 started) both fit alone, not together: compute goes first, so the
  // recompute runs 3100..3120, b_r 3120..3125 frees r, and only then does
  // x's prefetch start (3125..3625).
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 500);
  const int32_t r_t = b.Tensor("r", 500);
  const int32_t q = b.Tensor("q", 200);
  const int32_t z = b.Tensor("z", 500);
  b.Forward("f_x", 10, {}, {x});      // 0..10; swap-out 10..510
  b.Forward("f_long", 1000, {}, {});  // 10..1010
  b.Forward("f_r", 20, {}, {r_t});    // 1010..1030, dropped at its end
  b.Forward("f_q", 10, {}, {q});      // 1030..1040
  b.Forward("f_z", 60, {}, {z});      // 1040..1100
  const int32_t b0 = b.Backward("b0", 2000, {z});  // 1100..3100
  b.Backward("b_r", 5, {r_t});
  b.Backward("b_x", 5, {x});
  b.Backward("b_q", 5, {q});
  Graph g = b.Build();
  Plan plan = Swap(g, {{x, b0}});
  plan.decisions[r_t].action = Action::kRecompute;
  SimResult r = Sim(g, plan, /*budget=*/1000);
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  const SimEvent* recompute = FindEvent(r, EventType::kRecompute, 2);
  ASSERT_NE(recompute, nullptr);
  EXPECT_EQ(recompute->start_ns, 3100);
  const SimEvent* in = FindEvent(r, EventType::kPrefetch, x);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->start_ns, 3125);
  EXPECT_EQ(in->end_ns, 3625);
  EXPECT_EQ(r.step_ns, 3635);
}

TEST(SimulatorTest, PrefetchesOneOpIssuesForOneTaskGoInTensorIdOrder) {
  // u (id 0) and v (id 1) are first needed by the same task: issued by b0
  // together, u's prefetch goes first (1000..1300), then v's (1300..1400).
  GraphBuilder b;
  const int32_t u = b.Tensor("u", 300);
  const int32_t v = b.Tensor("v", 100);
  b.Forward("f_uv", 10, {}, {u, v});
  b.Forward("f_long", 990, {}, {});
  const int32_t b0 = b.Backward("b0", 1000, {});
  b.Backward("b_uv", 10, {v, u});
  Graph g = b.Build();
  SimResult r = Sim(g, Swap(g, {{v, b0}, {u, b0}}));
  ASSERT_TRUE(r.feasible) << r.infeasible_reason;
  const SimEvent* pu = FindEvent(r, EventType::kPrefetch, u);
  const SimEvent* pv = FindEvent(r, EventType::kPrefetch, v);
  ASSERT_NE(pu, nullptr);
  ASSERT_NE(pv, nullptr);
  EXPECT_EQ(pu->start_ns, 1000);
  EXPECT_EQ(pu->end_ns, 1300);
  EXPECT_EQ(pv->start_ns, 1300);
  EXPECT_EQ(pv->end_ns, 1400);
}

TEST(SimulatorTest, AZeroDurationOpsPeakIsOnTheTimeline) {
  // w (1000 B, recomputed, read by no forward op) is made and dropped at the
  // same instant by a zero-duration op: the peak (1100 at 10) must still be
  // a point of the timeline, beside the fall back to 100 at 10.
  GraphBuilder b;
  const int32_t a = b.Tensor("a", 100);
  const int32_t w = b.Tensor("w", 1000);
  b.Forward("f_a", 10, {}, {a});
  b.Forward("f_w", 0, {}, {w});
  b.Forward("f_tail", 10, {}, {});
  b.Backward("b_w", 5, {w});
  b.Backward("b_a", 5, {a});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[w].action = Action::kRecompute;
  SimResult r = Sim(g, plan);
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.peak_activation_bytes, 1100);
  EXPECT_EQ(r.peak_activation_ns, 10);
  int64_t timeline_max = 0;
  int at_ten = 0;
  for (const MemorySample& m : r.timeline) {
    timeline_max = std::max(timeline_max, m.activation_bytes);
    at_ten += m.time_ns == 10;
  }
  EXPECT_EQ(timeline_max, r.peak_activation_bytes);
  EXPECT_EQ(at_ten, 2);
}

TEST(SimulatorTest, PinnedHostMemoryExhaustedIsInfeasible) {
  SwapGraph s = MakeSwapGraph(2000);
  Hardware hw = TestLink();
  hw.pinned_host_memory_bytes = 999;
  SimResult r = Sim(s.g, Swap(s.g, {{s.a, s.b_long}}), 0, hw);
  EXPECT_FALSE(r.feasible);
  EXPECT_THAT(r.infeasible_reason, HasSubstr("pinned host memory exhausted"));
  EXPECT_THAT(r.infeasible_reason, HasSubstr("(a)"));
  EXPECT_EQ(r.throughput_retained, 0);
}

TEST(SimulatorTest, KeepingEverythingUnderTooSmallABudgetIsInfeasible) {
  GraphBuilder b;
  int32_t a = b.Tensor("a", 600);
  int32_t c = b.Tensor("c", 600);
  b.Forward("f_a", 10, {}, {a});
  b.Forward("f_c", 10, {}, {c});
  b.Backward("b_c", 10, {c});
  b.Backward("b_a", 10, {a});
  Graph g = b.Build();
  SimResult r = Sim(g, Plan::KeepAll(g), /*budget=*/1000);
  EXPECT_FALSE(r.feasible);
  EXPECT_THAT(r.infeasible_reason, HasSubstr("op 1 (f_c)"));
  EXPECT_THAT(r.infeasible_reason, HasSubstr("needs 600 bytes"));
  EXPECT_EQ(r.step_ns, 10);  // where it got stuck
}

TEST(SimulatorTest, BudgetCoveringAllMemoryCountsTransients) {
  GraphBuilder b;
  int32_t a = b.Tensor("a", 600);
  int32_t tmp = b.Tensor("tmp", 600);
  b.Forward("f_a", 10, {}, {a});
  b.Forward("f_tmp", 10, {}, {tmp});
  b.Forward("use_tmp", 10, {tmp}, {});
  b.Backward("b_a", 10, {a});
  Graph g = b.Build();
  SimOptions opts;
  opts.budget_bytes = 1000;
  absl::StatusOr<SimResult> activations =
      Simulate(g, TestLink(), Plan::KeepAll(g), opts);
  ASSERT_TRUE(activations.ok()) << activations.status();
  EXPECT_TRUE(activations->feasible);
  opts.budget_covers_all = true;
  absl::StatusOr<SimResult> all =
      Simulate(g, TestLink(), Plan::KeepAll(g), opts);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_FALSE(all->feasible);
}

TEST(SimulatorTest, SameInputSameResult) {
  DuplexGraph d = MakeDuplexGraph();
  Plan plan = Swap(d.g, {{d.a, d.f_long}, {d.b, d.f_long}});
  SimResult r1 = Sim(d.g, plan);
  SimResult r2 = Sim(d.g, plan);
  EXPECT_EQ(r1.step_ns, r2.step_ns);
  ASSERT_EQ(r1.timeline.size(), r2.timeline.size());
  for (size_t i = 0; i < r1.timeline.size(); ++i) {
    EXPECT_EQ(r1.timeline[i].time_ns, r2.timeline[i].time_ns);
    EXPECT_EQ(r1.timeline[i].activation_bytes, r2.timeline[i].activation_bytes);
  }
  EXPECT_EQ(r1.events.size(), r2.events.size());
}

// The planner's records are the full ones cut down: a span per task, as the
// compute events give them, and every point of the timeline with its
// activation bytes. On random steps with swaps, recomputes and workspaces,
// so that points where only the transient bytes change are there to keep.
TEST(SimulatorTest, TaskSpansAndActivationTimelineCutDownTheFullRecords) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    Graph g = testutil::RandomTrainingStep(seed);
    // Workspaces: transient bytes that come and go while the activations
    // stay.
    for (size_t o = 0; o < g.ops.size(); o += 3) {
      g.ops[o].workspace_bytes = 1 << 20;
    }
    ASSERT_TRUE(IndexGraph(g).ok());
    Plan plan = Plan::KeepAll(g);
    int transient_only_points = 0;
    for (size_t i = 0; i < g.index.saved.size(); ++i) {
      plan.decisions[g.index.saved[i]].action =
          i % 3 == 0 ? Action::kSwap
                     : (i % 3 == 1 ? Action::kRecompute : Action::kKeep);
    }
    // Each swap prefetched just before its first need (a recompute chain
    // may read it before its own backward use); one needed before its
    // forward pass is done is kept instead, and the plan lowered again.
    absl::StatusOr<OpDurations> durations = ComputeDurations(g, TestLink());
    ASSERT_TRUE(durations.ok()) << durations.status();
    for (bool changed = true; changed;) {
      absl::StatusOr<Schedule> lowered =
          LowerWithoutPrefetches(g, plan, *durations);
      ASSERT_TRUE(lowered.ok()) << lowered.status();
      const std::vector<int32_t> need = FirstNeedOps(*lowered);
      changed = false;
      for (int32_t t : g.index.saved) {
        Decision& d = plan.decisions[t];
        if (d.action != Action::kSwap) continue;
        const int32_t first =
            need[t] == kNone ? g.index.first_bwd_use[t] : need[t];
        d.prefetch_after_op = first - 1;
        if (d.prefetch_after_op <=
            std::max(g.index.producer[t], g.index.last_fwd_use[t])) {
          d.action = Action::kKeep;
          changed = true;
        }
      }
    }
    SimOptions full;
    full.record_events = true;
    SimOptions cut = full;
    cut.record_events = false;
    cut.record_timeline = false;
    cut.record_task_spans = true;
    cut.record_activation_timeline = true;
    absl::StatusOr<SimResult> a = Simulate(g, TestLink(), plan, full);
    absl::StatusOr<SimResult> b = Simulate(g, TestLink(), plan, cut);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(a->feasible) << a->infeasible_reason;
    EXPECT_EQ(b->step_ns, a->step_ns);
    EXPECT_TRUE(b->events.empty());
    EXPECT_TRUE(b->timeline.empty());
    EXPECT_TRUE(a->task_spans.empty());
    EXPECT_TRUE(a->activation_timeline.empty());

    std::vector<std::pair<int64_t, int64_t>> compute_events, spans;
    for (const SimEvent& e : a->events) {
      if (e.stream == StreamId::kCompute) {
        compute_events.push_back({e.start_ns, e.end_ns});
      }
    }
    for (const TaskSpan& s : b->task_spans) {
      spans.push_back({s.start_ns, s.end_ns});
    }
    EXPECT_EQ(spans, compute_events);

    std::vector<std::pair<int64_t, int64_t>> points, activation_points;
    for (size_t i = 0; i < a->timeline.size(); ++i) {
      const MemorySample& m = a->timeline[i];
      points.push_back({m.time_ns, m.activation_bytes});
      transient_only_points +=
          i > 0 && m.activation_bytes == a->timeline[i - 1].activation_bytes &&
          m.transient_bytes != a->timeline[i - 1].transient_bytes;
    }
    for (const ActivationSample& m : b->activation_timeline) {
      activation_points.push_back({m.time_ns, m.activation_bytes});
    }
    EXPECT_EQ(activation_points, points);
    // Otherwise a timeline that dropped such points would pass.
    if (seed == 1) {
      EXPECT_GT(transient_only_points, 0);
    }
  }
}

TEST(SimulatorTest, RejectsPlansThatDoNotFitTheGraph) {
  SwapGraph s = MakeSwapGraph(2000);
  SimOptions opts;
  // Prefetch issued by the op that needs it.
  auto r = Simulate(s.g, TestLink(), Swap(s.g, {{s.a, 3}}), opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("before the tensor's first backward need"));
  // Prefetch before the tensor exists.
  r = Simulate(s.g, TestLink(), Swap(s.g, {{s.a, 0}}), opts);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("after the tensor's last forward use"));
  // Wrong number of decisions.
  Plan short_plan;
  r = Simulate(s.g, TestLink(), short_plan, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // Negative budget.
  opts.budget_bytes = -1;
  r = Simulate(s.g, TestLink(), Plan::KeepAll(s.g), opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimulatorTest, OnlySavedActivationsCanMove) {
  GraphBuilder b;
  int32_t tmp = b.Tensor("tmp", 10);
  b.Forward("f", 10, {}, {tmp});
  b.Forward("g", 10, {tmp}, {});
  b.Backward("b", 10, {});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[tmp].action = Action::kRecompute;
  auto r = Simulate(g, TestLink(), plan, SimOptions());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("tensor 0 (tmp): only saved activations"));
}

TEST(SimulatorTest, CancellationStopsTheRun) {
  GraphBuilder b;
  for (int i = 0; i < 5000; ++i) b.Forward("f", 1, {}, {});
  b.Backward("b", 1, {});
  Graph g = b.Build();
  SimOptions opts;
  opts.should_stop = [] { return true; };
  auto r = Simulate(g, TestLink(), Plan::KeepAll(g), opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
}

TEST(DownsampleTimelineTest, KeepsTheMaximumOfEachBucket) {
  std::vector<MemorySample> tl;
  for (int i = 0; i < 100; ++i) tl.push_back({i, i == 37 ? 1000 : i, 0});
  std::vector<MemorySample> d = DownsampleTimeline(tl, 10);
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d[3].activation_bytes, 1000);
  EXPECT_EQ(d[9].activation_bytes, 99);
  EXPECT_EQ(DownsampleTimeline(tl, 0).size(), 100u);
}

}  // namespace
}  // namespace slackswap
