#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "testing/reference.h"

namespace slackswap {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::slackswap::testutil::At;
using ::slackswap::testutil::Reference;
using ::testing::HasSubstr;

Hardware A100() { return *FindHardware("a100-80gb-pcie4"); }

// --- The reference: every op of every model on every profile. ------------

struct Case {
  std::string model;
  std::string attention;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "/" << c.attention;
}

class CostModelReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(CostModelReferenceTest, OpTimesMatchReference) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  const Case& p = GetParam();
  absl::StatusOr<TransformerConfig> c = FindWorkload(p.model);
  ASSERT_TRUE(c.ok());
  c->attention = *ParseAttention(p.attention);
  absl::StatusOr<Graph> g = BuildTransformer(*c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(IndexGraph(*g).ok());
  std::map<std::string, int32_t> by_name;
  for (int32_t i = 0; i < static_cast<int32_t>(g->ops.size()); ++i) {
    by_name[g->ops[i].name.str()] = i;
  }
  const Struct& variant =
      At(Reference(), {"models", p.model, "attention", p.attention})
          .struct_value();
  int checked = 0;
  // The reference froze one efficiency per kernel kind; the catalog's tables
  // (docs/FIDELITY.md) move every figure on purpose.
  for (const Hardware& catalog_hw : HardwareCatalog()) {
    const Hardware hw = testutil::FrozenCostModel(catalog_hw);
    absl::StatusOr<OpDurations> d = ComputeDurations(*g, hw);
    ASSERT_TRUE(d.ok()) << d.status();
    int64_t sum = 0;
    for (int64_t ns : d->op_ns) sum += ns;
    EXPECT_EQ(d->total_ns, sum);
    for (const std::string section : {"pre_ops", "layer_ops", "post_ops"}) {
      for (const Value& v :
           variant.fields().at(section).list_value().values()) {
        const Struct& ref = v.struct_value();
        std::string name = ref.fields().at("name").string_value();
        if (section == "layer_ops") name = "L0." + name;
        SCOPED_TRACE(name + " on " + hw.name);
        auto fwd = by_name.find(name);
        auto bwd = by_name.find(name + ".bwd");
        ASSERT_NE(fwd, by_name.end());
        ASSERT_NE(bwd, by_name.end());
        const auto& est = ref.fields()
                              .at("est_time_us")
                              .struct_value()
                              .fields()
                              .at(hw.name)
                              .list_value();
        ASSERT_EQ(est.values_size(), 2);
        const double got[2] = {d->op_ns[fwd->second] / 1000.0,
                               d->op_ns[bwd->second] / 1000.0};
        for (int i = 0; i < 2; ++i) {
          const double want = est.values(i).number_value();
          // 2%, or 0.1 us on tiny ops (the reference rounds to 0.1 us).
          EXPECT_NEAR(got[i], want, std::max(0.02 * want, 0.1))
              << (i == 0 ? "forward" : "backward");
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 4 * 2 * 15);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, CostModelReferenceTest,
    ::testing::Values(Case{"bert-large", "flash"},
                      Case{"bert-large", "unfused"}, Case{"gpt2-xl", "flash"},
                      Case{"gpt2-xl", "unfused"}, Case{"llama-7b", "flash"},
                      Case{"llama-7b", "unfused"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string s = info.param.model + "_" + info.param.attention;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// --- Hand-worked CostNs on the A100 80GB profile. --------------------------
// peak 312 TFLOP/s = 312e3 FLOP/ns; matmul eff 0.75 -> 234000 FLOP/ns;
// batched 0.6 -> 187200; flash fwd 0.6 -> 187200, bwd 0.5 -> 156000.
// HBM 2039 GB/s * 0.85 = 1733.15 B/ns. Launch 4000 ns per kernel.

OpCost Cost(OpKind kind, double flops, int64_t bytes, int32_t kernels = 1) {
  OpCost c;
  c.kind = kind;
  c.flops = flops;
  c.bytes_accessed = bytes;
  c.kernels = kernels;
  return c;
}

TEST(CostModelTest, ComputeBoundMatmul) {
  // 2.34e11 FLOPs / 234000 FLOP/ns = 1e6 ns (bytes: 1000 / 1733 ~ 1 ns).
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kMatmul, 2.34e11, 1000), Phase::kForward, A100()),
      1'000'000 + 4'000);
  // Same in backward (GEMM efficiency has no phase), 2 kernels.
  EXPECT_EQ(*CostNs(Cost(OpKind::kMatmul, 2.34e11, 1000, 2), Phase::kBackward,
                    A100()),
            1'000'000 + 8'000);
}

TEST(CostModelTest, BatchedMatmulAndFlashEfficiencies) {
  const double flops = 1.872e11;  // 1e6 ns at 187200 FLOP/ns
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kBatchedMatmul, flops, 0), Phase::kForward, A100()),
      1'000'000 + 4'000);
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kFlashAttention, flops, 0), Phase::kForward, A100()),
      1'000'000 + 4'000);
  // Backward attention at 0.5: 1.872e11 / 156000 = 1.2e6 ns.
  EXPECT_EQ(*CostNs(Cost(OpKind::kFlashAttention, flops, 0), Phase::kBackward,
                    A100()),
            1'200'000 + 4'000);
}

TEST(CostModelTest, MemoryBound) {
  // 1733150000 B / 1733.15 B/ns = 1e6 ns; FLOPs are ignored.
  EXPECT_EQ(*CostNs(Cost(OpKind::kMemoryBound, 1e15, 1'733'150'000, 3),
                    Phase::kForward, A100()),
            1'000'000 + 3 * 4'000);
  // A GEMM whose bytes dominate takes the bytes term.
  EXPECT_EQ(*CostNs(Cost(OpKind::kMatmul, 2.34e8, 1'733'150'000),
                    Phase::kForward, A100()),
            1'000'000 + 4'000);
  // A fraction of a nanosecond rounds up.
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kMemoryBound, 0, 1, 0), Phase::kForward, A100()), 1);
}

TEST(CostModelTest, KernelsOnly) {
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kMemoryBound, 0, 0, 5), Phase::kForward, A100()),
      20'000);
  EXPECT_EQ(
      *CostNs(Cost(OpKind::kMemoryBound, 0, 0, 0), Phase::kForward, A100()), 0);
}

TEST(CostModelTest, MeasuredDurationReplacesFormula) {
  OpCost c = Cost(OpKind::kMatmul, 1e15, 1'000'000'000, 7);
  c.duration_ns = 777;
  EXPECT_EQ(*CostNs(c, Phase::kBackward, A100()), 777);
  c.duration_ns = -1;
  EXPECT_EQ(CostNs(c, Phase::kForward, A100()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CostModelTest, OverflowIsAnError) {
  absl::StatusOr<int64_t> ns =
      CostNs(Cost(OpKind::kMatmul, 1e30, 0), Phase::kForward, A100());
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ns.status().message()), HasSubstr("overflow"));
  Hardware slow = A100();
  slow.hbm_gbps = 1e-6;
  ns =
      CostNs(Cost(OpKind::kMemoryBound, 0, std::numeric_limits<int64_t>::max()),
             Phase::kForward, slow);
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
  ns = CostNs(Cost(OpKind::kMatmul, std::nan(""), 0), Phase::kForward, A100());
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
  ns = CostNs(Cost(OpKind::kMatmul, std::numeric_limits<double>::infinity(), 0),
              Phase::kForward, A100());
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
}

Graph TwoOps(const OpCost& a, const OpCost& b) {
  Graph g;
  g.name = "two";
  int32_t x = g.AddTensor({.name = "x", .bytes = 1024});
  int32_t y = g.AddTensor({.name = "y", .bytes = 1024});
  g.AddOp(
      {.name = "first", .phase = Phase::kForward, .outputs = {x}, .cost = a});
  g.AddOp({.name = "second",
           .phase = Phase::kForward,
           .inputs = {x},
           .outputs = {y},
           .cost = b});
  g.AddOp({.name = "second.bwd", .phase = Phase::kBackward, .inputs = {x, y}});
  EXPECT_TRUE(IndexGraph(g).ok());
  return g;
}

TEST(CostModelTest, ComputeDurationsPerOpAndTotal) {
  OpCost measured;
  measured.duration_ns = 123;
  Graph g = TwoOps(Cost(OpKind::kMatmul, 2.34e11, 0), measured);
  // A dropout-mask-like rebuild: 1733150 bytes = 1000 ns, 1 kernel; rebuilds
  // run in the forward phase.
  Rebuild r;
  r.cost = Cost(OpKind::kFlashAttention, 1.872e9, 0);  // 10000 ns at fwd eff
  g.tensors[1].rebuild = r;
  Rebuild m;
  m.cost = Cost(OpKind::kMemoryBound, 0, 1'733'150);
  g.tensors[0].rebuild = m;
  absl::StatusOr<OpDurations> d = ComputeDurations(g, A100());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->op_ns, ::testing::ElementsAre(1'004'000, 123, 4'000));
  EXPECT_EQ(d->total_ns, 1'004'000 + 123 + 4'000);
  EXPECT_THAT(d->rebuild_ns, ::testing::ElementsAre(5'000, 14'000));
}

TEST(CostModelTest, ComputeDurationsNamesTheOverflowingOp) {
  Graph g =
      TwoOps(Cost(OpKind::kMemoryBound, 0, 0), Cost(OpKind::kMatmul, 1e30, 0));
  absl::StatusOr<OpDurations> d = ComputeDurations(g, A100());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("(second)"));
}

TEST(CostModelTest, ComputeDurationsRejectsTotalOverflow) {
  OpCost big;
  big.duration_ns = 5'000'000'000'000'000'000;
  Graph g = TwoOps(big, big);
  absl::StatusOr<OpDurations> d = ComputeDurations(g, A100());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("(second)"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("overflow"));
}

// --- Shape tables -----------------------------------------------------------

TEST(CostModelTest, ShapedAttentionUsesTheProfilesTable) {
  // A100's causal hd-128 curve at s 2048: 155 TFLOP/s forward+backward,
  // split 284.1:287.1 (model/efficiency_tables.h): the backward runs at
  // 155 * (287.1 / 284.1 + 2.5) / 3.5 TFLOP/s.
  OpCost c = Cost(OpKind::kFlashAttention, 2.5e12, 1000);
  c.shape = {2048, 2048, 128, true};
  const double bwd_tflops = 155 * (287.1 / 284.1 + 2.5) / 3.5;
  EXPECT_NEAR(static_cast<double>(*CostNs(c, Phase::kBackward, A100())),
              2.5e12 / (bwd_tflops * 1e3) + 4000, 2);
  // The same op without a shape: the constant 0.5 (156 TFLOP/s).
  c.shape = {};
  EXPECT_EQ(*CostNs(c, Phase::kBackward, A100()),
            static_cast<int64_t>(std::ceil(2.5e12 / 156e3)) + 4000);
}

TEST(CostModelTest, ShapedGemmUsesTheProfilesTable) {
  // 8192^3 on A100: 271.3 TFLOP/s (a table point).
  const double flops = 2.0 * 8192 * 8192 * 8192;
  OpCost c = Cost(OpKind::kMatmul, flops, 1000);
  c.shape = {8192, 8192, 8192, false};
  EXPECT_NEAR(static_cast<double>(*CostNs(c, Phase::kForward, A100())),
              flops / 271.3e3 + 4000, 2);
}

TEST(CostModelTest, AttentionOfAMaskTheTableLacksNamesTheOp) {
  Graph g;
  Op op;
  op.name = "attn";
  op.cost = Cost(OpKind::kFlashAttention, 1e9, 1000);
  op.cost.shape = {1024, 1024, 64, true};
  g.AddOp(op);
  Hardware hw = A100();
  std::erase_if(hw.attention_efficiency,
                [](const AttentionEfficiencyCurve& c) { return c.causal; });
  absl::StatusOr<OpDurations> d = ComputeDurations(g, hw);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()),
              ::testing::AllOf(HasSubstr("attn"),
                               HasSubstr("attention_efficiency has no causal "
                                         "curve")));
}

}  // namespace
}  // namespace slackswap
