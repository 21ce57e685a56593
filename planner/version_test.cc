// kPlannerVersion stays honest: the plans and simulated figures of fixed
// requests (the three built-in workloads and random steps, three budgets,
// every default policy) hash to the fingerprint recorded for this version.
// When a change moves any of them, this fails: bump kPlannerVersion
// (planner/version.h) and record the new fingerprint below, with the table
// of answers the failure prints (kAnswers), which says which requests and
// policies the next change moves.
#include "planner/version.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "model/workloads.h"
#include "planner/policy.h"
#include "testing/random_graphs.h"

namespace slackswap {
namespace {

// kPlannerVersion -> the fingerprint of its answers (each over the requests
// of its day: version 3 added the budget 0.7, where its change moved plans
// of the built-in workloads; at 0.3 and 0.5 it hashes as version 2 did;
// version 4 moved slackswap's plan for gpt2-xl at 0.3).
constexpr const char* kFingerprints[] = {
    "",  // versions start at 1
    "a082d1e8d6c01ee46436451389486b5a935e8732ae7279dc4db1cd737d90f4b2",
    "f67f3382fbfa6cf09b349b58296611d67a5aea8fcd7fd393090a435da7d1449b",
    "25c51cc4161ac960f98fa8d5f119b00bbda151251c6b4e4768fe5ce9ba4885b4",
    "6b6430dfc82abac4024f4c74833deb9c9ebc3a34c575bd134ccbedfe06eee0ba",
};

// For the failure message only (the test asserts the fingerprint alone):
// per request (graph and budget), each default policy's answer as the first
// 8 hex digits of its SHA-256, in DefaultPolicyNames() order, as version
// kAnswersVersion answered.
constexpr int kAnswersVersion = 4;
constexpr const char* kAnswers[] = {
    "bert-large 0.3: 3e0e1c91 24282f7b 91ff4c61 44c736a4 0400e587",
    "bert-large 0.5: 3e0e1c91 39cff9fc ad87e2bc f7e50112 362d2802",
    "bert-large 0.7: 3e0e1c91 15f85bb1 e2b50faa 707ebd5c 7815c641",
    "gpt2-xl 0.3: fe08540c ae549002 b56e9cea 2cd05e7e 46dbf60f",
    "gpt2-xl 0.5: fe08540c e6f6c7c3 fff0e318 ec7d394a 17e2771d",
    "gpt2-xl 0.7: fe08540c 78ab9975 8ba14930 987b1a2e 601555f5",
    "llama-7b 0.3: 5432b14d be11fc71 a4132a5c 73ead394 9c90d7b0",
    "llama-7b 0.5: 5432b14d 2158c009 dfcfd994 18025a40 b2b4bc02",
    "llama-7b 0.7: 5432b14d f8697f7a 7e9bc33b 0ffac0a2 02ece7cb",
    "random step 0 0.3: a779bd7f 54a9e1ab 9158411e fc0aaca3 0c48330e",
    "random step 0 0.5: a779bd7f 74a99deb edecd298 cb354c9a e34b193e",
    "random step 0 0.7: a779bd7f 152197b0 f334142f 0bc1bf52 e73bd05e",
    "random step 1 0.3: 3d4edbaf c77b507c 5fc58faf e7bbefde 49d2977e",
    "random step 1 0.5: 3d4edbaf c77b507c 5fc58faf 5f8b8f7c 49d2977e",
    "random step 1 0.7: 3d4edbaf dc83adb7 fb2cc5f5 b435e473 7f597ae9",
    "random step 2 0.3: 63ef3d78 bce34a1a 43e14408 26f5a660 bec1b21e",
    "random step 2 0.5: 63ef3d78 bce34a1a 43e14408 26f5a660 bec1b21e",
    "random step 2 0.7: 63ef3d78 315a5d9a 1a19c4ee 7b765d8b 042a66e3",
    "random step 3 0.3: 41b1200c db6a4d35 9152c3ce a2a99516 c7943cf9",
    "random step 3 0.5: 41b1200c 7cee3f4d 9d0d3ef5 f23b2260 3f6a4209",
    "random step 3 0.7: 41b1200c 322fdf49 1a7c919b 6f8dad97 a17b1615",
    "random step 4 0.3: e6d45222 8ac58749 b3ab8e11 f56c8b4d e842d42e",
    "random step 4 0.5: e6d45222 75060e24 7cb9416f 0a651693 9bf477ca",
    "random step 4 0.7: e6d45222 f835341e be6c5915 b69f48cb 2f437126",
    "random step 5 0.3: c3958dd1 8f65c096 da58f77f 3c25ef8c f01cb8a6",
    "random step 5 0.5: c3958dd1 c125bdc1 8d7b169d 89b2b5db 7cd1d9f6",
    "random step 5 0.7: c3958dd1 c125bdc1 8d7b169d 89b2b5db 7cd1d9f6",
    "random step 6 0.3: fff92b4d 1789cd9c 0ad74132 a528547a d9ae0cda",
    "random step 6 0.5: fff92b4d 246c45f6 55d61266 bf5a7965 93658bb6",
    "random step 6 0.7: fff92b4d e63c0803 79a5bfa5 0b17b607 ab37d495",
    "random step 7 0.3: fc42e604 e7c08df2 8855b83a 4e5b25d2 3b765b9d",
    "random step 7 0.5: fc42e604 d2d570c9 8d3045b1 2a2649be 24078066",
    "random step 7 0.7: fc42e604 8c5df8c3 59a907eb eb1e6463 ba0cacee",
};

// Every integer figure of a plan and its simulation, in order.
std::string Answer(const PlanOutcome& o) {
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
  return text;
}

// One request's answers: (policy, Answer) per default policy.
struct Request {
  std::string label;  // "gpt2-xl 0.3": the graph and the budget's fraction
  std::vector<std::pair<std::string, std::string>> answers;
};

// An answer as a failure shows it: its decisions cut short, its figures.
std::string Shown(const std::string& answer) {
  constexpr size_t kDecisionChars = 300;
  const size_t figures = answer.rfind('|');
  if (figures == std::string::npos || figures <= kDecisionChars) {
    return answer;
  }
  return absl::StrCat(answer.substr(0, kDecisionChars), "...",
                      answer.substr(figures));
}

std::string ShortHash(const std::string& answer) {
  return Sha256Hex(Sha256::Of(answer)).substr(0, 8);
}

// The line of kAnswers for `r`.
std::string AnswersLine(const Request& r) {
  std::vector<std::string> hashes;
  for (const auto& [policy, answer] : r.answers) {
    hashes.push_back(ShortHash(answer));
  }
  return absl::StrCat(r.label, ": ", absl::StrJoin(hashes, " "));
}

// Which answers differ from kAnswers (the start of the first of them), and
// this build's table to record.
std::string Differences(const std::vector<Request>& requests) {
  std::map<std::string, std::vector<std::string>> recorded;
  for (const char* line : kAnswers) {
    std::pair<std::string, std::string> parts = absl::StrSplit(line, ": ");
    recorded[parts.first] = absl::StrSplit(parts.second, ' ');
  }
  std::string changed, first, table;
  for (const Request& r : requests) {
    const std::vector<std::string>& then = recorded[r.label];
    std::vector<std::string> policies;
    for (size_t i = 0; i < r.answers.size(); ++i) {
      const auto& [policy, answer] = r.answers[i];
      if (i < then.size() && then[i] == ShortHash(answer)) continue;
      policies.push_back(policy);
      if (first.empty()) first = absl::StrCat(r.label, " ", Shown(answer));
    }
    if (!policies.empty()) {
      absl::StrAppend(&changed, "  ", r.label, ": ",
                      absl::StrJoin(policies, ", "), "\n");
    }
    absl::StrAppend(&table, "    \"", AnswersLine(r), "\",\n");
  }
  return absl::StrCat(
      "answers that differ from version ", kAnswersVersion, "'s:\n",
      changed.empty() ? "  none: only their order or number changed\n"
                      : changed,
      first.empty() ? "" : absl::StrCat("the first, now: ", first),
      "this build's, to record as kAnswers:\n", table);
}

TEST(PlannerVersionTest, AnswersMatchTheFingerprintOfThisVersion) {
  std::vector<std::pair<std::string, Graph>> graphs;
  for (const std::string& w : WorkloadNames()) {
    absl::StatusOr<Graph> g = BuildWorkload(w, {});
    ASSERT_TRUE(g.ok()) << w << ": " << g.status();
    graphs.push_back({w, *std::move(g)});
  }
  for (uint32_t seed = 0; seed < 8; ++seed) {
    graphs.push_back({absl::StrCat("random step ", seed),
                      testutil::RandomTrainingStep(seed)});
  }
  absl::StatusOr<Hardware> hw = FindHardware("a100-80gb-pcie4");
  ASSERT_TRUE(hw.ok()) << hw.status();
  Sha256 h;
  std::vector<Request> requests;
  for (const auto& [name, g] : graphs) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, *hw);
    ASSERT_TRUE(a.ok()) << a.status();
    for (double fraction : {0.3, 0.5, 0.7}) {
      PlanningContext ctx{
          g, *hw, *a,
          static_cast<int64_t>(fraction *
                               static_cast<double>(g.index.saved_bytes))};
      ctx.explain = false;
      Request& request = requests.emplace_back();
      request.label = absl::StrCat(name, " ", fraction);
      for (const std::string& policy : DefaultPolicyNames()) {
        absl::StatusOr<PlanOutcome> o = PlanAndSimulate(policy, ctx, {});
        ASSERT_TRUE(o.ok()) << policy << ": " << o.status();
        const std::string answer = Answer(*o);
        h.Update(answer);
        request.answers.push_back({policy, answer});
      }
    }
  }
  const std::string fingerprint = Sha256Hex(h.Finish());
  ASSERT_LT(kPlannerVersion, static_cast<int>(std::size(kFingerprints)));
  EXPECT_EQ(fingerprint, kFingerprints[kPlannerVersion])
      << "planning answers changed: bump kPlannerVersion in "
         "planner/version.h and record this fingerprint for it\n"
      << Differences(requests);
}

}  // namespace
}  // namespace slackswap
