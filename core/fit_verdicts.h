// The answers a Fit request gives per hardware profile or node, as metrics
// label them (server/metrics.h: slackswap_fit_profiles_total{verdict},
// slackswap_fit_nodes_total{node,verdict}).
//
//   observer->FitProfile(kFitVerdicts[0]);  // "fits"
#ifndef SLACKSWAP_CORE_FIT_VERDICTS_H_
#define SLACKSWAP_CORE_FIT_VERDICTS_H_

namespace slackswap {

// Fits as it is (keeping every activation), fits with a plan, does not fit.
inline constexpr const char* kFitVerdicts[] = {"fits", "fits_with_plan",
                                               "does_not_fit"};

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_FIT_VERDICTS_H_
