// DeviceFit and the summary, on results with hand-set numbers.
#include "core/device_fit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

constexpr int64_t GB = 1'000'000'000;

v1::SimulationResult Result(int64_t reserved, double retained,
                            int64_t capacity = 40 * GB) {
  v1::SimulationResult r;
  r.set_feasible(true);
  r.set_throughput_retained(retained);
  r.set_static_bytes(13 * GB);
  r.set_peak_activation_bytes(reserved - 14 * GB);
  v1::DeviceMemory* d = r.mutable_device();
  d->set_capacity_bytes(capacity);
  d->set_framework_reserve_bytes(GB);
  d->set_peak_reserved_bytes(reserved);
  d->set_required_bytes(reserved + GB);
  d->set_fits_device(reserved + GB <= capacity);
  return r;
}

google::protobuf::RepeatedPtrField<v1::PolicyResult> Results(
    std::initializer_list<std::pair<const char*, v1::SimulationResult>> rs) {
  google::protobuf::RepeatedPtrField<v1::PolicyResult> out;
  for (const auto& [policy, r] : rs) {
    v1::PolicyResult* p = out.Add();
    p->set_policy(policy);
    *p->mutable_result() = r;
  }
  return out;
}

TEST(DeviceFitTest, SummarySaysWhatFitsAndWhatDoesNot) {
  EXPECT_EQ(DeviceSummary(Result(30 * GB, 1)),
            "fits: static 13.00 GB + activations 16.00 GB + transient and "
            "allocator overhead 1.00 GB + reserve 1.00 GB = 31.00 GB <= 40.00 "
            "GB");
  v1::SimulationResult over = Result(45 * GB, 1);
  over.mutable_device()->set_headroom_bytes(GB / 2);
  EXPECT_EQ(DeviceSummary(over),
            "does not fit: static 13.00 GB + activations 31.00 GB + transient "
            "and allocator overhead 1.00 GB + reserve 1.00 GB + headroom 500 "
            "MB = 46.00 GB > 40.00 GB");
  v1::SimulationResult stuck = Result(30 * GB, 0);
  stuck.set_feasible(false);
  stuck.set_infeasible_reason("op 1 (f) ...");
  EXPECT_EQ(DeviceSummary(stuck),
            "does not fit: the step does not complete (op 1 (f) ...)");
  EXPECT_EQ(DeviceSummary(v1::SimulationResult()),
            "the device was not modelled");
}

TEST(DeviceFitTest, TheFastestFittingBudgetedPolicyAndTheLeastMemory) {
  const v1::SimulationResult keep_all = Result(55 * GB, 1);
  const auto results = Results({{"ideal", Result(55 * GB, 1)},
                                {"recompute_only", Result(30 * GB, 0.95)},
                                {"swap_only", Result(38 * GB, 0.97)},
                                {"slackswap", Result(39 * GB, 0.99)}});
  const v1::DeviceFit fit = DescribeDeviceFit(results, keep_all);
  EXPECT_TRUE(fit.fits_device());
  EXPECT_FALSE(fit.fits_without_plan());
  EXPECT_EQ(fit.policy(), "slackswap");
  EXPECT_EQ(fit.min_device_bytes(), 31 * GB);
  EXPECT_EQ(fit.min_device_policy(), "recompute_only");
  EXPECT_EQ(fit.activation_bytes(), 25 * GB);  // slackswap's
  EXPECT_EQ(fit.overhead_bytes(), GB);
  EXPECT_THAT(fit.summary(), ::testing::StartsWith("fits: "));
}

TEST(DeviceFitTest, WhenNothingFitsTheLeastIsDescribed) {
  const v1::SimulationResult keep_all = Result(55 * GB, 1, 20 * GB);
  const auto results =
      Results({{"recompute_only", Result(25 * GB, 0.9, 20 * GB)},
               {"slackswap", Result(27 * GB, 0.95, 20 * GB)}});
  const v1::DeviceFit fit = DescribeDeviceFit(results, keep_all);
  EXPECT_FALSE(fit.fits_device());
  EXPECT_TRUE(fit.policy().empty());
  EXPECT_EQ(fit.min_device_bytes(), 26 * GB);
  EXPECT_EQ(fit.min_device_policy(), "recompute_only");
  EXPECT_THAT(fit.summary(), ::testing::HasSubstr("= 26.00 GB > 20.00 GB"));
}

TEST(DeviceFitTest, KeepingEverythingFitsWithoutAPlan) {
  const v1::SimulationResult keep_all = Result(30 * GB, 1);
  const auto results = Results({{"ideal", keep_all}});
  const v1::DeviceFit fit = DescribeDeviceFit(results, keep_all);
  EXPECT_TRUE(fit.fits_device());
  EXPECT_TRUE(fit.fits_without_plan());
  EXPECT_EQ(fit.policy(), kKeepAllName);
  EXPECT_EQ(fit.min_device_bytes(), 31 * GB);
}

}  // namespace
}  // namespace slackswap
