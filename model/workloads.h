// The built-in workloads: transformer training steps named after the public
// models they reproduce (bert-large, gpt2-xl, llama-7b), and building one
// with the overrides a request or the command line may give.
//
//   WorkloadOverrides o;
//   o.layers = 4;
//   absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
//   for (const Workload& w : WorkloadCatalog()) Print(w.name, w.about);
#ifndef SLACKSWAP_MODEL_WORKLOADS_H_
#define SLACKSWAP_MODEL_WORKLOADS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/graph.h"
#include "model/transformer.h"

namespace slackswap {

struct Workload {
  std::string name;
  // One line: the model and the configuration it follows.
  std::string about;
  TransformerConfig config;
};

// Every built-in workload, in a fixed order.
const std::vector<Workload>& WorkloadCatalog();
std::vector<std::string> WorkloadNames();

// The named workload's configuration; NOT_FOUND listing the names.
absl::StatusOr<TransformerConfig> FindWorkload(absl::string_view name);

struct WorkloadOverrides {
  std::optional<int64_t> batch;
  std::optional<int64_t> seq;
  // In [1, kMaxTransformerLayers].
  std::optional<int64_t> layers;
  std::optional<Attention> attention;
  // Ranks in data parallel (TransformerConfig::data_parallel); in
  // [1, kMaxDataParallel].
  std::optional<int64_t> data_parallel;
  // Ranks the parameters are sharded over (TransformerConfig::
  // fully_sharded); in [1, kMaxFullyShardedRanks].
  std::optional<int64_t> fully_sharded;
  // Ranks each layer's matrices are split over (TransformerConfig::
  // tensor_parallel); in [1, kMaxTensorParallel].
  std::optional<int64_t> tensor_parallel;
  // The rank whose step is built (TransformerConfig::rank).
  std::optional<int64_t> rank;
};

// The named workload's configuration with `overrides` applied, validated.
absl::StatusOr<TransformerConfig> WorkloadConfig(
    absl::string_view name, const WorkloadOverrides& overrides);

// The named workload with `overrides` applied, generated and indexed.
absl::StatusOr<Graph> BuildWorkload(absl::string_view name,
                                    const WorkloadOverrides& overrides);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_WORKLOADS_H_
