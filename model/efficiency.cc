#include "model/efficiency.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/format.h"

namespace slackswap {
namespace {

// Sequence lengths and sizes a table may name: past any kernel's dimension,
// and small enough that log2 and the cube edge stay exact.
constexpr int64_t kMaxTableCoordinate = int64_t{1} << 40;
constexpr int32_t kMaxHeadDim = 1 << 16;

absl::Status CheckCoordinates(const std::vector<int64_t>& xs,
                              absl::string_view head, absl::string_view field) {
  if (xs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(head, field, " is empty; give at least one point"));
  }
  if (xs.size() > static_cast<size_t>(kMaxEfficiencyPoints)) {
    return absl::InvalidArgumentError(
        absl::StrCat(head, field, " has ", xs.size(), " points; at most ",
                     kMaxEfficiencyPoints));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] <= 0 || xs[i] > kMaxTableCoordinate) {
      return absl::InvalidArgumentError(
          absl::StrCat(head, field, "[", i, "] must be in [1, ",
                       kMaxTableCoordinate, "], got ", xs[i]));
    }
    if (i > 0 && xs[i] <= xs[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(head, field, " must be strictly increasing: [", i,
                       "] is ", xs[i], " after ", xs[i - 1]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckValues(const std::vector<double>& ys, size_t want,
                         absl::string_view head, absl::string_view field,
                         absl::string_view coordinates) {
  if (ys.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(head, field, " has ", ys.size(), " values for ", want,
                     " points of ", coordinates));
  }
  for (size_t i = 0; i < ys.size(); ++i) {
    if (!(ys[i] > 0 && ys[i] <= 1)) {  // NaN fails too
      return absl::InvalidArgumentError(absl::StrCat(
          head, field, "[", i, "] must be in (0, 1], got ", ys[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double InterpolateLog2(const std::vector<int64_t>& xs,
                       const std::vector<double>& ys, double x) {
  if (x <= static_cast<double>(xs.front())) return ys.front();
  if (x >= static_cast<double>(xs.back())) return ys.back();
  const size_t hi =
      static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x,
                                           [](double v, int64_t p) {
                                             return v < static_cast<double>(p);
                                           }) -
                          xs.begin());
  const size_t lo = hi - 1;
  const double x0 = std::log2(static_cast<double>(xs[lo]));
  const double x1 = std::log2(static_cast<double>(xs[hi]));
  const double t = (std::log2(x) - x0) / (x1 - x0);
  return ys[lo] + t * (ys[hi] - ys[lo]);
}

absl::StatusOr<double> AttentionEfficiency(const Hardware& hw,
                                           const KernelShape& shape,
                                           Phase phase) {
  const bool bwd = phase == Phase::kBackward;
  if (hw.attention_efficiency.empty() || !shape.known()) {
    return bwd ? hw.attn_efficiency_bwd : hw.attn_efficiency_fwd;
  }
  // The curves of this mask nearest the head dimension from below and above.
  const AttentionEfficiencyCurve* below = nullptr;
  const AttentionEfficiencyCurve* above = nullptr;
  for (const AttentionEfficiencyCurve& c : hw.attention_efficiency) {
    if (c.causal != shape.causal) continue;
    if (c.head_dim <= shape.k &&
        (below == nullptr || c.head_dim > below->head_dim)) {
      below = &c;
    }
    if (c.head_dim >= shape.k &&
        (above == nullptr || c.head_dim < above->head_dim)) {
      above = &c;
    }
  }
  if (below == nullptr && above == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hardware ", QuoteInput(hw.name), ": attention_efficiency has no ",
        shape.causal ? "causal" : "non-causal", " curve, and the graph has ",
        shape.causal ? "causal" : "non-causal", " attention (head dimension ",
        shape.k, ", ", shape.n, " keys); add one"));
  }
  if (below == nullptr) below = above;
  if (above == nullptr) above = below;
  const double seq = static_cast<double>(shape.n);
  auto at = [&](const AttentionEfficiencyCurve& c) {
    return InterpolateLog2(c.seq_len, bwd ? c.bwd : c.fwd, seq);
  };
  const double lo = at(*below);
  if (below == above) return lo;
  const double hi = at(*above);
  const double t = (std::log2(static_cast<double>(shape.k)) -
                    std::log2(static_cast<double>(below->head_dim))) /
                   (std::log2(static_cast<double>(above->head_dim)) -
                    std::log2(static_cast<double>(below->head_dim)));
  return lo + t * (hi - lo);
}

double GemmEfficiency(const Hardware& hw, const KernelShape& shape) {
  if (hw.gemm_efficiency.empty() || !shape.known()) {
    return hw.matmul_efficiency;
  }
  const double size =
      std::cbrt(static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                static_cast<double>(shape.k));
  return InterpolateLog2(hw.gemm_efficiency.size, hw.gemm_efficiency.efficiency,
                         size);
}

absl::Status ValidateEfficiencyTables(const Hardware& hw,
                                      absl::string_view head) {
  const auto& curves = hw.attention_efficiency;
  if (curves.size() > static_cast<size_t>(kMaxEfficiencyCurves)) {
    return absl::InvalidArgumentError(
        absl::StrCat(head, "attention_efficiency has ", curves.size(),
                     " curves; at most ", kMaxEfficiencyCurves));
  }
  std::set<std::pair<bool, int32_t>> seen;
  for (size_t i = 0; i < curves.size(); ++i) {
    const AttentionEfficiencyCurve& c = curves[i];
    const std::string field = absl::StrCat("attention_efficiency[", i, "].");
    if (c.head_dim <= 0 || c.head_dim > kMaxHeadDim) {
      return absl::InvalidArgumentError(
          absl::StrCat(head, field, "head_dim must be in [1, ", kMaxHeadDim,
                       "], got ", c.head_dim));
    }
    if (!seen.insert({c.causal, c.head_dim}).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          head, field, " repeats the ", c.causal ? "causal" : "non-causal",
          " curve for head_dim ", c.head_dim, "; give each once"));
    }
    absl::Status s =
        CheckCoordinates(c.seq_len, head, absl::StrCat(field, "seq_len"));
    if (!s.ok()) return s;
    s = CheckValues(c.fwd, c.seq_len.size(), head, absl::StrCat(field, "fwd"),
                    "seq_len");
    if (!s.ok()) return s;
    s = CheckValues(c.bwd, c.seq_len.size(), head, absl::StrCat(field, "bwd"),
                    "seq_len");
    if (!s.ok()) return s;
  }
  const GemmEfficiencyCurve& gemm = hw.gemm_efficiency;
  if (gemm.empty()) return absl::OkStatus();
  absl::Status s = CheckCoordinates(gemm.size, head, "gemm_efficiency.size");
  if (!s.ok()) return s;
  return CheckValues(gemm.efficiency, gemm.size.size(), head,
                     "gemm_efficiency.efficiency", "size");
}

}  // namespace slackswap
