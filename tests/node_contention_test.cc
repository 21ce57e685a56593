// What a plan made for one GPU keeps on a node: docs/SIMULATOR.md's table
// ("What a node costs a plan made for one GPU"), computed here and compared
// with the doc, so the figures cannot drift from the code.
//
// Each reference workload, data parallel over the 8 GPUs of dgx-a100-80gb,
// every rank running slackswap's single-GPU plan at budget 0.5 of the
// unconstrained peak: throughput retained alone (Simulate, one GPU, its
// collectives free) and on the node (SimulateNode), then on the node with
// one cause removed at a time: the switches' uplinks and the sockets'
// memory made unlimited (shared host links), NVLink made unlimited and the
// collectives' latency zero (collectives), and every link's
// both-directions rate raised to its one-way rate (the both-directions
// drop). Each removal's gain is that cause's share of the loss; the causes
// interact, so the shares need not add up to the loss.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "model/workloads.h"
#include "planner/analysis.h"
#include "planner/policy.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"
#include "testing/doc_tables.h"

namespace slackswap {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int32_t kRanks = 8;

struct Row {
  double alone = 0;
  double node = 0;
  double no_shared_host_links = 0;
  double free_collectives = 0;
  double no_both_directions_drop = 0;
};

double OnNode(const Node& node, const Graph& g, const Plan& plan,
              int64_t budget) {
  absl::StatusOr<OpDurations> d = ComputeDurations(g, node.gpu);
  EXPECT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Schedule> s = LowerPlan(g, plan, *d);
  EXPECT_TRUE(s.ok()) << s.status();
  std::vector<RankStep> ranks;
  for (int32_t gpu = 0; gpu < kRanks; ++gpu) {
    ranks.push_back(
        {.gpu = gpu, .graph = &g, .durations = &*d, .schedule = &*s});
  }
  SimOptions opts;
  opts.budget_bytes = budget;
  opts.record_timeline = false;
  absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, opts);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return 0;
  EXPECT_TRUE(r->feasible) << r->infeasible_reason;
  return r->throughput_retained;
}

void NoBothDirectionsDrop(LinkRates& r) {
  r.bidir_h2d_gbps = r.h2d_gbps;
  r.bidir_d2h_gbps = r.d2h_gbps;
}

Row Measure(const std::string& workload) {
  WorkloadOverrides o;
  o.data_parallel = kRanks;
  absl::StatusOr<Graph> g = BuildWorkload(workload, o);
  EXPECT_TRUE(g.ok()) << g.status();
  const Node node = *FindNode("dgx-a100-80gb");
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(*g, node.gpu);
  EXPECT_TRUE(a.ok()) << a.status();
  const int64_t budget = g->index.saved_bytes / 2;
  const PlanningContext ctx{*g, node.gpu, *a, budget};
  absl::StatusOr<Plan> plan = PlanWithPolicy("slackswap", ctx);
  EXPECT_TRUE(plan.ok()) << plan.status();

  Row row;
  absl::StatusOr<SimResult> alone = SimulatePlan("slackswap", ctx, *plan, {});
  EXPECT_TRUE(alone.ok()) << alone.status();
  row.alone = alone->throughput_retained;
  row.node = OnNode(node, *g, *plan, budget);

  Node wide = node;
  for (PcieSwitch& sw : wide.switches) sw.uplink = {kInf, kInf, kInf, kInf};
  for (Socket& s : wide.sockets) s.memory = {kInf, kInf, kInf, kInf};
  row.no_shared_host_links = OnNode(wide, *g, *plan, budget);

  Node free = node;
  free.nvlink_gbps = kInf;
  free.collective_base_latency_ns = 0;
  free.collective_hop_latency_ns = 0;
  row.free_collectives = OnNode(free, *g, *plan, budget);

  Node full_duplex = node;
  full_duplex.gpu.bidir_h2d_gbps = full_duplex.gpu.h2d_gbps;
  full_duplex.gpu.bidir_d2h_gbps = full_duplex.gpu.d2h_gbps;
  for (PcieSwitch& sw : full_duplex.switches) NoBothDirectionsDrop(sw.uplink);
  for (Socket& s : full_duplex.sockets) NoBothDirectionsDrop(s.memory);
  row.no_both_directions_drop = OnNode(full_duplex, *g, *plan, budget);
  return row;
}

std::string Pct(double retained) {
  return absl::StrFormat("%.1f%%", 100 * retained);
}
std::string Gain(double with, double without) {
  return absl::StrFormat("%+.1f pp", 100 * (with - without));
}

TEST(NodeContentionTest, TheDocsTableIsWhatTheSimulatorGives) {
  const std::vector<std::vector<std::string>> rows = testutil::MarkdownTable(
      testutil::SourceFile("docs/SIMULATOR.md"),
      "| workload (DDP, 8 ranks, budget 0.5) | alone |");
  ASSERT_EQ(rows.size(), 3u) << "the table in docs/SIMULATOR.md";
  const std::vector<std::string> workloads = {"bert-large", "gpt2-xl",
                                              "llama-7b"};
  for (size_t i = 0; i < workloads.size(); ++i) {
    SCOPED_TRACE(workloads[i]);
    const Row r = Measure(workloads[i]);
    const std::vector<std::string> want = {
        workloads[i],
        Pct(r.alone),
        Pct(r.node),
        Gain(r.no_shared_host_links, r.node),
        Gain(r.free_collectives, r.node),
        Gain(r.no_both_directions_drop, r.node)};
    EXPECT_EQ(rows[i], want) << "| " << absl::StrJoin(want, " | ") << " |";
    // A node shares what one GPU has alone: never faster.
    EXPECT_LE(r.node, r.alone);
  }
}

}  // namespace
}  // namespace slackswap
