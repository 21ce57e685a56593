// The hardware catalog's efficiency tables, each built from published
// measurements (docs/FIDELITY.md, "Where the tables come from", names the
// source of every figure here).
//
//   hw.attention_efficiency = A100AttentionEfficiency();
//   hw.gemm_efficiency = A100GemmEfficiency();
#ifndef SLACKSWAP_MODEL_EFFICIENCY_TABLES_H_
#define SLACKSWAP_MODEL_EFFICIENCY_TABLES_H_

#include <vector>

#include "model/hardware.h"

namespace slackswap {

// The forward:backward rate ratios of FlashAttention-2 measured on H100
// (hd 128, s 8192: 369.9 / 290.6 TFLOP/s non-causal, 284.1 / 287.1 causal),
// the only published split; A100's published figures are forward and
// backward together, and this ratio divides them.
inline constexpr double kFa2FwdBwdRatioNonCausal = 369.9 / 290.6;
inline constexpr double kFa2FwdBwdRatioCausal = 284.1 / 287.1;

// Forward and backward rates from a forward+backward rate (FLOPs counted
// as forward x 3.5) and the forward:backward rate ratio:
//   3.5 F / r_both = F / r_fwd + 2.5 F / r_bwd,  r_fwd = ratio * r_bwd.
struct FwdBwdRates {
  double fwd;
  double bwd;
};
FwdBwdRates SplitFwdBwd(double both_tflops, double fwd_bwd_ratio);

// FlashAttention-2 on A100-80GB SXM4 (fwd+bwd, hd 64 and 128, causal or
// not, s 512 to 16k), as fractions of 312 TFLOP/s.
std::vector<AttentionEfficiencyCurve> A100AttentionEfficiency();
// FlashAttention-2 on H100-80GB SXM5, as fractions of 989 TFLOP/s; the
// fractions also serve the H100 PCIe card, which has no published figure.
std::vector<AttentionEfficiencyCurve> H100AttentionEfficiency();

// Dense bf16 GEMMs by size: A100 (2048, 3744, 8192), H100 PCIe (4096,
// 8192) and H100 SXM (4096, 8192).
GemmEfficiencyCurve A100GemmEfficiency();
GemmEfficiencyCurve H100PcieGemmEfficiency();
GemmEfficiencyCurve H100SxmGemmEfficiency();

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_EFFICIENCY_TABLES_H_
