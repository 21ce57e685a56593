#include "model/hardware.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "testing/reference.h"

namespace slackswap {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::slackswap::testutil::At;
using ::slackswap::testutil::Reference;
using ::testing::HasSubstr;

const Struct& RefHardware() {
  return At(Reference(), {"hardware"}).struct_value();
}

TEST(HardwareCatalogTest, HasExactlyTheReferenceProfiles) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  std::set<std::string> want;
  for (const auto& [name, unused] : RefHardware().fields()) want.insert(name);
  std::set<std::string> got;
  for (const Hardware& hw : HardwareCatalog()) got.insert(hw.name);
  EXPECT_EQ(got, want);
  EXPECT_EQ(HardwareCatalog().size(), 4u);
}

TEST(HardwareCatalogTest, ValuesEqualReference) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  for (const auto& [name, value] : RefHardware().fields()) {
    SCOPED_TRACE(name);
    const Struct& ref = value.struct_value();
    auto num = [&](const std::string& key) {
      return ref.fields().at(key).number_value();
    };
    absl::StatusOr<Hardware> hw = FindHardware(name);
    ASSERT_TRUE(hw.ok()) << hw.status();
    EXPECT_EQ(hw->name, name);
    EXPECT_EQ(hw->gpu, ref.fields().at("gpu").string_value());
    EXPECT_EQ(hw->link, ref.fields().at("link").string_value());
    EXPECT_DOUBLE_EQ(hw->memory_gb, num("memory_gb"));
    EXPECT_DOUBLE_EQ(hw->peak_tflops_bf16, num("peak_tflops_bf16"));
    EXPECT_DOUBLE_EQ(hw->peak_tflops_tf32, num("peak_tflops_tf32"));
    EXPECT_DOUBLE_EQ(hw->peak_tflops_fp32, num("peak_tflops_fp32"));
    EXPECT_DOUBLE_EQ(hw->hbm_gbps, num("hbm_gbps"));
    EXPECT_DOUBLE_EQ(hw->hbm_efficiency, num("hbm_efficiency"));
    EXPECT_DOUBLE_EQ(hw->matmul_efficiency, num("matmul_efficiency"));
    EXPECT_DOUBLE_EQ(hw->attn_efficiency_fwd, num("attn_efficiency_fwd"));
    EXPECT_DOUBLE_EQ(hw->attn_efficiency_bwd, num("attn_efficiency_bwd"));
    EXPECT_DOUBLE_EQ(hw->link_theoretical_gbps_per_dir,
                     num("link_theoretical_gbps_per_dir"));
    // The reference's PCIe 5.0 rates were round figures; the catalog's are
    // the published measurements (docs/FIDELITY.md, "Host link"), tested in
    // tests/fidelity_test.cc. Every other profile keeps the reference's.
    if (name != "h100-pcie5") {
      EXPECT_DOUBLE_EQ(hw->h2d_gbps, num("h2d_gbps"));
      EXPECT_DOUBLE_EQ(hw->d2h_gbps, num("d2h_gbps"));
      EXPECT_DOUBLE_EQ(hw->bidir_h2d_gbps, num("bidir_h2d_gbps"));
      EXPECT_DOUBLE_EQ(hw->bidir_d2h_gbps, num("bidir_d2h_gbps"));
    } else {
      EXPECT_NE(hw->h2d_gbps, num("h2d_gbps"));
    }
    EXPECT_EQ(hw->copy_engines, num("copy_engines"));
    EXPECT_EQ(hw->transfer_latency_ns,
              std::llround(num("transfer_latency_us") * 1000));
    EXPECT_EQ(hw->kernel_launch_ns,
              std::llround(num("kernel_launch_us") * 1000));
    const Value& duplex = ref.fields().at("duplex");
    if (duplex.has_bool_value()) {
      EXPECT_EQ(hw->duplex,
                duplex.bool_value() ? Duplex::kFull : Duplex::kHalf);
    } else {
      EXPECT_EQ(duplex.string_value(), "partial");
      EXPECT_EQ(hw->duplex, Duplex::kPartial);
    }
    EXPECT_TRUE(hw->ConcurrentCopies());
    EXPECT_GT(hw->pinned_host_memory_bytes, 0);
    EXPECT_TRUE(ValidateHardware(*hw).ok()) << ValidateHardware(*hw);
  }
}

TEST(HardwareCatalogTest, PinnedHostMemory) {
  EXPECT_EQ(FindHardware("a100-40gb-pcie4")->pinned_host_memory_bytes,
            128'000'000'000);
  EXPECT_EQ(FindHardware("a100-80gb-pcie4")->pinned_host_memory_bytes,
            256'000'000'000);
  EXPECT_EQ(FindHardware("h100-pcie5")->pinned_host_memory_bytes,
            256'000'000'000);
  EXPECT_EQ(FindHardware("gh200-c2c")->pinned_host_memory_bytes,
            480'000'000'000);
}

TEST(HardwareCatalogTest, UnknownNameListsKnownOnes) {
  absl::StatusOr<Hardware> hw = FindHardware("tpu-v5");
  EXPECT_EQ(hw.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(hw.status().message()), HasSubstr("tpu-v5"));
  EXPECT_THAT(std::string(hw.status().message()),
              HasSubstr("a100-40gb-pcie4, a100-80gb-pcie4, h100-pcie5, "
                        "gh200-c2c"));
}

TEST(HardwareTransferTest, RateSelectsBidirectionalRates) {
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  EXPECT_DOUBLE_EQ(hw.Rate(Direction::kH2D, false), 25.0);
  EXPECT_DOUBLE_EQ(hw.Rate(Direction::kD2H, false), 25.5);
  EXPECT_DOUBLE_EQ(hw.Rate(Direction::kH2D, true), 13.0);
  EXPECT_DOUBLE_EQ(hw.Rate(Direction::kD2H, true), 24.0);
}

TEST(HardwareTransferTest, HandWorkedPcie4) {
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  const int64_t gib = int64_t{1} << 30;
  // 10 us + 2^30 B / 25.5 B/ns = 10000 + ceil(42107522.51) ns.
  EXPECT_EQ(hw.TransferNs(gib, Direction::kD2H, false), 42117523);
  // 10000 + ceil(2^30 / 25) = 10000 + ceil(42949672.96).
  EXPECT_EQ(hw.TransferNs(gib, Direction::kH2D, false), 42959673);
  // Both busy: 13 and 24 GB/s.
  EXPECT_EQ(hw.TransferNs(gib, Direction::kH2D, true), 82605525);
  EXPECT_EQ(hw.TransferNs(gib, Direction::kD2H, true), 44749243);
  // 25 GB/s: 1000 bytes take exactly 40 ns.
  EXPECT_EQ(hw.TransferNs(1000, Direction::kH2D, false), 10040);
  EXPECT_EQ(hw.TransferNs(0, Direction::kH2D, false), 10000);
}

TEST(HardwareTransferTest, HandWorkedC2c) {
  const Hardware hw = *FindHardware("gh200-c2c");
  // 5 us + 1e9 / 340 = 5000 + ceil(2941176.47).
  EXPECT_EQ(hw.TransferNs(1'000'000'000, Direction::kH2D, false), 2946177);
  // 1000 / 295 = 3.39 -> 4 ns.
  EXPECT_EQ(hw.TransferNs(1000, Direction::kD2H, false), 5004);
  // 1e9 / 175 = 5714285.71 -> 5714286.
  EXPECT_EQ(hw.TransferNs(1'000'000'000, Direction::kD2H, true), 5719286);
}

TEST(HardwareTransferTest, SaturatesInsteadOfOverflowing) {
  Hardware hw = *FindHardware("a100-80gb-pcie4");
  hw.h2d_gbps = 1e-9;
  EXPECT_EQ(hw.TransferNs(std::numeric_limits<int64_t>::max(), Direction::kH2D,
                          false),
            std::numeric_limits<int64_t>::max());
}

TEST(HardwareTransferTest, ConcurrentCopies) {
  Hardware hw = *FindHardware("a100-80gb-pcie4");
  EXPECT_TRUE(hw.ConcurrentCopies());
  hw.duplex = Duplex::kHalf;
  EXPECT_FALSE(hw.ConcurrentCopies());
  hw.duplex = Duplex::kPartial;
  hw.copy_engines = 1;
  EXPECT_FALSE(hw.ConcurrentCopies());
}

void ExpectInvalid(const Hardware& hw, const std::string& text) {
  absl::Status s = ValidateHardware(hw);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
}

// Rates far below any physical link would make copy times overflow: the
// error names the field and its range.
TEST(HardwareValidateTest, RejectsRatesOutsidePhysicalRanges) {
  Hardware hw = *FindHardware("a100-80gb-pcie4");
  hw.h2d_gbps = 1e-300;
  ExpectInvalid(hw, "h2d_gbps must be in [0.001, 100000] GB/s, got 1e-300");
  hw = *FindHardware("a100-80gb-pcie4");
  hw.bidir_d2h_gbps = 1e9;
  ExpectInvalid(hw, "bidir_d2h_gbps must be in [0.001, 100000] GB/s");
  hw = *FindHardware("a100-80gb-pcie4");
  hw.copy_engines = 1000;
  ExpectInvalid(hw, "copy_engines must be in [1, 64]");
  hw = *FindHardware("a100-80gb-pcie4");
  hw.name = std::string(20'000, 'n');
  hw.memory_gb = -1;
  absl::Status s = ValidateHardware(hw);
  EXPECT_LT(s.message().size(), 400u) << "a 20 KB name is not echoed whole";
}

TEST(HardwareCopyTest, CopyTimeSaturatesAndRoundsUp) {
  EXPECT_EQ(CopyNs(100, 25), 4);
  EXPECT_EQ(CopyNs(101, 25), 5);
  EXPECT_EQ(CopyNs(0, 25), 0);
  EXPECT_EQ(CopyNs(9e18, 1e-9), std::numeric_limits<int64_t>::max());
  Hardware hw = *FindHardware("a100-80gb-pcie4");
  hw.d2h_gbps = 1e-12;  // unvalidated: the formula still saturates
  EXPECT_EQ(hw.TransferNs(int64_t{1} << 60, Direction::kD2H, false),
            std::numeric_limits<int64_t>::max());
}

TEST(HardwareValidateTest, RejectsBadFieldsNamingThem) {
  const Hardware base = *FindHardware("a100-80gb-pcie4");
  Hardware hw = base;
  hw.name = "a100";
  hw.h2d_gbps = -1;
  ExpectInvalid(hw,
                "hardware \"a100\": h2d_gbps must be in [0.001, 100000] GB/s, "
                "got -1");

  hw = base;
  hw.d2h_gbps = 0;
  ExpectInvalid(hw, "d2h_gbps must be in [0.001, 100000] GB/s, got 0");
  hw = base;
  hw.bidir_h2d_gbps = std::nan("");
  ExpectInvalid(hw, "bidir_h2d_gbps");
  hw = base;
  hw.bidir_d2h_gbps = std::numeric_limits<double>::infinity();
  ExpectInvalid(hw, "bidir_d2h_gbps");
  hw = base;
  hw.hbm_gbps = 0;
  ExpectInvalid(hw, "hbm_gbps");
  hw = base;
  hw.peak_tflops_bf16 = -3;
  ExpectInvalid(hw, "peak_tflops_bf16");
  hw = base;
  hw.memory_gb = 0;
  ExpectInvalid(hw, "memory_gb");
  hw = base;
  hw.peak_tflops_fp32 = std::nan("");
  ExpectInvalid(hw, "peak_tflops_fp32");

  hw = base;
  hw.matmul_efficiency = 1.5;
  ExpectInvalid(hw, "matmul_efficiency must be in (0, 1], got 1.5");
  hw = base;
  hw.hbm_efficiency = 0;
  ExpectInvalid(hw, "hbm_efficiency");
  hw = base;
  hw.attn_efficiency_fwd = std::nan("");
  ExpectInvalid(hw, "attn_efficiency_fwd");
  hw = base;
  hw.attn_efficiency_bwd = -0.5;
  ExpectInvalid(hw, "attn_efficiency_bwd");
  hw = base;
  hw.attn_efficiency_bwd = 1.0;  // the upper bound is allowed
  EXPECT_TRUE(ValidateHardware(hw).ok());

  hw = base;
  hw.transfer_latency_ns = -1;
  ExpectInvalid(hw, "transfer_latency_ns must be in [0, 1e+09] ns, got -1");
  hw = base;
  hw.kernel_launch_ns = -1;
  ExpectInvalid(hw, "kernel_launch_ns");
  hw = base;
  hw.pinned_host_memory_bytes = -1;
  ExpectInvalid(hw, "pinned_host_memory_bytes");
  hw = base;
  hw.copy_engines = 0;
  ExpectInvalid(hw, "copy_engines");
  hw = base;
  hw.framework_reserve_bytes = -1;
  ExpectInvalid(hw, "framework_reserve_bytes must be in [0, ");
  hw = base;
  hw.framework_reserve_bytes =
      static_cast<int64_t>(hw.memory_gb * 1e9) + 1;  // more than the GPU
  ExpectInvalid(hw, "framework_reserve_bytes");
  hw = base;
  hw.framework_reserve_bytes = static_cast<int64_t>(hw.memory_gb * 1e9);
  EXPECT_TRUE(ValidateHardware(hw).ok());

  hw = base;
  hw.name.clear();
  hw.h2d_gbps = 0;
  ExpectInvalid(hw, "<unnamed>");
}

TEST(HardwareTest, EveryProfileHasTheDefaultFrameworkReserve) {
  for (const Hardware& hw : HardwareCatalog()) {
    EXPECT_EQ(hw.framework_reserve_bytes, kDefaultFrameworkReserveBytes)
        << hw.name;
  }
  EXPECT_EQ(kDefaultFrameworkReserveBytes, 1'000'000'000);
}

TEST(HardwareValidateTest, AcceptsZeroLatencyAndUnknownInformationalPeaks) {
  Hardware hw = *FindHardware("h100-pcie5");
  hw.transfer_latency_ns = 0;
  hw.kernel_launch_ns = 0;
  hw.pinned_host_memory_bytes = 0;
  hw.peak_tflops_tf32 = 0;
  hw.link_theoretical_gbps_per_dir = 0;
  EXPECT_TRUE(ValidateHardware(hw).ok());
}

}  // namespace
}  // namespace slackswap
