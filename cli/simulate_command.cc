// slackswap simulate (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   [--node NAME [--ranks N]] [--budget B] [--plan FILE] [--json]
//   [--trace FILE] [--svg FILE] [--timeline-points N] [--budget-all-memory]
//   [--expandable-segments] [--server HOST:PORT ...]
//
// With --node the step runs on the node's first N GPUs (all by default),
// the same plan on each; the summary is the slowest rank's, then a table
// of the ranks and one of the shared links.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "cli/print.h"
#include "common/status_macros.h"
#include "io/chrome_trace.h"
#include "io/proto_file.h"
#include "model/graph.h"
#include "model/node.h"

namespace slackswap {

namespace {

absl::Status RunSimulate(const Flags& flags, std::ostream& out) {
  v1::SimulateRequest req;
  SLACKSWAP_ASSIGN_OR_RETURN(*req.mutable_step(), StepFromFlags(flags));
  SLACKSWAP_RETURN_IF_ERROR(SetNodeFromFlags(flags, req.mutable_step()));
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
  req.set_render_svg(flags.Has("svg"));
  req.set_budget_covers_all_memory(flags.Has("budget-all-memory"));
  req.mutable_allocator()->set_expandable_segments(
      flags.Has("expandable-segments"));

  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(v1::SimulateResponse resp, backend->Simulate(req));
  if (flags.Has("svg")) {
    SLACKSWAP_RETURN_IF_ERROR(WriteSvg(*flags.Get("svg"), resp.svg()));
    resp.clear_svg();  // the file has it; keep --json readable
  }
  v1::SimulationResult& r = *resp.mutable_result();
  if (!flags.Has("node")) {
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
  if (!resp.has_node()) {
    // A server from before node simulations drops the unknown node field.
    return absl::FailedPreconditionError(
        "the server answered one GPU: it does not simulate nodes (an older "
        "slackswapd)");
  }
  v1::NodeSimulation& node = *resp.mutable_node();
  const std::string title =
      absl::StrCat(StepGraphName(req.step()), " on ", node.node_name());
  if (flags.Has("trace")) {
    SLACKSWAP_RETURN_IF_ERROR(
        WriteFile(*flags.Get("trace"), ChromeTraceNodeJson(node, title)));
    r.clear_events();
    for (v1::RankResult& rank : *node.mutable_ranks()) {
      rank.mutable_result()->clear_events();
    }
    for (v1::LinkUsage& link : *node.mutable_links()) link.clear_load();
  }
  if (flags.Has("json")) {
    // Without the server's time, the same command prints the same bytes.
    resp.clear_server_seconds();
    out << ToJson(resp);
    return absl::OkStatus();
  }
  // The slowest rank's summary: SimulateResponse.result is that rank's.
  const std::string rank =
      node.slowest_rank() < 0 || node.slowest_rank() >= node.ranks_size()
          ? std::string()
          : absl::StrCat(", slowest rank ", node.slowest_rank(), " (GPU ",
                         node.ranks(node.slowest_rank()).gpu(), ")");
  PrintSimulation(title + rank, r, out);
  PrintNodeSimulation(node, out);
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
                   {"json", "",
                    "print a SimulationResult as JSON (with --node, the "
                    "SimulateResponse)"},
                   {"trace", "FILE",
                    "write a Chrome trace (Perfetto) to FILE (with --node, a "
                    "process per rank and a counter per shared link)"},
                   {"svg", "FILE",
                    "draw the step as an SVG picture in FILE: memory against "
                    "the budget and the device, the streams, the decisions "
                    "(with --node, a panel per rank and per shared link)"},
                   TimelinePointsFlag(),
                   BudgetAllMemoryFlag(),
                   ExpandableSegmentsFlag()},
                  NodeFlags("the same plan on each"),
                  BackendFlags()}),
      .examples = {"slackswap simulate --workload gpt2-xl",
                   "slackswap simulate --workload gpt2-xl --node dgx-a100-80gb "
                   "--ranks 4 --budget 0.5",
                   "slackswap simulate --graph step.pb --plan plan.txtpb "
                   "--budget 0.5 --json"},
      .run = &RunSimulate,
  };
}

}  // namespace slackswap
