// Whole-device accounting through the simulator, on steps whose allocator
// sequences are worked out by hand (the rules: docs/SIMULATOR.md, "The
// caching allocator"; the allocator alone: caching_allocator_test.cc).
#include "sim/device_memory.h"

#include <vector>

#include "gtest/gtest.h"
#include "sim/simulator.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using testutil::GraphBuilder;

constexpr int64_t MiB = int64_t{1} << 20;

// f0, f1, f2 (10 ns each) make a (3 MiB), b (12 MiB), c (14 MiB); backward
// reads them in reverse, freeing c, b, then a.
Graph ThreeActivations(int64_t static_bytes = 0) {
  GraphBuilder g;
  if (static_bytes > 0) {
    g.Tensor("w", static_bytes, TensorKind::kParameter);
  }
  const int32_t a = g.Tensor("a", 3 * MiB);
  const int32_t b = g.Tensor("b", 12 * MiB);
  const int32_t c = g.Tensor("c", 14 * MiB);
  g.Forward("f0", 10, {}, {a});
  g.Forward("f1", 10, {}, {b});
  g.Forward("f2", 10, {}, {c});
  g.Backward("b2", 10, {c});
  g.Backward("b1", 10, {b});
  g.Backward("b0", 10, {a});
  return g.Build();
}

Hardware Device(double memory_gb, int64_t reserve) {
  Hardware hw = testutil::TestLink();
  hw.memory_gb = memory_gb;
  hw.framework_reserve_bytes = reserve;
  return hw;
}

SimResult SimulateDevice(const Graph& g, const Hardware& hw,
                         DeviceOptions device, bool timeline = true) {
  device.enabled = true;
  SimOptions opts;
  opts.device = device;
  opts.record_timeline = timeline;
  absl::StatusOr<SimResult> r = Simulate(g, hw, Plan::KeepAll(g), opts);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(DeviceMemoryTest, TheSecondStepReservesWhatTheFirstDidNot) {
  // Step 1, from an empty cache: a takes a new 20 MiB segment (17 MiB
  // split off), b the 17 MiB rest (5 MiB split off), c finds nothing and
  // makes a 14 MiB segment: 34 MiB. All freed: segments of 20 and 14 MiB.
  // Step 2: a now best-fits the 14 MiB segment (11 left), b the 20 MiB one
  // (8 left), and c fits neither rest: a third segment, 48 MiB, reached at
  // c's allocation (20 ns) with 3 + 12 + 14 = 29 MiB allocated. Step 3
  // (a in a 14, b in the other 14, c in the 20) reserves nothing new.
  const Graph g = ThreeActivations();
  SimResult r = SimulateDevice(g, Device(1, 0), {});
  ASSERT_TRUE(r.device.has_value());
  const DeviceReport& d = *r.device;
  EXPECT_EQ(d.peak_reserved_bytes, 48 * MiB);
  EXPECT_EQ(d.peak_reserved_step, 2);
  EXPECT_EQ(d.peak_reserved_ns, 20);
  EXPECT_EQ(d.fragmentation_bytes, 19 * MiB);
  EXPECT_EQ(d.steps, 3);
  EXPECT_EQ(d.segments, 3);
  EXPECT_EQ(d.peak_allocated_bytes, 29 * MiB);
  EXPECT_EQ(d.peak_allocated_ns, 20);
  EXPECT_EQ(d.peak_live_bytes, 29 * MiB);
  // The timeline's counters are the first step's: 34 MiB reserved.
  int64_t reserved = 0;
  for (const MemorySample& s : r.timeline) {
    reserved = std::max(reserved, s.reserved_bytes);
  }
  EXPECT_EQ(reserved, 34 * MiB);
}

TEST(DeviceMemoryTest, ExpandableSegmentsReachTheirSteadyStateAtOnce) {
  // a maps a 20 MiB page (17 free), b takes 12 of the 17 (5 free, next to
  // the unmapped rest), c grows that 5 MiB block by a page to 25 MiB: 40
  // MiB, one segment, reached at 20 ns with 29 MiB allocated. Freed, it
  // merges whole; the next step tiles it the same way.
  const Graph g = ThreeActivations();
  SimResult r = SimulateDevice(g, Device(1, 0),
                               {.allocator = {.expandable_segments = true}});
  ASSERT_TRUE(r.device.has_value());
  EXPECT_EQ(r.device->peak_reserved_bytes, 40 * MiB);
  EXPECT_EQ(r.device->peak_reserved_step, 1);
  EXPECT_EQ(r.device->fragmentation_bytes, 11 * MiB);
  EXPECT_EQ(r.device->steps, 2);
  EXPECT_TRUE(r.device->expandable_segments);
}

TEST(DeviceMemoryTest, StaticTensorsAreAllocatedBeforeTheStep) {
  // A 30 MiB parameter takes a 30 MiB segment at 0 ns, before f0 starts,
  // and stays: 48 + 30 MiB.
  const Graph g = ThreeActivations(30 * MiB);
  SimResult r = SimulateDevice(g, Device(1, 0), {});
  ASSERT_TRUE(r.device.has_value());
  EXPECT_EQ(r.device->peak_reserved_bytes, 78 * MiB);
  EXPECT_EQ(r.device->peak_live_bytes, 59 * MiB);
  EXPECT_EQ(r.static_bytes, 30 * MiB);
  ASSERT_FALSE(r.timeline.empty());
  EXPECT_EQ(r.timeline.front().allocated_bytes, 33 * MiB);  // w and a
}

TEST(DeviceMemoryTest, FitsComparesReservedPlusReservePlusHeadroom) {
  const Graph g = ThreeActivations();
  // 48 MiB = 50,331,648 B. 100 MB of memory with 49 MB reserved: fits with
  // 668,352 B to spare, not with a headroom of 1 MB.
  SimResult fits = SimulateDevice(g, Device(0.1, 49'000'000), {});
  ASSERT_TRUE(fits.device.has_value());
  EXPECT_EQ(fits.device->capacity_bytes, 100'000'000);
  EXPECT_EQ(fits.device->required_bytes, 99'331'648);
  EXPECT_TRUE(fits.device->fits);
  SimResult tight =
      SimulateDevice(g, Device(0.1, 49'000'000), {.headroom_bytes = 1'000'000});
  ASSERT_TRUE(tight.device.has_value());
  EXPECT_EQ(tight.device->required_bytes, 100'331'648);
  EXPECT_FALSE(tight.device->fits);
}

TEST(DeviceMemoryTest, AnInfeasibleStepDoesNotFit) {
  const Graph g = ThreeActivations();
  SimOptions opts;
  opts.device.enabled = true;
  opts.budget_bytes = 10 * MiB;  // b alone is 12 MiB
  absl::StatusOr<SimResult> r =
      Simulate(g, Device(1, 0), Plan::KeepAll(g), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->feasible);
  ASSERT_TRUE(r->device.has_value());
  EXPECT_FALSE(r->device->fits);
  EXPECT_EQ(r->device->steps, 1);  // no replay of a step that did not end
}

TEST(DeviceMemoryTest, OffByDefaultAndZeroBytesAllocateNothing) {
  const Graph g = ThreeActivations();
  absl::StatusOr<SimResult> off =
      Simulate(g, Device(1, 0), Plan::KeepAll(g), SimOptions{});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->device.has_value());
  for (const MemorySample& s : off->timeline) {
    EXPECT_EQ(s.reserved_bytes, 0);
  }
  GraphBuilder b;
  const int32_t empty = b.Tensor("empty", 0);
  b.Forward("f", 10, {}, {empty});
  b.Backward("g", 10, {empty});
  const Graph z = b.Build();
  SimResult r = SimulateDevice(z, Device(1, 0), {});
  ASSERT_TRUE(r.device.has_value());
  EXPECT_EQ(r.device->peak_reserved_bytes, 0);
}

TEST(DeviceMemoryTest, SwappedTensorsAreFreedAndAllocatedAgain) {
  // a (3 MiB) is swapped out under f_long and prefetched back: its device
  // copy is freed to the cache and the prefetch takes it again, so the
  // step reserves one 20 MiB segment however often a moves.
  GraphBuilder b;
  const int32_t a = b.Tensor("a", 3 * MiB);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_long", 10'000'000, {}, {});
  const int32_t b_long = b.Backward("b_long", 10'000'000, {});
  b.Backward("b_a", 100, {a});
  const Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[a].action = Action::kSwap;
  plan.decisions[a].prefetch_after_op = b_long;
  SimOptions opts;
  opts.device.enabled = true;
  absl::StatusOr<SimResult> r = Simulate(g, Device(1, 0), plan, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  EXPECT_EQ(r->d2h_bytes, 3 * MiB);
  ASSERT_TRUE(r->device.has_value());
  EXPECT_EQ(r->device->peak_reserved_bytes, 20 * MiB);
  EXPECT_EQ(r->device->segments, 1);
}

}  // namespace
}  // namespace slackswap
