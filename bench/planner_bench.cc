// Google Benchmark: plan + simulate, per policy, on the reference workloads
// and on synthetic transformer steps of about 1k, 10k and 100k ops. One
// iteration is what a request costs: analysis, the policy's search (its
// candidate simulations) and the final simulation of its plan.
// BM_AnalyzeStep times the analysis alone; BM_Bound the LP bound (from
// scratch, or started from slackswap's plan as the service does);
// `optimal` runs on the reference workloads only, to its 2 s limit.
// BM_DeviceBudget times one policy's device-budget search (the largest
// activation budget whose plan fits the device, every candidate simulated
// with the caching-allocator model): llama-7b on a100-40gb-pcie4, where
// keeping everything does not fit, and on a100-80gb-pcie4, where it does.
//
//   taskset -c 1 build/bench/planner_bench
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/budget_search.h"
#include "planner/policy.h"
#include "planner/relaxation.h"

namespace slackswap {
namespace {

// A gpt2-xl-shaped step of about `target_ops` ops. Batch 1 keeps host
// copies within pinned memory at 100k ops.
Graph Synthetic(int64_t target_ops) {
  return SyntheticTransformer(target_ops, /*batch=*/1);
}

const Graph& CachedGraph(const std::string& name) {
  static auto* graphs = new std::map<std::string, Graph>;
  auto it = graphs->find(name);
  if (it != graphs->end()) return it->second;
  Graph g;
  if (name == "ops_1k") {
    g = Synthetic(1'000);
  } else if (name == "ops_10k") {
    g = Synthetic(10'000);
  } else if (name == "ops_100k") {
    g = Synthetic(100'000);
  } else {
    g = *BuildTransformer(*FindWorkload(name));
  }
  return graphs->emplace(name, std::move(g)).first->second;
}

void BM_PlanAndSimulate(benchmark::State& state, std::string workload,
                        std::string policy) {
  const Graph& g = CachedGraph(workload);
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  SimOptions report;
  report.timeline_points = 200;
  double retained = 0;
  for (auto _ : state) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, hw);
    const PlanningContext ctx{g, hw, *a, g.index.saved_bytes / 2};
    absl::StatusOr<PlanOutcome> out = PlanAndSimulate(policy, ctx, report);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    // Not DoNotOptimize(retained): with GCC, its "+m,r" asm on a double
    // corrupts the value (google/benchmark#903, GCC PR 92597).
    benchmark::DoNotOptimize(*out);
    retained = out->result.throughput_retained;
  }
  state.counters["ops"] = static_cast<double>(g.ops.size());
  state.counters["retained"] = retained;
}

// The step analysis alone (durations, slack, every candidate's rebuild
// cost): every policy pays it once per request, before its search.
void BM_AnalyzeStep(benchmark::State& state, std::string workload) {
  const Graph& g = CachedGraph(workload);
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  for (auto _ : state) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, hw);
    benchmark::DoNotOptimize(a);
  }
  state.counters["ops"] = static_cast<double>(g.ops.size());
}

// The LP bound at half the peak. `warm`: started from slackswap's plan
// (made outside the timing), as PlanStep does with its fastest plan.
void BM_Bound(benchmark::State& state, std::string workload, bool warm) {
  const Graph& g = CachedGraph(workload);
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, hw);
  const PlanningContext ctx{g, hw, *a, g.index.saved_bytes / 2};
  RelaxationOptions options;
  std::optional<Plan> start;
  if (warm) {
    absl::StatusOr<PlanOutcome> plan = PlanAndSimulate("slackswap", ctx, {});
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    start = plan->plan;
    options.start = &*start;
  }
  double retained = 0;
  for (auto _ : state) {
    absl::StatusOr<Relaxation> bound = SolveRelaxation(ctx, options);
    if (!bound.ok()) {
      state.SkipWithError(std::string(bound.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(*bound);
    retained = bound->retained_upper;
  }
  state.counters["ops"] = static_cast<double>(g.ops.size());
  state.counters["bound"] = retained;
}

void BM_DeviceBudget(benchmark::State& state, std::string hardware,
                     std::string policy) {
  const Graph& g = CachedGraph("llama-7b");
  const Hardware hw = *FindHardware(hardware);
  SimOptions report;
  report.record_timeline = false;
  report.device.enabled = true;
  int32_t evaluations = 0;
  bool found = false;
  for (auto _ : state) {
    absl::StatusOr<StepAnalysis> a = AnalyzeStep(g, hw);
    const PlanningContext ctx{g, hw, *a, g.index.saved_bytes};
    absl::StatusOr<BudgetSearch> s = LargestFittingBudget(
        policy, ctx, DeviceJudge(policy, ctx, report), g.index.saved_bytes);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(*s);
    evaluations = s->evaluations;
    found = s->found;
  }
  state.counters["evaluations"] = evaluations;
  state.counters["fits"] = found;
}

bool IsReference(const std::string& workload) {
  return workload.rfind("ops_", 0) != 0;
}

}  // namespace

void RegisterBenchmarks() {
  for (const char* hardware : {"a100-40gb-pcie4", "a100-80gb-pcie4"}) {
    for (const char* policy : {"recompute_only", "capuchin", "slackswap"}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_DeviceBudget/llama-7b/", hardware, "/", policy)
              .c_str(),
          BM_DeviceBudget, hardware, policy)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const char* workload :
       {"bert-large", "gpt2-xl", "llama-7b", "ops_1k", "ops_10k", "ops_100k"}) {
    benchmark::RegisterBenchmark(
        ("BM_AnalyzeStep/" + std::string(workload)).c_str(), BM_AnalyzeStep,
        workload)
        ->Unit(benchmark::kMillisecond);
    for (bool warm : {false, true}) {
      if (std::string(workload) == "ops_100k") break;  // minutes per solve
      benchmark::RegisterBenchmark(
          ("BM_Bound/" + std::string(workload) + (warm ? "/warm" : "/cold"))
              .c_str(),
          BM_Bound, workload, warm)
          ->Unit(benchmark::kMillisecond);
    }
    for (const std::string& policy : PolicyNames()) {
      if (policy == "optimal" && !IsReference(workload)) continue;
      benchmark::RegisterBenchmark(
          ("BM_PlanAndSimulate/" + std::string(workload) + "/" + policy)
              .c_str(),
          BM_PlanAndSimulate, workload, policy)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace slackswap
