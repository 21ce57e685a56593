// Test-only: a graph with its op durations on a GPU and a plan lowered for
// it, as SimulateSchedule and each of SimulateNode's ranks take them, and
// those steps laid on a node's GPUs.
// Header-only: a test that includes it links slackswap_sim itself, so the
// testing library stays below the simulator.
//
//   const Lowered l = Lower(std::move(g), hw, Plan::KeepAll(g));
//   SimulateSchedule(l.graph, hw, l.durations, l.schedule, opts);
#ifndef SLACKSWAP_TESTING_LOWERED_H_
#define SLACKSWAP_TESTING_LOWERED_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/plan.h"
#include "model/workloads.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"

namespace slackswap::testutil {

struct Lowered {
  Graph graph;
  OpDurations durations;
  Schedule schedule;
};

// Fails the test (and returns what it has) if the durations or the
// lowering fail.
inline Lowered Lower(Graph g, const Hardware& hw, const Plan& plan) {
  Lowered l;
  l.graph = std::move(g);
  absl::StatusOr<OpDurations> d = ComputeDurations(l.graph, hw);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return l;
  l.durations = *std::move(d);
  absl::StatusOr<Schedule> s = LowerPlan(l.graph, plan, l.durations, {});
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) l.schedule = *std::move(s);
  return l;
}

// Step i of `lowered` on GPU i of a node.
inline std::vector<RankStep> OnGpus(const std::vector<Lowered>& lowered) {
  std::vector<RankStep> ranks;
  for (size_t i = 0; i < lowered.size(); ++i) {
    ranks.push_back({.gpu = static_cast<int32_t>(i),
                     .graph = &lowered[i].graph,
                     .durations = &lowered[i].durations,
                     .schedule = &lowered[i].schedule});
  }
  return ranks;
}

// The same step on GPUs 0 to gpus - 1.
inline std::vector<RankStep> OnGpus(const Lowered& l, int32_t gpus) {
  std::vector<RankStep> ranks;
  for (int32_t gpu = 0; gpu < gpus; ++gpu) {
    ranks.push_back({.gpu = gpu,
                     .graph = &l.graph,
                     .durations = &l.durations,
                     .schedule = &l.schedule});
  }
  return ranks;
}

// A data-parallel gpt2-xl step of two layers over `ranks` ranks (an
// all-reduce per gradient bucket) lowered for `hw`, with every
// `swap_every`-th saved tensor swapped to the host and prefetched just
// before its first backward use (0: everything kept).
inline Lowered DataParallelStep(const Hardware& hw, int32_t ranks,
                                int32_t swap_every) {
  WorkloadOverrides o;
  o.layers = 2;
  o.data_parallel = ranks;
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  Plan plan = Plan::KeepAll(*g);
  const GraphIndex& ix = g->index;
  for (size_t i = 0; swap_every > 0 && i < ix.saved.size(); i += swap_every) {
    const int32_t t = ix.saved[i];
    const int32_t k = ix.first_bwd_use[t] - 1;
    if (k > std::max(ix.producer[t], ix.last_fwd_use[t])) {
      plan.decisions[t] = {.action = Action::kSwap, .prefetch_after_op = k};
    }
  }
  return Lower(*std::move(g), hw, plan);
}

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_LOWERED_H_
