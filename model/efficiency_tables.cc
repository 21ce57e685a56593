#include "model/efficiency_tables.h"

#include <array>
#include <cstdint>
#include <vector>

#include "model/hardware.h"

namespace slackswap {
namespace {

// FlashAttention-2 forward+backward TFLOP/s at s = 512 ... 16k, batch
// 16k / s, hidden 2048 (Dao-AILab/flash-attention, assets
// flash2_a100_fwd_bwd_benchmark.png and flash2_h100_fwd_bwd_benchmark.png:
// the FlashAttention-2 paper's figures 4 and 7). FLOPs halved when causal,
// as the graph counts them.
constexpr std::array<int64_t, 6> kFa2SeqLens = {512,  1024, 2048,
                                                4096, 8192, 16384};
struct Fa2Row {
  bool causal;
  int32_t head_dim;
  std::array<double, 6> tflops;
};
constexpr std::array<Fa2Row, 4> kFa2A100 = {{
    {false, 64, {132, 153, 162, 171, 175, 176}},
    {false, 128, {150, 173, 187, 196, 201, 203}},
    {true, 64, {88, 119, 140, 156, 165, 171}},
    {true, 128, {99, 133, 155, 173, 182, 189}},
}};
constexpr std::array<Fa2Row, 4> kFa2H100Sxm = {{
    {false, 64, {215, 254, 274, 288, 294, 296}},
    {false, 128, {248, 294, 320, 326, 335, 338}},
    {true, 64, {141, 192, 232, 257, 273, 284}},
    {true, 128, {163, 221, 265, 294, 308, 328}},
}};
constexpr double kA100PeakTflops = 312.0;
constexpr double kH100SxmPeakTflops = 989.0;

std::vector<AttentionEfficiencyCurve> Curves(const std::array<Fa2Row, 4>& rows,
                                             double peak_tflops) {
  std::vector<AttentionEfficiencyCurve> curves;
  for (const Fa2Row& row : rows) {
    AttentionEfficiencyCurve c;
    c.causal = row.causal;
    c.head_dim = row.head_dim;
    const double ratio =
        row.causal ? kFa2FwdBwdRatioCausal : kFa2FwdBwdRatioNonCausal;
    for (size_t i = 0; i < kFa2SeqLens.size(); ++i) {
      const FwdBwdRates r = SplitFwdBwd(row.tflops[i], ratio);
      c.seq_len.push_back(kFa2SeqLens[i]);
      c.fwd.push_back(r.fwd / peak_tflops);
      c.bwd.push_back(r.bwd / peak_tflops);
    }
    curves.push_back(std::move(c));
  }
  return curves;
}

}  // namespace

FwdBwdRates SplitFwdBwd(double both_tflops, double fwd_bwd_ratio) {
  const double bwd = both_tflops * (1.0 / fwd_bwd_ratio + 2.5) / 3.5;
  return {fwd_bwd_ratio * bwd, bwd};
}

std::vector<AttentionEfficiencyCurve> A100AttentionEfficiency() {
  return Curves(kFa2A100, kA100PeakTflops);
}

std::vector<AttentionEfficiencyCurve> H100AttentionEfficiency() {
  return Curves(kFa2H100Sxm, kH100SxmPeakTflops);
}

GemmEfficiencyCurve A100GemmEfficiency() {
  // bf16/fp16 GEMMs by size: n = 2048 192.5 TFLOP/s (a square fp16 matmul
  // on an A800 80GB PCIe, the A100's silicon, mli/transformers-benchmarks#4:
  // no smaller SXM figure is published); 1024 x 10240 x 5120 (size 3,744)
  // 271.2 (the best shape of ml-engineering's MAMF search on an A100 SXM);
  // 8192^3 271.3 (cuBLAS bf16 on A100), of 312.
  return {{2048, 3744, 8192},
          {192.5 / kA100PeakTflops, 271.2 / kA100PeakTflops,
           271.3 / kA100PeakTflops}};
}

GemmEfficiencyCurve H100PcieGemmEfficiency() {
  // Square bf16 matmuls on an H100 PCIe: 4096^3 495.9, 8192^3 492.8 TFLOP/s
  // (zzc0721/torch-performance-test-data#95), of 756.
  constexpr double kPeak = 756.0;
  return {{4096, 8192}, {495.9 / kPeak, 492.8 / kPeak}};
}

GemmEfficiencyCurve H100SxmGemmEfficiency() {
  // Square bf16 matmuls on an H100 SXM: 4096^3 788.7, 8192^3 797.5 TFLOP/s
  // (zzc0721/torch-performance-test-data#79), of 989.
  return {{4096, 8192},
          {788.7 / kH100SxmPeakTflops, 797.5 / kH100SxmPeakTflops}};
}

}  // namespace slackswap
