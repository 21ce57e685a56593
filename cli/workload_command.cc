// slackswap workload --workload NAME [--batch N --seq N --layers N
//   --attention flash|unfused --dp N --fsdp N --tp N --rank R] --out FILE
//   [--server HOST:PORT ...]
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/proto_file.h"

namespace slackswap {

namespace {

absl::Status RunWorkload(const Flags& flags, std::ostream& out) {
  if (!flags.Has("workload")) {
    return absl::InvalidArgumentError("workload needs --workload NAME");
  }
  if (!flags.Has("out")) {
    return absl::InvalidArgumentError(
        "workload needs --out FILE (.pb, .txtpb or .json)");
  }
  // Fail on the extension before asking anyone for the graph.
  SLACKSWAP_RETURN_IF_ERROR(FormatForPath(*flags.Get("out")).status());
  v1::GetWorkloadRequest req;
  SLACKSWAP_ASSIGN_OR_RETURN(*req.mutable_workload(), WorkloadFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(v1::GetWorkloadResponse resp,
                             backend->GetWorkload(req));
  SLACKSWAP_RETURN_IF_ERROR(WriteProtoFile(*flags.Get("out"), resp.graph()));
  out << absl::StrFormat("wrote %s: %d ops, %d tensors\n", *flags.Get("out"),
                         resp.graph().ops_size(), resp.graph().tensors_size());
  return absl::OkStatus();
}

}  // namespace

Command WorkloadCommand() {
  FlagSpecs flags;
  for (const FlagSpec& f : StepFlags()) {
    if (f.name != "graph" && f.name != "hardware") flags.push_back(f);
  }
  flags.push_back({"rank", "R",
                   "the rank whose step to write, when --tp is combined with "
                   "--dp or --fsdp (their collectives' groups differ by "
                   "rank; default 0)"});
  flags.push_back({"out", "FILE",
                   "where to write the OperatorGraph (.pb, .txtpb or .json)"});
  return {
      .name = "workload",
      .summary = "write a built-in workload's operator graph to a file",
      .synopsis = "--workload NAME --out FILE [flags]",
      .flags = Concat({flags, BackendFlags()}),
      .examples = {"slackswap workload --workload gpt2-xl --layers 2 --out "
                   "gpt2.json",
                   "slackswap workload --workload llama-7b --dp 8 --out "
                   "llama-ddp8.pb",
                   "slackswap workload --workload llama-7b --tp 2 --dp 4 "
                   "--rank 1 --out llama-tp2-dp4-rank1.pb"},
      .run = &RunWorkload,
  };
}

}  // namespace slackswap
