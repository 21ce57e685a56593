// The "plans unchanged" safety net: a SHA-256 fingerprint of what
// `slackswap sweep` reports and of every plan behind it, for each built-in
// workload on each catalog GPU and each torchvision graph
// (tests/data/torchvision) on a100-80gb-pcie4, compared with the goldens in
// tests/data/plan_fingerprints.txt. A change meant to make planning faster,
// not different (the plan search, the simulator, the lowering), must leave
// every line as it is; a mismatch names each case that changed.
//
// A change meant to change plans regenerates the goldens, and its commit
// says why they moved:
//
//   SLACKSWAP_UPDATE_FINGERPRINTS=1 build/tests/plan_fingerprint_test
//
// rewrites tests/data/plan_fingerprints.txt in the source tree
// (SLACKSWAP_SOURCE_DIR) and passes.
//
// Two lines per case:
//   sweep GRAPH HARDWARE HEX: the SweepReport `slackswap sweep --json` prints
//     with default flags, built from the core's messages as
//     cli/sweep_command.cc builds it, hashed as ToJson writes it (it holds no
//     wall time: nothing to strip). `slackswap sweep --workload NAME
//     --hardware HW --json | sha256sum` prints the same digest.
//   plans GRAPH HARDWARE HEX: each point of that sweep (budget fraction, then
//     policy, in order): the plan's every decision (tensor, action, prefetch
//     point) and the simulator's verdict on it (feasible, step time, peaks,
//     bytes each way, recompute time, stalls). The plans come from the loop
//     the sweep itself runs (core/policy_round.h: PolicyRound, seeds and
//     all, through PolicyRunner::Quiet) in the context the sweep builds
//     (core/sweep_run.cc), and each point's result must equal the sweep's
//     point, so these are the plans behind the sweep line.
//
// planner/version_test.cc keeps kPlannerVersion honest on a few requests
// (one GPU, two budgets, no seeds); this covers what a sweep plans, on every
// GPU, and names the cases that moved.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "gtest/gtest.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/hardware.h"
#include "model/workloads.h"
#include "planner/analysis.h"
#include "planner/policy.h"
#include "slackswap/v1/planner_service.pb.h"
#include "slackswap/v1/report.pb.h"

namespace slackswap {
namespace {

constexpr char kGoldenPath[] = "tests/data/plan_fingerprints.txt";
constexpr char kUpdateVariable[] = "SLACKSWAP_UPDATE_FINGERPRINTS";
constexpr const char* kTorchvisionModels[] = {
    "resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny"};
// What the torchvision study plans on (docs/PLANNERS.md, "Real models").
constexpr char kTorchvisionHardware[] = "a100-80gb-pcie4";

std::string SourcePath(const std::string& relative) {
  return absl::StrCat(SLACKSWAP_SOURCE_DIR, "/", relative);
}

// One fingerprinted step: a graph on a GPU, as `slackswap sweep
// --workload NAME --hardware HW` or `--graph FILE --hardware HW` sends it.
struct Case {
  std::string graph;  // the workload's name or the graph file's stem
  std::string hardware;
  v1::StepSpec step;
};

absl::StatusOr<std::vector<Case>> Cases() {
  std::vector<Case> cases;
  for (const Workload& w : WorkloadCatalog()) {
    for (const Hardware& hw : HardwareCatalog()) {
      Case c{w.name, hw.name, {}};
      c.step.mutable_workload()->set_name(w.name);
      c.step.set_hardware_name(hw.name);
      cases.push_back(std::move(c));
    }
  }
  for (const char* model : kTorchvisionModels) {
    Case c{model, kTorchvisionHardware, {}};
    SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(
        SourcePath(absl::StrCat("tests/data/torchvision/", model, ".pb")),
        c.step.mutable_graph_inline()));
    c.step.set_hardware_name(kTorchvisionHardware);
    cases.push_back(std::move(c));
  }
  return cases;
}

// The report `slackswap sweep` prints for `step` with default flags, through
// the CLI's local backend (cli/backend.cc: the core's SweepBudgets, no stop)
// and collected as cli/sweep_command.cc collects it.
absl::StatusOr<v1::SweepReport> SweepAsTheCli(const v1::StepSpec& step) {
  v1::SweepRequest req;
  *req.mutable_step() = step;
  req.set_from(kDefaultSweepFrom);
  req.set_to(kDefaultSweepTo);
  req.set_step_fraction(kDefaultSweepStep);
  v1::SweepReport report;
  report.set_graph_name(step.has_workload() ? step.workload().name()
                                            : step.graph_inline().name());
  report.set_hardware_name(step.hardware_name());
  const PlanningCore core{CoreLimits{}};
  SLACKSWAP_RETURN_IF_ERROR(
      core.SweepBudgets(req, {}, [&](const v1::SweepResponse& msg) {
        if (msg.has_point()) {
          *report.add_points() = msg.point();
          report.set_unconstrained_peak_bytes(msg.unconstrained_peak_bytes());
          report.set_node_name(msg.node_name());
          report.set_ranks(msg.ranks());
          report.set_planned_h2d_gbps(msg.planned_h2d_gbps());
          report.set_planned_d2h_gbps(msg.planned_d2h_gbps());
        }
        if (msg.has_target()) *report.add_targets() = msg.target();
        if (msg.has_minimum()) *report.add_minimums() = msg.minimum();
        return true;
      }));
  return report;
}

// The default sweep's budget fractions, computed as core/sweep_run.cc's
// ResolveSweep does.
std::vector<double> DefaultFractions() {
  const double steps =
      (kDefaultSweepTo - kDefaultSweepFrom) / kDefaultSweepStep;
  const double count = std::floor(steps + 1e-9) + 1;
  std::vector<double> fractions;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    fractions.push_back(
        std::round((kDefaultSweepFrom + i * kDefaultSweepStep) * 1e9) / 1e9);
  }
  return fractions;
}

// Where the plans' run differs from the sweep's point `p`; empty when
// they agree.
std::string PointDifference(const v1::SweepPoint& p, const std::string& policy,
                            double fraction, int64_t budget,
                            const PolicyRound::Entry& e) {
  const SimResult& r = *e.result;
  if (p.policy() != policy || p.budget_fraction() != fraction ||
      p.budget_bytes() != budget || p.feasible() != r.feasible ||
      p.throughput_retained() != r.throughput_retained ||
      p.peak_activation_bytes() != r.peak_activation_bytes ||
      p.infeasible_reason() != r.infeasible_reason) {
    return absl::StrCat(
        "the sweep's point (", p.policy(), " at ", p.budget_fraction(),
        ": feasible ", p.feasible(), ", retained ", p.throughput_retained(),
        ", peak ", p.peak_activation_bytes(), ") is not the plan's (", policy,
        " at ", fraction, ": feasible ", r.feasible, ", retained ",
        r.throughput_retained, ", peak ", r.peak_activation_bytes, ")");
  }
  return "";
}

// One point as the plans fingerprint hashes it.
std::string PointText(const std::string& policy, int64_t budget,
                      const Plan& plan, const SimResult& r) {
  std::string text = absl::StrCat(
      "point ", policy, " ", budget, " ", r.feasible, " ", r.step_ns, " ",
      r.peak_activation_bytes, " ", r.peak_transient_bytes, " ", r.d2h_bytes,
      " ", r.h2d_bytes, " ", r.recompute_ns, " ", r.stall_prefetch_ns, " ",
      r.stall_swap_out_ns, " ", r.stall_memory_ns, "\n");
  for (size_t t = 0; t < plan.decisions.size(); ++t) {
    const Decision& d = plan.decisions[t];
    absl::StrAppend(&text, t, " ", static_cast<int>(d.action), " ",
                    d.prefetch_after_op, "\n");
  }
  return text;
}

// The plans behind `report`, the sweep of `step`: every policy's plan at
// every budget fraction, run as the sweep runs them (core/sweep_run.cc:
// SweepRunImpl's context, SweepAt's round), hashed in the sweep's order.
// Fails when a point's result is not the sweep's.
absl::StatusOr<std::string> PlansFingerprint(const v1::StepSpec& step,
                                             const v1::SweepReport& report) {
  const CoreLimits limits;
  SLACKSWAP_ASSIGN_OR_RETURN(Step s, ResolveStep(step, limits));
  SLACKSWAP_ASSIGN_OR_RETURN(std::vector<const PolicyInfo*> policies,
                             ResolvePolicies(v1::SweepRequest().policies()));
  SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis,
                             AnalyzeStep(s.graph(), s.hw));
  const int64_t peak = s.graph().index.saved_bytes;
  PlanningContext ctx{s.graph(), s.hw, analysis, std::max<int64_t>(1, peak),
                      StopFn{}};
  ctx.explain = false;
  ctx.optimal_time_limit_s = PlanningContext::kDefaultOptimalTimeLimitS;
  ctx.max_recompute_tasks = limits.max_recompute_tasks;
  const PolicyRunner runner{ctx, nullptr};

  Sha256 hash;
  int point = 0;
  for (double f : DefaultFractions()) {
    const int64_t budget = Budget::Fraction(f).Resolve(peak);
    PolicyRound round;
    SLACKSWAP_RETURN_IF_ERROR(
        round.Run(policies, [&](const PolicyInfo& policy, double*) {
          return runner.Quiet(policy.name, budget, &round.seeds());
        }));
    for (const PolicyRound::Entry& e : round.entries()) {
      if (!e.result.has_value()) {
        return absl::InternalError(absl::StrCat(
            e.policy->name, " at ", f, " is unavailable: ", e.unavailable));
      }
      if (point >= report.points_size()) {
        return absl::InternalError(absl::StrCat(
            "the sweep has ", report.points_size(), " points, the plans more"));
      }
      const std::string difference =
          PointDifference(report.points(point++), e.policy->name, f, budget, e);
      if (!difference.empty()) return absl::InternalError(difference);
      hash.Update(
          PointText(e.policy->name, budget, round.PlanOf(e), *e.result));
    }
  }
  if (point != report.points_size()) {
    return absl::InternalError(absl::StrCat(
        "the sweep has ", report.points_size(), " points, the plans ", point));
  }
  return Sha256Hex(hash.Finish());
}

// Golden lines by key ("sweep gpt2-xl h100-pcie5"), from the file's text:
// `#` lines and blank lines skipped.
absl::StatusOr<std::map<std::string, std::string>> ParseGoldens(
    const std::string& text) {
  std::map<std::string, std::string> goldens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() != 4 || !IsSha256Hex(words[3])) {
      return absl::InvalidArgumentError(
          absl::StrCat(kGoldenPath, ":", line_number,
                       ": expected KIND GRAPH HARDWARE SHA256HEX"));
    }
    const std::string key = absl::StrJoin({words[0], words[1], words[2]}, " ");
    if (!goldens.emplace(key, words[3]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(kGoldenPath, ":", line_number, ": ", key, " twice"));
    }
  }
  return goldens;
}

std::string GoldenFile(
    const std::vector<std::pair<std::string, std::string>>& lines) {
  std::string out = absl::StrCat(
      "# Plan fingerprints: tests/plan_fingerprint_test.cc compares them\n"
      "# and says what each line hashes.\n"
      "# Generated, not edited: after a change meant to change plans, run\n"
      "#   ",
      kUpdateVariable,
      "=1 build/tests/plan_fingerprint_test\n"
      "# to rewrite this file, and say in the commit why the plans moved.\n");
  for (const auto& [key, hex] : lines) {
    absl::StrAppend(&out, key, " ", hex, "\n");
  }
  return out;
}

TEST(PlanFingerprintTest, PlansAndSweepsAreTheGoldenOnes) {
  absl::StatusOr<std::vector<Case>> cases = Cases();
  ASSERT_TRUE(cases.ok()) << cases.status();

  std::vector<std::pair<std::string, std::string>> computed;
  for (const Case& c : *cases) {
    SCOPED_TRACE(absl::StrCat(c.graph, " on ", c.hardware));
    absl::StatusOr<v1::SweepReport> report = SweepAsTheCli(c.step);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_GT(report->points_size(), 0);
    absl::StatusOr<std::string> plans = PlansFingerprint(c.step, *report);
    ASSERT_TRUE(plans.ok()) << plans.status();
    const std::string name = absl::StrCat(c.graph, " ", c.hardware);
    computed.emplace_back(absl::StrCat("sweep ", name),
                          Sha256Hex(Sha256::Of(ToJson(*report))));
    computed.emplace_back(absl::StrCat("plans ", name), *plans);
  }

  const std::string path = SourcePath(kGoldenPath);
  const char* update = std::getenv(kUpdateVariable);
  if (update != nullptr && std::string(update) == "1") {
    absl::Status written = WriteFile(path, GoldenFile(computed));
    ASSERT_TRUE(written.ok()) << written;
    std::printf("wrote %zu fingerprints to %s\n", computed.size(),
                path.c_str());
    return;
  }

  absl::StatusOr<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status() << "; " << kUpdateVariable
                         << "=1 writes it";
  absl::StatusOr<std::map<std::string, std::string>> goldens =
      ParseGoldens(*text);
  ASSERT_TRUE(goldens.ok()) << goldens.status();
  std::vector<std::string> changed;
  for (const auto& [key, hex] : computed) {
    auto it = goldens->find(key);
    if (it == goldens->end()) {
      changed.push_back(absl::StrCat(key, ": no golden line (now ", hex, ")"));
      continue;
    }
    if (it->second != hex) {
      changed.push_back(
          absl::StrCat(key, ": golden ", it->second, ", now ", hex));
    }
    goldens->erase(it);
  }
  for (const auto& [key, hex] : *goldens) {
    changed.push_back(absl::StrCat(key, ": golden line for no case"));
  }
  EXPECT_TRUE(changed.empty())
      << changed.size() << " of " << computed.size()
      << " fingerprints differ from " << kGoldenPath << ":\n  "
      << absl::StrJoin(changed, "\n  ")
      << "\nIf the plans were meant to change, run this test with "
      << kUpdateVariable << "=1 and commit the file it writes.";
}

}  // namespace
}  // namespace slackswap
