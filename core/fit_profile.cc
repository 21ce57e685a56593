#include "core/fit_profile.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/device_fit.h"
#include "core/fit_verdicts.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "planner/budget_search.h"

namespace slackswap {

absl::StatusOr<FitOptions> ResolveFitOptions(const v1::FitRequest& req) {
  FitOptions options;
  options.target = kDefaultFitTarget;
  if (req.has_target()) {
    if (!(req.target() > 0 && req.target() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("target must be in (0, 1], got ", req.target()));
    }
    options.target = req.target();
  }
  if (req.headroom_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "headroom_bytes must be >= 0, got ", req.headroom_bytes()));
  }
  if (req.policies().empty()) {
    SLACKSWAP_ASSIGN_OR_RETURN(const PolicyInfo* slackswap,
                               FindPolicy(kDefaultFitPolicy));
    options.policies.push_back(slackswap);
  } else {
    SLACKSWAP_ASSIGN_OR_RETURN(options.policies,
                               ResolvePolicies(req.policies()));
  }
  for (size_t i = 0; i < options.policies.size(); ++i) {
    const PolicyInfo& p = *options.policies[i];
    if (p.unbudgeted_reference || p.may_be_unavailable) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policies[", i, "]: ", p.name,
          p.unbudgeted_reference
              ? " has no budget to fit to the device"
              : "'s solver would run at every budget the search tries"));
    }
  }
  options.device.enabled = true;
  options.device.allocator.expandable_segments =
      req.allocator().expandable_segments();
  options.device.headroom_bytes = req.headroom_bytes();
  return options;
}

absl::StatusOr<std::optional<double>> ResolvePrice(bool has_price, double price,
                                                   bool priced,
                                                   const std::string& list,
                                                   const std::string& field) {
  if (has_price != priced) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "price_per_hour: give a price for every ", list,
        " or for none (", list, "s[0] has ", priced ? "one" : "none", ")"));
  }
  if (!has_price) return std::nullopt;
  if (!(std::isfinite(price) && price >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "price_per_hour must be a finite number >= 0, got ", price));
  }
  return price;
}

absl::StatusOr<DeviceAnswer> FitDevice(const FitOptions& options,
                                       const PlanningContext& ctx) {
  const Graph& g = ctx.graph;
  SimOptions report;
  report.record_timeline = false;
  report.device = options.device;
  DeviceAnswer answer;
  v1::FitResult& out = answer.result;
  out.set_hardware_name(ctx.hw.name);
  // Every policy's search for the device; the fastest fit wins, or, when
  // none fits, the plan that needs least.
  google::protobuf::RepeatedPtrField<v1::PolicyResult> results;
  std::vector<Plan> plans;
  for (const PolicyInfo* policy : options.policies) {
    SLACKSWAP_ASSIGN_OR_RETURN(
        BudgetSearch s,
        LargestFittingBudget(policy->name, ctx,
                             DeviceJudge(policy->name, ctx, report),
                             ctx.budget_bytes));
    v1::PolicyResult* p = results.Add();
    p->set_policy(policy->name);
    *p->mutable_result() = ResultToProto(s.result, g);
    plans.push_back(std::move(s.plan));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult keep,
                             SimulateKeepAll(ctx, options.device));
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
  for (int i = 0; i < results.size(); ++i) {
    const v1::PolicyResult& p = results[i];
    if (p.policy() != chosen) continue;
    const v1::SimulationResult& r = p.result();
    out.set_policy(p.policy());
    out.set_budget_bytes(r.budget_bytes());
    out.set_throughput_retained(r.throughput_retained());
    out.set_step_ns(r.step_ns());
    out.set_peak_reserved_bytes(r.device().peak_reserved_bytes());
    out.set_headroom_bytes(r.device().capacity_bytes() -
                           r.device().required_bytes());
    answer.plan = std::move(plans[static_cast<size_t>(i)]);
  }
  if (chosen == kKeepAllName) {
    out.set_policy(kKeepAllName);
    out.set_budget_bytes(g.index.saved_bytes);
    out.set_throughput_retained(keep.throughput_retained);
    out.set_step_ns(keep.step_ns);
    out.set_peak_reserved_bytes(keep.device->peak_reserved_bytes);
    out.set_headroom_bytes(keep.device->capacity_bytes -
                           keep.device->required_bytes);
    answer.plan = Plan::KeepAll(g);
  }
  // The least memory that keeps the target share on this GPU's speeds,
  // and the least at any speed (the smallest feasible budget: a share
  // above 0): the first policy's smallest such budgets, their device need.
  // The bisections steer by feasibility and throughput alone, which the
  // device model only watches (sim/device_memory.h): their plans are judged
  // without it, and only the plan each search ends on is run with it.
  const PolicyInfo* first = options.policies.front();
  SimOptions steer = report;
  steer.device.enabled = false;
  const Judge judge = SimulationJudge(first->name, ctx, steer);
  // What the device needs for the plan a search ended on; nullopt without
  // the device model.
  const auto device_need =
      [&](const BudgetSearch& s) -> absl::StatusOr<std::optional<int64_t>> {
    PlanningContext at = ctx;
    at.budget_bytes = s.budget_bytes;
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult r,
                               SimulatePlan(first->name, at, s.plan, report));
    if (!r.feasible) {
      return absl::InternalError(
          absl::StrCat("the plan a budget search ended on (", first->name,
                       " at ", s.budget_bytes,
                       " bytes) was feasible without the device model, "
                       "not with it: ",
                       r.infeasible_reason));
    }
    if (!r.device.has_value()) return std::nullopt;
    return r.device->required_bytes;
  };
  SLACKSWAP_ASSIGN_OR_RETURN(
      BudgetSearch t,
      SmallestBudgetRetaining(first->name, ctx, judge, options.target));
  out.set_target_reached(t.found);
  if (t.found) {
    SLACKSWAP_ASSIGN_OR_RETURN(const std::optional<int64_t> need,
                               device_need(t));
    if (need.has_value()) out.set_min_device_bytes_for_target(*need);
  }
  SLACKSWAP_ASSIGN_OR_RETURN(BudgetSearch least,
                             SmallestFeasibleBudget(first->name, ctx, judge));
  if (least.found) {
    SLACKSWAP_ASSIGN_OR_RETURN(const std::optional<int64_t> need,
                               device_need(least));
    if (need.has_value()) {
      out.set_min_device_bytes(std::min(out.min_device_bytes(), *need));
    }
  }
  return answer;
}

void SetCost(std::optional<double> price_per_hour, v1::FitResult& result) {
  if (!price_per_hour.has_value()) return;
  result.set_price_per_hour(*price_per_hour);
  if (result.fits_device()) {
    // 1,000 steps of step_ns, in hours.
    result.set_cost_per_1000_steps(
        *price_per_hour * static_cast<double>(result.step_ns()) * 1e3 / 3.6e12);
  }
}

void RankFits(bool priced,
              google::protobuf::RepeatedPtrField<v1::FitResult>& results) {
  auto key = [priced](const v1::FitResult& f) {
    return priced ? f.cost_per_1000_steps() : static_cast<double>(f.step_ns());
  };
  std::stable_sort(results.begin(), results.end(),
                   [&](const v1::FitResult& a, const v1::FitResult& b) {
                     if (a.fits_device() != b.fits_device()) {
                       return a.fits_device();
                     }
                     return a.fits_device() && key(a) < key(b);
                   });
  int32_t rank = 0;
  for (v1::FitResult& f : results) {
    if (f.fits_device()) f.set_rank(++rank);
  }
}

const char* FitVerdictOf(const v1::FitResult& f) {
  if (f.fits_without_plan()) return kFitVerdicts[0];
  return f.fits_device() ? kFitVerdicts[1] : kFitVerdicts[2];
}

}  // namespace slackswap
