// The frozen cost model: op durations from FLOPs and HBM bytes on a hardware
// profile.
//
//   duration = max(flops / (peak * eff), bytes / (hbm * hbm_eff))
//              + kernels * kernel_launch
//
// eff is the GEMM efficiency for GEMMs (x kBatchedMatmulScale for batched
// attention GEMMs) and the attention efficiency for fused attention, each
// from the profile's tables at the op's shape, or its constants
// (model/efficiency.h); other ops are memory bound. A measured duration_ns
// replaces the formula.
//
//   absl::StatusOr<OpDurations> d = ComputeDurations(graph, hw);
//   int64_t t = d->op_ns[3];
#ifndef SLACKSWAP_MODEL_COST_MODEL_H_
#define SLACKSWAP_MODEL_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph.h"
#include "model/hardware.h"

namespace slackswap {

inline constexpr double kBatchedMatmulScale = 0.8;

// Duration of one cost on `hw` when run in `phase`, in nanoseconds.
// REQUIRES: cost and hw validated. Fails if the result overflows int64.
absl::StatusOr<int64_t> CostNs(const OpCost& cost, Phase phase,
                               const Hardware& hw);

struct OpDurations {
  std::vector<int64_t> op_ns;       // per op
  std::vector<int64_t> rebuild_ns;  // per tensor with a Rebuild, else 0
  int64_t total_ns = 0;             // sum of op_ns: the ideal step time
};

// REQUIRES: IndexGraph(g) succeeded. Fails, naming the op, when a duration or
// the step total overflows int64. A collective takes no compute time (its
// cost, if any, is ignored): the node simulator times it on its links.
absl::StatusOr<OpDurations> ComputeDurations(const Graph& g,
                                             const Hardware& hw);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_COST_MODEL_H_
