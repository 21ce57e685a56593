// slackswap simulate (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   [--budget B] [--plan FILE] [--json] [--trace FILE] [--timeline-points N]
//   [--budget-all-memory] [--expandable-segments] [--server HOST:PORT ...]
#include <ostream>

#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "cli/print.h"
#include "common/status_macros.h"
#include "io/chrome_trace.h"
#include "io/proto_file.h"

namespace slackswap {

namespace {

absl::Status RunSimulate(const Flags& flags, std::ostream& out) {
  v1::SimulateRequest req;
  SLACKSWAP_ASSIGN_OR_RETURN(*req.mutable_step(), StepFromFlags(flags));
  if (flags.Has("plan")) {
    SLACKSWAP_RETURN_IF_ERROR(
        ReadProtoFile(*flags.Get("plan"), req.mutable_plan()));
  }
  if (flags.Has("budget")) {
    SLACKSWAP_RETURN_IF_ERROR(SetBudgetFromFlags(flags, &req));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int32_t> points,
                             TimelinePointsFromFlags(flags));
  // The whole timeline by default for --json and --trace, which show what
  // happened; the text summary prints none, so asks for none.
  if (points.has_value()) {
    req.set_timeline_points(*points);
  } else if (flags.Has("json") || flags.Has("trace")) {
    req.set_timeline_points(MaxTimelinePoints());
  }
  req.set_include_events(flags.Has("trace"));
  req.set_budget_covers_all_memory(flags.Has("budget-all-memory"));
  req.mutable_allocator()->set_expandable_segments(
      flags.Has("expandable-segments"));

  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(v1::SimulateResponse resp, backend->Simulate(req));
  v1::SimulationResult& r = *resp.mutable_result();
  const std::string title = StepTitle(req.step());
  if (flags.Has("trace")) {
    SLACKSWAP_RETURN_IF_ERROR(
        WriteFile(*flags.Get("trace"), ChromeTraceJson(r, title)));
    r.clear_events();  // the trace has them; keep --json readable
  }
  if (flags.Has("json")) {
    out << ToJson(r);
  } else {
    PrintSimulation(title, r, out);
  }
  return absl::OkStatus();
}

}  // namespace

Command SimulateCommand() {
  return {
      .name = "simulate",
      .summary =
          "simulate one training step under a plan (default: keep "
          "everything)",
      .synopsis = "(--workload NAME | --graph FILE) [flags]",
      .flags =
          Concat({StepFlags(),
                  {BudgetFlag(/*required=*/false),
                   {"plan", "FILE", "a Plan file (.pb, .txtpb or .json)",
                    "keep everything"},
                   {"json", "", "print a SimulationResult as JSON"},
                   {"trace", "FILE", "write a Chrome trace (Perfetto) to FILE"},
                   TimelinePointsFlag(),
                   BudgetAllMemoryFlag(),
                   ExpandableSegmentsFlag()},
                  BackendFlags()}),
      .examples = {"slackswap simulate --workload gpt2-xl",
                   "slackswap simulate --graph step.pb --plan plan.txtpb "
                   "--budget 0.5 --json"},
      .run = &RunSimulate,
  };
}

}  // namespace slackswap
