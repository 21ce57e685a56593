// slackswap health --server HOST:PORT [--tls-ca FILE ...]: exit 0 iff the
// server's grpc.health.v1 service answers SERVING.
#include <ostream>

#include "absl/strings/str_cat.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "common/status_macros.h"

namespace slackswap {

namespace {

absl::Status RunHealth(const Flags& flags, std::ostream& out) {
  if (!flags.Has("server")) {
    return absl::InvalidArgumentError("health needs --server HOST:PORT");
  }
  SLACKSWAP_RETURN_IF_ERROR(CheckHealth(flags));
  out << *flags.Get("server") << " is SERVING\n";
  return absl::OkStatus();
}

// BackendFlags, with health's own --timeout default.
FlagSpecs HealthFlags() {
  FlagSpecs flags = BackendFlags();
  for (FlagSpec& f : flags) {
    if (f.name == "timeout") {
      f.default_text = absl::StrCat(kDefaultHealthTimeout.count());
    }
  }
  return flags;
}

}  // namespace

Command HealthCommand() {
  return {
      .name = "health",
      .summary = "exit 0 iff the server's health service answers SERVING",
      .synopsis = "--server HOST:PORT [flags]",
      .flags = HealthFlags(),
      .examples = {"slackswap health --server 127.0.0.1:50051 --timeout 3"},
      .run = &RunHealth,
  };
}

}  // namespace slackswap
