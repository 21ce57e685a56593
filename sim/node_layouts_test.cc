// The generator's tensor-parallel layouts (model/transformer.h) on a node:
// ranks whose graphs differ in their collectives' groups run together, a
// rank given another rank's graph is refused, and what tensor parallelism
// lets a plan recompute.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/node.h"
#include "model/plan.h"
#include "model/workloads.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"
#include "testing/graph_builder.h"
#include "testing/lowered.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using testutil::Lower;
using testutil::Lowered;
using testutil::OnGpus;

SimOptions WithEvents() {
  SimOptions opts;
  opts.record_events = true;
  return opts;
}

// Llama-7B (two layers) in tensor parallel over 2 ranks times data
// parallel over 4 on a DGX A100: every rank's graph, each lowered with
// everything kept.
class TensorTimesDataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    WorkloadOverrides o;
    o.layers = 2;
    o.tensor_parallel = 2;
    o.data_parallel = 4;
    for (int32_t r = 0; r < 8; ++r) {
      o.rank = r;
      absl::StatusOr<Graph> g = BuildWorkload("llama-7b", o);
      ASSERT_TRUE(g.ok()) << g.status();
      const Plan keep = Plan::KeepAll(*g);
      lowered_.push_back(Lower(*std::move(g), node_.gpu, keep));
    }
  }

  std::vector<RankStep> Ranks(bool every_rank_runs_rank_0) const {
    return every_rank_runs_rank_0 ? OnGpus(lowered_[0], 8) : OnGpus(lowered_);
  }

  Node node_;
  std::vector<Lowered> lowered_;
};

TEST_F(TensorTimesDataParallelTest, RanksLowerAlikeAndRunTogether) {
  // The core lowers rank 0's graph for every rank (core/simulate_step.cc):
  // the groups change neither the durations nor the schedule.
  for (int32_t r = 1; r < 8; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(lowered_[r].durations.op_ns, lowered_[0].durations.op_ns);
    ASSERT_EQ(lowered_[r].schedule.tasks.size(),
              lowered_[0].schedule.tasks.size());
    for (size_t i = 0; i < lowered_[r].schedule.tasks.size(); ++i) {
      EXPECT_EQ(lowered_[r].schedule.tasks[i].op,
                lowered_[0].schedule.tasks[i].op);
    }
  }
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(node_, Ranks(false), WithEvents());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  ASSERT_EQ(r->ranks.size(), 8u);
  for (size_t k = 0; k < r->ranks.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("rank ", k));
    const SimResult& rank = r->ranks[k];
    EXPECT_TRUE(rank.feasible);
    // Alone the collectives are free; on the node the all-reduces between
    // the attention or MLP and the residual add hold compute up.
    EXPECT_GT(rank.step_ns, lowered_[k].durations.total_ns);
    EXPECT_GT(rank.stall_collective_ns, 0);
    std::vector<int32_t> ran;
    for (const SimEvent& e : rank.events) {
      if (e.type == EventType::kCollective) ran.push_back(e.index);
    }
    EXPECT_EQ(ran, testutil::CollectiveOps(lowered_[k].graph));
  }
  // The tensor-parallel pairs (GPUs 0-1, 2-3, ...) and the data-parallel
  // rings all run over NVLink; no byte crosses a PCIe switch.
  for (const LinkUsage& link : r->links) {
    const bool nvlink = absl::StrContains(link.name, "NVLink");
    EXPECT_EQ(link.h2d_bytes + link.d2h_bytes > 0, nvlink) << link.name;
  }
}

TEST_F(TensorTimesDataParallelTest, EveryRankRunningRankZerosGraphIsRefused) {
  // Rank 1 would issue rank 0's data-parallel all-reduce, whose group
  // {0, 2, 4, 6} leaves it out.
  absl::StatusOr<NodeSimResult> r =
      SimulateNode(node_, Ranks(true), WithEvents());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("ranks[1]: op 37 (ddp.all_reduce.bucket0): "
                        "collective.group {0, 2, 4, 6} does not include this "
                        "rank (1)"));
}

// A plan may recompute what a rank can rebuild alone: q and k (rotated)
// and v come from the (kept) normalised input. A residual sum made from an
// all-reduced projection cannot be rebuilt without running the collective
// again.
TEST(TensorParallelPlansTest, RecomputeStopsAtTheAllReduce) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  ASSERT_TRUE(node.ok()) << node.status();
  WorkloadOverrides o;
  o.layers = 2;
  o.tensor_parallel = 8;
  absl::StatusOr<Graph> g = BuildWorkload("llama-7b", o);
  ASSERT_TRUE(g.ok()) << g.status();
  auto tensor = [&](absl::string_view name) {
    for (size_t t = 0; t < g->tensors.size(); ++t) {
      if (g->tensors[t].name.view() == name) return static_cast<int32_t>(t);
    }
    ADD_FAILURE() << name;
    return int32_t{0};
  };
  const absl::StatusOr<OpDurations> d = ComputeDurations(*g, node->gpu);
  ASSERT_TRUE(d.ok()) << d.status();

  Plan qkv = Plan::KeepAll(*g);
  for (const char* name : {"L1.q_r", "L1.k_r", "L1.v"}) {
    ASSERT_TRUE(g->index.is_saved[tensor(name)]) << name;
    qkv.decisions[tensor(name)].action = Action::kRecompute;
  }
  absl::StatusOr<Schedule> s = LowerPlan(*g, qkv, *d, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->recomputed_tensors, 3);

  Plan residual = Plan::KeepAll(*g);
  ASSERT_TRUE(g->index.is_saved[tensor("L1.r1")]);
  residual.decisions[tensor("L1.r1")].action = Action::kRecompute;
  s = LowerPlan(*g, residual, *d, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("tp.all_reduce.L1.o_proj"));
}

}  // namespace
}  // namespace slackswap
