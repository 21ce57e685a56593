// Whether a request's plans fit the device, in the messages: the fastest
// fitting plan, the least memory any plan needs, and the numbers in words
// ("does not fit: static 13.5 GB + activations 6.1 GB + ... > 40 GB"), so
// that "feasible" (the plan meets its activation budget) is never read as
// "fits".
//
//   v1::DeviceFit fit = DescribeDeviceFit(report.results(), keep_all);
//   if (!fit.fits_device()) Refuse(fit.summary(), fit.min_device_bytes());
#ifndef SLACKSWAP_CORE_DEVICE_FIT_H_
#define SLACKSWAP_CORE_DEVICE_FIT_H_

#include <cstdint>
#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "slackswap/v1/report.pb.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Bytes as device figures are compared: two decimals in GB (TB from 10^12
// bytes), so 39.97 GB does not print as "40 GB <= 40 GB".
std::string FormatDeviceBytes(int64_t bytes);

// The policy name DeviceFit gives a plan that keeps every activation.
inline constexpr char kKeepAllName[] = "keep all";

// "fits: static A + activations B + transient and allocator overhead C +
// reserve D [+ headroom E] = F <= G" (or "does not fit: ... > G") for a
// result whose device was modelled; a note when it was not, or when its
// step did not complete.
std::string DeviceSummary(const v1::SimulationResult& r);

// The DeviceFit of `results` (each with a modelled device; those without,
// unavailable ones and infeasible ones are left out of the minimum), with
// `keep_all` the result of keeping every activation on the same device.
// The fastest fitting result of a budgeted policy names the policy (ties go
// to the earlier one); else "keep all" when keeping everything fits.
v1::DeviceFit DescribeDeviceFit(
    const google::protobuf::RepeatedPtrField<v1::PolicyResult>& results,
    const v1::SimulationResult& keep_all);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_DEVICE_FIT_H_
