// The node simulator against the single-GPU one it generalizes (one rank
// alone, and ranks whose shared links never limit), against hand-worked
// sharing on a small graph, and on bad input.
#include "sim/node_simulator.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/plan.h"
#include "model/workloads.h"
#include "sim/collective_model.h"
#include "testing/graph_builder.h"
#include "testing/lowered.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testutil::GraphBuilder;
using testutil::Lower;
using testutil::Lowered;
using testutil::OnGpus;
using testutil::TestLink;

constexpr double kInf = std::numeric_limits<double>::infinity();

LinkRates Rates(double one_way, double both) {
  return {.h2d_gbps = one_way,
          .d2h_gbps = one_way,
          .bidir_h2d_gbps = both,
          .bidir_d2h_gbps = both};
}

// `gpus` GPUs of `hw` behind one switch with the given uplink, on one socket
// whose memory never limits and which holds `pinned` bytes.
Node OneSwitch(const Hardware& hw, int32_t gpus, LinkRates uplink,
               int64_t pinned) {
  Node node;
  node.name = "test-node";
  node.gpu = hw;
  node.num_gpus = gpus;
  PcieSwitch sw;
  sw.name = "sw0";
  sw.uplink = uplink;
  for (int32_t g = 0; g < gpus; ++g) sw.gpus.push_back(g);
  node.switches.push_back(sw);
  node.sockets.push_back({.name = "cpu0",
                          .memory = Rates(kInf, kInf),
                          .pinned_host_memory_bytes = pinned});
  return node;
}

// Swaps every third saved tensor (prefetched four ops before its first
// backward use, where the graph allows) and recomputes every fifth of the
// rest: copies in both directions at once, and recompute tasks.
Plan MixedPlan(const Graph& g) {
  Plan plan = Plan::KeepAll(g);
  const GraphIndex& ix = g.index;
  for (size_t i = 0; i < ix.saved.size(); ++i) {
    const int32_t t = ix.saved[i];
    const int32_t after = std::max(ix.producer[t], ix.last_fwd_use[t]);
    const int32_t k = std::max(after + 1, ix.first_bwd_use[t] - 4);
    if (i % 3 == 0 && k < ix.first_bwd_use[t]) {
      plan.decisions[t] = {.action = Action::kSwap, .prefetch_after_op = k};
    } else if (i % 5 == 1) {
      plan.decisions[t].action = Action::kRecompute;
    }
  }
  return plan;
}

// f (10 ns) writes x (1000 bytes), which its backward reads; all kept.
Lowered KeepOne(const Hardware& hw) {
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000);
  b.Forward("f", 10, {}, {x});
  b.Backward("f.bwd", 10, {x});
  Graph g = b.Build();
  const Plan keep = Plan::KeepAll(g);
  return Lower(std::move(g), hw, keep);
}

// f (0 ns) writes x (1000 bytes), swapped out at once and prefetched when
// a 5000 ns op starts; its backward reads it after.
Lowered OneSwap(const Hardware& hw) {
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000);
  b.Forward("f", 0, {}, {x});
  b.Forward("long", 5000, {}, {});
  b.Backward("f.bwd", 0, {x});
  Graph g = b.Build();
  Plan plan = Plan::KeepAll(g);
  plan.decisions[x] = {.action = Action::kSwap, .prefetch_after_op = 1};
  return Lower(std::move(g), hw, plan);
}

Graph Workload(const std::string& name, int64_t layers) {
  WorkloadOverrides o;
  o.layers = layers;
  absl::StatusOr<Graph> g = BuildWorkload(name, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

void ExpectSame(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(a.feasible, b.feasible);
  EXPECT_EQ(a.infeasible_reason, b.infeasible_reason);
  EXPECT_EQ(a.step_ns, b.step_ns);
  EXPECT_EQ(a.ideal_step_ns, b.ideal_step_ns);
  EXPECT_EQ(a.throughput_retained, b.throughput_retained);
  EXPECT_EQ(a.peak_activation_bytes, b.peak_activation_bytes);
  EXPECT_EQ(a.peak_activation_ns, b.peak_activation_ns);
  EXPECT_EQ(a.peak_transient_bytes, b.peak_transient_bytes);
  EXPECT_EQ(a.d2h_bytes, b.d2h_bytes);
  EXPECT_EQ(a.h2d_bytes, b.h2d_bytes);
  EXPECT_EQ(a.recompute_ns, b.recompute_ns);
  EXPECT_EQ(a.stall_prefetch_ns, b.stall_prefetch_ns);
  EXPECT_EQ(a.stall_swap_out_ns, b.stall_swap_out_ns);
  EXPECT_EQ(a.stall_memory_ns, b.stall_memory_ns);
  EXPECT_EQ(a.peak_pinned_host_bytes, b.peak_pinned_host_bytes);
  EXPECT_EQ(a.events_processed, b.events_processed);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].start_ns, b.events[i].start_ns) << "event " << i;
    EXPECT_EQ(a.events[i].end_ns, b.events[i].end_ns) << "event " << i;
    EXPECT_EQ(a.events[i].index, b.events[i].index) << "event " << i;
  }
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    EXPECT_EQ(a.timeline[i].time_ns, b.timeline[i].time_ns);
    EXPECT_EQ(a.timeline[i].activation_bytes, b.timeline[i].activation_bytes);
  }
}

SimOptions Options(int64_t budget) {
  SimOptions opts;
  opts.budget_bytes = budget;
  opts.record_events = true;
  return opts;
}

// One GPU alone on a node whose uplink and socket never limit is the
// single-GPU simulation, bit for bit, on each reference workload and on
// every catalog GPU, also with directions that do not slow each other.
TEST(NodeSimulatorTest, OneRankAloneIsTheSingleGpuSimulation) {
  std::vector<Hardware> profiles;
  for (const std::string& name : HardwareNames()) {
    absl::StatusOr<Hardware> hw = FindHardware(name);
    ASSERT_TRUE(hw.ok()) << hw.status();
    profiles.push_back(*hw);
    // Directions that do not slow each other: the network leaves a copy
    // alone when the other direction's starts or ends, and the node
    // re-sets it as one GPU does. (The re-set moves a finish only when a
    // rounding lands within about 1e-12 of a whole nanosecond; these runs
    // pass without it too, so it is not what this case pins down.)
    hw->name += "-no-bidir-drop";
    hw->bidir_h2d_gbps = hw->h2d_gbps;
    hw->bidir_d2h_gbps = hw->d2h_gbps;
    profiles.push_back(*hw);
  }
  for (const Hardware& profile : profiles) {
    const Hardware* hw = &profile;
    const std::string& hw_name = profile.name;
    for (const std::string workload : {"bert-large", "gpt2-xl", "llama-7b"}) {
      SCOPED_TRACE(absl::StrCat(hw_name, " ", workload));
      Graph g = Workload(workload, 4);
      const Plan plan = MixedPlan(g);
      Lowered l = Lower(std::move(g), *hw, plan);
      const int64_t budget = l.graph.index.saved_bytes / 2;
      absl::StatusOr<SimResult> alone = SimulateSchedule(
          l.graph, *hw, l.durations, l.schedule, Options(budget));
      ASSERT_TRUE(alone.ok()) << alone.status();
      EXPECT_GT(alone->d2h_bytes, 0);

      const Node node =
          OneSwitch(*hw, 2, Rates(kInf, kInf), hw->pinned_host_memory_bytes);
      const std::vector<RankStep> ranks = {{.gpu = 1,
                                            .graph = &l.graph,
                                            .durations = &l.durations,
                                            .schedule = &l.schedule}};
      absl::StatusOr<NodeSimResult> on_node =
          SimulateNode(node, ranks, Options(budget));
      ASSERT_TRUE(on_node.ok()) << on_node.status();
      ASSERT_EQ(on_node->ranks.size(), 1u);
      ExpectSame(on_node->ranks[0], *alone);
      EXPECT_EQ(on_node->step_ns, alone->step_ns);
      EXPECT_EQ(on_node->throughput_retained, alone->throughput_retained);
    }
  }
}

// Ranks whose shared links never limit (and whose socket holds all their
// host copies) each run as if alone, whatever the others do.
TEST(NodeSimulatorTest, RanksOnLinksThatNeverLimitRunAsIfAlone) {
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  std::vector<Lowered> lowered;
  const std::vector<std::string> workloads = {"bert-large", "gpt2-xl",
                                              "llama-7b", "gpt2-xl"};
  for (size_t i = 0; i < workloads.size(); ++i) {
    Graph g = Workload(workloads[i], 2 + static_cast<int64_t>(i));
    const Plan plan = MixedPlan(g);
    lowered.push_back(Lower(std::move(g), hw, plan));
  }
  const std::vector<RankStep> ranks = OnGpus(lowered);
  const Node node =
      OneSwitch(hw, 4, Rates(kInf, kInf), 4 * hw.pinned_host_memory_bytes);
  absl::StatusOr<NodeSimResult> on_node = SimulateNode(node, ranks, Options(0));
  ASSERT_TRUE(on_node.ok()) << on_node.status();
  int64_t slowest = 0;
  for (size_t i = 0; i < lowered.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("rank ", i));
    absl::StatusOr<SimResult> alone =
        SimulateSchedule(lowered[i].graph, hw, lowered[i].durations,
                         lowered[i].schedule, Options(0));
    ASSERT_TRUE(alone.ok()) << alone.status();
    ExpectSame(on_node->ranks[i], *alone);
    slowest = std::max(slowest, alone->step_ns);
  }
  EXPECT_EQ(on_node->step_ns, slowest);
}

// More ranks copying through one uplink never make a rank's step faster,
// and they do make it slower once the uplink is the bottleneck.
TEST(NodeSimulatorTest, MoreRanksBehindASwitchNeverMakeAStepFaster) {
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  for (const std::string workload : {"bert-large", "gpt2-xl", "llama-7b"}) {
    SCOPED_TRACE(workload);
    Graph g = Workload(workload, 4);
    const Plan plan = MixedPlan(g);
    const Lowered l = Lower(std::move(g), hw, plan);
    // The uplink carries one GPU's copies at full speed, not two.
    const Node node = OneSwitch(hw, 8, Rates(hw.h2d_gbps, hw.bidir_h2d_gbps),
                                8 * hw.pinned_host_memory_bytes);
    int64_t last = 0;
    int64_t alone = 0;
    for (int32_t n = 1; n <= 8; n *= 2) {
      absl::StatusOr<NodeSimResult> r =
          SimulateNode(node, OnGpus(l, n), Options(0));
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->feasible) << r->infeasible_reason;
      EXPECT_GE(r->ranks[0].step_ns, last) << n << " ranks";
      last = r->ranks[0].step_ns;
      if (n == 1) alone = last;
    }
    EXPECT_GT(last, alone) << "8 ranks on one GPU's uplink";
  }
}

// Two ranks swap out 1000 bytes each at the same moment through an uplink
// of 1 byte/ns (each GPU's own link: 2 byte/ns; TestLink has no latency):
// 0.5 byte/ns each, 2000 ns, where one rank alone takes 1000 ns; then both
// prefetch it back the same way, under a 5000 ns op either way. The uplink
// carried 1000 bytes each way per rank in a 5000 ns step.
TEST(NodeSimulatorTest, TwoCopiesShareAnUplinkHalfEach) {
  Hardware hw = TestLink();
  hw.h2d_gbps = hw.d2h_gbps = hw.bidir_h2d_gbps = hw.bidir_d2h_gbps = 2;
  const Lowered l = OneSwap(hw);
  const RankStep rank = {
      .graph = &l.graph, .durations = &l.durations, .schedule = &l.schedule};
  const Node node = OneSwitch(hw, 2, Rates(1, 1), 1 << 20);
  for (int32_t n : {1, 2}) {
    std::vector<RankStep> ranks(n, rank);
    for (int32_t i = 0; i < n; ++i) ranks[i].gpu = i;
    absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, Options(0));
    ASSERT_TRUE(r.ok()) << r.status();
    for (const SimResult& rr : r->ranks) {
      const SimEvent* out = nullptr;
      for (const SimEvent& e : rr.events) {
        if (e.type == EventType::kSwapOut) out = &e;
      }
      ASSERT_NE(out, nullptr);
      EXPECT_EQ(out->end_ns - out->start_ns, 1000 * n);
      const SimEvent* in = nullptr;
      for (const SimEvent& e : rr.events) {
        if (e.type == EventType::kPrefetch) in = &e;
      }
      ASSERT_NE(in, nullptr);
      EXPECT_EQ(in->start_ns, 1000 * n);
      EXPECT_EQ(in->end_ns, 2000 * n);
    }
    ASSERT_EQ(r->links.size(), n + 2u);
    const LinkUsage& uplink = r->links[n];
    EXPECT_EQ(uplink.name, "switch sw0 uplink");
    EXPECT_EQ(uplink.ranks.size(), static_cast<size_t>(n));
    EXPECT_EQ(r->links[0].ranks, std::vector<int32_t>{0});
    EXPECT_EQ(uplink.d2h_bytes, 1000 * n);
    EXPECT_EQ(uplink.h2d_bytes, 1000 * n);
    EXPECT_EQ(r->step_ns, 5000);  // the prefetches land in the long op
    EXPECT_DOUBLE_EQ(uplink.d2h_utilization, 1000.0 * n / 5000);
  }
}

// The ranks behind one socket hold its pinned memory together: room for
// one rank's host copy is not room for two.
TEST(NodeSimulatorTest, RanksShareTheirSocketsPinnedMemory) {
  const Hardware hw = TestLink();
  const Lowered l = OneSwap(hw);
  const Node node = OneSwitch(hw, 2, Rates(kInf, kInf), 1500);
  std::vector<RankStep> ranks = {{.gpu = 0,
                                  .graph = &l.graph,
                                  .durations = &l.durations,
                                  .schedule = &l.schedule},
                                 {.gpu = 1,
                                  .graph = &l.graph,
                                  .durations = &l.durations,
                                  .schedule = &l.schedule}};
  absl::StatusOr<NodeSimResult> one =
      SimulateNode(node, absl::MakeConstSpan(ranks).subspan(0, 1), Options(0));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->feasible) << one->infeasible_reason;
  EXPECT_EQ(one->peak_pinned_bytes_per_socket[0], 1000);

  absl::StatusOr<NodeSimResult> two = SimulateNode(node, ranks, Options(0));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_FALSE(two->feasible);
  EXPECT_THAT(two->infeasible_reason,
              StartsWith("rank 1 (GPU 1): pinned host memory exhausted"));
  EXPECT_THAT(two->infeasible_reason,
              HasSubstr("with 1000 of 1500 bytes in use on socket cpu0, "
                        "shared by ranks 0, 1"));
}

// A rank whose plan cannot run under the budget makes the node's step
// infeasible, naming the rank, instead of hanging the loop.
TEST(NodeSimulatorTest, ARankThatCannotRunIsNamed) {
  const Hardware hw = TestLink();
  const Lowered l = KeepOne(hw);
  const Node node = OneSwitch(hw, 2, Rates(1, 1), 1 << 20);
  const std::vector<RankStep> ranks = {{.gpu = 1,
                                        .graph = &l.graph,
                                        .durations = &l.durations,
                                        .schedule = &l.schedule}};
  absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, Options(500));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->feasible);
  EXPECT_THAT(r->infeasible_reason, StartsWith("rank 0 (GPU 1): "));
  EXPECT_THAT(r->infeasible_reason, HasSubstr("budget"));
}

TEST(NodeSimulatorTest, BadRanksAreRefusedNamingTheField) {
  const Hardware hw = TestLink();
  const Lowered l = KeepOne(hw);
  const Node node = OneSwitch(hw, 2, Rates(1, 1), 1 << 20);
  const RankStep ok = {
      .graph = &l.graph, .durations = &l.durations, .schedule = &l.schedule};
  struct Case {
    std::vector<RankStep> ranks;
    std::string error;
  };
  RankStep gpu5 = ok;
  gpu5.gpu = 5;
  RankStep no_schedule = ok;
  no_schedule.schedule = nullptr;
  const std::vector<Case> cases = {
      {{}, "ranks: a node step needs a rank"},
      {{ok, ok, ok}, "ranks: 3 ranks on a node of 2 GPUs"},
      {{gpu5}, "ranks[0].gpu: GPU 5 does not exist"},
      {{ok, ok}, "ranks[1].gpu: GPU 0 already runs ranks[0]"},
      {{no_schedule}, "ranks[0]: a rank needs a graph, durations and a"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NodeSimResult> r = SimulateNode(node, c.ranks, Options(0));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.error));
  }
}

// --- Collectives -----------------------------------------------------------

// `n` GPUs of TestLink, each behind its own switch (uplink 0.5 byte/ns) on
// one socket; NVLink at `nvlink` byte/ns each way (0: none); collective
// latency: 100 ns a call, 10 a step.
Node CollectiveNode(int32_t n, double nvlink) {
  Node node = OneSwitch(TestLink(), n, Rates(kInf, kInf), 1 << 30);
  node.switches.clear();
  for (int32_t g = 0; g < n; ++g) {
    node.switches.push_back({.name = absl::StrCat("sw", g),
                             .gpus = {g},
                             .uplink = Rates(0.5, 0.5)});
  }
  node.nvlink_gbps = nvlink;
  node.collective_base_latency_ns = 100;
  node.collective_hop_latency_ns = 10;
  return node;
}

// f (1000 ns) writes x; a collective reads x and writes y; g (500 ns) reads
// y. Each op of `collectives` is a collective on `group` of `bytes`.
Graph WithCollectives(const std::vector<Collective>& collectives) {
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000);
  b.Forward("f", 1000, {}, {x});
  int32_t in = x;
  std::vector<int32_t> ops;
  for (size_t i = 0; i < collectives.size(); ++i) {
    const int32_t y = b.Tensor(absl::StrCat("y", i), 1000);
    ops.push_back(b.Forward(absl::StrCat("c", i), 0, {in}, {y}));
    in = y;
  }
  b.Forward("g", 500, {in}, {});
  Graph g = b.Build();
  for (size_t i = 0; i < collectives.size(); ++i) {
    g.ops[ops[i]].collective = collectives[i];
  }
  const absl::Status s = IndexGraph(g);
  EXPECT_TRUE(s.ok()) << s;
  return g;
}

std::vector<Lowered> LowerEach(const std::vector<Graph>& graphs) {
  std::vector<Lowered> out;
  for (const Graph& g : graphs) {
    out.push_back(Lower(g, TestLink(), Plan::KeepAll(g)));
  }
  return out;
}

// A ring all-reduce of 8000 bytes over 4 ranks on NVLink at 2 byte/ns:
// each rank sends 2 x 3/4 x 8000 = 12000 bytes to the next, at 2 byte/ns
// (one flow out of and one into each port): 6000 ns, after 100 + 6 x 10
// latency: 6160 ns, the model's formula (CollectiveTimeNs plus the base).
// g waits for it: the step is 1000 + 6160 + 500.
TEST(NodeCollectivesTest, ARingAllReduceTakesTheModelsTime) {
  const Collective ar = {
      .kind = CollectiveKind::kAllReduce, .bytes = 8000, .group = {0, 1, 2, 3}};
  const std::vector<Lowered> lowered =
      LowerEach(std::vector<Graph>(4, WithCollectives({ar})));
  const Node node = CollectiveNode(4, 2);
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(node, OnGpus(lowered), Options(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  const int64_t model =
      100 + CollectiveTimeNs(CollectiveKind::kAllReduce,
                             CollectiveAlgorithm::kRing, 8000, 4, 2, 10);
  EXPECT_EQ(model, 6160);
  for (const SimResult& rank : r->ranks) {
    const SimEvent* c = nullptr;
    for (const SimEvent& e : rank.events) {
      if (e.type == EventType::kCollective) c = &e;
    }
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->stream, StreamId::kComm);
    EXPECT_EQ(c->start_ns, 1000);
    EXPECT_EQ(c->end_ns, 1000 + model);
    EXPECT_EQ(rank.step_ns, 1000 + model + 500);
    EXPECT_EQ(rank.stall_collective_ns, model);
  }
  EXPECT_EQ(r->step_ns, 1000 + model + 500);
  EXPECT_EQ(r->ideal_step_ns, 1500);
  // Each NVLink port carried 12000 bytes each way.
  ASSERT_EQ(r->links.size(), 4u + 4u + 1u + 4u);
  EXPECT_EQ(r->links[9].name, "GPU 0 NVLink");
  EXPECT_EQ(r->links[9].d2h_bytes, 12000);
  EXPECT_EQ(r->links[9].h2d_bytes, 12000);
}

// Without NVLink a send crosses the sender's link, both switches' uplinks
// (0.5 byte/ns: the bottleneck) and the receiver's link: 1000 bytes in
// 2000 ns, after 100 + 1 x 10. One GPU alone runs a collective in no time.
TEST(NodeCollectivesTest, ASendCrossesTheSwitchesAndAloneIsFree) {
  const Collective send = {
      .kind = CollectiveKind::kSendRecv, .bytes = 1000, .group = {0, 1}};
  const Graph g = WithCollectives({send});
  const std::vector<Lowered> lowered = LowerEach({g, g});
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(CollectiveNode(2, 0), OnGpus(lowered), Options(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  EXPECT_EQ(r->step_ns, 1000 + 110 + 2000 + 500);
  EXPECT_EQ(r->links[2].name, "switch sw0 uplink");
  EXPECT_EQ(r->links[2].d2h_bytes, 1000);
  EXPECT_EQ(r->links[3].h2d_bytes, 1000);

  absl::StatusOr<SimResult> alone =
      SimulateSchedule(lowered[0].graph, TestLink(), lowered[0].durations,
                       lowered[0].schedule, Options(0));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->step_ns, 1500);
}

// A collective of one rank moves nothing and waits for no one: on the node
// as alone, it takes no time.
TEST(NodeCollectivesTest, AGroupOfOneTakesNoTime) {
  const Collective self = {
      .kind = CollectiveKind::kAllReduce, .bytes = 1000, .group = {0}};
  const std::vector<Lowered> lowered = LowerEach({WithCollectives({self})});
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(CollectiveNode(2, 2), OnGpus(lowered), Options(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  EXPECT_EQ(r->step_ns, 1500);
}

// Ranks 0, 1 and 2 each issue two collectives, on pairs, in orders that
// wait for each other in a cycle: each group's sequence agrees, so it is
// accepted, and the step is infeasible, saying so, instead of hanging.
TEST(NodeCollectivesTest, CollectivesThatWaitInACycleAreInfeasible) {
  const auto on = [](std::vector<int32_t> group) {
    return Collective{.kind = CollectiveKind::kAllReduce,
                      .bytes = 100,
                      .group = std::move(group)};
  };
  const std::vector<Lowered> lowered =
      LowerEach({WithCollectives({on({0, 1}), on({0, 2})}),
                 WithCollectives({on({1, 2}), on({0, 1})}),
                 WithCollectives({on({0, 2}), on({1, 2})})});
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(CollectiveNode(3, 2), OnGpus(lowered), Options(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->feasible);
  EXPECT_THAT(r->infeasible_reason,
              HasSubstr("rank 0 (GPU 0): collective op 1 (c0) (all_reduce of "
                        "100 bytes on ranks {0, 1}) waits for rank 1, which "
                        "waits at collective op 1 (c0) (all_reduce of 100 "
                        "bytes on ranks {1, 2})"));
  EXPECT_THAT(r->infeasible_reason, HasSubstr("wait for each other"));
}

TEST(NodeCollectivesTest, GroupsThatDoNotAgreeAreRefused) {
  const auto ar = [](int64_t bytes, std::vector<int32_t> group) {
    return Collective{.kind = CollectiveKind::kAllReduce,
                      .bytes = bytes,
                      .group = std::move(group)};
  };
  struct Case {
    std::vector<Graph> graphs;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{WithCollectives({ar(100, {0, 1})}), WithCollectives({ar(200, {0, 1})})},
       "ranks[1]: collective 0 on ranks {0, 1} is op 1 (c0) (all_reduce of "
       "200 bytes on ranks {0, 1}), where ranks[0]'s is op 1 (c0) (all_reduce "
       "of 100 bytes on ranks {0, 1})"},
      {{WithCollectives({ar(100, {0, 1})}),
        WithCollectives({ar(100, {0, 1}), ar(100, {0, 1})})},
       "ranks[1] issues 2 collectives on ranks {0, 1} where ranks[0] issues 1"},
      {{WithCollectives({ar(100, {0, 5})}), WithCollectives({})},
       "ranks[0]: op 1 (c0): collective.group names rank 5, but the node step "
       "has 2 ranks"},
      {{WithCollectives({}), WithCollectives({ar(100, {0})})},
       "ranks[1]: op 1 (c0): collective.group {0} does not include this rank "
       "(1)"},
  };
  for (const Case& c : cases) {
    const std::vector<Lowered> lowered = LowerEach(c.graphs);
    absl::StatusOr<NodeSimResult> r =
        SimulateNode(CollectiveNode(2, 2), OnGpus(lowered), Options(0));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  // Ranks that share one graph (whose collectives are found once) are each
  // checked against the groups: rank 0 belongs to {0}, rank 1 does not;
  // and the first rank listed outside the node is the one named.
  for (const auto& [group, error] :
       std::vector<std::pair<std::vector<int32_t>, std::string>>{
           {{0},
            "ranks[1]: op 1 (c0): collective.group {0} does not include "
            "this rank (1)"},
           {{1, 7, 0, 9},
            "ranks[0]: op 1 (c0): collective.group names rank 7, "
            "but the node step has 2 ranks"}}) {
    const std::vector<Lowered> shared =
        LowerEach({WithCollectives({ar(100, group)})});
    absl::StatusOr<NodeSimResult> r =
        SimulateNode(CollectiveNode(2, 2), OnGpus(shared[0], 2), Options(0));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(error));
  }
}

// A collective's output that backward reads is a saved activation; one
// rank cannot rebuild it alone, so a plan recomputing it is refused.
TEST(NodeCollectivesTest, ACollectivesOutputIsNotRecomputed) {
  GraphBuilder b;
  const int32_t x = b.Tensor("x", 1000);
  const int32_t y = b.Tensor("y", 1000);
  b.Forward("f", 10, {}, {x});
  const int32_t c = b.Forward("gather", 0, {x}, {y});
  b.Forward("h", 10, {y}, {});
  b.Backward("h.bwd", 10, {y});
  Graph g = b.Build();
  g.ops[c].collective = Collective{
      .kind = CollectiveKind::kAllGather, .bytes = 1000, .group = {0}};
  ASSERT_TRUE(IndexGraph(g).ok());
  ASSERT_TRUE(g.index.is_saved[y]);
  Plan plan = Plan::KeepAll(g);
  plan.decisions[y].action = Action::kRecompute;
  const OpDurations d = *ComputeDurations(g, TestLink());
  EXPECT_EQ(d.op_ns[c], 0);  // a collective takes no compute time
  absl::StatusOr<Schedule> s = LowerPlan(g, plan, d, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("a collective's output can be kept or swapped, not "
                        "recomputed"));
}

// The data-parallel step the generator builds (model/transformer.h: DDP's
// gradient buckets, one ring all-reduce each) on a DGX A100: every rank
// runs the same graph with its plan lowered (keep everything). The
// all-reduces run beside backward on the NVLink ports; the last one is
// issued after the last backward op, so no rank's step is shorter than the
// GPU's step alone, where collectives take no time.
TEST(NodeCollectivesTest, ADataParallelStepRunsOnADgx) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->num_gpus, 8);
  WorkloadOverrides o;
  o.layers = 2;
  o.data_parallel = 8;
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<int32_t> buckets = testutil::CollectiveOps(*g);
  ASSERT_GT(buckets.size(), 1u);
  const Plan plan = Plan::KeepAll(*g);
  const Lowered l = Lower(*std::move(g), node->gpu, plan);
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(*node, OnGpus(l, 8), Options(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;

  absl::StatusOr<SimResult> alone =
      SimulateSchedule(l.graph, node->gpu, l.durations, l.schedule, Options(0));
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE(alone->feasible);
  // Alone, the all-reduces are free: the step of the single-GPU graph.
  o.data_parallel = 1;
  absl::StatusOr<Graph> one = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<OpDurations> single = ComputeDurations(*one, node->gpu);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(alone->step_ns, single->total_ns);
  EXPECT_EQ(alone->step_ns, l.durations.total_ns);

  ASSERT_EQ(r->ranks.size(), 8u);
  for (size_t k = 0; k < r->ranks.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("rank ", k));
    const SimResult& rank = r->ranks[k];
    EXPECT_TRUE(rank.feasible);
    EXPECT_GE(rank.step_ns, alone->step_ns);
    EXPECT_EQ(rank.ideal_step_ns, alone->ideal_step_ns);
    // One collective per bucket, in bucket order, on the comm stream.
    std::vector<int32_t> collectives;
    for (const SimEvent& e : rank.events) {
      if (e.type != EventType::kCollective) continue;
      EXPECT_EQ(e.stream, StreamId::kComm);
      EXPECT_GT(e.end_ns, e.start_ns);
      collectives.push_back(e.index);
    }
    EXPECT_EQ(collectives, buckets);
  }
  // The last bucket's all-reduce cannot hide under backward.
  EXPECT_GT(r->step_ns, alone->step_ns);
}

// The FSDP step the generator builds (model/transformer.h: per-layer
// all-gathers in forward and backward, reduce-scatters after each unit's
// backward) on a DGX A100's 8 GPUs, with everything kept and with every
// activation recomputed that has a recipe reading the parameters gathered
// for backward (FSDP's activation checkpointing). Both lower and run; no
// rank's step is shorter than the GPU's step alone.
TEST(NodeCollectivesTest, AFullyShardedStepRunsOnADgx) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->num_gpus, 8);
  WorkloadOverrides o;
  o.layers = 2;
  o.fully_sharded = 8;
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<int32_t> collectives;
  std::vector<bool> gathered_for_backward(g->tensors.size(), false);
  for (size_t i = 0; i < g->ops.size(); ++i) {
    const Op& op = g->ops[i];
    if (!op.collective.has_value()) continue;
    collectives.push_back(static_cast<int32_t>(i));
    if (op.phase == Phase::kBackward) {
      for (int32_t t : op.outputs) gathered_for_backward[t] = true;
    }
  }
  ASSERT_EQ(collectives.size(), 9u);  // 3 units: 2 gathers, 1 scatter each
  Plan recompute = Plan::KeepAll(*g);
  int32_t recomputed = 0;
  for (int32_t t : g->index.saved) {
    const Tensor& tensor = g->tensors[t];
    if (!tensor.rebuild.has_value()) continue;
    if (std::none_of(tensor.rebuild->inputs.begin(),
                     tensor.rebuild->inputs.end(),
                     [&](int32_t in) { return gathered_for_backward[in]; })) {
      continue;
    }
    recompute.decisions[t].action = Action::kRecompute;
    ++recomputed;
  }
  ASSERT_GT(recomputed, 10);

  absl::StatusOr<OpDurations> single_gpu;
  {
    o.fully_sharded = 1;
    absl::StatusOr<Graph> one = BuildWorkload("gpt2-xl", o);
    ASSERT_TRUE(one.ok()) << one.status();
    single_gpu = ComputeDurations(*one, node->gpu);
    ASSERT_TRUE(single_gpu.ok()) << single_gpu.status();
  }
  Plan keep = Plan::KeepAll(*g);
  for (const Plan* plan : {&keep, &recompute}) {
    const bool kept = plan == &keep;
    SCOPED_TRACE(kept ? "keep all" : "recompute");
    const Lowered l = Lower(*g, node->gpu, *plan);
    EXPECT_EQ(l.schedule.recomputed_tensors, kept ? 0 : recomputed);
    absl::StatusOr<NodeSimResult> r =
        SimulateNode(*node, OnGpus(l, 8), Options(0));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->feasible) << r->infeasible_reason;
    // Alone, the collectives are free: the single GPU's compute, plus the
    // recomputes.
    EXPECT_EQ(l.durations.total_ns, single_gpu->total_ns);
    ASSERT_EQ(r->ranks.size(), 8u);
    for (size_t k = 0; k < r->ranks.size(); ++k) {
      SCOPED_TRACE(absl::StrCat("rank ", k));
      const SimResult& rank = r->ranks[k];
      EXPECT_TRUE(rank.feasible);
      EXPECT_GE(rank.step_ns, single_gpu->total_ns);
      std::vector<int32_t> ran;
      for (const SimEvent& e : rank.events) {
        if (e.type != EventType::kCollective) continue;
        EXPECT_EQ(e.stream, StreamId::kComm);
        ran.push_back(e.index);
      }
      EXPECT_EQ(ran, collectives);
    }
    // Forward waits for the first all-gather: the step is longer than the
    // compute alone.
    EXPECT_GT(r->step_ns, single_gpu->total_ns);
  }
}

}  // namespace
}  // namespace slackswap
