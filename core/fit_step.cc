// PlanningCore::FitStep: the Fit RPC for schedulers. For each profile, the
// device budget's search (planner/budget_search.h) per policy, the fastest
// plan that fits, and the smallest device that keeps the target share;
// then the profiles ranked by step time or by the cost of 1,000 steps. A
// job on nodes is core/fit_job.cc's.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/fit_profile.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "planner/analysis.h"

namespace slackswap {
namespace {

// A Fit request over GPUs, validated.
struct FitSpec {
  std::shared_ptr<const Graph> graph;
  std::vector<Hardware> hardware;
  std::vector<std::optional<double>> prices;
  bool priced = false;
  FitOptions options;
};

absl::StatusOr<FitSpec> ResolveFit(const v1::FitRequest& req,
                                   const CoreLimits& limits, const StopFn& stop,
                                   GraphSource* graphs) {
  FitSpec spec;
  SLACKSWAP_ASSIGN_OR_RETURN(spec.graph,
                             ResolveGraphOf(req, "", limits, stop, graphs));
  if (req.profiles_size() < 1 || req.profiles_size() > kMaxFitProfiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profiles: give 1 to ", kMaxFitProfiles,
        " hardware profiles (or nodes, for a job), got ", req.profiles_size()));
  }
  if (!req.layouts().empty() || req.global_batch() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.layouts().empty() ? "global_batch" : "layouts",
        ": a job's; give nodes for it (profiles are single GPUs)"));
  }
  spec.priced = req.profiles(0).has_price_per_hour();
  for (int i = 0; i < req.profiles_size(); ++i) {
    const v1::FitProfile& p = req.profiles(i);
    const std::string field = absl::StrCat("profiles[", i, "].");
    SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, ResolveHardwareOf(p, field));
    spec.hardware.push_back(std::move(hw));
    SLACKSWAP_ASSIGN_OR_RETURN(
        std::optional<double> price,
        ResolvePrice(p.has_price_per_hour(), p.price_per_hour(), spec.priced,
                     "profile", field));
    spec.prices.push_back(price);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(spec.options, ResolveFitOptions(req));
  return spec;
}

}  // namespace

absl::StatusOr<v1::FitResponse> PlanningCore::FitStep(
    const v1::FitRequest& req, const StopFn& stop) const {
  if (!req.nodes().empty()) return FitJob(req, stop);
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(FitSpec spec,
                             ResolveFit(req, limits_, stop, graphs_));
  const Graph& g = *spec.graph;
  SLACKSWAP_RETURN_IF_ERROR(
      CheckRequestCost(g, req,
                       FitWork(spec.options.policies,
                               static_cast<int64_t>(spec.hardware.size()))));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());
  v1::FitResponse resp;
  resp.set_graph_name(g.name);
  resp.set_target(spec.options.target);
  resp.set_ranked_by(spec.priced ? "cost_per_1000_steps" : "step_time");
  const int64_t peak = std::max<int64_t>(1, g.index.saved_bytes);
  for (size_t i = 0; i < spec.hardware.size(); ++i) {
    const Hardware& hw = spec.hardware[i];
    SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw, stop));
    PlanningContext ctx = Context(g, hw, analysis, peak, stop);
    ctx.explain = false;
    SLACKSWAP_ASSIGN_OR_RETURN(DeviceAnswer a, FitDevice(spec.options, ctx));
    SetCost(spec.prices[i], a.result);
    if (observer_ != nullptr) observer_->FitProfile(FitVerdictOf(a.result));
    *resp.add_results() = std::move(a.result);
  }
  RankFits(spec.priced, *resp.mutable_results());
  resp.set_server_seconds(watch.Lap());
  return resp;
}

}  // namespace slackswap
