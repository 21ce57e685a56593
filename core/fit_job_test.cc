// Fit for a job on nodes: each node type and layout answered as a Plan on
// the node with the device budget answers it, the node's pinned memory
// limiting the plan, every "no" with its numbers, the ranking by price,
// admission, and the request validated field by field.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/fit_profile.h"
#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "model/node.h"

namespace slackswap {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// A small Llama (2 layers, sequence 128): every answer is a whole search on
// 4 or 8 ranks, kept fast.
v1::FitRequest SmallJob(const std::vector<std::string>& nodes,
                        int64_t global_batch) {
  v1::FitRequest req;
  v1::WorkloadRef& w = *req.mutable_workload();
  w.set_name("llama-7b");
  w.set_layers(2);
  w.set_seq(128);
  req.set_global_batch(global_batch);
  for (const std::string& n : nodes) req.add_nodes()->set_node_name(n);
  return req;
}

// The catalog's DGX A100 with its GPU's memory and the sockets' pinned
// memory replaced.
v1::NodeProfile SmallerDgx(double memory_gb, int64_t pinned_bytes) {
  v1::NodeProfile node = NodeToProto(*FindNode("dgx-a100-80gb"));
  node.set_name("small-dgx");
  node.mutable_gpu_inline()->set_memory_gb(memory_gb);
  for (v1::Socket& s : *node.mutable_sockets()) {
    s.set_pinned_host_memory_bytes(pinned_bytes);
  }
  return node;
}

TEST(FitJobTest, EachAnswerIsAPlanOnTheNodeWithTheDeviceBudget) {
  const PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::FitResponse> fit =
      core.FitStep(SmallJob({"dgx-a100-80gb", "gh200-4x"}, 64), {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->global_batch(), 64);
  EXPECT_EQ(fit->ranked_by(), "step_time");
  // Two nodes, the two default layouts each.
  ASSERT_EQ(fit->results_size(), 4);
  int64_t previous_step = 0;
  for (int i = 0; i < fit->results_size(); ++i) {
    const v1::FitResult& f = fit->results(i);
    SCOPED_TRACE(absl::StrCat(f.node_name(), " ", f.layout_name()));
    ASSERT_TRUE(f.fits_device()) << f.summary();
    EXPECT_EQ(f.rank(), i + 1);
    EXPECT_GE(f.step_ns(), previous_step);
    previous_step = f.step_ns();
    const int32_t gpus = f.node_name() == "gh200-4x" ? 4 : 8;
    EXPECT_EQ(f.ranks(), gpus);
    EXPECT_EQ(f.batch_per_rank(), 64 / gpus);
    EXPECT_EQ(f.layout_name(),
              absl::StrCat(f.layout().fully_sharded() ? "fsdp" : "dp", gpus));
    EXPECT_DOUBLE_EQ(f.samples_per_second(), 64 * 1e9 / f.step_ns());
    EXPECT_DOUBLE_EQ(f.tokens_per_second(), f.samples_per_second() * 128);
    // The same answer as Plan on the node, for that layout's step.
    v1::PlanRequest plan;
    v1::WorkloadRef& w = *plan.mutable_step()->mutable_workload();
    w.set_name("llama-7b");
    w.set_layers(2);
    w.set_seq(128);
    w.set_batch(64 / gpus);
    if (f.layout().fully_sharded()) {
      w.set_fully_sharded(gpus);
    } else {
      w.set_data_parallel(gpus);
    }
    plan.mutable_step()->set_node_name(f.node_name());
    plan.mutable_budget_device();
    plan.add_policies("slackswap");
    absl::StatusOr<v1::PlanResponse> p = core.PlanStep(plan, {});
    ASSERT_TRUE(p.ok()) << p.status();
    const v1::SimulationResult& r = p->report().results(0).result();
    EXPECT_EQ(p->report().device().fits_device(), f.fits_device());
    EXPECT_EQ(r.step_ns(), f.step_ns());
    EXPECT_EQ(r.budget_bytes(), f.budget_bytes());
    EXPECT_DOUBLE_EQ(r.throughput_retained(), f.throughput_retained());
    EXPECT_EQ(r.device().peak_reserved_bytes(), f.peak_reserved_bytes());
  }
}

TEST(FitJobTest, TheNodesPinnedMemoryLimitsThePlan) {
  const PlanningCore core{CoreLimits{}};
  // The step as it is, to size a GPU on which it needs a plan.
  v1::FitRequest req = SmallJob({}, 256);
  req.mutable_workload()->set_seq(512);
  req.add_layouts()->set_fully_sharded(false);
  *req.add_nodes()->mutable_node_inline() = SmallerDgx(80, int64_t{1} << 40);
  absl::StatusOr<v1::FitResponse> as_is = core.FitStep(req, {});
  ASSERT_TRUE(as_is.ok()) << as_is.status();
  ASSERT_TRUE(as_is->results(0).fits_without_plan());
  const int64_t needs = as_is->results(0).peak_reserved_bytes() +
                        as_is->results(0).framework_reserve_bytes();
  // 80% of it: a plan must move activations, and swaps hold pinned memory.
  const double memory_gb = 0.8 * static_cast<double>(needs) / 1e9;
  *req.mutable_nodes(0)->mutable_node_inline() =
      SmallerDgx(memory_gb, int64_t{1} << 40);
  absl::StatusOr<v1::FitResponse> roomy = core.FitStep(req, {});
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  const v1::FitResult& r = roomy->results(0);
  ASSERT_TRUE(r.fits_device()) << r.summary();
  EXPECT_FALSE(r.fits_without_plan());
  ASSERT_GT(r.peak_pinned_bytes(), 0) << "the plan swaps nothing";
  EXPECT_EQ(r.pinned_capacity_bytes(), int64_t{1} << 40);
  EXPECT_THAT(r.summary(), HasSubstr("pinned host memory"));
  // Half the pinned memory that plan held per socket: the plan holds less.
  const int64_t half = r.peak_pinned_bytes() / 2;
  *req.mutable_nodes(0)->mutable_node_inline() = SmallerDgx(memory_gb, half);
  absl::StatusOr<v1::FitResponse> tight = core.FitStep(req, {});
  ASSERT_TRUE(tight.ok()) << tight.status();
  const v1::FitResult& t = tight->results(0);
  EXPECT_EQ(t.pinned_capacity_bytes(), half);
  EXPECT_LE(t.peak_pinned_bytes(), half) << t.summary();
}

TEST(FitJobTest, EveryNoSaysWhyInNumbers) {
  const PlanningCore core{CoreLimits{}};
  v1::FitRequest req = SmallJob({"gh200-4x", "dgx-a100-80gb"}, 64);
  req.add_layouts()->set_tensor_parallel(8);
  *req.add_nodes()->mutable_node_inline() = SmallerDgx(1, int64_t{1} << 40);
  absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->results_size(), 3);
  // The DGX runs tp8; the GH200 node has 4 GPUs; 1 GB holds nothing.
  EXPECT_EQ(fit->results(0).node_name(), "dgx-a100-80gb");
  EXPECT_EQ(fit->results(0).layout_name(), "tp8");
  EXPECT_EQ(fit->results(0).rank(), 1);
  EXPECT_EQ(fit->results(0).batch_per_rank(), 64);
  EXPECT_EQ(fit->results(1).node_name(), "gh200-4x");
  EXPECT_FALSE(fit->results(1).fits_device());
  EXPECT_EQ(fit->results(1).rank(), 0);
  EXPECT_EQ(fit->results(1).summary(),
            "does not fit: tensor_parallel 8 does not divide the node's 4 "
            "GPUs");
  EXPECT_EQ(fit->results(2).node_name(), "small-dgx");
  EXPECT_FALSE(fit->results(2).fits_device());
  EXPECT_THAT(fit->results(2).summary(), HasSubstr("does not fit: static"));
  EXPECT_THAT(fit->results(2).summary(), HasSubstr("> 1.00 GB"));
  EXPECT_GT(fit->results(2).min_device_bytes(), int64_t{1'000'000'000});
}

TEST(FitJobTest, PricesRankByTheCostOf1000Steps) {
  const PlanningCore core{CoreLimits{}};
  v1::FitRequest req = SmallJob({"hgx-h100-sxm", "dgx-a100-80gb"}, 64);
  req.add_layouts()->set_fully_sharded(true);
  req.mutable_nodes(0)->set_price_per_hour(1000);
  req.mutable_nodes(1)->set_price_per_hour(1);
  absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->ranked_by(), "cost_per_1000_steps");
  // The H100 node is faster but a thousand times the price.
  ASSERT_EQ(fit->results(0).node_name(), "dgx-a100-80gb");
  EXPECT_LT(fit->results(1).step_ns(), fit->results(0).step_ns());
  for (const v1::FitResult& f : fit->results()) {
    EXPECT_DOUBLE_EQ(f.cost_per_1000_steps(),
                     f.price_per_hour() * f.step_ns() * 1e3 / 3.6e12);
  }
}

TEST(FitJobTest, AdmissionCountsEveryRankOfEveryLayout) {
  CoreLimits limits;
  // Enough for one small node plan's search, not for two nodes' layouts.
  limits.max_request_seconds = 1e-3;
  const PlanningCore core{limits};
  absl::StatusOr<v1::FitResponse> fit =
      core.FitStep(SmallJob({"dgx-a100-80gb", "hgx-h100-sxm"}, 64), {});
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kResourceExhausted)
      << fit.status();
}

// The observer hears of every node answered, by its catalog name, with the
// verdict its row gives; a node given inline is one series ("") even when
// its name repeats a catalog node's, and a layout the node cannot run is a
// "no" like any other.
TEST(FitJobTest, TheObserverCountsEachNodesVerdictByCatalogName) {
  class NodeVerdicts : public CoreObserver {
   public:
    void FitNode(const std::string& node_name,
                 const std::string& verdict) override {
      heard.push_back(absl::StrCat(node_name, ":", verdict));
    }
    std::vector<std::string> heard;
  };
  NodeVerdicts observer;
  const PlanningCore core(CoreLimits{}, &observer);
  // A global batch of 4 runs on the 4 GPUs of the GH200 node and on none
  // of the DGX's 8.
  v1::FitRequest req = SmallJob({"gh200-4x"}, 4);
  v1::NodeProfile dgx = NodeToProto(*FindNode("dgx-a100-80gb"));
  *req.add_nodes()->mutable_node_inline() = dgx;
  absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->results_size(), 4);
  std::vector<std::string> answered;
  for (const v1::FitResult& f : fit->results()) {
    answered.push_back(absl::StrCat(
        f.node_name() == "gh200-4x" ? "gh200-4x" : "", ":", FitVerdictOf(f)));
  }
  EXPECT_THAT(observer.heard, UnorderedElementsAreArray(answered));
  EXPECT_THAT(observer.heard, Contains(":does_not_fit").Times(2));
  EXPECT_THAT(observer.heard, Contains(HasSubstr("gh200-4x:fits")).Times(2));
}

TEST(FitJobTest, EveryFieldIsValidated) {
  const PlanningCore core{CoreLimits{}};
  struct Case {
    std::string name;
    std::function<void(v1::FitRequest&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"no global batch", [](v1::FitRequest& r) { r.set_global_batch(0); },
       "global_batch: a job needs"},
      {"a batch that splits over no node",
       [](v1::FitRequest& r) { r.set_global_batch(6); },
       "global_batch: 6 does not split evenly over the default layout DDP"},
      {"a tensor-parallel degree no node has",
       [](v1::FitRequest& r) { r.add_layouts()->set_tensor_parallel(16); },
       "layouts[0].tensor_parallel: 16 divides no node's GPUs"},
      {"a negative degree",
       [](v1::FitRequest& r) { r.add_layouts()->set_tensor_parallel(-2); },
       "layouts[0].tensor_parallel must be in [0, 64]"},
      {"a layout twice",
       [](v1::FitRequest& r) {
         r.add_layouts();
         r.add_layouts()->set_tensor_parallel(1);
       },
       "layouts[1]: the same layout as layouts[0]"},
      {"a degree the model cannot split",
       [](v1::FitRequest& r) { r.add_layouts()->set_tensor_parallel(8); },
       "layouts[0] on dgx-a100-80gb: workload"},
      {"an unknown node",
       [](v1::FitRequest& r) { r.add_nodes()->set_node_name("dgx-z"); },
       "nodes[1].node_name"},
      {"a price for one node only",
       [](v1::FitRequest& r) {
         r.mutable_nodes(0)->set_price_per_hour(2);
         r.add_nodes()->set_node_name("hgx-h100-sxm");
       },
       "nodes[1].price_per_hour: give a price for every node or for none "
       "(nodes[0] has one)"},
      {"the workload's own batch",
       [](v1::FitRequest& r) { r.mutable_workload()->set_batch(4); },
       "workload.batch: a job sets it"},
      {"the workload's own layout",
       [](v1::FitRequest& r) { r.mutable_workload()->set_fully_sharded(8); },
       "workload.fully_sharded: a job sets it"},
      {"a graph instead of a workload",
       [](v1::FitRequest& r) { r.mutable_graph_inline(); },
       "graph_inline: a job on nodes builds each rank's step"},
      {"profiles too",
       [](v1::FitRequest& r) {
         r.add_profiles()->set_hardware_name("a100-80gb-pcie4");
       },
       "profiles: a job gives nodes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::FitRequest req = SmallJob({"dgx-a100-80gb"}, 64);
    // 25 heads: tensor parallelism over 8 cannot split them.
    if (c.name == "a degree the model cannot split") {
      req.mutable_workload()->set_name("gpt2-xl");
      req.mutable_workload()->set_layers(1);
    }
    c.edit(req);
    absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
    EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument)
        << fit.status();
    EXPECT_THAT(std::string(fit.status().message()), HasSubstr(c.field));
  }
  // A layout for profiles is a job's.
  v1::FitRequest steps;
  steps.mutable_workload()->set_name("bert-large");
  steps.add_profiles()->set_hardware_name("a100-80gb-pcie4");
  steps.add_layouts();
  EXPECT_THAT(std::string(core.FitStep(steps, {}).status().message()),
              HasSubstr("layouts: a job's; give nodes"));
}

}  // namespace
}  // namespace slackswap
