#include "model/hardware.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/format.h"
#include "common/saturating.h"
#include "model/efficiency.h"
#include "model/efficiency_tables.h"

namespace slackswap {
namespace {

constexpr int64_t kNsPerUs = 1000;

// Pinned host memory per GPU. The reference does not give it; these follow
// the public system specifications of the usual host for each GPU, divided
// evenly among its GPUs:
//  - DGX A100 320GB (8x A100 40GB): 1 TB DDR4 host memory -> 1e12 / 8.
//  - DGX A100 640GB (8x A100 80GB): 2 TB DDR4 host memory -> 2e12 / 8.
//  - H100 PCIe servers (e.g. 8-GPU 2-socket PCIe 5.0 systems) are typically
//    built with 2 TB of DDR5 -> 2e12 / 8.
//  - GH200 Grace Hopper superchip: 480 GB LPDDR5X on the Grace side, all of
//    it reachable over NVLink-C2C by its one GPU.
constexpr int64_t kDgxA100_320HostBytesPerGpu = 128'000'000'000;
constexpr int64_t kDgxA100_640HostBytesPerGpu = 256'000'000'000;
constexpr int64_t kH100PcieServerHostBytesPerGpu = 256'000'000'000;
constexpr int64_t kGh200GraceLpddr5xBytes = 480'000'000'000;

// The cost-model and link parameters of the catalog (datasheet peaks;
// efficiencies and link rates as measured on each system). The constant
// efficiencies are the frozen reference's; they cost ops whose graph gives
// no shape, and the tables (model/efficiency_tables.h) cost the rest.

// A100 (SXM4 or PCIe card) on PCIe 4.0 x16: 312 TFLOP/s dense bf16,
// 156 tf32, 19.5 fp32.
constexpr double kA100PeakBf16Tflops = 312.0;
constexpr double kA100PeakTf32Tflops = 156.0;
constexpr double kA100PeakFp32Tflops = 19.5;
constexpr double kA100MatmulEfficiency = 0.75;
constexpr double kA100AttnEfficiencyFwd = 0.6;
constexpr double kA100AttnEfficiencyBwd = 0.5;
constexpr int64_t kA100KernelLaunchNs = 4 * kNsPerUs;

// PCIe 4.0 x16: 31.5 GB/s per direction in theory (16 GT/s, 128b/130b);
// pinned cudaMemcpyAsync reaches about 25 GB/s H2D and 25.5 GB/s D2H alone,
// and 13 / 24 GB/s when both directions run at once.
constexpr double kPcie4TheoreticalGbps = 31.5;
constexpr double kPcie4H2dGbps = 25.0;
constexpr double kPcie4D2hGbps = 25.5;
constexpr double kPcie4BidirH2dGbps = 13.0;
constexpr double kPcie4BidirD2hGbps = 24.0;
constexpr int64_t kPcie4TransferLatencyNs = 10 * kNsPerUs;
constexpr int32_t kA100CopyEngines = 3;

// A100 40GB: HBM2 1555 GB/s; A100 80GB SXM4: HBM2e 2039 GB/s.
constexpr double kA100_40MemoryGb = 40;
constexpr double kA100_40HbmGbps = 1555.0;
constexpr double kA100_40HbmEfficiency = 0.84;
constexpr double kA100_80MemoryGb = 80;
constexpr double kA100_80HbmGbps = 2039.0;
constexpr double kA100_80HbmEfficiency = 0.85;

// H100 PCIe 80GB (114 SMs, HBM2e 2.0 TB/s, 350 W) on PCIe 5.0 x16.
constexpr double kH100PcieMemoryGb = 80;
constexpr double kH100PciePeakBf16Tflops = 756.0;
constexpr double kH100PciePeakTf32Tflops = 378.0;
constexpr double kH100PciePeakFp32Tflops = 51.0;
constexpr double kH100PcieHbmGbps = 2000.0;
constexpr double kH100PcieHbmEfficiency = 0.85;
constexpr double kH100PcieMatmulEfficiency = 0.7;
constexpr double kH100PcieAttnEfficiencyFwd = 0.45;
constexpr double kH100PcieAttnEfficiencyBwd = 0.38;
constexpr double kPcie5TheoreticalGbps = 63.0;
// Pinned copies on PCIe 5.0 x16 hosts (docs/FIDELITY.md, "Host link"):
// busGrind on an 8-GPU Gen5 host measured H2D 56.1-56.2 GB/s, D2H
// 53.5-57.2 and 101.3-101.4 both ways together (taken as half each way);
// nvbandwidth on H100s 56.7-57.1 H2D. No figure names an H100 PCIe card.
constexpr double kPcie5H2dGbps = 56.2;
constexpr double kPcie5D2hGbps = 55.4;
constexpr double kPcie5BidirH2dGbps = 50.7;
constexpr double kPcie5BidirD2hGbps = 50.7;
constexpr int32_t kH100PcieCopyEngines = 3;
constexpr int64_t kPcie5TransferLatencyNs = 8 * kNsPerUs;
constexpr int64_t kH100KernelLaunchNs = 3 * kNsPerUs;

// GH200 Grace Hopper (H100 die with 132 SMs, 96 GB HBM3 at 4.0 TB/s) with
// NVLink-C2C to the Grace CPU: 450 GB/s per direction in theory, measured
// 340 / 295 GB/s alone and 200 / 175 GB/s both ways (partially duplex).
constexpr double kGh200MemoryGb = 96;
constexpr double kGh200PeakBf16Tflops = 989.0;
constexpr double kGh200PeakTf32Tflops = 494.0;
constexpr double kGh200PeakFp32Tflops = 67.0;
constexpr double kGh200HbmGbps = 4000.0;
constexpr double kGh200HbmEfficiency = 0.85;
constexpr double kGh200MatmulEfficiency = 0.75;
constexpr double kGh200AttnEfficiencyFwd = 0.55;
constexpr double kGh200AttnEfficiencyBwd = 0.45;
constexpr double kC2cTheoreticalGbps = 450.0;
constexpr double kC2cH2dGbps = 340.0;
constexpr double kC2cD2hGbps = 295.0;
constexpr double kC2cBidirH2dGbps = 200.0;
constexpr double kC2cBidirD2hGbps = 175.0;
constexpr int32_t kGh200CopyEngines = 3;
constexpr int64_t kC2cTransferLatencyNs = 5 * kNsPerUs;
constexpr int64_t kGh200KernelLaunchNs = 3 * kNsPerUs;

Hardware A100Pcie4(absl::string_view name, absl::string_view gpu,
                   double memory_gb, double hbm_gbps, double hbm_efficiency,
                   int64_t pinned_host_memory_bytes) {
  Hardware hw;
  hw.name = std::string(name);
  hw.gpu = std::string(gpu);
  hw.link = "PCIe 4.0 x16";
  hw.memory_gb = memory_gb;
  hw.peak_tflops_bf16 = kA100PeakBf16Tflops;
  hw.peak_tflops_tf32 = kA100PeakTf32Tflops;
  hw.peak_tflops_fp32 = kA100PeakFp32Tflops;
  hw.hbm_gbps = hbm_gbps;
  hw.hbm_efficiency = hbm_efficiency;
  hw.matmul_efficiency = kA100MatmulEfficiency;
  hw.attn_efficiency_fwd = kA100AttnEfficiencyFwd;
  hw.attn_efficiency_bwd = kA100AttnEfficiencyBwd;
  hw.attention_efficiency = A100AttentionEfficiency();
  hw.gemm_efficiency = A100GemmEfficiency();
  hw.link_theoretical_gbps_per_dir = kPcie4TheoreticalGbps;
  hw.h2d_gbps = kPcie4H2dGbps;
  hw.d2h_gbps = kPcie4D2hGbps;
  hw.bidir_h2d_gbps = kPcie4BidirH2dGbps;
  hw.bidir_d2h_gbps = kPcie4BidirD2hGbps;
  hw.duplex = Duplex::kFull;
  hw.copy_engines = kA100CopyEngines;
  hw.transfer_latency_ns = kPcie4TransferLatencyNs;
  hw.kernel_launch_ns = kA100KernelLaunchNs;
  hw.pinned_host_memory_bytes = pinned_host_memory_bytes;
  return hw;
}

Hardware H100Pcie5() {
  Hardware hw;
  hw.name = "h100-pcie5";
  hw.gpu = "NVIDIA H100 PCIe 80GB (114 SMs, HBM2e 2.0 TB/s, 350 W)";
  hw.link = "PCIe 5.0 x16";
  hw.memory_gb = kH100PcieMemoryGb;
  hw.peak_tflops_bf16 = kH100PciePeakBf16Tflops;
  hw.peak_tflops_tf32 = kH100PciePeakTf32Tflops;
  hw.peak_tflops_fp32 = kH100PciePeakFp32Tflops;
  hw.hbm_gbps = kH100PcieHbmGbps;
  hw.hbm_efficiency = kH100PcieHbmEfficiency;
  hw.matmul_efficiency = kH100PcieMatmulEfficiency;
  hw.attn_efficiency_fwd = kH100PcieAttnEfficiencyFwd;
  hw.attn_efficiency_bwd = kH100PcieAttnEfficiencyBwd;
  hw.attention_efficiency = H100AttentionEfficiency();
  hw.gemm_efficiency = H100PcieGemmEfficiency();
  hw.link_theoretical_gbps_per_dir = kPcie5TheoreticalGbps;
  hw.h2d_gbps = kPcie5H2dGbps;
  hw.d2h_gbps = kPcie5D2hGbps;
  hw.bidir_h2d_gbps = kPcie5BidirH2dGbps;
  hw.bidir_d2h_gbps = kPcie5BidirD2hGbps;
  hw.duplex = Duplex::kFull;
  hw.copy_engines = kH100PcieCopyEngines;
  hw.transfer_latency_ns = kPcie5TransferLatencyNs;
  hw.kernel_launch_ns = kH100KernelLaunchNs;
  hw.pinned_host_memory_bytes = kH100PcieServerHostBytesPerGpu;
  return hw;
}

Hardware Gh200C2c() {
  Hardware hw;
  hw.name = "gh200-c2c";
  hw.gpu =
      "NVIDIA GH200 Grace Hopper (H100 die 132 SMs, 96GB HBM3 4.0 TB/s; "
      "144GB HBM3e variant 4.9 TB/s)";
  hw.link = "NVLink-C2C";
  hw.memory_gb = kGh200MemoryGb;
  hw.peak_tflops_bf16 = kGh200PeakBf16Tflops;
  hw.peak_tflops_tf32 = kGh200PeakTf32Tflops;
  hw.peak_tflops_fp32 = kGh200PeakFp32Tflops;
  hw.hbm_gbps = kGh200HbmGbps;
  hw.hbm_efficiency = kGh200HbmEfficiency;
  hw.matmul_efficiency = kGh200MatmulEfficiency;
  hw.attn_efficiency_fwd = kGh200AttnEfficiencyFwd;
  hw.attn_efficiency_bwd = kGh200AttnEfficiencyBwd;
  hw.attention_efficiency = H100AttentionEfficiency();
  hw.gemm_efficiency = H100SxmGemmEfficiency();
  hw.link_theoretical_gbps_per_dir = kC2cTheoreticalGbps;
  hw.h2d_gbps = kC2cH2dGbps;
  hw.d2h_gbps = kC2cD2hGbps;
  hw.bidir_h2d_gbps = kC2cBidirH2dGbps;
  hw.bidir_d2h_gbps = kC2cBidirD2hGbps;
  hw.duplex = Duplex::kPartial;
  hw.copy_engines = kGh200CopyEngines;
  hw.transfer_latency_ns = kC2cTransferLatencyNs;
  hw.kernel_launch_ns = kGh200KernelLaunchNs;
  hw.pinned_host_memory_bytes = kGh200GraceLpddr5xBytes;
  return hw;
}

std::string Label(const Hardware& hw) {
  return hw.name.empty() ? std::string("hardware <unnamed>")
                         : absl::StrCat("hardware ", QuoteInput(hw.name));
}

// `head` is what precedes the field's name: the profile's label, or a
// prefix such as "gpu." (ValidateHardwareFields).
absl::Status FieldError(absl::string_view head, absl::string_view field,
                        absl::string_view requirement, double got) {
  return absl::InvalidArgumentError(
      absl::StrCat(head, field, " must be ", requirement, ", got ", got));
}

absl::Status Validate(const Hardware& hw, absl::string_view hw_head);

}  // namespace

double Hardware::Rate(Direction dir, bool both_busy) const {
  if (dir == Direction::kH2D) return both_busy ? bidir_h2d_gbps : h2d_gbps;
  return both_busy ? bidir_d2h_gbps : d2h_gbps;
}

int64_t CopyNs(double bytes, double bytes_per_ns) {
  if (bytes <= 0) return 0;
  return SaturatingCeil(bytes / bytes_per_ns * (1.0 - 1e-12));
}

int64_t Hardware::TransferNs(int64_t bytes, Direction dir,
                             bool both_busy) const {
  return SaturatingAdd(transfer_latency_ns, CopyNs(static_cast<double>(bytes),
                                                   Rate(dir, both_busy)));
}

absl::Status ValidateHardware(const Hardware& hw) {
  return Validate(hw, absl::StrCat(Label(hw), ": "));
}

absl::Status ValidateHardwareFields(const Hardware& hw,
                                    absl::string_view prefix) {
  return Validate(hw, prefix);
}

namespace {

absl::Status Validate(const Hardware& hw, absl::string_view hw_head) {
  // Physical ranges, wide enough for any GPU and host link of today or
  // tomorrow, narrow enough that every derived time and size stays far
  // inside int64 (a rate of 1e-300 GB/s would make copies last forever).
  struct Range {
    absl::string_view name;
    double value;
    double lo;
    double hi;
    absl::string_view unit;
  };
  constexpr double kMinLinkGbps = 0.001;  // 1 MB/s
  constexpr double kMaxLinkGbps = 1e5;
  for (const Range& r : {
           Range{"memory_gb", hw.memory_gb, 0.001, 1e6, "GB"},
           Range{"peak_tflops_bf16", hw.peak_tflops_bf16, 1e-3, 1e6, "TFLOP/s"},
           Range{"peak_tflops_tf32", hw.peak_tflops_tf32, 0, 1e6, "TFLOP/s"},
           Range{"peak_tflops_fp32", hw.peak_tflops_fp32, 0, 1e6, "TFLOP/s"},
           Range{"hbm_gbps", hw.hbm_gbps, 0.1, 1e6, "GB/s"},
           Range{"h2d_gbps", hw.h2d_gbps, kMinLinkGbps, kMaxLinkGbps, "GB/s"},
           Range{"d2h_gbps", hw.d2h_gbps, kMinLinkGbps, kMaxLinkGbps, "GB/s"},
           Range{"bidir_h2d_gbps", hw.bidir_h2d_gbps, kMinLinkGbps,
                 kMaxLinkGbps, "GB/s"},
           Range{"bidir_d2h_gbps", hw.bidir_d2h_gbps, kMinLinkGbps,
                 kMaxLinkGbps, "GB/s"},
           Range{"link_theoretical_gbps_per_dir",
                 hw.link_theoretical_gbps_per_dir, 0, kMaxLinkGbps, "GB/s"},
           Range{"transfer_latency_ns",
                 static_cast<double>(hw.transfer_latency_ns), 0, 1e9, "ns"},
           Range{"kernel_launch_ns", static_cast<double>(hw.kernel_launch_ns),
                 0, 1e9, "ns"},
           Range{"pinned_host_memory_bytes",
                 static_cast<double>(hw.pinned_host_memory_bytes), 0, 1e15,
                 "bytes"},
           Range{"copy_engines", static_cast<double>(hw.copy_engines), 1, 64,
                 ""},
           Range{"framework_reserve_bytes",
                 static_cast<double>(hw.framework_reserve_bytes), 0,
                 hw.memory_gb * 1e9, "bytes"},
       }) {
    if (!(r.value >= r.lo && r.value <= r.hi)) {  // NaN fails too
      return FieldError(hw_head, r.name,
                        absl::StrCat("in [", r.lo, ", ", r.hi, "]",
                                     r.unit.empty() ? "" : " ", r.unit),
                        r.value);
    }
  }
  for (const Range& r :
       {Range{"hbm_efficiency", hw.hbm_efficiency},
        Range{"matmul_efficiency", hw.matmul_efficiency},
        Range{"attn_efficiency_fwd", hw.attn_efficiency_fwd},
        Range{"attn_efficiency_bwd", hw.attn_efficiency_bwd}}) {
    if (!(r.value > 0 && r.value <= 1)) {
      return FieldError(hw_head, r.name, "in (0, 1]", r.value);
    }
  }
  if (hw.duplex != Duplex::kFull && hw.duplex != Duplex::kHalf &&
      hw.duplex != Duplex::kPartial) {
    return FieldError(hw_head, "duplex", "full, half or partial",
                      static_cast<int>(hw.duplex));
  }
  return ValidateEfficiencyTables(hw, hw_head);
}

}  // namespace

const std::vector<Hardware>& HardwareCatalog() {
  static const std::vector<Hardware>* catalog = new std::vector<Hardware>{
      A100Pcie4("a100-40gb-pcie4",
                "NVIDIA A100 40GB (SXM4 or PCIe card; both reach the host "
                "over PCIe 4.0 x16)",
                kA100_40MemoryGb, kA100_40HbmGbps, kA100_40HbmEfficiency,
                kDgxA100_320HostBytesPerGpu),
      A100Pcie4("a100-80gb-pcie4",
                "NVIDIA A100 80GB SXM4 (HBM2e 2039 GB/s; the 80GB PCIe card "
                "has 1935 GB/s)",
                kA100_80MemoryGb, kA100_80HbmGbps, kA100_80HbmEfficiency,
                kDgxA100_640HostBytesPerGpu),
      H100Pcie5(),
      Gh200C2c(),
  };
  return *catalog;
}

std::vector<std::string> HardwareNames() {
  std::vector<std::string> names;
  for (const Hardware& hw : HardwareCatalog()) names.push_back(hw.name);
  return names;
}

absl::StatusOr<Hardware> FindHardware(absl::string_view name) {
  for (const Hardware& hw : HardwareCatalog()) {
    if (hw.name == name) return hw;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown hardware profile ", QuoteInput(name),
                   "; known: ", absl::StrJoin(HardwareNames(), ", ")));
}

}  // namespace slackswap
