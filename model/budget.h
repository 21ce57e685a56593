// Activation budgets as users write them: a fraction of the unconstrained
// activation peak ("0.5") or bytes with a unit ("20GB", "512MiB", "1e9B").
//
//   absl::StatusOr<Budget> b = ParseBudget("0.5");
//   int64_t bytes = b->Resolve(graph.index.saved_bytes);
#ifndef SLACKSWAP_MODEL_BUDGET_H_
#define SLACKSWAP_MODEL_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace slackswap {

// The largest fraction of the peak a budget may be: a bare "20" is more
// likely 20 GB than twenty times the peak.
inline constexpr double kMaxBudgetFraction = 10;

struct Budget {
  // Exactly one is set: a fraction of the unconstrained peak, or bytes.
  double fraction = 0;
  int64_t bytes = 0;

  static Budget Fraction(double f) { return {f, 0}; }
  static Budget Bytes(int64_t b) { return {0, b}; }

  // Bytes for a graph whose unconstrained activation peak is `peak`; at
  // least 1 (0 would mean "no limit" to the simulator).
  int64_t Resolve(int64_t peak) const;
};

// Units: B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024);
// a bare number is a fraction, at most kMaxBudgetFraction (above, the error
// suggests a unit). Rejects zero, negatives, NaN and overflow.
absl::StatusOr<Budget> ParseBudget(absl::string_view text);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_BUDGET_H_
