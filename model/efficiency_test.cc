#include "model/efficiency.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/efficiency_tables.h"
#include "model/hardware.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

Hardware TwoCurveProfile() {
  Hardware hw = *FindHardware("a100-80gb-pcie4");
  hw.attention_efficiency = {
      {false, 64, {512, 2048}, {0.4, 0.6}, {0.3, 0.5}},
      {false, 256, {512, 2048}, {0.5, 0.8}, {0.4, 0.7}},
      {true, 64, {1024}, {0.2}, {0.25}},
  };
  hw.gemm_efficiency = {{1000, 8000}, {0.5, 0.8}};
  return hw;
}

TEST(InterpolateLog2Test, LinearInLog2AndClampedOutside) {
  const std::vector<int64_t> xs = {512, 2048};
  const std::vector<double> ys = {0.4, 0.6};
  EXPECT_DOUBLE_EQ(InterpolateLog2(xs, ys, 1024), 0.5);  // halfway in log2
  EXPECT_DOUBLE_EQ(InterpolateLog2(xs, ys, 512), 0.4);
  EXPECT_DOUBLE_EQ(InterpolateLog2(xs, ys, 2048), 0.6);
  EXPECT_DOUBLE_EQ(InterpolateLog2(xs, ys, 1), 0.4);        // clamped below
  EXPECT_DOUBLE_EQ(InterpolateLog2(xs, ys, 1 << 20), 0.6);  // and above
  EXPECT_DOUBLE_EQ(InterpolateLog2({100}, {0.7}, 5), 0.7);  // one point
}

TEST(AttentionEfficiencyTest, FollowsSequenceHeadDimMaskAndPhase) {
  const Hardware hw = TwoCurveProfile();
  KernelShape s{1024, 1024, 64, false};
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kForward), 0.5);
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kBackward), 0.4);
  // Head dim 128 lies halfway (in log2) between the 64 and 256 curves.
  s.k = 128;
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kForward),
                   (0.5 + 0.65) / 2);
  // Past the largest head dim: clamped to its curve.
  s.k = 512;
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kForward), 0.65);
  s.k = 16;
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kForward), 0.5);
  // The causal curve for causal attention, whatever its length.
  s = {8192, 8192, 64, true};
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, s, Phase::kBackward), 0.25);
}

TEST(AttentionEfficiencyTest, ConstantsServeUnknownShapesAndEmptyTables) {
  Hardware hw = TwoCurveProfile();
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, KernelShape{}, Phase::kForward),
                   hw.attn_efficiency_fwd);
  hw.attention_efficiency.clear();
  EXPECT_DOUBLE_EQ(*AttentionEfficiency(hw, KernelShape{1024, 1024, 64, true},
                                        Phase::kBackward),
                   hw.attn_efficiency_bwd);
}

TEST(AttentionEfficiencyTest, MissingMaskIsRefusedNamingTheField) {
  Hardware hw = TwoCurveProfile();
  hw.attention_efficiency.pop_back();  // no causal curve left
  absl::StatusOr<double> e = AttentionEfficiency(
      hw, KernelShape{1024, 1024, 64, true}, Phase::kForward);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("hardware \"a100-80gb-pcie4\": attention_efficiency "
                        "has no causal curve"));
  // A name from the wire is quoted as every input is (common/format.h).
  hw.name = "bad\nname";
  e = AttentionEfficiency(hw, KernelShape{1024, 1024, 64, true},
                          Phase::kForward);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("hardware \"bad\\nname\""));
}

TEST(GemmEfficiencyTest, ByTheCubeEdgeOfItsVolume) {
  const Hardware hw = TwoCurveProfile();
  // 2000 x 2000 x 2000 lies a third of the way from 1000 to 8000 in log2.
  EXPECT_NEAR(GemmEfficiency(hw, KernelShape{2000, 2000, 2000, false}), 0.6,
              1e-12);
  // A flat GEMM of the same volume: the same efficiency.
  EXPECT_NEAR(GemmEfficiency(hw, KernelShape{8000, 1000, 1000, false}), 0.6,
              1e-12);
  EXPECT_DOUBLE_EQ(GemmEfficiency(hw, KernelShape{10, 10, 10, false}), 0.5);
  EXPECT_DOUBLE_EQ(GemmEfficiency(hw, KernelShape{}), hw.matmul_efficiency);
}

absl::Status Check(const Hardware& hw) {
  return ValidateEfficiencyTables(hw, "hardware \"t\": ");
}

TEST(ValidateEfficiencyTablesTest, RefusesBadTablesNamingTheField) {
  struct Case {
    const char* what;
    void (*mutate)(Hardware&);
    const char* field;
  };
  const Case cases[] = {
      {"empty curve",
       [](Hardware& hw) {
         hw.attention_efficiency[0] = {false, 64, {}, {}, {}};
       },
       "attention_efficiency[0].seq_len is empty"},
      {"unsorted",
       [](Hardware& hw) {
         hw.attention_efficiency[1].seq_len = {2048, 512};
       },
       "attention_efficiency[1].seq_len must be strictly increasing"},
      {"zero length",
       [](Hardware& hw) {
         hw.attention_efficiency[1].seq_len = {0, 512};
       },
       "attention_efficiency[1].seq_len[0] must be in [1,"},
      {"above one",
       [](Hardware& hw) { hw.attention_efficiency[0].bwd[1] = 1.5; },
       "attention_efficiency[0].bwd[1] must be in (0, 1]"},
      {"zero", [](Hardware& hw) { hw.attention_efficiency[2].fwd[0] = 0; },
       "attention_efficiency[2].fwd[0] must be in (0, 1]"},
      {"NaN",
       [](Hardware& hw) { hw.attention_efficiency[2].fwd[0] = std::nan(""); },
       "attention_efficiency[2].fwd[0] must be in (0, 1]"},
      {"lengths differ",
       [](Hardware& hw) { hw.attention_efficiency[0].fwd.push_back(0.5); },
       "attention_efficiency[0].fwd has 3 values for 2 points"},
      {"repeated curve",
       [](Hardware& hw) {
         hw.attention_efficiency.push_back(hw.attention_efficiency[0]);
       },
       "attention_efficiency[3]. repeats the non-causal curve for head_dim 64"},
      {"bad head dim",
       [](Hardware& hw) { hw.attention_efficiency[0].head_dim = 0; },
       "attention_efficiency[0].head_dim must be in [1,"},
      {"gemm unsorted",
       [](Hardware& hw) {
         hw.gemm_efficiency.size = {8000, 8000};
       },
       "gemm_efficiency.size must be strictly increasing"},
      {"gemm values missing",
       [](Hardware& hw) { hw.gemm_efficiency.efficiency = {0.5}; },
       "gemm_efficiency.efficiency has 1 values for 2 points"},
      {"gemm sizes missing",
       [](Hardware& hw) { hw.gemm_efficiency.size.clear(); },
       "gemm_efficiency.size is empty"},
      {"gemm negative",
       [](Hardware& hw) {
         hw.gemm_efficiency.efficiency = {-0.1, 0.5};
       },
       "gemm_efficiency.efficiency[0] must be in (0, 1]"},
  };
  ASSERT_TRUE(Check(TwoCurveProfile()).ok()) << Check(TwoCurveProfile());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Hardware hw = TwoCurveProfile();
    c.mutate(hw);
    absl::Status s = Check(hw);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(std::string("hardware \"t\": ") + c.field));
    // ValidateHardware runs the same checks.
    EXPECT_EQ(ValidateHardware(hw).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ValidateEfficiencyTablesTest, BoundsTheTableSize) {
  Hardware hw = TwoCurveProfile();
  hw.gemm_efficiency.size.clear();
  hw.gemm_efficiency.efficiency.clear();
  for (int i = 1; i <= kMaxEfficiencyPoints + 1; ++i) {
    hw.gemm_efficiency.size.push_back(i);
    hw.gemm_efficiency.efficiency.push_back(0.5);
  }
  EXPECT_THAT(std::string(Check(hw).message()),
              HasSubstr("gemm_efficiency.size has 65 points; at most 64"));
}

TEST(EfficiencyTablesTest, SplitKeepsTheCombinedTime) {
  // 3.5 F / both = F / fwd + 2.5 F / bwd, with fwd = ratio * bwd.
  for (double ratio : {kFa2FwdBwdRatioNonCausal, kFa2FwdBwdRatioCausal}) {
    const FwdBwdRates r = SplitFwdBwd(150, ratio);
    EXPECT_NEAR(3.5 / 150, 1 / r.fwd + 2.5 / r.bwd, 1e-12);
    EXPECT_NEAR(r.fwd / r.bwd, ratio, 1e-12);
  }
}

TEST(EfficiencyTablesTest, EveryCatalogProfileHasValidTables) {
  for (const Hardware& hw : HardwareCatalog()) {
    SCOPED_TRACE(hw.name);
    EXPECT_TRUE(ValidateHardware(hw).ok()) << ValidateHardware(hw);
    EXPECT_EQ(hw.attention_efficiency.size(), 4u);
    EXPECT_FALSE(hw.gemm_efficiency.empty());
  }
  // The published A100 cell nearest Llama-7B (causal, hd 128, s 2k):
  // 155 TFLOP/s forward+backward, so the table's forward and backward
  // together take 3.5 F / 155 TFLOP/s.
  const Hardware a100 = *FindHardware("a100-80gb-pcie4");
  const KernelShape llama{2048, 2048, 128, true};
  const double fwd = *AttentionEfficiency(a100, llama, Phase::kForward);
  const double bwd = *AttentionEfficiency(a100, llama, Phase::kBackward);
  EXPECT_NEAR(1 / fwd + 2.5 / bwd, 3.5 / (155.0 / 312), 1e-9);
}

}  // namespace
}  // namespace slackswap
