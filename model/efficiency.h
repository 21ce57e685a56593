// Kernel efficiencies that follow shape: fused attention's against sequence
// length, head dimension, mask and phase, and a GEMM's against its size,
// read from a hardware profile's tables and interpolated. docs/FIDELITY.md
// gives the published measurements the catalog's tables come from.
//
//   KernelShape s{.m = 2048, .n = 2048, .k = 128, .causal = true};
//   absl::StatusOr<double> e = AttentionEfficiency(hw, s, Phase::kForward);
//   double g = GemmEfficiency(hw, KernelShape{.m = 8192, .n = 4096,
//                                             .k = 4096});
//
// Between two points a value is linear in log2 of the coordinate; outside a
// table it is clamped to the nearest point (a sequence longer than the
// longest measured gets the longest's efficiency). Head dimensions between
// two curves interpolate the same way, and outside them clamp.
#ifndef SLACKSWAP_MODEL_EFFICIENCY_H_
#define SLACKSWAP_MODEL_EFFICIENCY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/graph.h"
#include "model/hardware.h"

namespace slackswap {

// Most curves a profile may carry, and most points on one: a table is a
// few published figures, not a trace.
inline constexpr int32_t kMaxEfficiencyCurves = 64;
inline constexpr int32_t kMaxEfficiencyPoints = 64;

// `ys` at `x`, linear in log2(x) between points, clamped outside.
// REQUIRES: xs strictly increasing, > 0, the same length as ys, not empty.
double InterpolateLog2(const std::vector<int64_t>& xs,
                       const std::vector<double>& ys, double x);

// Fused attention's efficiency for `shape` in `phase`: the profile's
// constant when it has no attention table or the shape is unknown.
// Fails, naming the field, when the table has no curve for the shape's mask.
// REQUIRES: hw's tables validated (ValidateEfficiencyTables).
absl::StatusOr<double> AttentionEfficiency(const Hardware& hw,
                                           const KernelShape& shape,
                                           Phase phase);

// A GEMM's efficiency for `shape`: the profile's constant when it has no
// GEMM table or the shape is unknown.
// REQUIRES: hw's tables validated (ValidateEfficiencyTables).
double GemmEfficiency(const Hardware& hw, const KernelShape& shape);

// Refuses tables that are empty, unsorted, of unequal lengths, too large,
// with a repeated curve, or with a value outside (0, 1], naming the field
// after `head` (e.g. "attention_efficiency[1].seq_len[2]").
absl::Status ValidateEfficiencyTables(const Hardware& hw,
                                      absl::string_view head);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_EFFICIENCY_H_
