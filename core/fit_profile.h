// One device's Fit answer, shared by a Fit over GPUs (core/fit_step.cc)
// and a job's Fit over nodes (core/fit_job.cc): every policy's search for
// the largest activation budget whose plan fits the whole device (or a
// smaller one whose plan is as fast; planner/budget_search.h), the
// fastest that fits (or the plan that needs least), and the least memory
// that keeps the target share; then the answers ranked.
//
//   SLACKSWAP_ASSIGN_OR_RETURN(FitOptions options, ResolveFitOptions(req));
//   SLACKSWAP_ASSIGN_OR_RETURN(DeviceAnswer a, FitDevice(options, ctx));
//   SetCost(price, a.result);
//   RankFits(priced, *resp.mutable_results());
#ifndef SLACKSWAP_CORE_FIT_PROFILE_H_
#define SLACKSWAP_CORE_FIT_PROFILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "model/plan.h"
#include "planner/policy.h"
#include "sim/simulator.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// What a Fit request asks of every device, validated.
struct FitOptions {
  double target = 0;
  std::vector<const PolicyInfo*> policies;
  DeviceOptions device;
};

// The request's target, headroom, policies and allocator; errors name the
// field.
absl::StatusOr<FitOptions> ResolveFitOptions(const v1::FitRequest& req);

// A price per hour given for every entry of a list ("profile", "node")
// or for none: nullopt when absent; errors name `field` + "price_per_hour"
// (`priced`: entry 0 had one).
absl::StatusOr<std::optional<double>> ResolvePrice(bool has_price, double price,
                                                   bool priced,
                                                   const std::string& list,
                                                   const std::string& field);

struct DeviceAnswer {
  v1::FitResult result;
  // The plan behind result (its policy's at result.budget_bytes, or
  // keeping every activation).
  Plan plan;
};

// The answer for ctx's graph and device (ctx.node set: every rank on the
// node, judged there). REQUIRES: options.policies not empty.
absl::StatusOr<DeviceAnswer> FitDevice(const FitOptions& options,
                                       const PlanningContext& ctx);

// With a price: price_per_hour, and for a fitting answer the cost of
// 1,000 steps of result.step_ns.
void SetCost(std::optional<double> price_per_hour, v1::FitResult& result);

// Fitting answers first, by cost or step time (ties in request order), then
// the rest in request order; ranks 1.. for the fitting ones.
void RankFits(bool priced,
              google::protobuf::RepeatedPtrField<v1::FitResult>& results);

// kFitVerdicts' entry for an answer.
const char* FitVerdictOf(const v1::FitResult& f);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_FIT_PROFILE_H_
