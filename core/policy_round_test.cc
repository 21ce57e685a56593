// PolicyRound, the loop Plan and Sweep share, on policies that return
// outcomes made up by the test: which plans become seeds, what an
// unavailable or failing policy does to the round, and which seed the bound
// starts from.
#include "core/policy_round.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

const PolicyInfo* Policy(const char* name) {
  absl::StatusOr<const PolicyInfo*> p = FindPolicy(name);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

// An outcome whose plan is named after its policy (to tell seeds apart).
PlanOutcome Outcome(const std::string& policy, bool feasible, int64_t step_ns,
                    int64_t peak_bytes) {
  PlanOutcome o;
  o.plan.policy = policy;
  o.result.feasible = feasible;
  o.result.step_ns = step_ns;
  o.result.peak_activation_bytes = peak_bytes;
  return o;
}

std::vector<std::string> SeedNames(const PolicyRound& round) {
  std::vector<std::string> names;
  for (const Plan& p : round.seeds()) names.push_back(p.policy);
  return names;
}

TEST(PolicyRoundTest, BudgetedPlansBecomeSeedsForTheLaterPolicies) {
  PolicyRound round;
  std::vector<size_t> seeds_seen;
  ASSERT_TRUE(round
                  .Run({Policy("ideal"), Policy("recompute_only"),
                        Policy("capuchin"), Policy("slackswap")},
                       [&](const PolicyInfo& p, double* seconds) {
                         seeds_seen.push_back(round.seeds().size());
                         *seconds = 1;
                         return Outcome(p.name, true, 100, 10);
                       })
                  .ok());
  // The reference has no budget: its plan is no seed.
  EXPECT_THAT(seeds_seen, ::testing::ElementsAre(0, 0, 1, 2));
  EXPECT_THAT(SeedNames(round), ::testing::ElementsAre(
                                    "recompute_only", "capuchin", "slackswap"));
  ASSERT_EQ(round.entries().size(), 4u);
  const PolicyRound::Entry& ideal = round.Of(Policy("ideal"));
  EXPECT_EQ(round.PlanOf(ideal).policy, "ideal");
  EXPECT_EQ(round.PlanOf(round.Of(Policy("capuchin"))).policy, "capuchin");
  EXPECT_EQ(ideal.seconds, 1);
  EXPECT_TRUE(round.any_budgeted());
  EXPECT_TRUE(round.any_feasible());
}

TEST(PolicyRoundTest, TheBoundStartsFromTheFastestFeasibleSeed) {
  PolicyRound round;
  ASSERT_TRUE(round
                  .Run({Policy("recompute_only"), Policy("capuchin"),
                        Policy("slackswap")},
                       [](const PolicyInfo& p, double*) {
                         const std::string name = p.name;
                         if (name == "recompute_only") {
                           return Outcome(name, false, 50, 1);  // infeasible
                         }
                         return Outcome(name, true,
                                        name == "capuchin" ? 120 : 110, 10);
                       })
                  .ok());
  ASSERT_NE(round.BoundStart(), nullptr);
  EXPECT_EQ(round.BoundStart()->policy, "slackswap");
}

TEST(PolicyRoundTest, WithNoFeasibleSeedTheBoundStartsFromTheLowestPeak) {
  PolicyRound round;
  ASSERT_TRUE(round
                  .Run({Policy("recompute_only"), Policy("capuchin")},
                       [](const PolicyInfo& p, double*) {
                         const std::string name = p.name;
                         return Outcome(name, false, 100,
                                        name == "capuchin" ? 5 : 7);
                       })
                  .ok());
  EXPECT_TRUE(round.any_budgeted());
  EXPECT_FALSE(round.any_feasible());
  ASSERT_NE(round.BoundStart(), nullptr);
  EXPECT_EQ(round.BoundStart()->policy, "capuchin");
}

TEST(PolicyRoundTest, APolicyThatMayBeUnavailableSaysWhyAndTheRoundGoesOn) {
  PolicyRound round;
  ASSERT_TRUE(
      round
          .Run({Policy("optimal"), Policy("slackswap")},
               [](const PolicyInfo& p, double*) -> absl::StatusOr<PlanOutcome> {
                 if (p.may_be_unavailable) {
                   return absl::ResourceExhaustedError("model too big");
                 }
                 return Outcome(p.name, true, 100, 10);
               })
          .ok());
  const PolicyRound::Entry& optimal = round.Of(Policy("optimal"));
  EXPECT_FALSE(optimal.result.has_value());
  EXPECT_EQ(optimal.unavailable, "model too big");
  EXPECT_THAT(SeedNames(round), ::testing::ElementsAre("slackswap"));
}

TEST(PolicyRoundTest, AnyOtherErrorOrACancellationEndsTheRound) {
  for (const char* failing : {"capuchin", "optimal"}) {
    PolicyRound round;
    int runs = 0;
    const absl::Status s = round.Run(
        {Policy("capuchin"), Policy("optimal"), Policy("slackswap")},
        [&](const PolicyInfo& p, double*) -> absl::StatusOr<PlanOutcome> {
          ++runs;
          if (std::string(p.name) == failing) {
            return std::string(failing) == "optimal"
                       ? absl::CancelledError("stopped")
                       : absl::InternalError("broken");
          }
          return Outcome(p.name, true, 100, 10);
        });
    EXPECT_FALSE(s.ok()) << failing;
    EXPECT_EQ(runs, std::string(failing) == "capuchin" ? 1 : 2) << failing;
  }
}

}  // namespace
}  // namespace slackswap
