// PlanningCore::FitStep: the Fit RPC for schedulers. For each profile, the
// device budget's search (planner/budget_search.h) per policy, the fastest
// plan that fits, and the smallest device that keeps the target share;
// then the profiles ranked by step time or by the cost of 1,000 steps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/device_fit.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "planner/analysis.h"
#include "planner/budget_search.h"

namespace slackswap {
namespace {

// A Fit request, validated.
struct FitSpec {
  std::shared_ptr<const Graph> graph;
  std::vector<Hardware> hardware;
  std::vector<std::optional<double>> prices;
  bool priced = false;
  double target = kDefaultFitTarget;
  std::vector<const PolicyInfo*> policies;
  DeviceOptions device;
};

absl::StatusOr<FitSpec> ResolveFit(const v1::FitRequest& req,
                                   const CoreLimits& limits, const StopFn& stop,
                                   GraphSource* graphs) {
  FitSpec spec;
  SLACKSWAP_ASSIGN_OR_RETURN(spec.graph,
                             ResolveGraphOf(req, "", limits, stop, graphs));
  if (req.profiles_size() < 1 || req.profiles_size() > kMaxFitProfiles) {
    return absl::InvalidArgumentError(
        absl::StrCat("profiles: give 1 to ", kMaxFitProfiles,
                     " hardware profiles, got ", req.profiles_size()));
  }
  spec.priced = req.profiles(0).has_price_per_hour();
  for (int i = 0; i < req.profiles_size(); ++i) {
    const v1::FitProfile& p = req.profiles(i);
    const std::string field = absl::StrCat("profiles[", i, "].");
    SLACKSWAP_ASSIGN_OR_RETURN(Hardware hw, ResolveHardwareOf(p, field));
    spec.hardware.push_back(std::move(hw));
    if (p.has_price_per_hour() != spec.priced) {
      return absl::InvalidArgumentError(absl::StrCat(
          field,
          "price_per_hour: give a price for every profile or for none "
          "(profiles[0] has ",
          spec.priced ? "one" : "none", ")"));
    }
    if (p.has_price_per_hour()) {
      const double price = p.price_per_hour();
      if (!(std::isfinite(price) && price >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, "price_per_hour must be a finite number >= 0, got ", price));
      }
      spec.prices.push_back(price);
    } else {
      spec.prices.push_back(std::nullopt);
    }
  }
  if (req.has_target()) {
    if (!(req.target() > 0 && req.target() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("target must be in (0, 1], got ", req.target()));
    }
    spec.target = req.target();
  }
  if (req.headroom_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "headroom_bytes must be >= 0, got ", req.headroom_bytes()));
  }
  if (req.policies().empty()) {
    SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* slackswap,
                               FindPolicy(kDefaultFitPolicy));
    spec.policies.push_back(slackswap);
  } else {
    SLACKSWAP_ASSIGN_OR_RETURN(spec.policies, ResolvePolicies(req.policies()));
  }
  for (size_t i = 0; i < spec.policies.size(); ++i) {
    const PolicyInfo& p = *spec.policies[i];
    if (p.unbudgeted_reference || p.may_be_unavailable) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policies[", i, "]: ", p.name,
          p.unbudgeted_reference
              ? " has no budget to fit to the device"
              : "'s solver would run at every budget the search tries"));
    }
  }
  spec.device.enabled = true;
  spec.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  spec.device.headroom_bytes = req.headroom_bytes();
  return spec;
}

// The Fit answer for one profile.
absl::StatusOr<v1::FitResult> FitProfile(const FitSpec& spec,
                                         const Hardware& hw,
                                         const PlanningContext& ctx) {
  const Graph& g = *spec.graph;
  SimOptions report;
  report.record_timeline = false;
  report.device = spec.device;
  v1::FitResult out;
  out.set_hardware_name(hw.name);
  // Every policy's search for the device; the fastest fit wins, or, when
  // none fits, the plan that needs least.
  google::protobuf::RepeatedPtrField<v1::PolicyResult> results;
  for (const PolicyInfo* policy : spec.policies) {
    SLACKSWAP_ASSIGN_OR_RETURN(
        BudgetSearch s,
        LargestFittingBudget(policy->name, ctx,
                             DeviceJudge(policy->name, ctx, report),
                             ctx.budget_bytes));
    v1::PolicyResult* p = results.Add();
    p->set_policy(policy->name);
    *p->mutable_result() = ResultToProto(s.result, g);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult keep, SimulateKeepAll(ctx, spec.device));
  const v1::DeviceFit fit = DescribeDeviceFit(results, ResultToProto(keep, g));
  out.set_fits_device(fit.fits_device());
  out.set_fits_without_plan(fit.fits_without_plan());
  out.set_capacity_bytes(fit.capacity_bytes());
  out.set_framework_reserve_bytes(fit.framework_reserve_bytes());
  out.set_min_device_bytes(fit.min_device_bytes());
  out.set_summary(fit.summary());
  // The plan behind the answer: the fitting policy's, else the least.
  const std::string& chosen =
      fit.fits_device() ? fit.policy() : fit.min_device_policy();
  for (const v1::PolicyResult& p : results) {
    if (p.policy() != chosen) continue;
    const v1::SimulationResult& r = p.result();
    out.set_policy(p.policy());
    out.set_budget_bytes(r.budget_bytes());
    out.set_throughput_retained(r.throughput_retained());
    out.set_step_ns(r.step_ns());
    out.set_peak_reserved_bytes(r.device().peak_reserved_bytes());
    out.set_headroom_bytes(r.device().capacity_bytes() -
                           r.device().required_bytes());
  }
  if (chosen == kKeepAllName) {
    out.set_policy(kKeepAllName);
    out.set_budget_bytes(g.index.saved_bytes);
    out.set_throughput_retained(keep.throughput_retained);
    out.set_step_ns(keep.step_ns);
    out.set_peak_reserved_bytes(keep.device->peak_reserved_bytes);
    out.set_headroom_bytes(keep.device->capacity_bytes -
                           keep.device->required_bytes);
  }
  // The least memory that keeps the target share on this GPU's speeds,
  // and the least at any speed (the smallest feasible budget: a share
  // above 0): the first policy's smallest such budgets, their device need.
  const PolicyInfo* first = spec.policies.front();
  const Judge judge = DeviceJudge(first->name, ctx, report);
  SLACKSWAP_ASSIGN_OR_RETURN(
      BudgetSearch t,
      SmallestBudgetRetaining(first->name, ctx, judge, spec.target));
  out.set_target_reached(t.found);
  if (t.found && t.result.device.has_value()) {
    out.set_min_device_bytes_for_target(t.result.device->required_bytes);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(
      BudgetSearch least,
      SmallestBudgetRetaining(first->name, ctx, judge,
                              std::numeric_limits<double>::min()));
  if (least.found && least.result.device.has_value()) {
    out.set_min_device_bytes(
        std::min(out.min_device_bytes(), least.result.device->required_bytes));
  }
  return out;
}

// Fitting profiles first, by cost or step time (ties in request order),
// then the rest in request order; ranks 1.. for the fitting ones.
void Rank(bool priced, google::protobuf::RepeatedPtrField<v1::FitResult>& r) {
  auto key = [priced](const v1::FitResult& f) {
    return priced ? f.cost_per_1000_steps() : static_cast<double>(f.step_ns());
  };
  std::stable_sort(r.begin(), r.end(),
                   [&](const v1::FitResult& a, const v1::FitResult& b) {
                     if (a.fits_device() != b.fits_device()) {
                       return a.fits_device();
                     }
                     return a.fits_device() && key(a) < key(b);
                   });
  int32_t rank = 0;
  for (v1::FitResult& f : r) {
    if (f.fits_device()) f.set_rank(++rank);
  }
}

const char* FitVerdictOf(const v1::FitResult& f) {
  if (f.fits_without_plan()) return kFitVerdicts[0];
  return f.fits_device() ? kFitVerdicts[1] : kFitVerdicts[2];
}

}  // namespace

absl::StatusOr<v1::FitResponse> PlanningCore::FitStep(
    const v1::FitRequest& req, const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(FitSpec spec,
                             ResolveFit(req, limits_, stop, graphs_));
  const Graph& g = *spec.graph;
  SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(
      g, req,
      FitWork(spec.policies, static_cast<int64_t>(spec.hardware.size()))));
  if (observer_ != nullptr) observer_->GraphOps(g.ops.size());
  v1::FitResponse resp;
  resp.set_graph_name(g.name);
  resp.set_target(spec.target);
  resp.set_ranked_by(spec.priced ? "cost_per_1000_steps" : "step_time");
  const int64_t peak = std::max<int64_t>(1, g.index.saved_bytes);
  for (size_t i = 0; i < spec.hardware.size(); ++i) {
    const Hardware& hw = spec.hardware[i];
    SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis, AnalyzeStep(g, hw, stop));
    PlanningContext ctx = Context(g, hw, analysis, peak, stop);
    ctx.explain = false;
    SLACKSWAP_ASSIGN_OR_RETURN(v1::FitResult f, FitProfile(spec, hw, ctx));
    if (spec.prices[i].has_value()) {
      f.set_price_per_hour(*spec.prices[i]);
      if (f.fits_device()) {
        // 1,000 steps of step_ns, in hours.
        f.set_cost_per_1000_steps(
            *spec.prices[i] * static_cast<double>(f.step_ns()) * 1e3 / 3.6e12);
      }
    }
    if (observer_ != nullptr) observer_->FitProfile(FitVerdictOf(f));
    *resp.add_results() = std::move(f);
  }
  Rank(spec.priced, *resp.mutable_results());
  resp.set_server_seconds(watch.Lap());
  return resp;
}

}  // namespace slackswap
