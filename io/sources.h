// Where graphs, hardware and plans come from: built-in workloads with
// overrides, the hardware catalog, or message files.
//
//   WorkloadOverrides o;
//   o.layers = 4;
//   absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
//   absl::StatusOr<Hardware> hw = LoadHardware("a100-80gb-pcie4");
//   absl::StatusOr<Hardware> custom = LoadHardware("my_gpu.txtpb");
#ifndef SLACKSWAP_IO_SOURCES_H_
#define SLACKSWAP_IO_SOURCES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/graph.h"
#include "planner/hardware.h"
#include "planner/plan.h"
#include "planner/transformer.h"

namespace slackswap {

struct WorkloadOverrides {
  std::optional<int64_t> batch;
  std::optional<int64_t> seq;
  std::optional<int64_t> layers;
  std::optional<Attention> attention;
};

// A preset with overrides applied, generated and indexed.
absl::StatusOr<Graph> BuildWorkload(absl::string_view name,
                                    const WorkloadOverrides& overrides);

// A graph file (.pb, .txtpb or .json), converted and validated.
absl::StatusOr<Graph> LoadGraphFile(const std::string& path);

// A catalog name, or a path to a HardwareProfile file (anything ending in
// .pb, .txtpb or .json).
absl::StatusOr<Hardware> LoadHardware(const std::string& name_or_path);

// REQUIRES: g indexed.
absl::StatusOr<Plan> LoadPlanFile(const std::string& path, const Graph& g);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_SOURCES_H_
