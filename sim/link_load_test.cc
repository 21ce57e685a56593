// Each shared link's load over a node's step (SimOptions::record_link_load):
// the recorder on hand-made flows, its averaging, and on a DGX A100 that its
// series integrate to the bytes each link carried (collectives' transfers
// over NVLink, host copies over the GPUs' links) and change nothing else.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "sim/collective_model.h"
#include "sim/link_load_recorder.h"
#include "sim/node_simulator.h"
#include "testing/graph_builder.h"
#include "testing/lowered.h"

namespace slackswap {
namespace {

using testutil::Lowered;
using testutil::OnGpus;

struct Bytes {
  double h2d = 0;
  double d2h = 0;
};

// The series' integral over time: the bytes it says moved each way.
Bytes Integral(const std::vector<LinkLoadPoint>& s) {
  Bytes b;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    const double ns = static_cast<double>(s[i + 1].time_ns - s[i].time_ns);
    b.h2d += s[i].h2d_bytes_per_ns * ns;
    b.d2h += s[i].d2h_bytes_per_ns * ns;
  }
  return b;
}

TEST(LinkLoadRecorderTest, SumsTheFlowsOnALinkAtEachInstant) {
  LinkLoadRecorder rec(2);
  const std::vector<Hop> both = {{0, LinkDir::kH2D}, {1, LinkDir::kD2H}};
  const std::vector<Hop> first = {{0, LinkDir::kH2D}};
  const int64_t a = rec.Open();
  const int64_t b = rec.Open();
  rec.SetRate(a, both, 0, 4);
  rec.SetRate(b, first, 10, 2);
  rec.SetRate(a, both, 10, 2);  // the same instant: the last rate wins
  rec.SetRate(b, first, 20, 0);
  rec.SetRate(a, both, 20, 4);
  rec.SetRate(a, both, 30, 0);
  // 2 + 2 from 10 on, then 4 alone: still 4, so no point until the end.
  EXPECT_EQ(rec.Series(0, 0),
            (std::vector<LinkLoadPoint>{{0, 4, 0}, {30, 0, 0}}));
  EXPECT_EQ(rec.Series(1, 0), (std::vector<LinkLoadPoint>{
                                  {0, 0, 4}, {10, 0, 2}, {20, 0, 4}, {30}}));
}

TEST(LinkLoadRecorderTest, AveragingKeepsTheBytes) {
  const std::vector<LinkLoadPoint> s = {{0, 10, 0}, {5, 0, 3}, {30, 0, 0}};
  // Two spans of 15 ns: 50 bytes to the GPUs in the first, 30 + 45 to the
  // host over the two.
  const std::vector<LinkLoadPoint> avg = AverageLinkLoad(s, 3);
  EXPECT_EQ(avg, (std::vector<LinkLoadPoint>{
                     {0, 50.0 / 15, 30.0 / 15}, {15, 0, 3}, {30, 0, 0}}));
  EXPECT_DOUBLE_EQ(Integral(avg).h2d, 50);
  EXPECT_DOUBLE_EQ(Integral(avg).d2h, 75);
}

// A data-parallel step on four GPUs of a DGX A100, with every fourth saved
// tensor swapped to the host or none.
struct DdpStep {
  Node node;
  Lowered lowered;
};

DdpStep Ddp(bool swap) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  EXPECT_TRUE(node.ok()) << node.status();
  return {*node, testutil::DataParallelStep(node->gpu, 4, swap ? 4 : 0)};
}

SimOptions Recording(bool on) {
  SimOptions opts;
  opts.record_events = true;
  opts.record_link_load = on;
  return opts;
}

// Within a flow's last partial nanosecond: a copy ends on the whole
// nanosecond after its last byte, having carried its rate (at most the
// link's) up to it.
double Slack(int64_t flows, double rate) {
  return static_cast<double>(flows) * rate;
}

TEST(NodeLinkLoadTest, NvlinkLoadIsTheCollectivesBytes) {
  const DdpStep step = Ddp(/*swap=*/false);
  const std::vector<RankStep> ranks = OnGpus(step.lowered, 4);
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(step.node, ranks, Recording(true));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  // Per GPU, the collectives' transfers out of and into its port.
  std::vector<int64_t> out(4, 0);
  std::vector<int64_t> in(4, 0);
  for (int32_t op : testutil::CollectiveOps(step.lowered.graph)) {
    const Collective& c = *step.lowered.graph.ops[op].collective;
    for (const CollectiveFlow& f :
         PlanCollective(c.kind, c.algorithm, c.bytes,
                        static_cast<int32_t>(c.group.size()))
             .flows) {
      ++out[c.group[f.src]];
      ++in[c.group[f.dst]];
    }
  }
  int nvlinks = 0;
  for (const LinkUsage& link : r->links) {
    SCOPED_TRACE(link.name);
    const Bytes moved = Integral(link.load);
    if (link.name.find("NVLink") == std::string::npos) {
      // No host copies, and the collectives stay on NVLink.
      EXPECT_TRUE(link.load.empty());
      continue;
    }
    ++nvlinks;
    const int32_t gpu = link.name[4] - '0';  // "GPU 3 NVLink"
    ASSERT_GT(link.d2h_bytes, 0);
    EXPECT_NEAR(moved.d2h, link.d2h_bytes,
                Slack(out[gpu], step.node.nvlink_gbps));
    EXPECT_NEAR(moved.h2d, link.h2d_bytes,
                Slack(in[gpu], step.node.nvlink_gbps));
    EXPECT_EQ(link.load.back(), LinkLoadPoint{link.load.back().time_ns});
    EXPECT_LE(link.load.back().time_ns, r->step_ns);
    for (const LinkLoadPoint& p : link.load) {
      EXPECT_LE(p.d2h_bytes_per_ns, step.node.nvlink_gbps * (1 + 1e-12));
      EXPECT_LE(p.h2d_bytes_per_ns, step.node.nvlink_gbps * (1 + 1e-12));
    }
  }
  EXPECT_EQ(nvlinks, 4);
}

TEST(NodeLinkLoadTest, HostCopyLoadIsTheLinksBytes) {
  const DdpStep step = Ddp(/*swap=*/true);
  const std::vector<RankStep> ranks = OnGpus(step.lowered, 4);
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(step.node, ranks, Recording(true));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  int64_t copies = 0;  // each way, every rank's
  for (const SimResult& rank : r->ranks) copies += rank.swapped_tensors;
  ASSERT_GT(copies, 0);
  const double fastest =
      std::max(step.node.gpu.h2d_gbps, step.node.gpu.d2h_gbps);
  for (const LinkUsage& link : r->links) {
    SCOPED_TRACE(link.name);
    if (link.ranks.empty()) continue;
    ASSERT_GT(link.h2d_bytes, 0);
    ASSERT_GT(link.d2h_bytes, 0);
    const Bytes moved = Integral(link.load);
    EXPECT_NEAR(moved.h2d, link.h2d_bytes, Slack(copies, fastest));
    EXPECT_NEAR(moved.d2h, link.d2h_bytes, Slack(copies, fastest));
  }
}

TEST(NodeLinkLoadTest, RecordingChangesNothingElse) {
  const DdpStep step = Ddp(/*swap=*/true);
  const std::vector<RankStep> ranks = OnGpus(step.lowered, 4);
  absl::StatusOr<NodeSimResult> off =
      SimulateNode(step.node, ranks, Recording(false));
  SimOptions capped = Recording(true);
  capped.timeline_points = 16;
  for (const SimOptions& opts : {Recording(true), capped}) {
    absl::StatusOr<NodeSimResult> on = SimulateNode(step.node, ranks, opts);
    ASSERT_TRUE(off.ok() && on.ok());
    EXPECT_EQ(on->step_ns, off->step_ns);
    EXPECT_EQ(on->events_processed, off->events_processed);
    ASSERT_EQ(on->ranks.size(), off->ranks.size());
    for (size_t k = 0; k < on->ranks.size(); ++k) {
      const SimResult& a = on->ranks[k];
      const SimResult& b = off->ranks[k];
      EXPECT_EQ(a.step_ns, b.step_ns);
      EXPECT_EQ(a.stall_collective_ns, b.stall_collective_ns);
      ASSERT_EQ(a.events.size(), b.events.size());
      for (size_t i = 0; i < a.events.size(); ++i) {
        EXPECT_EQ(a.events[i].start_ns, b.events[i].start_ns);
        EXPECT_EQ(a.events[i].end_ns, b.events[i].end_ns);
      }
    }
    ASSERT_EQ(on->links.size(), off->links.size());
    for (size_t l = 0; l < on->links.size(); ++l) {
      SCOPED_TRACE(on->links[l].name);
      EXPECT_EQ(on->links[l].h2d_bytes, off->links[l].h2d_bytes);
      EXPECT_EQ(on->links[l].d2h_bytes, off->links[l].d2h_bytes);
      EXPECT_EQ(on->links[l].h2d_utilization, off->links[l].h2d_utilization);
      EXPECT_TRUE(off->links[l].load.empty());
      EXPECT_FALSE(on->links[l].load.empty());
      if (opts.timeline_points > 0) {
        EXPECT_LE(on->links[l].load.size(), 16u);
        // Averaged, the series still moves the link's bytes.
        const Bytes moved = Integral(on->links[l].load);
        EXPECT_NEAR(moved.d2h, on->links[l].d2h_bytes,
                    1e-3 * on->links[l].d2h_bytes + 1e4);
      }
    }
  }
}

}  // namespace
}  // namespace slackswap
