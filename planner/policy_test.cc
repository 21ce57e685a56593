// Policies on graphs small enough that the right decision is obvious by
// hand; every plan is judged by the simulator.
#include "planner/policy.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/internal/policies.h"
#include "testing/doc_tables.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using testutil::GraphBuilder;
using testutil::TestLink;

struct Fixture {
  Graph g;
  Hardware hw = TestLink();
  StepAnalysis a;
  void Analyze() {
    absl::StatusOr<StepAnalysis> s = AnalyzeStep(g, hw);
    ASSERT_TRUE(s.ok()) << s.status();
    a = *std::move(s);
  }
  PlanOutcome Run(const std::string& policy, int64_t budget) {
    PlanningContext ctx{g, hw, a, budget};
    absl::StatusOr<PlanOutcome> out = PlanAndSimulate(policy, ctx, {});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *std::move(out) : PlanOutcome{};
  }
};

// G: 1000 bytes from a 5000-ns GEMM, with 2000 ns of forward compute after
// it and 2000 ns of backward compute before its use: its 1000-ns copies hide
// both ways. K, made last, fills the 1000-byte budget by itself, so G must
// leave the GPU.
TEST(PolicyTest, ATensorWhoseSwapHidesIsSwappedNotRecomputed) {
  Fixture f;
  GraphBuilder b;
  int32_t in = b.Tensor("in", 8, TensorKind::kInput);
  int32_t g = b.Tensor("G", 1000);
  int32_t k = b.Tensor("K", 1000);
  b.Forward("f_g", 5000, {in}, {g});
  b.Forward("f_tail", 2000, {}, {});
  b.Forward("f_k", 3000, {in}, {k});
  b.Backward("b_k", 10, {k});
  b.Backward("b_long", 2000, {});
  b.Backward("b_g", 10, {g});
  f.g = b.Build();
  f.Analyze();

  PlanOutcome slack = f.Run("slackswap", 1000);
  ASSERT_TRUE(slack.result.feasible) << slack.result.infeasible_reason;
  EXPECT_EQ(slack.plan.decisions[g].action, Action::kSwap);
  EXPECT_EQ(slack.plan.decisions[k].action, Action::kKeep);
  EXPECT_DOUBLE_EQ(slack.result.throughput_retained, 1.0);
  EXPECT_EQ(slack.result.stall_prefetch_ns, 0);
  EXPECT_THAT(slack.plan.FactsOf(g).reason, HasSubstr("swap: "));

  // Checkpointing pays the GEMM again.
  PlanOutcome recompute = f.Run("recompute_only", 1000);
  ASSERT_TRUE(recompute.result.feasible);
  EXPECT_EQ(recompute.plan.decisions[g].action, Action::kRecompute);
  EXPECT_GE(recompute.result.recompute_ns, 5000);
  EXPECT_LT(recompute.result.throughput_retained, 1.0);
}

// G (5000-ns GEMM) and E (100-ns elementwise) must both be off the GPU when
// K is made at 6600 ns. G's swap-out runs 5000..6000; E, made at 6000..6100,
// could only leave by 7100: swapping it would stall f_k 500 ns, rebuilding
// it costs 100 ns. E is recomputed, G is swapped.
TEST(PolicyTest, ACheapElementwiseOutputIsRecomputedWhenTheLinkIsSaturated) {
  Fixture f;
  GraphBuilder b;
  int32_t in = b.Tensor("in", 8, TensorKind::kInput);
  int32_t g = b.Tensor("G", 1000);
  int32_t e = b.Tensor("E", 1000);
  int32_t k = b.Tensor("K", 1000);
  b.Forward("f_g", 5000, {in}, {g});
  b.Forward("f_mid", 1000, {}, {});
  b.Forward("f_e", 100, {in}, {e});
  b.Forward("f_tail", 500, {}, {});
  b.Forward("f_k", 3000, {in}, {k});
  b.Backward("b_k", 10, {k});
  b.Backward("b_long", 3000, {});
  b.Backward("b_g", 10, {g});
  b.Backward("b_e", 10, {e});
  f.g = b.Build();
  f.Analyze();

  PlanOutcome slack = f.Run("slackswap", 1000);
  ASSERT_TRUE(slack.result.feasible) << slack.result.infeasible_reason;
  EXPECT_EQ(slack.plan.decisions[g].action, Action::kSwap);
  EXPECT_EQ(slack.plan.decisions[e].action, Action::kRecompute);
  // Worked out: ideal 12630 ns; E's rebuild adds 100 ns and nothing stalls.
  EXPECT_EQ(slack.result.ideal_step_ns, 12630);
  EXPECT_EQ(slack.result.step_ns, 12730);
  EXPECT_EQ(slack.result.recompute_ns, 100);

  // Offloading everything instead waits for the saturated link.
  PlanOutcome swap = f.Run("swap_only", 1000);
  ASSERT_TRUE(swap.result.feasible);
  EXPECT_EQ(swap.plan.decisions[e].action, Action::kSwap);
  EXPECT_GT(swap.result.stall_swap_out_ns, 0);
  EXPECT_LT(swap.result.throughput_retained, slack.result.throughput_retained);
}

TEST(PolicyTest, AChainRecomputeIsCostedAsAChain) {
  // z comes from f2(y), y (unsaved) from f1(x): rebuilding z re-runs both,
  // 200 + 300 ns. K, made last, leaves room for x and K only.
  Fixture f;
  GraphBuilder b;
  int32_t in = b.Tensor("in", 8, TensorKind::kInput);
  int32_t x = b.Tensor("x", 10);
  int32_t y = b.Tensor("y", 10);
  int32_t z = b.Tensor("z", 1000);
  int32_t k = b.Tensor("K", 1000);
  b.Forward("f0", 10, {in}, {x});
  b.Forward("f1", 200, {x}, {y});
  b.Forward("f2", 300, {y}, {z});
  b.Forward("f_k", 3000, {in}, {k});
  b.Backward("b_k", 10, {k});
  b.Backward("b_z", 10, {z});
  b.Backward("b_x", 10, {x});
  f.g = b.Build();
  f.Analyze();
  PlanOutcome out = f.Run("recompute_only", 1010);
  ASSERT_TRUE(out.result.feasible) << out.result.infeasible_reason;
  ASSERT_EQ(out.plan.decisions[z].action, Action::kRecompute);
  EXPECT_EQ(out.plan.FactsOf(z).recompute_ns, 500);
  EXPECT_EQ(out.result.recompute_ns, 500);
  EXPECT_THAT(out.plan.FactsOf(z).reason, HasSubstr("rebuild 0.001 ms"));
}

// a, s, t, l: 1000 bytes each; 3000 leaves room for three. l is the
// cheapest rebuild per byte, so the greedy prefix drops it first, but it
// cannot lower the peak alone: a or s (100 ns each) must go, and then l's
// memory is not needed. The recompute the budget does not need is kept.
TEST(PolicyTest, RecomputesTheBudgetDoesNotNeedAreKept) {
  Fixture f;
  GraphBuilder b;
  int32_t a = b.Tensor("a", 1000);
  int32_t s = b.Tensor("s", 1000);
  int32_t t = b.Tensor("t", 1000);
  int32_t l = b.Tensor("l", 1000);
  b.Forward("f_a", 100, {}, {a});
  b.Forward("f_s", 100, {a}, {s});
  b.Forward("f_t", 100, {s}, {t});
  b.Forward("f_l", 50, {}, {l});
  b.Backward("b_l", 10, {l});
  b.Backward("b_t", 10, {t});
  b.Backward("b_s", 10, {s});
  b.Backward("b_a", 10, {a});
  f.g = b.Build();
  f.Analyze();
  for (const char* policy : {"recompute_only", "slackswap"}) {
    PlanOutcome out = f.Run(policy, 3000);
    ASSERT_TRUE(out.result.feasible) << policy;
    EXPECT_EQ(out.plan.decisions[l].action, Action::kKeep) << policy;
    EXPECT_EQ(out.result.recomputed_tensors, 1) << policy;
    EXPECT_EQ(out.result.recompute_ns, 100) << policy;
  }
}

// A two-layer BERT at batch 1, sequence 128, half its peak: every
// recompute plan deadlocks in the backward pass (a rebuilt input beside the
// kept activations overflows the budget), while offloading fits with
// stalls. slackswap falls back to swapping beyond its slack rather than
// returning an infeasible plan.
TEST(PolicyTest, SwapsBeyondTheSlackWhenNothingWithinItFits) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("bert-large");
  ASSERT_TRUE(c.ok());
  c->layers = 2;
  c->batch = 1;
  c->seq = 128;
  Fixture f;
  f.g = *BuildTransformer(*c);
  f.hw = *FindHardware("a100-80gb-pcie4");
  f.Analyze();
  const int64_t budget = f.g.index.saved_bytes / 2;
  PlanOutcome recompute = f.Run("recompute_only", budget);
  ASSERT_FALSE(recompute.result.feasible);
  PlanOutcome offload = f.Run("swap_only", budget);
  ASSERT_TRUE(offload.result.feasible) << offload.result.infeasible_reason;

  PlanOutcome slack = f.Run("slackswap", budget);
  ASSERT_TRUE(slack.result.feasible) << slack.result.infeasible_reason;
  EXPECT_LE(slack.result.peak_activation_bytes, budget);
  EXPECT_GE(slack.result.throughput_retained,
            offload.result.throughput_retained);
  // Swapped beyond the slack, its own way or as swap_only's plan (both are
  // among its candidates), and the reason says which.
  bool explained = false;
  for (size_t t = 0; t < slack.plan.decisions.size(); ++t) {
    const std::string& reason =
        slack.plan.FactsOf(static_cast<int32_t>(t)).reason;
    explained |= slack.plan.decisions[t].action == Action::kSwap &&
                 (reason.find("beyond") != std::string::npos ||
                  reason.find("swap_only's plan") != std::string::npos);
  }
  EXPECT_TRUE(explained);
}

TEST(PolicyTest, UnknownPoliciesAreNamed) {
  absl::StatusOr<const PolicyInfo*> p = FindPolicy("magic");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("slackswap"));
}

// The docs and the wire format's comments name exactly the registry's
// policies.
TEST(PolicyRegistryTest, IsWhatTheDocsAndTheProtoList) {
  const std::string planners = testutil::SourceFile("docs/PLANNERS.md");
  std::vector<std::string> table;  // the `name` column of the policy table
  std::smatch m;
  for (std::string::const_iterator it = planners.begin(); std::regex_search(
           it, planners.end(), m, std::regex("\n\\| `([a-z_]+)` \\| "));
       it = m[0].second) {
    table.push_back(m[1]);
  }
  EXPECT_EQ(table, PolicyNames());
  const std::string report =
      testutil::SourceFile("proto/slackswap/v1/report.proto");
  for (const std::string& name : PolicyNames()) {
    EXPECT_THAT(report, HasSubstr(name)) << "report.proto's policy comment";
  }
  int references = 0;
  for (const PolicyInfo& p : PolicyRegistry()) {
    references += p.unbudgeted_reference;
    EXPECT_NE(std::string(p.summary), "");
    EXPECT_NE(p.create, nullptr);
  }
  EXPECT_EQ(references, 1);
}

std::vector<int32_t> Tensors(const std::vector<const Candidate*>& order) {
  std::vector<int32_t> out;
  for (const Candidate* c : order) out.push_back(c->tensor);
  return out;
}

TEST(OrderCandidatesTest, OrdersByKeyAndKeepsProductionOrderAmongEquals) {
  StepAnalysis a;
  for (int64_t bytes : {30, 10, 30, 20, 10, 30}) {
    Candidate c;
    c.tensor = static_cast<int32_t>(a.candidates.size());
    c.bytes = bytes;
    a.candidates.push_back(c);
  }
  const auto not_four = [](const Candidate& c) { return c.tensor != 4; };
  const auto bytes = [](const Candidate& c) { return c.bytes; };
  EXPECT_EQ(Tensors(OrderCandidates(a, not_four, bytes, std::greater<>())),
            (std::vector<int32_t>{0, 2, 5, 3, 1}));
  EXPECT_EQ(Tensors(OrderCandidates(a, not_four, bytes, std::less<>())),
            (std::vector<int32_t>{1, 3, 0, 2, 5}));
}

// What a stable sort by the comparator on the candidates gives, on many
// ties and a two-part key.
TEST(OrderCandidatesTest, IsTheStableSortOfTheCandidates) {
  std::mt19937_64 rng(7);
  StepAnalysis a;
  for (int32_t t = 0; t < 2000; ++t) {
    Candidate c;
    c.tensor = t;
    c.bytes = static_cast<int64_t>(rng() % 8);
    c.recompute_ns = static_cast<int64_t>(rng() % 5);
    a.candidates.push_back(c);
  }
  const auto odd_bytes = [](const Candidate& c) { return c.bytes % 2 == 1; };
  const auto less = [](const Candidate& x, const Candidate& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.recompute_ns < y.recompute_ns;
  };
  std::vector<const Candidate*> expected;
  for (const Candidate& c : a.candidates) {
    if (odd_bytes(c)) expected.push_back(&c);
  }
  std::stable_sort(
      expected.begin(), expected.end(),
      [&](const Candidate* x, const Candidate* y) { return less(*x, *y); });
  const std::vector<const Candidate*> got = OrderCandidates(
      a, odd_bytes,
      [](const Candidate& c) {
        return std::make_pair(c.bytes, c.recompute_ns);
      },
      [](const std::pair<int64_t, int64_t>& x,
         const std::pair<int64_t, int64_t>& y) {
        if (x.first != y.first) return x.first > y.first;
        return x.second < y.second;
      });
  EXPECT_EQ(Tensors(got), Tensors(expected));
}

TEST(PolicyTest, IdealRunsWithNoLimit) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 2;
  Fixture f;
  f.g = *BuildTransformer(*c);
  f.hw = *FindHardware("a100-80gb-pcie4");
  f.Analyze();
  PlanOutcome out = f.Run("ideal", f.g.index.saved_bytes / 2);
  EXPECT_TRUE(out.result.feasible);
  EXPECT_EQ(out.result.budget_bytes, 0);
  EXPECT_DOUBLE_EQ(out.result.throughput_retained, 1.0);
  EXPECT_EQ(out.result.peak_activation_bytes, f.g.index.saved_bytes);
}

// Sweeps on the reference workloads: every policy's retained throughput
// grows with the budget (within 0.1 pp) and is 100% at the full peak, and
// no feasible plan ever exceeds its budget.
class SweepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SweepTest, RetainedThroughputGrowsWithTheBudget) {
  Fixture f;
  absl::StatusOr<TransformerConfig> c = FindWorkload(GetParam());
  ASSERT_TRUE(c.ok());
  f.g = *BuildTransformer(*c);
  f.hw = *FindHardware("a100-80gb-pcie4");
  f.Analyze();
  const int64_t peak = f.g.index.saved_bytes;
  for (const std::string& policy : DefaultPolicyNames()) {
    double previous = 0;
    for (int step = 2; step <= 20; ++step) {  // 0.10 .. 1.00
      const int64_t budget = peak * step / 20;
      PlanOutcome out = f.Run(policy, budget);
      const double retained = out.result.throughput_retained;
      if (out.result.feasible && policy != "ideal") {
        EXPECT_LE(out.result.peak_activation_bytes, budget) << policy;
      }
      if (previous > 0) {
        EXPECT_GE(retained, previous - 0.001)
            << policy << " at " << step / 20.0 << " of the peak";
      }
      if (out.result.feasible) previous = retained;
      if (step == 20) {
        EXPECT_DOUBLE_EQ(retained, 1.0) << policy;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceWorkloads, SweepTest,
                         ::testing::Values("bert-large", "gpt2-xl",
                                           "llama-7b"));

}  // namespace
}  // namespace slackswap
