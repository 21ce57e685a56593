#include "cli/inputs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "core/planning_core.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/hardware.h"
#include "model/workloads.h"
#include "planner/policy.h"

namespace slackswap {

const FlagSpecs& StepFlags() {
  static const FlagSpecs* const flags = new FlagSpecs{
      {"workload", "NAME",
       absl::StrCat("a built-in workload (",
                    absl::StrJoin(WorkloadNames(), ", "), "); or --graph")},
      {"graph", "FILE", "an OperatorGraph file (.pb, .txtpb or .json)"},
      {"batch", "N", "workload override: batch size"},
      {"seq", "N", "workload override: sequence length"},
      {"layers", "N", "workload override: number of layers"},
      {"attention", "flash|unfused", "workload override: attention kernels"},
      {"hardware", "NAME|FILE",
       absl::StrCat("a catalog profile (", absl::StrJoin(HardwareNames(), ", "),
                    ") or a HardwareProfile file"),
       "a100-80gb-pcie4"},
  };
  return *flags;
}

FlagSpec BudgetFlag(bool required) {
  return {"budget", "B",
          absl::StrCat("activation budget: a fraction of the unconstrained "
                       "peak (0.5, at most ",
                       kMaxBudgetFraction,
                       ") or bytes with a unit (20GB, "
                       "512MiB)"),
          required ? "" : "none"};
}

FlagSpec PolicyFlag() {
  return {"policy", "NAME[,NAME...]|all",
          absl::StrCat("policies: ", absl::StrJoin(PolicyNames(), ", "),
                       "; all is every one"),
          absl::StrJoin(DefaultPolicyNames(), ",")};
}

FlagSpecs BoundFlags() {
  return {{"include-bound", "",
           "also compute the bound no plan can beat (an LP), and each "
           "policy's gap to it"},
          {"optimal-time-limit", "SECONDS",
           "the optimal policy's solver time limit (at most 600)", "2"}};
}

FlagSpec TimelinePointsFlag() {
  return {"timeline-points", "N",
          absl::StrCat("downsample the memory timeline to N points (at most ",
                       MaxTimelinePoints(), ")")};
}

absl::StatusOr<v1::WorkloadRef> WorkloadFromFlags(const Flags& flags) {
  v1::WorkloadRef ref;
  ref.set_name(flags.Get("workload").value_or(""));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> batch,
                             flags.GetInt("batch"));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> seq, flags.GetInt("seq"));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> layers,
                             flags.GetInt("layers"));
  if (batch.has_value()) ref.set_batch(*batch);
  if (seq.has_value()) ref.set_seq(*seq);
  if (layers.has_value()) ref.set_layers(*layers);
  ref.set_attention(flags.Get("attention").value_or(""));
  return ref;
}

absl::StatusOr<v1::StepSpec> StepFromFlags(const Flags& flags) {
  v1::StepSpec step;
  if (flags.Has("workload") == flags.Has("graph")) {
    return absl::InvalidArgumentError(
        "give exactly one of --workload NAME and --graph FILE");
  }
  if (flags.Has("graph")) {
    for (const char* name : {"batch", "seq", "layers", "attention"}) {
      if (flags.Has(name)) {
        return absl::InvalidArgumentError(
            std::string("--") + name + " applies to --workload, not --graph");
      }
    }
    const std::string path = *flags.Get("graph");
    SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(path, step.mutable_graph_inline()));
    // Check it here too, so errors name the file, local or remote.
    absl::Status valid = GraphFromProto(step.graph_inline()).status();
    if (!valid.ok()) {
      return absl::Status(valid.code(),
                          absl::StrCat(path, ": ", valid.message()));
    }
  } else {
    SLACKSWAP_ASSIGN_OR_RETURN(*step.mutable_workload(),
                               WorkloadFromFlags(flags));
  }
  const std::string hardware =
      flags.Get("hardware").value_or("a100-80gb-pcie4");
  if (FormatForPath(hardware).ok()) {
    SLACKSWAP_RETURN_IF_ERROR(
        ReadProtoFile(hardware, step.mutable_hardware_inline()));
    absl::Status valid = HardwareFromProto(step.hardware_inline()).status();
    if (!valid.ok()) {
      return absl::Status(valid.code(),
                          absl::StrCat(hardware, ": ", valid.message()));
    }
  } else {
    step.set_hardware_name(hardware);
  }
  return step;
}

absl::StatusOr<Budget> BudgetFromFlags(const Flags& flags) {
  return ParseBudget(flags.Get("budget").value_or(""));
}

void AddPolicies(const Flags& flags,
                 google::protobuf::RepeatedPtrField<std::string>* out) {
  if (!flags.Has("policy")) return;  // empty: the default set
  const std::string spec = *flags.Get("policy");
  if (spec == "all") {
    for (const std::string& name : PolicyNames()) out->Add(std::string(name));
    return;
  }
  for (absl::string_view name : absl::StrSplit(spec, ',')) {
    out->Add(std::string(name));
  }
}

int32_t MaxTimelinePoints() { return CoreLimits{}.max_timeline_points; }

absl::StatusOr<std::optional<int32_t>> TimelinePointsFromFlags(
    const Flags& flags) {
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> points,
                             flags.GetInt("timeline-points"));
  if (!points.has_value()) return std::nullopt;
  if (*points < 1 || *points > MaxTimelinePoints()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeline-points must be in [1, ", MaxTimelinePoints(), "]"));
  }
  return static_cast<int32_t>(*points);
}

std::string StepGraphName(const v1::StepSpec& step) {
  return step.has_workload() ? step.workload().name()
                             : step.graph_inline().name();
}

std::string StepHardwareName(const v1::StepSpec& step) {
  return step.has_hardware_inline() ? step.hardware_inline().name()
                                    : step.hardware_name();
}

std::string StepTitle(const v1::StepSpec& step) {
  return StepGraphName(step) + " on " + StepHardwareName(step);
}

}  // namespace slackswap
