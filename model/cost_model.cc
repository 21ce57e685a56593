#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "model/efficiency.h"

namespace slackswap {
namespace {

constexpr int64_t kMaxNs = std::numeric_limits<int64_t>::max();
// Doubles at or above this do not convert to int64 safely (2^63 rounded).
constexpr double kMaxNsDouble = 9.2e18;

// FLOP/s efficiency for the op's kind and shape, or 0 for memory-bound ops.
absl::StatusOr<double> ComputeEfficiency(const OpCost& cost, Phase phase,
                                         const Hardware& hw) {
  switch (cost.kind) {
    case OpKind::kMatmul:
      return GemmEfficiency(hw, cost.shape);
    case OpKind::kBatchedMatmul:
      return GemmEfficiency(hw, cost.shape) * kBatchedMatmulScale;
    case OpKind::kFlashAttention:
      return AttentionEfficiency(hw, cost.shape, phase);
    case OpKind::kMemoryBound:
      return 0.0;
  }
  return 0.0;
}

}  // namespace

absl::StatusOr<int64_t> CostNs(const OpCost& cost, Phase phase,
                               const Hardware& hw) {
  if (cost.duration_ns.has_value()) {
    if (*cost.duration_ns < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "measured duration_ns must be >= 0, got ", *cost.duration_ns));
    }
    return *cost.duration_ns;
  }
  if (!std::isfinite(cost.flops) || cost.flops < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("flops must be finite and >= 0, got ", cost.flops));
  }
  if (cost.bytes_accessed < 0 || cost.kernels < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes_accessed and kernels must be >= 0, got ",
                     cost.bytes_accessed, " and ", cost.kernels));
  }
  // GB/s = bytes per ns; TFLOP/s = 1e3 FLOPs per ns.
  double ns = static_cast<double>(cost.bytes_accessed) /
              (hw.hbm_gbps * hw.hbm_efficiency);
  absl::StatusOr<double> eff = ComputeEfficiency(cost, phase, hw);
  if (!eff.ok()) return eff.status();
  if (*eff > 0) {
    ns = std::max(ns, cost.flops / (hw.peak_tflops_bf16 * 1e3 * *eff));
  }
  // Round up to whole nanoseconds, ignoring floating-point noise far below
  // a nanosecond (2039 GB/s * 0.85 is 1733.1499999999999 in binary).
  ns = std::ceil(ns * (1.0 - 1e-12));
  const double launch = static_cast<double>(cost.kernels) *
                        static_cast<double>(hw.kernel_launch_ns);
  const double total = ns + launch;
  if (!std::isfinite(total) || total >= kMaxNsDouble) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration overflows int64 nanoseconds (", total,
                     " ns from ", cost.flops, " FLOPs, ", cost.bytes_accessed,
                     " bytes, ", cost.kernels, " kernels)"));
  }
  return static_cast<int64_t>(ns) +
         static_cast<int64_t>(cost.kernels) * hw.kernel_launch_ns;
}

absl::StatusOr<OpDurations> ComputeDurations(const Graph& g,
                                             const Hardware& hw) {
  OpDurations d;
  d.op_ns.resize(g.ops.size(), 0);
  d.rebuild_ns.resize(g.tensors.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    // A collective runs beside compute, on the communication stream, for as
    // long as the node's links take (sim/node_simulator.h): no compute time.
    if (op.collective.has_value()) continue;
    absl::StatusOr<int64_t> ns = CostNs(op.cost, op.phase, hw);
    if (!ns.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          g.OpLabel(static_cast<int32_t>(i)), ": ", ns.status().message()));
    }
    if (*ns > kMaxNs - d.total_ns) {
      return absl::InvalidArgumentError(
          absl::StrCat(g.OpLabel(static_cast<int32_t>(i)),
                       ": step time overflows int64 nanoseconds"));
    }
    d.op_ns[i] = *ns;
    d.total_ns += *ns;
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Tensor& tensor = g.tensors[t];
    if (!tensor.rebuild.has_value()) continue;
    absl::StatusOr<int64_t> ns =
        CostNs(tensor.rebuild->cost, Phase::kForward, hw);
    if (!ns.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(g.TensorLabel(static_cast<int32_t>(t)),
                       " rebuild: ", ns.status().message()));
    }
    d.rebuild_ns[t] = *ns;
  }
  return d;
}

}  // namespace slackswap
