#include "io/sources.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "io/convert.h"
#include "io/proto_file.h"

namespace slackswap {

absl::StatusOr<Graph> BuildWorkload(absl::string_view name,
                                    const WorkloadOverrides& overrides) {
  SLACKSWAP_ASSIGN_OR_RETURN(TransformerConfig config, FindPreset(name));
  if (overrides.layers.has_value()) {
    if (*overrides.layers <= 0 || *overrides.layers > 100000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layers must be in [1, 100000], got ", *overrides.layers));
    }
    config.layers = static_cast<int32_t>(*overrides.layers);
  }
  if (overrides.batch.has_value()) config.batch = *overrides.batch;
  if (overrides.seq.has_value()) config.seq = *overrides.seq;
  if (overrides.attention.has_value()) config.attention = *overrides.attention;
  return BuildTransformer(config);
}

absl::StatusOr<Graph> LoadGraphFile(const std::string& path) {
  v1::OperatorGraph pb;
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(path, &pb));
  absl::StatusOr<Graph> g = GraphFromProto(pb);
  if (!g.ok()) {
    return absl::Status(g.status().code(),
                        absl::StrCat(path, ": ", g.status().message()));
  }
  return g;
}

absl::StatusOr<Hardware> LoadHardware(const std::string& name_or_path) {
  if (!FormatForPath(name_or_path).ok()) return FindHardware(name_or_path);
  v1::HardwareProfile pb;
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(name_or_path, &pb));
  absl::StatusOr<Hardware> hw = HardwareFromProto(pb);
  if (!hw.ok()) {
    return absl::Status(
        hw.status().code(),
        absl::StrCat(name_or_path, ": ", hw.status().message()));
  }
  return hw;
}

absl::StatusOr<Plan> LoadPlanFile(const std::string& path, const Graph& g) {
  v1::Plan pb;
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(path, &pb));
  absl::StatusOr<Plan> plan = PlanFromProto(pb, g);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(path, ": ", plan.status().message()));
  }
  return plan;
}

}  // namespace slackswap
