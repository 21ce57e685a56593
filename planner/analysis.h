// What every policy needs to know about one training step on one GPU: the
// saved activations (the candidates) with their sizes, uses, transfer times
// and recompute costs, the unconstrained peak and the ideal timeline. The
// hidden-transfer capacity ("slack") built on it is planner/internal/slack.h.
//
//   absl::StatusOr<StepAnalysis> a = AnalyzeStep(graph, hw);
//   for (const Candidate& c : a->candidates) {
//     double seconds_per_byte = c.recompute_ns / 1e9 / c.bytes;
//   }
#ifndef SLACKSWAP_PLANNER_ANALYSIS_H_
#define SLACKSWAP_PLANNER_ANALYSIS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/plan.h"

namespace slackswap {

// The int32 fields first, then the int64 ones: 48 bytes, no padding (a
// 10^6-op step has a million candidates, which the searches sort and walk).
struct Candidate {
  int32_t tensor = kNone;
  int32_t producer = kNone;
  int32_t last_fwd_use = kNone;  // kNone: read only in backward
  int32_t first_bwd_use = kNone;
  int64_t bytes = 0;
  // Solo copy times, latency included.
  int64_t d2h_ns = 0;
  int64_t h2d_ns = 0;
  // Rebuilding it when nothing else is dropped (its chain through unsaved
  // forward tensors included).
  int64_t recompute_ns = 0;
};

struct StepAnalysis {
  OpDurations durations;
  // Ideal timeline (no plan, no budget): when each op starts and ends.
  std::vector<int64_t> op_start_ns;
  std::vector<int64_t> op_end_ns;
  // Saved activations in production order.
  std::vector<Candidate> candidates;
  // Index into candidates by tensor, or kNone.
  std::vector<int32_t> candidate_of;
  int64_t unconstrained_peak_bytes = 0;
  // When the forward pass ends on the ideal timeline.
  int64_t forward_ns = 0;
  // The op at whose start the most saved activation bytes are allocated
  // when everything is kept (the first, on a tie), and when it starts on the
  // ideal timeline: where a budget binds hardest.
  int32_t peak_op = kNone;
  int64_t peak_ns = 0;
  // By tensor: whether a plan may recompute it (RecomputableTensors); empty
  // when the graph has no collective, where every tensor may be.
  std::vector<bool> recomputable;
};

// REQUIRES: IndexGraph(g) succeeded, hw validated. `stop`, if set, is
// polled; true stops with CANCELLED.
absl::StatusOr<StepAnalysis> AnalyzeStep(
    const Graph& g, const Hardware& hw,
    const std::function<bool()>& stop = nullptr);

// By tensor, whether every chain that rebuilds it finds what it reads: a
// recipe may read a tensor a collective writes in backward (FSDP's gathered
// parameters, model/transformer.h), which exists only from that collective
// to its last reader; a collective's output made in forward cannot be
// rebuilt at all (sim/schedule.cc refuses both). A saved activation is
// recomputable when its first backward use falls where all it reads, down
// chains through unsaved and recomputable saved tensors, exists. True for
// every saved activation of a graph without collectives. Recomputing only
// recomputable tensors, no chain runs where an input is missing: a tensor
// rebuilt within another's chain reads no later and no longer than that
// one does.
std::vector<bool> RecomputableTensors(const Graph& g);

// Keeps each tensor `plan` recomputes that `a` says cannot be: the plan
// then lowers, and holds those bytes. Returns whether anything changed
// (never, when a.recomputable is empty).
bool KeepUnrecomputable(const StepAnalysis& a, Plan& plan);

// Whether rebuilding something that reads t must rebuild t first: t is a
// forward tensor the plan drops (recomputed, or saved by nobody).
bool NeedsRebuild(const Graph& g, const Plan& plan, int32_t t);

// What rebuilding t reads: its Rebuild recipe's inputs, or its producer's.
// REQUIRES: t is produced by an op.
absl::Span<const int32_t> RebuildInputs(const Graph& g, int32_t t);

// Compute time to rebuild tensor t under `plan`: its producer (or Rebuild
// recipe) plus, down the chain, every input that is not resident then
// (dropped by the plan, or a forward tensor nobody saved); shared links count
// once. Swapped and kept inputs cost nothing here. Linear in the chain;
// saturates at INT64_MAX.
int64_t RecomputeCostNs(const Graph& g, const OpDurations& d, const Plan& plan,
                        int32_t t);

// The same, not counting producer re-runs already in `rebuilt` (ops counted
// for tensors explained before), and adding this chain's to it: over many
// tensors, each op is counted once, so explaining a whole plan is linear.
int64_t RecomputeCostNs(const Graph& g, const OpDurations& d, const Plan& plan,
                        int32_t t, absl::flat_hash_set<int32_t>* rebuilt);

}  // namespace slackswap

#endif  // SLACKSWAP_PLANNER_ANALYSIS_H_
