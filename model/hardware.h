// A GPU and its host link in core units (bytes, nanoseconds, bytes per
// nanosecond), and the built-in catalog of profiles.
//
//   absl::StatusOr<Hardware> hw = FindHardware("a100-80gb-pcie4");
//   int64_t ns = hw->TransferNs(1 << 30, Direction::kD2H, /*both_busy=*/false);
#ifndef SLACKSWAP_MODEL_HARDWARE_H_
#define SLACKSWAP_MODEL_HARDWARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace slackswap {

enum class Duplex : uint8_t { kFull, kHalf, kPartial };

// What the framework holds on a GPU outside its caching allocator: the CUDA
// context with the kernels' modules loaded, and the libraries' workspaces
// (cuBLAS, cuDNN). A round default for a PyTorch training process; a profile
// overrides it with what it measured (torch.cuda.mem_get_info() against
// memory_reserved()).
inline constexpr int64_t kDefaultFrameworkReserveBytes = 1'000'000'000;
enum class Direction : uint8_t { kD2H, kH2D };

// Fused attention's efficiency (a fraction of peak_tflops_bf16, FLOPs
// counted as the graph counts them: halved when causal) against sequence
// length, for one head dimension and mask (model/efficiency.h).
struct AttentionEfficiencyCurve {
  bool causal = false;
  int32_t head_dim = 0;
  std::vector<int64_t> seq_len;  // strictly increasing, > 0
  std::vector<double> fwd;       // each in (0, 1]
  std::vector<double> bwd;
};

// A GEMM's efficiency against its size: the edge of the cube with its
// volume, (m * n * k)^(1/3), so that a square n^3 GEMM has size n.
struct GemmEfficiencyCurve {
  std::vector<int64_t> size;  // strictly increasing, > 0
  std::vector<double> efficiency;

  bool empty() const { return size.empty() && efficiency.empty(); }
};

struct Hardware {
  std::string name;
  std::string gpu;
  std::string link;
  double memory_gb = 0;
  double peak_tflops_bf16 = 0;
  double peak_tflops_tf32 = 0;
  double peak_tflops_fp32 = 0;
  double hbm_gbps = 0;
  double hbm_efficiency = 1;
  double matmul_efficiency = 1;
  double attn_efficiency_fwd = 1;
  double attn_efficiency_bwd = 1;
  // Efficiencies that follow the kernel's shape. Empty: the constants above
  // serve every op (a constant is a one-point table); otherwise the
  // constants serve only ops whose graph gives no shape.
  std::vector<AttentionEfficiencyCurve> attention_efficiency;
  GemmEfficiencyCurve gemm_efficiency;
  double link_theoretical_gbps_per_dir = 0;
  // GB/s = bytes per nanosecond.
  double h2d_gbps = 0;
  double d2h_gbps = 0;
  // Rates while both directions are busy.
  double bidir_h2d_gbps = 0;
  double bidir_d2h_gbps = 0;
  Duplex duplex = Duplex::kFull;
  int32_t copy_engines = 2;
  int64_t transfer_latency_ns = 0;
  int64_t kernel_launch_ns = 0;
  int64_t pinned_host_memory_bytes = 0;
  // Device memory the allocator cannot use (kDefaultFrameworkReserveBytes).
  int64_t framework_reserve_bytes = kDefaultFrameworkReserveBytes;

  // Both copy directions may run at once: a duplex link and an engine each.
  bool ConcurrentCopies() const {
    return duplex != Duplex::kHalf && copy_engines >= 2;
  }
  // Bytes per nanosecond in `dir`, given whether the other direction is busy.
  double Rate(Direction dir, bool both_busy) const;
  // latency + CopyNs(bytes, rate), saturating at INT64_MAX.
  int64_t TransferNs(int64_t bytes, Direction dir, bool both_busy) const;
};

// Nanoseconds to move `bytes` at `bytes_per_ns`, rounded up to a whole
// nanosecond (ignoring floating-point noise far below one), saturating at
// INT64_MAX. The one copy-time formula: the planner's TransferNs and the
// simulator's copies (whose rate can change mid-copy) both use it.
// REQUIRES: bytes >= 0, bytes_per_ns > 0.
int64_t CopyNs(double bytes, double bytes_per_ns);

// Rejects values outside physical ranges (rates, sizes, latencies, each with
// its range in the error) and efficiencies outside (0, 1], naming the field.
absl::Status ValidateHardware(const Hardware& hw);
// The same checks for a profile inside another structure: each field named
// `prefix` + its name (e.g. "gpu.h2d_gbps" for a node's GPU), without the
// profile's own label.
absl::Status ValidateHardwareFields(const Hardware& hw,
                                    absl::string_view prefix);

// The built-in profiles, by name.
const std::vector<Hardware>& HardwareCatalog();
std::vector<std::string> HardwareNames();
absl::StatusOr<Hardware> FindHardware(absl::string_view name);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_HARDWARE_H_
