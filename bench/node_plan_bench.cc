// Google Benchmark: what a Plan request for a node costs the core, against
// the same request for the node's GPU alone. One iteration is
// PlanningCore::PlanStep with slackswap on a built-in workload in data
// parallel or FSDP over the 8 GPUs of dgx-a100-80gb: the workload built
// and analysed, the policies planned for the GPU alone (the seed), then
// planned with every candidate judged on the whole node
// (docs/PLANNERS.md, "Plans for a node"). BM_FitJob is a Fit for a job
// (README, "Which node for a job?") on every catalog node with the default
// layouts (DDP and FSDP), against BM_FitSteps, the Fit of the same
// workload's step on every catalog GPU.
//
//   taskset -c 1 build/bench/node_plan_bench
#include <string>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/planning_core.h"
#include "model/hardware.h"
#include "model/node.h"

namespace slackswap {
namespace {

void BM_NodePlan(benchmark::State& state, std::string workload,
                 std::string layout, bool on_node) {
  const PlanningCore core(CoreLimits{});
  v1::PlanRequest req;
  v1::WorkloadRef& w = *req.mutable_step()->mutable_workload();
  w.set_name(workload);
  if (layout == "ddp") {
    w.set_data_parallel(8);
  } else {
    w.set_fully_sharded(8);
  }
  const Node node = *FindNode("dgx-a100-80gb");
  if (on_node) {
    req.mutable_step()->set_node_name(node.name);
  } else {
    req.mutable_step()->set_hardware_name(node.gpu.name);
  }
  req.set_budget_fraction(0.5);
  req.add_policies("slackswap");
  double retained = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
    if (!resp.ok()) {
      state.SkipWithError(std::string(resp.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(*resp);
    retained = resp->report().results(0).result().throughput_retained();
  }
  state.counters["retained"] = retained;
}

void BM_Fit(benchmark::State& state, std::string workload, bool job) {
  const PlanningCore core(CoreLimits{});
  v1::FitRequest req;
  req.mutable_workload()->set_name(workload);
  if (job) {
    req.set_global_batch(64);
    for (const std::string& name : NodeNames()) {
      req.add_nodes()->set_node_name(name);
    }
  } else {
    for (const std::string& name : HardwareNames()) {
      req.add_profiles()->set_hardware_name(name);
    }
  }
  int fitting = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::FitResponse> resp = core.FitStep(req, {});
    if (!resp.ok()) {
      state.SkipWithError(std::string(resp.status().message()).c_str());
      return;
    }
    fitting = 0;
    for (const v1::FitResult& f : resp->results()) fitting += f.fits_device();
    benchmark::DoNotOptimize(*resp);
  }
  state.counters["answers"] = job ? 2.0 * NodeNames().size()
                                  : static_cast<double>(HardwareNames().size());
  state.counters["fitting"] = fitting;
}

}  // namespace

void RegisterBenchmarks() {
  for (const char* workload : {"gpt2-xl", "llama-7b"}) {
    benchmark::RegisterBenchmark(
        (std::string("BM_FitSteps/") + workload).c_str(), BM_Fit, workload,
        false)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_FitJob/") + workload).c_str(),
                                 BM_Fit, workload, true)
        ->Unit(benchmark::kMillisecond);
  }
  for (const char* workload : {"gpt2-xl", "llama-7b"}) {
    for (const char* layout : {"ddp", "fsdp"}) {
      for (bool on_node : {false, true}) {
        benchmark::RegisterBenchmark(
            (std::string("BM_NodePlan/") + workload + "/" + layout +
             (on_node ? "/node" : "/gpu"))
                .c_str(),
            BM_NodePlan, workload, layout, on_node)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace slackswap
