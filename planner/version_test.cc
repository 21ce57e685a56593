// kPlannerVersion stays honest: the plans and simulated figures of fixed
// requests (the three built-in workloads and random steps, two budgets,
// every default policy) hash to the fingerprint recorded for this version.
// When a change moves any of them, this fails: bump kPlannerVersion
// (planner/version.h) and record the new fingerprint below.
#include "planner/version.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "model/workloads.h"
#include "planner/policy.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

// kPlannerVersion -> the fingerprint of its answers.
constexpr const char* kFingerprints[] = {
    "",  // versions start at 1
    "a082d1e8d6c01ee46436451389486b5a935e8732ae7279dc4db1cd737d90f4b2",
};

// Every integer figure of a plan and its simulation, in order.
void AddAnswer(const PlanOutcome& o, Sha256& h) {
  std::string text = absl::StrCat(o.plan.policy, ";");
  for (size_t t = 0; t < o.plan.decisions.size(); ++t) {
    const Decision& d = o.plan.decisions[t];
    if (d.action == Action::kKeep) continue;
    absl::StrAppend(&text, t, ":", static_cast<int>(d.action), ":",
                    d.prefetch_after_op, ",");
  }
  const SimResult& r = o.result;
  absl::StrAppend(&text, "|", r.feasible, ",", r.step_ns, ",",
                  r.peak_activation_bytes, ",", r.peak_transient_bytes, ",",
                  r.d2h_bytes, ",", r.h2d_bytes, ",", r.recompute_ns, ",",
                  r.stall_prefetch_ns, ",", r.stall_swap_out_ns, ",",
                  r.stall_memory_ns, "\n");
  h.Update(text);
}

TEST(PlannerVersionTest, AnswersMatchTheFingerprintOfThisVersion) {
  std::vector<Graph> graphs;
  for (const std::string& w : WorkloadNames()) {
    graphs.push_back(*BuildWorkload(w, {}));
  }
  for (uint32_t seed = 0; seed < 8; ++seed) {
    graphs.push_back(testing::RandomTrainingStep(seed));
  }
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  Sha256 h;
  for (const Graph& g : graphs) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, hw);
    ASSERT_TRUE(a.ok()) << a.status();
    for (double fraction : {0.3, 0.5}) {
      PlanningContext ctx{
          g, hw, *a,
          static_cast<int64_t>(fraction *
                               static_cast<double>(g.index.saved_bytes))};
      ctx.explain = false;
      for (const std::string& policy : DefaultPolicyNames()) {
        absl::StatusOr<PlanOutcome> o = PlanAndSimulate(policy, ctx, {});
        ASSERT_TRUE(o.ok()) << policy << ": " << o.status();
        AddAnswer(*o, h);
      }
    }
  }
  const std::string fingerprint = Sha256Hex(h.Finish());
  ASSERT_LT(kPlannerVersion, static_cast<int>(std::size(kFingerprints)));
  EXPECT_EQ(fingerprint, kFingerprints[kPlannerVersion])
      << "planning answers changed: bump kPlannerVersion in "
         "planner/version.h and record this fingerprint for it";
}

}  // namespace
}  // namespace slackswap
