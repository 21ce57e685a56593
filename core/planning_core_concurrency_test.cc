// The core is called from every worker thread at once: the same requests
// must give the same answers as when run alone. Run under ThreadSanitizer in
// CI (scripts/sanitize.sh thread).
#include <string>
#include <thread>
#include <vector>

#include "core/planning_core.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

std::string Canonical(v1::PlanResponse r) {
  r.clear_server_seconds();
  for (auto& p : *r.mutable_report()->mutable_results()) {
    p.clear_planning_seconds();
  }
  return r.SerializeAsString();
}

TEST(PlanningCoreConcurrencyTest, ThreadsGetTheAnswersOneThreadGets) {
  const PlanningCore core{CoreLimits{}};
  std::vector<v1::PlanRequest> requests;
  for (const char* workload : {"bert-large", "gpt2-xl", "llama-7b"}) {
    v1::PlanRequest req;
    req.mutable_step()->mutable_workload()->set_name(workload);
    req.mutable_step()->mutable_workload()->set_layers(3);
    req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
    req.set_budget_fraction(0.6);
    req.set_timeline_points(32);
    requests.push_back(req);
  }
  std::vector<std::string> expected;
  for (const v1::PlanRequest& req : requests) {
    absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
    ASSERT_TRUE(r.ok()) << r.status();
    expected.push_back(Canonical(*r));
  }
  constexpr int kThreads = 4;
  constexpr int kRounds = 3;
  std::vector<std::vector<std::string>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < requests.size(); ++i) {
          const v1::PlanRequest& req = requests[(i + t) % requests.size()];
          absl::StatusOr<v1::PlanResponse> r = core.PlanStep(req, {});
          got[t].push_back(r.ok() ? Canonical(*r) : r.status().ToString());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(got[t].size(), kRounds * requests.size());
    for (size_t k = 0; k < got[t].size(); ++k) {
      EXPECT_EQ(got[t][k],
                expected[(k % requests.size() + t) % requests.size()])
          << "thread " << t << " call " << k;
    }
  }
}

}  // namespace
}  // namespace slackswap
