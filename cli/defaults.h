// The CLI's default flag values, each written once: the code that applies a
// default and the help that shows it (FlagSpec::default_text) both read it
// from here.
//
//   const std::string hw = flags.Get("hardware").value_or(kDefaultHardware);
//   FlagSpec f = {"hardware", "NAME|FILE", "a catalog profile",
//                 kDefaultHardware};
#ifndef SLACKSWAP_CLI_DEFAULTS_H_
#define SLACKSWAP_CLI_DEFAULTS_H_

#include <chrono>

#include "core/planning_core.h"

namespace slackswap {

// --hardware of every command that plans or simulates one step.
inline constexpr char kDefaultHardware[] = "a100-80gb-pcie4";

// sweep --budgets FROM:TO:STEP and fit's --target and --policy are the
// core's defaults (core/planning_core.h: kDefaultSweepFrom, kDefaultSweepTo,
// kDefaultSweepStep, kDefaultFitTarget, kDefaultFitPolicy): the CLI sends
// nothing for them and shows them in help.

// health's deadline when --timeout is not given (other commands set none).
inline constexpr std::chrono::seconds kDefaultHealthTimeout(5);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_DEFAULTS_H_
