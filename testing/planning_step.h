// Test-only: a training step with its hardware and analysis, and planning
// contexts over it (reasons off) at a budget in bytes or as a share of its
// saved activation bytes.
//
//   const testutil::PlanningStep s = testutil::MakePlanningStep(
//       RandomTrainingStep(3), *FindHardware("a100-80gb-pcie4"));
//   absl::StatusOr<Plan> plan = PlanWithPolicy("slackswap", s.AtShare(0.5));
#ifndef SLACKSWAP_TESTING_PLANNING_STEP_H_
#define SLACKSWAP_TESTING_PLANNING_STEP_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "planner/analysis.h"
#include "planner/policy.h"

namespace slackswap::testutil {

struct PlanningStep {
  Graph graph;
  Hardware hw;
  StepAnalysis analysis;

  PlanningContext At(int64_t budget_bytes) const {
    PlanningContext ctx{graph, hw, analysis, budget_bytes};
    ctx.explain = false;
    return ctx;
  }
  // At least one byte.
  PlanningContext AtShare(double share) const {
    return At(std::max<int64_t>(
        1, static_cast<int64_t>(share *
                                static_cast<double>(graph.index.saved_bytes))));
  }
};

inline PlanningStep MakePlanningStep(Graph g, Hardware hw) {
  PlanningStep s{std::move(g), std::move(hw), {}};
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(s.graph, s.hw);
  EXPECT_TRUE(a.ok()) << a.status();
  if (a.ok()) s.analysis = *std::move(a);
  return s;
}

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_PLANNING_STEP_H_
