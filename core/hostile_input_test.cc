// Hostile and broken requests, one test each: every one gets a status that
// names the problem, never a crash, a hang or unbounded work. The transport
// cases (oversized and truncated messages, abandoned streams) are in
// tests/hostile_service_test.cc against a real slackswapd.
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "model/hardware.h"
#include "planner/policy.h"
#include "testing/hostile_graphs.h"
#include "testing/timing.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

v1::OperatorGraph Tiny() {
  v1::OperatorGraph g;
  g.set_name("tiny");
  for (int id : {1, 2}) {
    v1::Tensor* t = g.add_tensors();
    t->set_id(id);
    t->set_name(id == 1 ? "x" : "y");
    t->set_size_bytes(1 << 20);
  }
  v1::Op* f = g.add_ops();
  f->set_id(10);
  f->set_name("f");
  f->set_phase(v1::PHASE_FORWARD);
  f->add_output_ids(1);
  f->mutable_cost()->set_flops(1e9);
  f->mutable_cost()->set_kind(v1::OP_KIND_MATMUL);
  v1::Op* h = g.add_ops();
  h->set_id(11);
  h->set_name("h");
  h->set_phase(v1::PHASE_FORWARD);
  h->add_input_ids(1);
  h->add_output_ids(2);
  h->mutable_cost()->set_flops(1e9);
  h->mutable_cost()->set_kind(v1::OP_KIND_MATMUL);
  v1::Op* b = g.add_ops();
  b->set_id(12);
  b->set_name("h.bwd");
  b->set_phase(v1::PHASE_BACKWARD);
  b->add_input_ids(1);
  b->add_input_ids(2);
  b->mutable_cost()->set_flops(2e9);
  b->mutable_cost()->set_kind(v1::OP_KIND_MATMUL);
  return g;
}

v1::PlanRequest Request(const v1::OperatorGraph& g) {
  v1::PlanRequest req;
  *req.mutable_step()->mutable_graph_inline() = g;
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  req.add_policies("slackswap");
  return req;
}

struct Expect {
  absl::StatusCode code;
  std::string message;
};

void Check(const v1::PlanRequest& req, const Expect& want) {
  const PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
  EXPECT_EQ(r.status().code(), want.code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(want.message));
}

TEST(HostileInputTest, TenMillionOpsAreRefusedBeforeAnyWork) {
  v1::OperatorGraph g = Tiny();
  g.mutable_ops()->Reserve(10'000'000);
  for (int i = 0; i < 10'000'000; ++i) g.add_ops();
  Check(Request(g), {absl::StatusCode::kResourceExhausted,
                     "step.graph_inline.ops: 10000003 ops exceed the limit "
                     "of 1000000"});
}

TEST(HostileInputTest, ATensorOfTwoToTheSixtyTwoBytes) {
  // Valid alone, but the step's byte totals and copy times overflow or are
  // absurd: refused by the overflow checks, not simulated for ever.
  v1::OperatorGraph g = Tiny();
  g.mutable_tensors(0)->set_size_bytes(int64_t{1} << 62);
  g.mutable_tensors(1)->set_size_bytes(int64_t{1} << 62);
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "size_bytes makes the graph's bytes exceed "
                     "1152921504606846976 (2^60)"});
}

TEST(HostileInputTest, DurationsWhoseSumOverflowsInt64) {
  v1::OperatorGraph g = Tiny();
  for (v1::Op& op : *g.mutable_ops()) {
    op.mutable_cost()->set_duration_ns(std::numeric_limits<int64_t>::max() / 2);
  }
  Check(Request(g), {absl::StatusCode::kInvalidArgument, "overflow"});
}

TEST(HostileInputTest, NaNFlops) {
  v1::OperatorGraph g = Tiny();
  g.mutable_ops(1)->mutable_cost()->set_flops(std::nan(""));
  Check(Request(g),
        {absl::StatusCode::kInvalidArgument,
         "step.graph_inline: op 11 (h): cost.flops must be finite"});
}

TEST(HostileInputTest, Cycles) {
  v1::OperatorGraph g = Tiny();
  g.mutable_ops(0)->add_input_ids(2);  // f reads y, which h makes from f's x
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "the ops form a cycle: op 10 (f) <- op 11 (h)"});
}

TEST(HostileInputTest, SelfLoops) {
  v1::OperatorGraph g = Tiny();
  g.mutable_ops(1)->add_input_ids(2);
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "op 11 (h): reads its own output tensor 2 (y)"});
}

TEST(HostileInputTest, DanglingIds) {
  v1::OperatorGraph g = Tiny();
  g.mutable_ops(1)->add_input_ids(987);
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "op 11 (h): input tensor 987 does not exist"});
}

TEST(HostileInputTest, DuplicateIds) {
  v1::OperatorGraph g = Tiny();
  g.mutable_tensors(1)->set_id(1);
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "tensors[1]: id 1 is already used by tensors[0] (x)"});
  g = Tiny();
  g.mutable_ops(2)->set_id(10);
  Check(Request(g), {absl::StatusCode::kInvalidArgument,
                     "ops[2]: id 10 is already used by ops[0] (f)"});
}

TEST(HostileInputTest, BudgetZero) {
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_bytes(0);
  Check(req, {absl::StatusCode::kInvalidArgument,
              "budget_bytes must be > 0, got 0"});
}

TEST(HostileInputTest, NegativeBudgets) {
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_bytes(-5);
  Check(req, {absl::StatusCode::kInvalidArgument,
              "budget_bytes must be > 0, got -5"});
  req.set_budget_fraction(-0.5);
  Check(req, {absl::StatusCode::kInvalidArgument,
              "budget_fraction must be in (0, 10], got -0.5"});
  req.set_budget_fraction(std::nan(""));
  Check(req, {absl::StatusCode::kInvalidArgument, "budget_fraction"});
}

// At or above the peak no policy moves anything, on workloads where every
// saved tensor could be swapped or recomputed (before, slackswap swapped
// 117, 273 and 251 tensors of them at 1.0), and the bound is 100%.
TEST(HostileInputTest, ABudgetAboveThePeakKeepsEverything) {
  const PlanningCore core{CoreLimits{}};
  for (const char* workload : {"bert-large", "gpt2-xl", "llama-7b"}) {
    for (double fraction : {1.0, 1.5, 10.0}) {
      SCOPED_TRACE(absl::StrCat(workload, " at ", fraction));
      v1::PlanRequest req;
      req.mutable_step()->mutable_workload()->set_name(workload);
      req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
      req.set_budget_fraction(fraction);
      req.set_include_bound(true);
      absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->report().bound_retained(), 1.0);
      ASSERT_EQ(r->report().results_size(), DefaultPolicyNames().size());
      for (const v1::PolicyResult& p : r->report().results()) {
        const v1::SimulationResult& result = p.result();
        EXPECT_TRUE(result.feasible()) << p.policy();
        EXPECT_DOUBLE_EQ(result.throughput_retained(), 1.0) << p.policy();
        EXPECT_EQ(result.swapped_tensors() + result.recomputed_tensors(), 0)
            << p.policy();
      }
    }
  }
}

TEST(HostileInputTest, AbudgetNothingCanMeet) {
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_bytes(1000);
  const PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->report().budget_unmet(),
              HasSubstr("cannot be met: the lowest activation peak reachable "
                        "is"));
  EXPECT_FALSE(r->report().results(0).result().feasible());
  EXPECT_GT(r->report().results(0).min_budget_bytes(), 1000);
}

// An input of 2^50 bytes (1.13 PB): within the graph's cap, beyond any
// device. Every budget's answer says it does not fit, with the numbers.
TEST(HostileInputTest, AnInputNoDeviceHoldsIsRefusedWithTheNumbers) {
  v1::OperatorGraph g = Tiny();
  v1::Tensor* in = g.add_tensors();
  in->set_id(3);
  in->set_name("input");
  in->set_kind(v1::TENSOR_KIND_INPUT);
  in->set_size_bytes(int64_t{1} << 50);
  g.mutable_ops(0)->add_input_ids(3);
  const PlanningCore core{CoreLimits{}};
  for (bool device : {false, true}) {
    SCOPED_TRACE(device ? "budget_device" : "budget_fraction 0.5");
    v1::PlanRequest req = Request(g);
    if (device) req.mutable_budget_device();
    absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
    ASSERT_TRUE(r.ok()) << r.status();
    const v1::DeviceFit& fit = r->report().device();
    EXPECT_FALSE(fit.fits_device());
    EXPECT_EQ(fit.static_bytes(), int64_t{1} << 50);
    EXPECT_GT(fit.min_device_bytes(), int64_t{1} << 50);
    EXPECT_EQ(fit.capacity_bytes(), 80'000'000'000);
    EXPECT_THAT(fit.summary(),
                HasSubstr("does not fit: static 1125.90 TB + activations"));
    EXPECT_THAT(fit.summary(), HasSubstr("> 80.00 GB"));
    const v1::SimulationResult& s = r->report().results(0).result();
    EXPECT_FALSE(s.device().fits_device());
  }
}

TEST(HostileInputTest, UnknownPolicyAndHardware) {
  v1::PlanRequest req = Request(Tiny());
  req.set_policies(0, "fastest");
  Check(req, {absl::StatusCode::kInvalidArgument,
              "policies[0]: unknown policy \"fastest\""});
  req = Request(Tiny());
  req.mutable_step()->set_hardware_name("tpu-v9");
  Check(req, {absl::StatusCode::kNotFound, "step.hardware_name"});
}

TEST(HostileInputTest, InlineHardwareWithNonsenseRates) {
  v1::PlanRequest req = Request(Tiny());
  v1::HardwareProfile* hw = req.mutable_step()->mutable_hardware_inline();
  hw->set_name("bad");
  hw->set_peak_tflops_bf16(std::numeric_limits<double>::infinity());
  Check(req, {absl::StatusCode::kInvalidArgument, "step.hardware_inline"});
}

TEST(HostileInputTest, HugeWorkloadOverridesAreRefused) {
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(1'000'000);
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  Check(req, {absl::StatusCode::kResourceExhausted,
              "step.workload.layers: 1000000 exceeds the limit"});
  req.mutable_step()->mutable_workload()->set_layers(2);
  req.mutable_step()->mutable_workload()->set_seq(int64_t{1} << 40);
  Check(req, {absl::StatusCode::kInvalidArgument, "step.workload"});
  req.mutable_step()->mutable_workload()->clear_seq();
  for (int32_t ranks : {0, -3, 65}) {
    req.mutable_step()->mutable_workload()->set_data_parallel(ranks);
    Check(req, {absl::StatusCode::kInvalidArgument,
                absl::StrCat("step.workload.data_parallel must be in [1, 64] "
                             "ranks, got ",
                             ranks)});
  }
  req.mutable_step()->mutable_workload()->clear_data_parallel();
  for (int32_t ranks : {0, -3, 65}) {
    req.mutable_step()->mutable_workload()->set_fully_sharded(ranks);
    Check(req, {absl::StatusCode::kInvalidArgument,
                absl::StrCat("step.workload.fully_sharded must be in [1, 64] "
                             "ranks, got ",
                             ranks)});
  }
  // Hybrid sharding, refused naming both fields.
  req.mutable_step()->mutable_workload()->set_fully_sharded(2);
  req.mutable_step()->mutable_workload()->set_data_parallel(2);
  Check(req, {absl::StatusCode::kInvalidArgument,
              "data_parallel (2) and fully_sharded (2) cannot both be > 1"});
  req.mutable_step()->mutable_workload()->clear_fully_sharded();
  for (int32_t ranks : {0, -3, 65}) {
    req.mutable_step()->mutable_workload()->set_tensor_parallel(ranks);
    Check(req, {absl::StatusCode::kInvalidArgument,
                absl::StrCat("step.workload.tensor_parallel must be in [1, 64] "
                             "ranks, got ",
                             ranks)});
  }
  // 5 x 13 ranks: more than a collective's group may name.
  req.mutable_step()->mutable_workload()->set_tensor_parallel(5);
  req.mutable_step()->mutable_workload()->set_data_parallel(13);
  Check(req, {absl::StatusCode::kInvalidArgument,
              "tensor_parallel x data_parallel is 65 ranks; at most 64"});
  req.mutable_step()->mutable_workload()->set_data_parallel(2);
  for (int32_t rank : {-1, 10, 1 << 30}) {
    req.mutable_step()->mutable_workload()->set_rank(rank);
    Check(req, {absl::StatusCode::kInvalidArgument,
                absl::StrCat("rank must be in [0, 10) (the layout's ranks), "
                             "got ",
                             rank)});
  }
}

TEST(HostileInputTest, TooManyTimelinePointsOrSweepPoints) {
  v1::PlanRequest req = Request(Tiny());
  req.set_timeline_points(1 << 30);
  Check(req, {absl::StatusCode::kInvalidArgument, "timeline_points"});

  const PlanningCore core{CoreLimits{}};
  v1::SweepRequest sweep;
  *sweep.mutable_step() = req.step();
  sweep.set_from(1e-6);
  sweep.set_to(1.0);
  sweep.set_step_fraction(1e-6);
  absl::Status s = core.SweepBudgets(
      sweep, {}, [](const v1::SweepResponse&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("exceed the limit of 1000"));
}

// --- Hostile shapes --------------------------------------------------------

// The server's limits (slackswapd's defaults).
CoreLimits ServerLimits() {
  CoreLimits limits;
  limits.max_request_bytes = int64_t{320} << 20;
  limits.max_request_seconds = 120;
  return limits;
}

v1::StepSpec Inline(const v1::OperatorGraph& g) {
  v1::StepSpec step;
  *step.mutable_graph_inline() = g;
  step.set_hardware_name("a100-80gb-pcie4");
  return step;
}

using testutil::kStopMargin;

// The optimal policy runs its solver up to its time limit: a limit past
// what the server allows per request is refused before any work, in a plan
// and in a sweep (a limit per budget).
TEST(HostileInputTest, ASolverTimeLimitPastTheRequestLimitIsRefused) {
  const PlanningCore core{ServerLimits()};
  v1::PlanRequest plan = Request(Tiny());
  plan.set_budget_fraction(0.5);
  plan.clear_policies();
  plan.add_policies("optimal");
  plan.set_optimal_time_limit_s(600);
  absl::Status s = core.PlanStep(plan, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("would take an estimated 600.0 s; this server "
                        "allows 120 s per request"));
  v1::SweepRequest sweep;
  *sweep.mutable_step() = plan.step();
  sweep.add_policies("optimal");
  sweep.set_from(0.5);
  sweep.set_to(1.0);
  sweep.set_step_fraction(0.1);
  sweep.set_optimal_time_limit_s(30);  // 6 budgets: 180 s
  s = core.SweepBudgets(sweep, {},
                        [](const v1::SweepResponse&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("would take an estimated"));
}

// Records what the core reports: a request refused by its estimate is
// refused before the core reports its graph, which it does once admitted
// and before any analysis, planning or simulation.
class RecordingObserver : public CoreObserver {
 public:
  void GraphOps(int64_t ops) override { ++admitted; }
  void PolicyRun(const std::string& policy, double planner_seconds,
                 double simulator_seconds, double retained,
                 bool feasible) override {
    ++policy_runs;
  }
  int admitted = 0;
  int policy_runs = 0;
};

TEST(HostileInputTest, AMillionOpChainIsRefusedByItsEstimatedCost) {
  const v1::OperatorGraph g = testutil::ChainGraph(500'000);
  ASSERT_EQ(g.ops_size(), 1'000'000);
  RecordingObserver observer;
  const PlanningCore core{ServerLimits(), &observer};
  v1::PlanRequest plan;
  *plan.mutable_step() = Inline(g);
  plan.set_budget_fraction(0.5);
  absl::Status s = core.PlanStep(plan, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("the graph (1000000 ops, 500000 tensors): planning it "
                        "needs an estimated"));
  v1::SimulateRequest sim;
  *sim.mutable_step() = Inline(g);
  s = core.SimulateStep(sim, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  v1::SweepRequest sweep;
  *sweep.mutable_step() = Inline(g);
  s = core.SweepBudgets(sweep, {},
                        [](const v1::SweepResponse&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // Refused before any planning: converting the graph is all it cost.
  EXPECT_EQ(observer.admitted, 0);
  EXPECT_EQ(observer.policy_runs, 0);
  // The same core admits and plans a request it can afford: the counts
  // above could have moved.
  ASSERT_TRUE(core.PlanStep(Request(Tiny()), {}).ok());
  EXPECT_EQ(observer.admitted, 1);
  EXPECT_GT(observer.policy_runs, 0);
}

TEST(HostileInputTest, AMillionOpChainRecomputedWholeSimulatesWithoutLimits) {
  // Every link dropped: the first backward op rebuilds the whole chain, a
  // walk as deep as the graph (it once overflowed the stack).
  const v1::OperatorGraph g = testutil::ChainGraph(500'000);
  const PlanningCore core{CoreLimits{}};
  v1::SimulateRequest sim;
  *sim.mutable_step() = Inline(g);
  *sim.mutable_plan() = testutil::RecomputeEverything(g);
  absl::StatusOr<v1::SimulateResponse> r = core.SimulateStep(sim, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->result().feasible());
  EXPECT_EQ(r->result().recomputed_tensors(), 500'000);
  // The last link is rebuilt from the first: 499,999 links re-run before it.
  EXPECT_EQ(r->result().recompute_ns(), int64_t{500'000} * 1000);
}

TEST(HostileInputTest, AStopFunctionIsHeardSoonWhateverTheShape) {
  struct Shape {
    const char* name;
    v1::OperatorGraph graph;
    std::vector<std::string> policies;  // empty: all
  };
  const std::vector<Shape> shapes = {
      {"a chain of 200,000 links, every policy",
       testutil::ChainGraph(200'000),
       {}},
      {"a forward chain of 400,000 ops",
       testutil::ForwardChainGraph(400'000),
       {"slackswap", "recompute_only"}},
      {"a fan-out of 200,000", testutil::FanOutGraph(200'000), {}},
      {"an input listed 1,000,000 times",
       testutil::DuplicateInputGraph(1'000'000),
       {}},
  };
  const PlanningCore core{CoreLimits{}};
  const auto deadline_after = std::chrono::milliseconds(300);
  for (const Shape& shape : shapes) {
    v1::PlanRequest req;
    *req.mutable_step() = Inline(shape.graph);
    req.set_budget_fraction(0.3);
    for (const std::string& p : shape.policies) req.add_policies(p);
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + deadline_after;
    absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, [deadline] {
      return std::chrono::steady_clock::now() >= deadline;
    });
    const auto late = std::chrono::steady_clock::now() - deadline;
    EXPECT_TRUE(r.ok() || r.status().code() == absl::StatusCode::kCancelled ||
                r.status().code() == absl::StatusCode::kFailedPrecondition)
        << shape.name << ": " << r.status();
    EXPECT_LT(late, kStopMargin)
        << shape.name << " answered "
        << std::chrono::duration<double>(late).count() << " s after the stop";
  }
  // A sweep of 1,000 points.
  v1::SweepRequest sweep;
  sweep.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  sweep.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  sweep.set_from(0.001);
  sweep.set_to(1.0);
  sweep.set_step_fraction(0.001);
  sweep.add_policies("slackswap");
  const auto deadline = std::chrono::steady_clock::now() + deadline_after;
  absl::Status s = core.SweepBudgets(
      sweep,
      [deadline] { return std::chrono::steady_clock::now() >= deadline; },
      [](const v1::SweepResponse&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - deadline, kStopMargin);
}

TEST(HostileInputTest, PolicyNamesAreDeduplicatedAndCapped) {
  const PlanningCore core{CoreLimits{}};
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_fraction(3.0);
  for (int i = 0; i < 50; ++i) req.add_policies("slackswap");
  absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report().results_size(), 1);
  for (int i = 0; i < 3000; ++i) req.add_policies("slackswap");
  Check(req, {absl::StatusCode::kInvalidArgument,
              "policies: 3051 names; at most 64"});
}

TEST(HostileInputTest, LongNamesAreNotEchoedWhole) {
  v1::PlanRequest req = Request(Tiny());
  req.mutable_step()->set_hardware_name(std::string(20'000, 'h'));
  const PlanningCore core{CoreLimits{}};
  absl::Status s = core.PlanStep(req, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_LT(s.message().size(), 400u) << s.message().substr(0, 500);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(20000 bytes)"));
  req = Request(Tiny());
  req.mutable_step()->mutable_graph_inline()->mutable_ops(1)->set_name(
      std::string(20'000, 'o'));
  req.mutable_step()->mutable_graph_inline()->mutable_ops(1)->add_input_ids(99);
  s = core.PlanStep(req, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 400u) << s.message().substr(0, 500);
}

TEST(HostileInputTest, LinkRatesBeyondPhysicsAreNamed) {
  v1::PlanRequest req = Request(Tiny());
  absl::StatusOr<Hardware> a100 = FindHardware("a100-80gb-pcie4");
  ASSERT_TRUE(a100.ok());
  v1::HardwareProfile hw = HardwareToProto(*a100);
  hw.set_d2h_gbps(1e-300);
  hw.set_h2d_gbps(1e-300);
  *req.mutable_step()->mutable_hardware_inline() = hw;
  Check(req, {absl::StatusCode::kInvalidArgument,
              "h2d_gbps must be in [0.001, 100000] GB/s, got 1e-300"});
}

TEST(HostileInputTest, EfficiencyTablesOutOfRangeAreNamed) {
  v1::PlanRequest req = Request(Tiny());
  absl::StatusOr<Hardware> a100 = FindHardware("a100-80gb-pcie4");
  ASSERT_TRUE(a100.ok());
  v1::HardwareProfile hw = HardwareToProto(*a100);
  hw.mutable_attention_efficiency(1)->set_bwd(0, 0);
  *req.mutable_step()->mutable_hardware_inline() = hw;
  Check(req, {absl::StatusCode::kInvalidArgument,
              "attention_efficiency[1].bwd[0] must be in (0, 1], got 0"});
  hw = HardwareToProto(*a100);
  hw.mutable_gemm_efficiency()->set_size(1, 1);
  *req.mutable_step()->mutable_hardware_inline() = hw;
  Check(req, {absl::StatusCode::kInvalidArgument,
              "gemm_efficiency.size must be strictly increasing"});
}

}  // namespace
}  // namespace slackswap
