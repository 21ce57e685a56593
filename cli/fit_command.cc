// slackswap fit (--workload NAME | --graph FILE) [--hardware NAME|FILE,...]
//   [--prices P,...] [--target SHARE] [--headroom BYTES] [--policy NAMES]
//   [--expandable-segments] [--json] [--server HOST:PORT ...]
// slackswap fit --workload NAME --global-batch N [--node NAME,...]
//   [--layout dp,fsdp,tp2-fsdp,...] [--prices P,...] ... (a job on nodes)
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/inputs.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/hardware.h"
#include "model/node.h"

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

// --prices, one per entry of `what` (profiles or nodes), in its order.
absl::StatusOr<std::vector<double>> PricesFromFlags(const Flags& flags,
                                                    size_t entries,
                                                    const std::string& what) {
  std::vector<double> out;
  if (!flags.Has("prices")) return out;
  const std::vector<std::string> prices =
      absl::StrSplit(*flags.Get("prices"), ',');
  if (prices.size() != entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prices gives ", prices.size(), " prices for ", entries,
                     " ", what, "; give one per entry, in the same order"));
  }
  for (const std::string& p : prices) {
    double price = 0;
    if (!absl::SimpleAtod(p, &price)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prices: ", QuoteInput(p), " is not a number"));
    }
    out.push_back(price);
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
  SLACKSWAP_ASSIGN_OR_RETURN(
      const std::vector<double> prices,
      PricesFromFlags(flags, names.size(), "--hardware profiles"));
  for (size_t i = 0; i < prices.size(); ++i) {
    req.mutable_profiles(static_cast<int>(i))->set_price_per_hour(prices[i]);
  }
  return absl::OkStatus();
}

// --layout L[,L...]: dp, fsdp, tpN (data parallel over what is left, DDP),
// tpN-dp, tpN-fsdp.
absl::Status AddLayouts(const Flags& flags, v1::FitRequest& req) {
  if (!flags.Has("layout")) return absl::OkStatus();
  for (absl::string_view text : absl::StrSplit(*flags.Get("layout"), ',')) {
    v1::ParallelLayout* layout = req.add_layouts();
    absl::string_view rest = text;
    if (absl::ConsumePrefix(&rest, "tp")) {
      const std::vector<absl::string_view> parts = absl::StrSplit(rest, '-');
      int32_t tp = 0;
      if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &tp) || tp < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--layout: ", QuoteInput(text),
            " is not a layout (dp, fsdp, tpN, tpN-dp or tpN-fsdp)"));
      }
      layout->set_tensor_parallel(tp);
      rest = parts.size() == 2 ? parts[1] : "dp";
    }
    if (rest == "fsdp") {
      layout->set_fully_sharded(true);
    } else if (rest != "dp") {
      return absl::InvalidArgumentError(
          absl::StrCat("--layout: ", QuoteInput(text),
                       " is not a layout (dp, fsdp, tpN, tpN-dp or tpN-fsdp)"));
    }
  }
  return absl::OkStatus();
}

// A job (--global-batch): the nodes (default: the catalog's), layouts and
// prices.
absl::Status AddJob(const Flags& flags, v1::FitRequest& req) {
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> global_batch,
                             flags.GetInt("global-batch"));
  req.set_global_batch(*global_batch);
  std::vector<std::string> names;
  if (flags.Has("node")) {
    names = absl::StrSplit(*flags.Get("node"), ',');
  } else {
    names = NodeNames();
  }
  for (const std::string& name : names) req.add_nodes()->set_node_name(name);
  SLACKSWAP_ASSIGN_OR_RETURN(const std::vector<double> prices,
                             PricesFromFlags(flags, names.size(), "--node"));
  for (size_t i = 0; i < prices.size(); ++i) {
    req.mutable_nodes(static_cast<int>(i))->set_price_per_hour(prices[i]);
  }
  return AddLayouts(flags, req);
}

std::string Verdict(const v1::FitResult& f) {
  if (!f.fits_device()) return "no";
  return f.fits_without_plan() ? "as is" : "with plan";
}

// A job's answers (global_batch set) name the node and layout, and add
// the samples per second; a step's name the GPU.
std::string Where(const v1::FitResult& f, bool job) {
  return job ? absl::StrCat(f.node_name(), " ", f.layout_name())
             : f.hardware_name();
}

void PrintFit(const v1::FitResponse& resp, std::ostream& out) {
  const bool priced = resp.ranked_by() == "cost_per_1000_steps";
  const bool job = resp.global_batch() > 0;
  out << absl::StrFormat(
      "%s%s: will it fit? ranked by %s; the least memory%s for %.2f%% of "
      "ideal\n",
      resp.graph_name(),
      job ? absl::StrCat(", global batch ", resp.global_batch()) : "",
      priced ? "the cost of 1,000 steps" : "step time", job ? " per rank" : "",
      100 * resp.target());
  out << absl::StrFormat("  %4s %-*s %-9s %-10s %9s %10s", "rank",
                         job ? 26 : 16, job ? "node and layout" : "hardware",
                         "fits", "policy", "retained", "step ms");
  if (job) out << absl::StrFormat(" %9s", "samples/s");
  out << absl::StrFormat(" %9s %9s %9s %9s", "reserved", "headroom", "least",
                         "target");
  if (priced) out << absl::StrFormat(" %9s %12s", "price/h", "per 1k steps");
  out << "\n";
  for (const v1::FitResult& f : resp.results()) {
    out << absl::StrFormat("  %4s %-*s %-9s %-10s %8.2f%% %10.3f",
                           f.rank() > 0 ? absl::StrCat(f.rank()) : "-",
                           job ? 26 : 16, Where(f, job), Verdict(f), f.policy(),
                           100 * f.throughput_retained(), f.step_ns() / 1e6);
    if (job) out << absl::StrFormat(" %9.2f", f.samples_per_second());
    out << absl::StrFormat(
        " %9s %9s %9s %9s", FormatBytes(f.peak_reserved_bytes()),
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
    out << "  " << Where(f, job) << ": " << f.summary() << "\n";
  }
}

absl::Status RunFit(const Flags& flags, std::ostream& out) {
  v1::FitRequest req;
  SLACKSWAP_RETURN_IF_ERROR(SetGraphFromFlags(flags, &req));
  if (flags.Has("global-batch")) {
    if (flags.Has("hardware")) {
      return absl::InvalidArgumentError(
          "--hardware is for a step on GPUs; a job (--global-batch) runs on "
          "--node types");
    }
    SLACKSWAP_RETURN_IF_ERROR(AddJob(flags, req));
  } else {
    if (flags.Has("node") || flags.Has("layout")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flags.Has("node") ? "node" : "layout",
                       " is for a job: give its --global-batch"));
    }
    SLACKSWAP_RETURN_IF_ERROR(AddProfiles(flags, req));
  }
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
            {"global-batch", "N",
             "fit a job instead of a step: the samples of one step over all "
             "ranks, split over each layout's data-parallel ranks on every "
             "GPU of each --node"},
            {"node", "NAME[,...]",
             absl::StrCat("with --global-batch: node types to fit the job on (",
                          absl::StrJoin(NodeNames(), ", "), ")"),
             "every catalog node"},
            {"layout", "L[,...]",
             "with --global-batch: parallel layouts to try on each node: dp "
             "(DDP), fsdp, tpN (tensor parallel over N GPUs, DDP over the "
             "rest), tpN-fsdp",
             "dp,fsdp"},
            {"prices", "P[,...]",
             "price per hour of each --hardware profile (or --node), in its "
             "order: rank by the cost of 1,000 steps"},
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
                   "--headroom 2GB --target 0.95",
                   "slackswap fit --workload llama-7b --global-batch 32 "
                   "--layout fsdp,tp2-fsdp --node dgx-a100-80gb,hgx-h100-sxm "
                   "--prices 16,32"},
      .run = &RunFit,
  };
}

}  // namespace slackswap
