// slackswap fit (--workload NAME | --graph FILE) [--hardware NAME|FILE,...]
//   [--prices P,...] [--target SHARE] [--headroom BYTES] [--policy NAMES]
//   [--expandable-segments] [--json] [--server HOST:PORT ...]
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/inputs.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/hardware.h"

namespace slackswap {

namespace {

// StepFlags without --hardware, which fit takes as a list.
FlagSpecs GraphFlags() {
  FlagSpecs out;
  for (const FlagSpec& f : StepFlags()) {
    if (f.name != "hardware") out.push_back(f);
  }
  return out;
}

absl::Status AddProfiles(const Flags& flags, v1::FitRequest& req) {
  std::vector<std::string> names;
  if (flags.Has("hardware")) {
    names = absl::StrSplit(*flags.Get("hardware"), ',');
  } else {
    names = HardwareNames();
  }
  for (const std::string& name : names) {
    v1::FitProfile* p = req.add_profiles();
    bool is_inline = false;
    std::string catalog_name;
    SLACKSWAP_RETURN_IF_ERROR(HardwareFromFlag(
        name, p->mutable_hardware_inline(), &catalog_name, &is_inline));
    if (!is_inline) p->set_hardware_name(catalog_name);
  }
  if (!flags.Has("prices")) return absl::OkStatus();
  const std::vector<std::string> prices =
      absl::StrSplit(*flags.Get("prices"), ',');
  if (prices.size() != names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prices gives ", prices.size(), " prices for ", names.size(),
        " --hardware profiles; give one per profile, in the same order"));
  }
  for (size_t i = 0; i < prices.size(); ++i) {
    double price = 0;
    if (!absl::SimpleAtod(prices[i], &price)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prices: ", QuoteInput(prices[i]), " is not a number"));
    }
    req.mutable_profiles(i)->set_price_per_hour(price);
  }
  return absl::OkStatus();
}

std::string Verdict(const v1::FitResult& f) {
  if (!f.fits_device()) return "no";
  return f.fits_without_plan() ? "as is" : "with plan";
}

void PrintFit(const v1::FitResponse& resp, std::ostream& out) {
  const bool priced = resp.ranked_by() == "cost_per_1000_steps";
  out << absl::StrFormat(
      "%s: will it fit? ranked by %s; the least memory for %.2f%% of ideal\n",
      resp.graph_name(), priced ? "the cost of 1,000 steps" : "step time",
      100 * resp.target());
  out << absl::StrFormat("  %4s %-16s %-9s %-10s %9s %10s %9s %9s %9s %9s",
                         "rank", "hardware", "fits", "policy", "retained",
                         "step ms", "reserved", "headroom", "least", "target");
  if (priced) out << absl::StrFormat(" %9s %12s", "price/h", "per 1k steps");
  out << "\n";
  for (const v1::FitResult& f : resp.results()) {
    out << absl::StrFormat(
        "  %4s %-16s %-9s %-10s %8.2f%% %10.3f %9s %9s %9s %9s",
        f.rank() > 0 ? absl::StrCat(f.rank()) : "-", f.hardware_name(),
        Verdict(f), f.policy(), 100 * f.throughput_retained(),
        f.step_ns() / 1e6, FormatBytes(f.peak_reserved_bytes()),
        f.headroom_bytes() >= 0
            ? FormatBytes(f.headroom_bytes())
            : absl::StrCat("-", FormatBytes(-f.headroom_bytes())),
        FormatBytes(f.min_device_bytes()),
        f.target_reached() ? FormatBytes(f.min_device_bytes_for_target())
                           : "never");
    if (priced) {
      out << absl::StrFormat(
          " %9.2f %12s", f.price_per_hour(),
          f.has_cost_per_1000_steps()
              ? absl::StrFormat("%.4f", f.cost_per_1000_steps())
              : "-");
    }
    out << "\n";
  }
  for (const v1::FitResult& f : resp.results()) {
    out << "  " << f.hardware_name() << ": " << f.summary() << "\n";
  }
}

absl::Status RunFit(const Flags& flags, std::ostream& out) {
  v1::FitRequest req;
  SLACKSWAP_RETURN_IF_ERROR(SetGraphFromFlags(flags, &req));
  SLACKSWAP_RETURN_IF_ERROR(AddProfiles(flags, req));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> target,
                             flags.GetDouble("target"));
  if (target.has_value()) req.set_target(*target);
  if (flags.Has("headroom")) {
    absl::StatusOr<Budget> headroom = ParseBudget(*flags.Get("headroom"));
    if (!headroom.ok() || headroom->bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--headroom takes bytes with a unit (2GB, 512MiB), got ",
                       QuoteInput(*flags.Get("headroom"))));
    }
    req.set_headroom_bytes(headroom->bytes);
  }
  AddPolicies(flags, req.mutable_policies());
  req.mutable_allocator()->set_expandable_segments(
      flags.Has("expandable-segments"));
  SLACKSWAP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                             BackendFromFlags(flags));
  SLACKSWAP_ASSIGN_OR_RETURN(v1::FitResponse resp, backend->Fit(req));
  if (flags.Has("json")) {
    out << ToJson(resp);
  } else {
    PrintFit(resp, out);
  }
  return absl::OkStatus();
}

}  // namespace

Command FitCommand() {
  return {
      .name = "fit",
      .summary =
          "will the step fit, and on which GPU: per hardware profile, whether "
          "it fits the device (the caching allocator's reserved peak plus "
          "the framework reserve), the fastest plan that fits, and the least "
          "memory that keeps a share of the ideal speed; ranked by step time "
          "or, with prices, by the cost of 1,000 steps",
      .synopsis = "(--workload NAME | --graph FILE) [flags]",
      .flags = Concat(
          {GraphFlags(),
           {{"hardware", "NAME|FILE[,...]",
             absl::StrCat("hardware profiles to fit on: catalog names (",
                          absl::StrJoin(HardwareNames(), ", "),
                          ") or HardwareProfile files"),
             "every catalog profile"},
            {"prices", "P[,...]",
             "price per hour of each --hardware profile, in its order: rank "
             "by the cost of 1,000 steps"},
            {"target", "SHARE",
             "the share of the ideal throughput the least-memory answer "
             "keeps, in (0, 1]",
             absl::StrCat(kDefaultFitTarget)},
            {"headroom", "BYTES",
             "memory each device keeps free beyond its framework reserve "
             "(2GB)",
             "0"},
            {"policy", "NAME[,NAME...]",
             "policies to plan with (not ideal or optimal)", kDefaultFitPolicy},
            ExpandableSegmentsFlag(),
            {"json", "", "print the FitResponse as JSON"}},
           BackendFlags()}),
      .examples = {"slackswap fit --workload llama-7b --hardware "
                   "a100-40gb-pcie4,a100-80gb-pcie4,h100-pcie5",
                   "slackswap fit --workload llama-7b --prices "
                   "1.2,1.9,2.5,3.2 --json",
                   "slackswap fit --graph step.pb --hardware my_gpu.txtpb "
                   "--headroom 2GB --target 0.95"},
      .run = &RunFit,
  };
}

}  // namespace slackswap
