// What subcommands read from their flags into request messages: the step
// (--workload NAME with --batch/--seq/--layers/--attention overrides, or
// --graph FILE; --hardware NAME|FILE), the budget and the policies.
#ifndef SLACKSWAP_CLI_INPUTS_H_
#define SLACKSWAP_CLI_INPUTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "model/budget.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// Flags StepFromFlags reads: --workload with its overrides, --graph,
// --hardware.
const FlagSpecs& StepFlags();
// --budget B, for commands where it is `required` or optional.
FlagSpec BudgetFlag(bool required);
// --policy NAME[,NAME...]|all.
FlagSpec PolicyFlag();
// --include-bound and --optimal-time-limit SECONDS.
FlagSpecs BoundFlags();
// --timeline-points N.
FlagSpec TimelinePointsFlag();

// Exactly one of --workload and --graph; --hardware defaults to
// a100-80gb-pcie4. Files are read here and sent inline.
absl::StatusOr<v1::StepSpec> StepFromFlags(const Flags& flags);
absl::StatusOr<v1::WorkloadRef> WorkloadFromFlags(const Flags& flags);

// --budget B: a fraction (0.5) or bytes with a unit (20GB).
absl::StatusOr<Budget> BudgetFromFlags(const Flags& flags);

// Sets `req`'s budget_bytes or budget_fraction (a PlanRequest or
// SimulateRequest) from --budget, as BudgetFromFlags reads it.
template <typename Request>
absl::Status SetBudgetFromFlags(const Flags& flags, Request* req) {
  absl::StatusOr<Budget> budget = BudgetFromFlags(flags);
  if (!budget.ok()) return budget.status();
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
// hardware name; a simulation's title is "GRAPH on HARDWARE" (StepTitle).
std::string StepGraphName(const v1::StepSpec& step);
std::string StepHardwareName(const v1::StepSpec& step);
std::string StepTitle(const v1::StepSpec& step);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_INPUTS_H_
