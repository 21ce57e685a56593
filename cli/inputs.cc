#include "cli/inputs.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "planner/budget.h"

namespace slackswap {

const std::set<std::string>& StepFlags() {
  static const std::set<std::string> flags = {
      "workload", "graph", "batch", "seq", "layers", "attention", "hardware"};
  return flags;
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

absl::Status BudgetFromFlags(const Flags& flags,
                             const std::function<void(int64_t)>& set_bytes,
                             const std::function<void(double)>& set_fraction) {
  SLACKSWAP_ASSIGN_OR_RETURN(Budget budget,
                             ParseBudget(flags.Get("budget").value_or("")));
  if (budget.bytes > 0) {
    set_bytes(budget.bytes);
  } else {
    set_fraction(budget.fraction);
  }
  return absl::OkStatus();
}

std::set<std::string> Join(std::set<std::string> a,
                           const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

}  // namespace slackswap
