// What the core reports to its observer (CoreObserver, core/planning_core.h)
// about plans and node simulations: each admitted Plan request's scope,
// once, and the wall time of every node simulation it runs itself, for a
// node plan's policies and for a Simulate on a node; none on one GPU.
#include <string>
#include <vector>

#include "core/plan_scopes.h"
#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/node.h"

namespace slackswap {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Gt;
using ::testing::IsEmpty;

class RecordingObserver : public CoreObserver {
 public:
  void PolicyRun(const std::string& policy, double planner_seconds,
                 double simulator_seconds, double retained,
                 bool feasible) override {
    policy_simulator_seconds.push_back(simulator_seconds);
  }
  void PlanAdmitted(const std::string& scope) override {
    scopes.push_back(scope);
  }
  void NodeSimulation(double seconds) override {
    node_seconds.push_back(seconds);
  }

  std::vector<double> policy_simulator_seconds;
  std::vector<std::string> scopes;
  std::vector<double> node_seconds;
};

// GPT-2 XL at two layers: on two ranks of the DGX, or on its GPU alone.
v1::StepSpec SmallStep(bool on_node) {
  v1::StepSpec step;
  step.mutable_workload()->set_name("gpt2-xl");
  step.mutable_workload()->set_layers(2);
  if (on_node) {
    step.set_node_name("dgx-a100-80gb");
    step.set_ranks(2);
  } else {
    step.set_hardware_name(FindNode("dgx-a100-80gb")->gpu.name);
  }
  return step;
}

v1::PlanRequest SmallPlan(bool on_node) {
  v1::PlanRequest req;
  *req.mutable_step() = SmallStep(on_node);
  req.set_budget_fraction(0.6);
  req.add_policies("swap_only");
  req.add_policies("slackswap");
  return req;
}

TEST(CoreObserverTest, ANodePlanCountsAsNodeAndTimesEachPolicysNodeRun) {
  RecordingObserver observer;
  const PlanningCore core(CoreLimits{}, &observer);
  absl::StatusOr<v1::PlanResponse> resp =
      core.PlanStep(SmallPlan(/*on_node=*/true), {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->report().results_size(), 2);
  for (const v1::PolicyResult& p : resp->report().results()) {
    EXPECT_EQ(p.node().ranks_size(), 2) << p.policy();
  }
  EXPECT_THAT(observer.scopes, ElementsAre(kNodeScope));
  // One node run per policy's result, the same time its simulator time
  // reports (the seed planned for the GPU alone reports nothing).
  EXPECT_EQ(observer.node_seconds.size(), 2u);
  EXPECT_THAT(observer.node_seconds, Each(Gt(0)));
  EXPECT_EQ(observer.node_seconds, observer.policy_simulator_seconds);
}

TEST(CoreObserverTest, AGpuPlanCountsAsGpuAndRunsNoNode) {
  RecordingObserver observer;
  const PlanningCore core(CoreLimits{}, &observer);
  ASSERT_TRUE(core.PlanStep(SmallPlan(/*on_node=*/false), {}).ok());
  EXPECT_THAT(observer.scopes, ElementsAre(kGpuScope));
  EXPECT_EQ(observer.policy_simulator_seconds.size(), 2u);
  EXPECT_THAT(observer.node_seconds, IsEmpty());
}

TEST(CoreObserverTest, ARefusedPlanIsNotCounted) {
  RecordingObserver observer;
  const PlanningCore core(CoreLimits{}, &observer);
  v1::PlanRequest req = SmallPlan(/*on_node=*/true);
  req.set_budget_fraction(-1);
  EXPECT_FALSE(core.PlanStep(req, {}).ok());
  EXPECT_THAT(observer.scopes, IsEmpty());
  EXPECT_THAT(observer.node_seconds, IsEmpty());
}

TEST(CoreObserverTest, SimulateOnANodeIsOneNodeRunAndNoPlan) {
  RecordingObserver observer;
  const PlanningCore core(CoreLimits{}, &observer);
  v1::SimulateRequest req;
  *req.mutable_step() = SmallStep(/*on_node=*/true);
  ASSERT_TRUE(core.SimulateStep(req, {}).ok());
  ASSERT_EQ(observer.node_seconds.size(), 1u);
  EXPECT_GT(observer.node_seconds[0], 0);
  EXPECT_THAT(observer.scopes, IsEmpty());
  // On one GPU: no node ran.
  *req.mutable_step() = SmallStep(/*on_node=*/false);
  ASSERT_TRUE(core.SimulateStep(req, {}).ok());
  EXPECT_EQ(observer.node_seconds.size(), 1u);
}

}  // namespace
}  // namespace slackswap
