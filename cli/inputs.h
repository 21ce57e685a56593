// What subcommands read from their flags into request messages: the step
// (--workload NAME with --batch/--seq/--layers/--attention/--dp/--fsdp
// overrides, or --graph FILE; --hardware NAME|FILE), the budget and the
// policies.
#ifndef SLACKSWAP_CLI_INPUTS_H_
#define SLACKSWAP_CLI_INPUTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "model/budget.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// Flags StepFromFlags reads: --workload with its overrides, --graph,
// --hardware.
const FlagSpecs& StepFlags();
// --budget B, for commands where it is `required` or optional; with
// `device`, B may also be device[:HEADROOM].
FlagSpec BudgetFlag(bool required, bool device = false);
// --expandable-segments and --budget-all-memory.
FlagSpec ExpandableSegmentsFlag();
FlagSpec BudgetAllMemoryFlag();
// --policy NAME[,NAME...]|all.
FlagSpec PolicyFlag();
// --include-bound and --optimal-time-limit SECONDS.
FlagSpecs BoundFlags();
// --timeline-points N.
FlagSpec TimelinePointsFlag();
// --node NAME and --ranks N: the step on a node's first N GPUs, `what`
// describing what runs there.
FlagSpecs NodeFlags(absl::string_view what);
// Sets `step`'s node from --node and --ranks (the node's GPU is the step's:
// a --hardware given too stays, for the core to check against it).
absl::Status SetNodeFromFlags(const Flags& flags, v1::StepSpec* step);

// Exactly one of --workload and --graph; --hardware defaults to
// kDefaultHardware (cli/defaults.h). Files are read here: a graph is sent
// inline to a server, and held for the local core (HoldLocalGraph).
absl::StatusOr<v1::StepSpec> StepFromFlags(const Flags& flags);
// Where GraphFromFlags put the step's graph.
enum class GraphFrom {
  kWorkload,
  // --graph FILE as a message, for a server.
  kInline,
  // --graph FILE converted, for the local core (HoldLocalGraph).
  kHeld,
};
// The graph part of StepFromFlags: the workload into `workload`; or --graph
// FILE into `graph` for a server, or for the local backend converted and
// held (HoldLocalGraph), its key in `held_key`. Either way the file's graph
// is checked here, so errors name the file.
absl::StatusOr<GraphFrom> GraphFromFlags(const Flags& flags,
                                         v1::OperatorGraph* graph,
                                         v1::WorkloadRef* workload,
                                         std::string* held_key);
// Sets the graph oneof of `msg` (a StepSpec or a FitRequest) from
// --workload or --graph, as GraphFromFlags reads them: a held graph by its
// key (graph_sha256).
template <typename Message>
absl::Status SetGraphFromFlags(const Flags& flags, Message* msg) {
  v1::OperatorGraph graph;
  v1::WorkloadRef workload;
  std::string held_key;
  absl::StatusOr<GraphFrom> from =
      GraphFromFlags(flags, &graph, &workload, &held_key);
  if (!from.ok()) return from.status();
  switch (*from) {
    case GraphFrom::kWorkload:
      *msg->mutable_workload() = std::move(workload);
      break;
    case GraphFrom::kInline:
      *msg->mutable_graph_inline() = std::move(graph);
      break;
    case GraphFrom::kHeld:
      msg->set_graph_sha256(std::move(held_key));
      break;
  }
  return absl::OkStatus();
}
// --hardware's one value: a catalog name, or a profile file read here.
absl::Status HardwareFromFlag(const std::string& value,
                              v1::HardwareProfile* inline_hw, std::string* name,
                              bool* is_inline);
absl::StatusOr<v1::WorkloadRef> WorkloadFromFlags(const Flags& flags);

// --budget B: a fraction (0.5) or bytes with a unit (20GB).
absl::StatusOr<Budget> BudgetFromFlags(const Flags& flags);

// --budget device[:HEADROOM]: the headroom in bytes (0 without one), or
// nullopt when the budget is not the device. HEADROOM is bytes with a unit.
absl::StatusOr<std::optional<int64_t>> DeviceBudgetFromFlags(
    const Flags& flags);

// Sets `req`'s budget_bytes or budget_fraction (a PlanRequest or
// SimulateRequest) from --budget, as BudgetFromFlags reads it; a
// PlanRequest's budget_device from --budget device[:HEADROOM].
template <typename Request>
absl::Status SetBudgetFromFlags(const Flags& flags, Request* req) {
  absl::StatusOr<std::optional<int64_t>> device = DeviceBudgetFromFlags(flags);
  if (!device.ok()) return device.status();
  if (device->has_value()) {
    if constexpr (std::is_same_v<Request, v1::PlanRequest>) {
      req->mutable_budget_device()->set_headroom_bytes(**device);
      return absl::OkStatus();
    } else {
      return absl::InvalidArgumentError(
          "--budget device is for plan; simulate reports whether the step "
          "fits the device by itself");
    }
  }
  absl::StatusOr<Budget> budget = BudgetFromFlags(flags);
  if (!budget.ok()) {
    if constexpr (std::is_same_v<Request, v1::PlanRequest>) {
      return absl::Status(budget.status().code(),
                          std::string(budget.status().message()) +
                              "; or device[:HEADROOM] for the GPU's memory");
    }
    return budget.status();
  }
  if (budget->bytes > 0) {
    req->set_budget_bytes(budget->bytes);
  } else {
    req->set_budget_fraction(budget->fraction);
  }
  return absl::OkStatus();
}

// --policy NAME[,NAME...]|all: adds the names to `out` (all: every policy);
// none without the flag, which the backend reads as the default set.
void AddPolicies(const Flags& flags,
                 google::protobuf::RepeatedPtrField<std::string>* out);

// Sets a PlanRequest's or SweepRequest's include_bound and
// optimal_time_limit_s from --include-bound and --optimal-time-limit.
template <typename Request>
absl::Status SetBoundFlags(const Flags& flags, Request* req) {
  req->set_include_bound(flags.Has("include-bound"));
  absl::StatusOr<std::optional<double>> limit =
      flags.GetDouble("optimal-time-limit");
  if (!limit.ok()) return limit.status();
  if (limit->has_value()) req->set_optimal_time_limit_s(**limit);
  return absl::OkStatus();
}

// --timeline-points N, in [1, CoreLimits::max_timeline_points]; nullopt when
// not given.
absl::StatusOr<std::optional<int32_t>> TimelinePointsFromFlags(
    const Flags& flags);

// The most timeline points a request may ask for (the core's limit).
int32_t MaxTimelinePoints();

// The step's graph name (the workload's or the inline graph's) and its
// hardware name (on a node without hardware, the node's GPU); a
// simulation's title is "GRAPH on HARDWARE" (StepTitle).
std::string StepGraphName(const v1::StepSpec& step);
std::string StepHardwareName(const v1::StepSpec& step);
std::string StepTitle(const v1::StepSpec& step);

// Writes a response's picture (PlanResponse.svg, SimulateResponse.svg) to
// `path`. FAILED_PRECONDITION, writing nothing, when it is empty: a server
// that ignored render_svg (one from before pictures), or no result to draw.
absl::Status WriteSvg(const std::string& path, const std::string& svg);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_INPUTS_H_
