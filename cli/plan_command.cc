// slackswap plan (--workload NAME | --graph FILE) [--hardware NAME|FILE]
//   --budget B|device[:HEADROOM] [--budget-all-memory]
//   [--expandable-segments] [--policy NAME[,NAME...]|all] [--out PLAN_FILE]
//   [--json] [--timeline-points N] [--reasons] [--svg FILE]
//   [--node NAME [--ranks N]] [--server HOST:PORT ...]
//
// --svg draws the chosen policy's result (the fastest feasible one; the
// fitting one with --budget device), rendered by the core (render_svg).
// With --node every policy plans for the node's ranks (one plan, each
// rank's budget) and each plan is judged by simulating them all.
#include <ostream>

#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "cli/print.h"
#include "common/status_macros.h"
#include "io/proto_file.h"

namespace slackswap {

namespace {

absl::Status RunPlan(const Flags& flags, std::ostream& out) {
  if (!flags.Has("budget")) {
    return absl::InvalidArgumentError(
        "plan needs --budget (a fraction such as 0.5, bytes such as 20GB, or "
        "device)");
  }
  v1::PlanRequest req;
  SLACKSWAP_ASSIGN_OR_RETURN(*req.mutable_step(), StepFromFlags(flags));
  SLACKSWAP_RETURN_IF_ERROR(SetNodeFromFlags(flags, req.mutable_step()));
  SLACKSWAP_RETURN_IF_ERROR(SetBudgetFromFlags(flags, &req));
  req.set_budget_covers_all_memory(flags.Has("budget-all-memory"));
  req.mutable_allocator()->set_expandable_segments(
      flags.Has("expandable-segments"));
  AddPolicies(flags, req.mutable_policies());
  SLACKSWAP_RETURN_IF_ERROR(SetBoundFlags(flags, &req));
  if (flags.Has("out") && req.policies_size() != 1) {
    return absl::InvalidArgumentError("--out needs exactly one --policy");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int32_t> points,
                             TimelinePointsFromFlags(flags));
  req.set_timeline_points(points.value_or(0));
  // Plans written to a file keep their reasons.
  req.set_include_reasons(flags.Has("reasons") || flags.Has("out") ||
                          flags.Has("json"));
  req.set_render_svg(flags.Has("svg"));

  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(v1::PlanResponse resp, backend->Plan(req));
  if (flags.Has("out")) {
    SLACKSWAP_RETURN_IF_ERROR(
        WriteProtoFile(*flags.Get("out"), resp.report().results(0).plan()));
  }
  if (flags.Has("svg")) {
    SLACKSWAP_RETURN_IF_ERROR(WriteSvg(*flags.Get("svg"), resp.svg()));
  }
  if (flags.Has("json")) {
    out << ToJson(resp.report());
  } else {
    PrintPlanReport(resp.report(), out);
    if (flags.Has("reasons")) {
      for (const v1::PolicyResult& p : resp.report().results()) {
        out << "\n" << p.policy() << " decisions:\n";
        for (const v1::Decision& d : p.plan().decisions()) {
          out << "  " << d.tensor_name() << ": " << d.reason() << "\n";
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

Command PlanCommand() {
  return {
      .name = "plan",
      .summary =
          "plan a step under a budget with one or more policies, each "
          "judged by the simulator",
      .synopsis = "(--workload NAME | --graph FILE) --budget B [flags]",
      .flags = Concat(
          {StepFlags(),
           {BudgetFlag(/*required=*/true, /*device=*/true),
            BudgetAllMemoryFlag(),
            ExpandableSegmentsFlag(),
            PolicyFlag(),
            {"out", "FILE", "write the plan of the one --policy to FILE"},
            {"json", "", "print the PlanReport as JSON"},
            TimelinePointsFlag(),
            {"reasons", "", "print each decision's reason"},
            {"svg", "FILE",
             "draw the chosen policy's result (the fastest feasible one) as "
             "an SVG picture in FILE: memory against the budget and the "
             "device, the streams, the decisions"}},
           BoundFlags(),
           NodeFlags("one plan for every rank, judged on the whole node"),
           BackendFlags()}),
      .examples = {"slackswap plan --workload gpt2-xl --budget 0.5 --policy "
                   "slackswap --out plan.txtpb",
                   "slackswap plan --workload llama-7b --budget 20GB --json",
                   "slackswap plan --workload llama-7b --hardware "
                   "a100-40gb-pcie4 --budget device:2GB",
                   "slackswap plan --workload bert-large --budget 0.3 --policy "
                   "optimal,slackswap --include-bound",
                   "slackswap plan --workload gpt2-xl --budget 0.3 --svg "
                   "plan.svg",
                   "slackswap plan --workload llama-7b --dp 8 --node "
                   "dgx-a100-80gb --budget 0.5"},
      .run = &RunPlan,
  };
}

}  // namespace slackswap
