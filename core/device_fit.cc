#include "core/device_fit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "planner/policy.h"

namespace slackswap {
namespace {

// The reserved peak beyond the static tensors and the activation peak.
int64_t Overhead(const v1::SimulationResult& r) {
  return std::max<int64_t>(0, r.device().peak_reserved_bytes() -
                                  r.static_bytes() - r.peak_activation_bytes());
}

// A result whose required bytes count: its device modelled, its step
// completed.
bool Counts(const v1::SimulationResult& r) {
  return r.has_device() && r.feasible();
}

void Describe(const v1::SimulationResult& r, v1::DeviceFit& fit) {
  fit.set_static_bytes(r.static_bytes());
  fit.set_activation_bytes(r.peak_activation_bytes());
  fit.set_overhead_bytes(Overhead(r));
  fit.set_summary(DeviceSummary(r));
}

}  // namespace

std::string FormatDeviceBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e12) return absl::StrFormat("%.2f TB", b / 1e12);
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  return FormatBytes(bytes);
}

std::string DeviceSummary(const v1::SimulationResult& r) {
  if (!r.has_device()) return "the device was not modelled";
  const v1::DeviceMemory& d = r.device();
  if (!r.feasible()) {
    return absl::StrCat("does not fit: the step does not complete (",
                        r.infeasible_reason(), ")");
  }
  std::string out = absl::StrCat(
      d.fits_device() ? "fits: " : "does not fit: ", "static ",
      FormatDeviceBytes(r.static_bytes()), " + activations ",
      FormatDeviceBytes(r.peak_activation_bytes()),
      " + transient and allocator overhead ", FormatDeviceBytes(Overhead(r)),
      " + reserve ", FormatDeviceBytes(d.framework_reserve_bytes()));
  if (d.headroom_bytes() > 0) {
    absl::StrAppend(&out, " + headroom ",
                    FormatDeviceBytes(d.headroom_bytes()));
  }
  absl::StrAppend(&out, " = ", FormatDeviceBytes(d.required_bytes()),
                  d.fits_device() ? " <= " : " > ",
                  FormatDeviceBytes(d.capacity_bytes()));
  return out;
}

v1::DeviceFit DescribeDeviceFit(
    const google::protobuf::RepeatedPtrField<v1::PolicyResult>& results,
    const v1::SimulationResult& keep_all) {
  v1::DeviceFit fit;
  const v1::DeviceMemory& d = keep_all.device();
  fit.set_capacity_bytes(d.capacity_bytes());
  fit.set_framework_reserve_bytes(d.framework_reserve_bytes());
  fit.set_headroom_bytes(d.headroom_bytes());
  fit.set_fits_without_plan(Counts(keep_all) && d.fits_device());
  const v1::SimulationResult* least = Counts(keep_all) ? &keep_all : nullptr;
  fit.set_min_device_policy(kKeepAllName);
  const v1::PolicyResult* fastest = nullptr;
  for (const v1::PolicyResult& p : results) {
    const v1::SimulationResult& r = p.result();
    if (!p.unavailable().empty() || !Counts(r)) continue;
    if (least == nullptr ||
        r.device().required_bytes() < least->device().required_bytes()) {
      least = &r;
      fit.set_min_device_policy(p.policy());
    }
    // The unbudgeted reference keeps everything: keep_all says that.
    absl::StatusOr<const PolicyInfo*> info = FindPolicy(p.policy());
    const bool reference = info.ok() && (*info)->unbudgeted_reference;
    if (!reference && r.device().fits_device() &&
        (fastest == nullptr ||
         r.throughput_retained() > fastest->result().throughput_retained())) {
      fastest = &p;
    }
  }
  if (least != nullptr) {
    fit.set_min_device_bytes(least->device().required_bytes());
  }
  if (fastest != nullptr) {
    fit.set_fits_device(true);
    fit.set_policy(fastest->policy());
    Describe(fastest->result(), fit);
  } else if (fit.fits_without_plan()) {
    fit.set_fits_device(true);
    fit.set_policy(kKeepAllName);
    Describe(keep_all, fit);
  } else if (least != nullptr) {
    Describe(*least, fit);
  } else {
    fit.set_summary(DeviceSummary(keep_all));
  }
  return fit;
}

}  // namespace slackswap
