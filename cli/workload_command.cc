// slackswap workload --workload NAME [--batch N --seq N --layers N
//   --attention flash|unfused] --out FILE
#include <ostream>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "common/status_macros.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "planner/budget.h"

namespace slackswap {

absl::Status RunWorkload(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Flags flags, Flags::Parse(args, Join(GraphFlags(), {"out"}), {}));
  if (!flags.Has("workload")) {
    return absl::InvalidArgumentError("workload needs --workload NAME");
  }
  if (!flags.Has("out")) {
    return absl::InvalidArgumentError(
        "workload needs --out FILE (.pb, .txtpb or .json)");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, LoadGraph(flags));
  SLACKSWAP_RETURN_IF_ERROR(WriteProtoFile(*flags.Get("out"), GraphToProto(g)));
  out << absl::StrFormat(
      "wrote %s: %d ops, %d tensors, %d saved activations "
      "(%s)\n",
      *flags.Get("out"), g.ops.size(), g.tensors.size(), g.index.saved.size(),
      FormatBytes(g.index.saved_bytes));
  return absl::OkStatus();
}

}  // namespace slackswap
