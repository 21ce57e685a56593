// Hostile and broken requests, one test each: every one gets a status that
// names the problem, never a crash, a hang or unbounded work. The transport
// cases (oversized and truncated messages, abandoned streams) are in
// tests/hostile_service_test.cc against a real slackswapd.
#include <cmath>
#include <limits>
#include <string>

#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
  Check(Request(g),
        {absl::StatusCode::kInvalidArgument, "total bytes overflow int64"});
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

TEST(HostileInputTest, ABudgetAboveThePeakKeepsEverything) {
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_fraction(3.0);
  const PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SimulationResult& result = r->report().results(0).result();
  EXPECT_TRUE(result.feasible());
  EXPECT_DOUBLE_EQ(result.throughput_retained(), 1.0);
  EXPECT_EQ(result.swapped_tensors() + result.recomputed_tensors(), 0);
}

TEST(HostileInputTest, AbudgetNothingCanMeet) {
  v1::PlanRequest req = Request(Tiny());
  req.set_budget_bytes(1000);
  Check(req, {absl::StatusCode::kFailedPrecondition,
              "cannot be met: the lowest activation peak reachable is"});
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

}  // namespace
}  // namespace slackswap
