// slackswap health --server HOST:PORT [--tls-ca FILE ...]: exit 0 iff the
// server's grpc.health.v1 service answers SERVING.
#include <ostream>

#include "cli/backend.h"
#include "cli/commands.h"
#include "common/status_macros.h"

namespace slackswap {

absl::Status RunHealth(const Args& args, std::ostream& out) {
  SLACKSWAP_ASSIGN_OR_RETURN(Flags flags,
                             Flags::Parse(args, BackendFlags(), {}));
  SLACKSWAP_RETURN_IF_ERROR(CheckHealth(flags));
  out << *flags.Get("server") << " is SERVING\n";
  return absl::OkStatus();
}

}  // namespace slackswap
