// The Fit call: every catalog profile for llama-7b (batch 4, sequence
// 2048), ranked, and each answer checked against a separate Plan call with
// the device budget; prices; and its validation, field by field.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hardware.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

v1::FitRequest Llama7bFit(const std::vector<std::string>& hardware) {
  v1::FitRequest req;
  req.mutable_workload()->set_name("llama-7b");
  for (const std::string& name : hardware) {
    req.add_profiles()->set_hardware_name(name);
  }
  return req;
}

TEST(FitStepTest, RanksTheCatalogAsSeparatePlanCallsDo) {
  const PlanningCore core{CoreLimits{}};
  absl::StatusOr<v1::FitResponse> fit =
      core.FitStep(Llama7bFit(HardwareNames()), {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->results_size(), static_cast<int>(HardwareNames().size()));
  EXPECT_EQ(fit->ranked_by(), "step_time");
  EXPECT_DOUBLE_EQ(fit->target(), 0.99);
  int64_t previous_step = 0;
  for (int i = 0; i < fit->results_size(); ++i) {
    const v1::FitResult& f = fit->results(i);
    SCOPED_TRACE(f.hardware_name());
    // Every catalog GPU holds llama-7b, with a plan where it must.
    ASSERT_TRUE(f.fits_device()) << f.summary();
    EXPECT_EQ(f.rank(), i + 1);
    EXPECT_GE(f.step_ns(), previous_step);
    previous_step = f.step_ns();
    EXPECT_GE(f.headroom_bytes(), 0);
    EXPECT_EQ(f.fits_without_plan(), f.hardware_name() != "a100-40gb-pcie4");
    EXPECT_TRUE(f.target_reached());
    EXPECT_LE(f.min_device_bytes(), f.min_device_bytes_for_target());
    // The same answer as Plan with the device budget and the same policy.
    v1::PlanRequest plan;
    plan.mutable_step()->mutable_workload()->set_name("llama-7b");
    plan.mutable_step()->set_hardware_name(f.hardware_name());
    plan.mutable_budget_device();
    plan.add_policies("slackswap");
    absl::StatusOr<v1::PlanResponse> p = core.PlanStep(plan, {});
    ASSERT_TRUE(p.ok()) << p.status();
    const v1::SimulationResult& r = p->report().results(0).result();
    EXPECT_EQ(p->report().device().fits_device(), f.fits_device());
    EXPECT_EQ(r.step_ns(), f.step_ns());
    EXPECT_EQ(r.budget_bytes(), f.budget_bytes());
    EXPECT_DOUBLE_EQ(r.throughput_retained(), f.throughput_retained());
    EXPECT_EQ(r.device().peak_reserved_bytes(), f.peak_reserved_bytes());
  }
  // Faster GPUs first: GH200, then H100, then the A100s.
  EXPECT_EQ(fit->results(0).hardware_name(), "gh200-c2c");
  EXPECT_EQ(fit->results(1).hardware_name(), "h100-pcie5");
}

TEST(FitStepTest, PricesRankByTheCostOf1000Steps) {
  const PlanningCore core{CoreLimits{}};
  v1::FitRequest req = Llama7bFit({"a100-40gb-pcie4", "h100-pcie5"});
  req.mutable_profiles(0)->set_price_per_hour(1.0);
  req.mutable_profiles(1)->set_price_per_hour(100.0);
  absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->ranked_by(), "cost_per_1000_steps");
  // The H100 is faster, but 100 times the price: the A100 ranks first.
  ASSERT_EQ(fit->results(0).hardware_name(), "a100-40gb-pcie4");
  const v1::FitResult& a100 = fit->results(0);
  EXPECT_EQ(a100.rank(), 1);
  EXPECT_DOUBLE_EQ(a100.cost_per_1000_steps(),
                   1.0 * a100.step_ns() * 1e3 / 3.6e12);
  EXPECT_LT(a100.cost_per_1000_steps(), fit->results(1).cost_per_1000_steps());
}

TEST(FitStepTest, ADeviceTooSmallIsANoWithTheNumbers) {
  const PlanningCore core{CoreLimits{}};
  v1::FitRequest req = Llama7bFit({});
  v1::HardwareProfile* tiny = req.add_profiles()->mutable_hardware_inline();
  *tiny = v1::HardwareProfile();
  tiny->set_name("a100-12gb");
  // An A100 with 12 GB: less than the parameters alone.
  const Hardware a100 = *FindHardware("a100-40gb-pcie4");
  tiny->set_memory_gb(12);
  tiny->set_peak_tflops_bf16(a100.peak_tflops_bf16);
  tiny->set_hbm_gbps(a100.hbm_gbps);
  tiny->set_hbm_efficiency(a100.hbm_efficiency);
  tiny->set_matmul_efficiency(a100.matmul_efficiency);
  tiny->set_attn_efficiency_fwd(a100.attn_efficiency_fwd);
  tiny->set_attn_efficiency_bwd(a100.attn_efficiency_bwd);
  tiny->set_h2d_gbps(a100.h2d_gbps);
  tiny->set_d2h_gbps(a100.d2h_gbps);
  tiny->set_bidir_h2d_gbps(a100.bidir_h2d_gbps);
  tiny->set_bidir_d2h_gbps(a100.bidir_d2h_gbps);
  tiny->set_duplex(v1::DUPLEX_FULL);
  tiny->set_copy_engines(2);
  tiny->set_pinned_host_memory_bytes(a100.pinned_host_memory_bytes);
  tiny->set_framework_reserve_bytes(500'000'000);
  absl::StatusOr<v1::FitResponse> fit = core.FitStep(req, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  const v1::FitResult& f = fit->results(0);
  EXPECT_FALSE(f.fits_device());
  EXPECT_EQ(f.rank(), 0);
  EXPECT_LT(f.headroom_bytes(), 0);
  EXPECT_EQ(f.framework_reserve_bytes(), 500'000'000);
  EXPECT_GT(f.min_device_bytes(), f.capacity_bytes());
  EXPECT_THAT(f.summary(), HasSubstr("does not fit: static 13.48 GB"));
  EXPECT_THAT(f.summary(), HasSubstr("reserve 500 MB"));
  EXPECT_THAT(f.summary(), HasSubstr("> 12.00 GB"));
}

TEST(FitStepTest, EveryFieldIsValidated) {
  const PlanningCore core{CoreLimits{}};
  auto error = [&](const v1::FitRequest& req) {
    absl::Status s = core.FitStep(req, {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  v1::FitRequest none = Llama7bFit({});
  EXPECT_THAT(error(none), HasSubstr("profiles: give 1 to 16 hardware "
                                     "profiles (or nodes, for a job), got 0"));
  v1::FitRequest many = Llama7bFit(std::vector<std::string>(17, "h100-pcie5"));
  EXPECT_THAT(error(many), HasSubstr("got 17"));
  v1::FitRequest no_graph = Llama7bFit({"h100-pcie5"});
  no_graph.clear_workload();
  EXPECT_THAT(error(no_graph),
              HasSubstr("set graph_inline, graph_sha256 or workload"));
  v1::FitRequest unknown = Llama7bFit({"h100-pcie5", "tpu"});
  absl::Status s = core.FitStep(unknown, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[1].hardware_name"));
  for (double price :
       {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    v1::FitRequest bad = Llama7bFit({"h100-pcie5"});
    bad.mutable_profiles(0)->set_price_per_hour(price);
    EXPECT_THAT(error(bad), HasSubstr("profiles[0].price_per_hour must be a "
                                      "finite number >= 0"));
  }
  v1::FitRequest some = Llama7bFit({"h100-pcie5", "a100-40gb-pcie4"});
  some.mutable_profiles(0)->set_price_per_hour(2);
  EXPECT_THAT(error(some), HasSubstr("profiles[1].price_per_hour: give a "
                                     "price for every profile or for none"));
  for (double target : {0.0, 1.5, std::nan("")}) {
    v1::FitRequest bad = Llama7bFit({"h100-pcie5"});
    bad.set_target(target);
    EXPECT_THAT(error(bad), HasSubstr("target must be in (0, 1]"));
  }
  v1::FitRequest headroom = Llama7bFit({"h100-pcie5"});
  headroom.set_headroom_bytes(-5);
  EXPECT_THAT(error(headroom), HasSubstr("headroom_bytes must be >= 0"));
  for (const char* policy : {"ideal", "optimal"}) {
    v1::FitRequest bad = Llama7bFit({"h100-pcie5"});
    bad.add_policies(policy);
    EXPECT_THAT(error(bad), HasSubstr(absl::StrCat("policies[0]: ", policy)));
  }
}

}  // namespace
}  // namespace slackswap
