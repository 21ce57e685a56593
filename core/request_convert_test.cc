#include "core/request_convert.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "testing/held_graph_source.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

using testutil::HeldGraphSource;

v1::StepSpec Gpt2Step(int64_t layers) {
  v1::StepSpec spec;
  spec.mutable_workload()->set_name("gpt2-xl");
  spec.mutable_workload()->set_layers(layers);
  spec.set_hardware_name("a100-80gb-pcie4");
  return spec;
}

// The second request naming a workload gets the graph the first built:
// the same object, and the same graph a fresh build gives.
TEST(ResolveStepTest, AWorkloadBuiltOnceIsTakenFromTheSource) {
  HeldGraphSource source;
  absl::StatusOr<Step> first =
      ResolveStep(Gpt2Step(3), CoreLimits{}, nullptr, &source);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Step> second =
      ResolveStep(Gpt2Step(3), CoreLimits{}, nullptr, &source);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->graph_holder, second->graph_holder);
  EXPECT_EQ(source.offers, 1);
  EXPECT_EQ(source.finds, 2);
  absl::StatusOr<Step> fresh = ResolveStep(Gpt2Step(3), CoreLimits{});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(GraphToProto(second->graph()).SerializeAsString(),
            GraphToProto(fresh->graph()).SerializeAsString());
}

// Every override names a different graph.
TEST(ResolveStepTest, OtherOverridesAreOtherGraphs) {
  HeldGraphSource source;
  std::vector<v1::StepSpec> specs(5, Gpt2Step(2));
  specs[1].mutable_workload()->set_layers(3);
  specs[2].mutable_workload()->set_batch(2);
  specs[3].mutable_workload()->set_seq(512);
  specs[4].mutable_workload()->set_attention("unfused");
  std::vector<std::shared_ptr<const Graph>> graphs;
  for (const v1::StepSpec& spec : specs) {
    absl::StatusOr<Step> step =
        ResolveStep(spec, CoreLimits{}, nullptr, &source);
    ASSERT_TRUE(step.ok()) << step.status();
    graphs.push_back(step->graph_holder);
  }
  EXPECT_EQ(source.offers, 5);
  EXPECT_EQ(source.held.size(), 5u);
  for (size_t i = 1; i < graphs.size(); ++i) {
    EXPECT_NE(GraphToProto(*graphs[0]).SerializeAsString(),
              GraphToProto(*graphs[i]).SerializeAsString())
        << specs[i].DebugString();
  }
}

// On a node whose ranks run different graphs, each rank's is held under
// its own key and taken back as that rank's.
TEST(ResolveStepTest, EachRanksGraphIsHeldApart) {
  HeldGraphSource source;
  v1::StepSpec spec;
  spec.mutable_workload()->set_name("llama-7b");
  spec.mutable_workload()->set_layers(2);
  spec.mutable_workload()->set_tensor_parallel(2);
  spec.mutable_workload()->set_data_parallel(4);
  spec.set_node_name("dgx-a100-80gb");
  absl::StatusOr<Step> first =
      ResolveStep(spec, CoreLimits{}, nullptr, &source);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->rank_graphs.size(), 8u);
  EXPECT_EQ(source.offers, 8);
  absl::StatusOr<Step> second =
      ResolveStep(spec, CoreLimits{}, nullptr, &source);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(source.offers, 8);
  absl::StatusOr<Step> fresh = ResolveStep(spec, CoreLimits{});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(first->rank_graphs[r], second->rank_graphs[r]) << r;
    EXPECT_EQ(GraphToProto(*second->rank_graphs[r]).SerializeAsString(),
              GraphToProto(*fresh->rank_graphs[r]).SerializeAsString())
        << r;
  }
  EXPECT_NE(GraphToProto(*second->rank_graphs[0]).SerializeAsString(),
            GraphToProto(*second->rank_graphs[1]).SerializeAsString());
}

// A held graph still meets the asking core's limits (a source may serve
// cores with other limits).
TEST(ResolveStepTest, AHeldGraphIsCheckedAgainstTheLimits) {
  HeldGraphSource source;
  ASSERT_TRUE(ResolveStep(Gpt2Step(3), CoreLimits{}, nullptr, &source).ok());
  CoreLimits small;
  small.max_graph_ops = 10;
  absl::StatusOr<Step> refused =
      ResolveStep(Gpt2Step(3), small, nullptr, &source);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("step.workload: "));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("ops exceed the limit of 10"));
  EXPECT_EQ(source.offers, 1);
}

}  // namespace
}  // namespace slackswap
