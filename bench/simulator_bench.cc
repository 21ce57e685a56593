// Google Benchmark for the discrete-event simulator. Each benchmark reports
// `events_per_second`: simulator events (task and copy starts and ends, as
// counted in SimResult::events_processed) per second of CPU time.
//
//   BM_EventLoop/<workload>/<plan>  SimulateSchedule only: the event loop,
//                                   with durations and the schedule built
//                                   outside the timed loop.
//   BM_Lower/<workload>/<plan>      LowerPlan only: the plan made into the
//                                   task list the event loop runs.
//   BM_Simulate/<workload>/<plan>   Simulate(): cost model, lowering and
//                                   the event loop, as a planner calls it.
//   BM_EventLoopNode/<workload>/<plan>
//                                   SimulateNode: the same schedule on all 8
//                                   GPUs of dgx-a100-80gb at once, sharing
//                                   its uplinks, sockets and pinned memory
//                                   (compare with BM_EventLoop: at most 10x).
//   BM_SimulateDevice/<workload>/<plan>
//                                   the same with the whole device modelled
//                                   (SimOptions::device: the caching-
//                                   allocator model and its replays), as
//                                   Simulate requests and reported results
//                                   run it.
//
// Workloads: the three reference presets and `synthetic-100k`, gpt2-xl with
// its layer count raised until the step has about 100,000 ops. Plans:
// `keep_all` (no budget) and `mixed` (every other saved activation swapped
// with its prefetch at the first backward op, the rest recomputed, budget
// 0.5 of the unconstrained peak). A case the simulator finds infeasible falls
// back to unlimited pinned host memory (when that ran out) or no budget, so
// every case runs a whole step; the log line of each case says which.
//
//   taskset -c 1 build/bench/simulator_bench
//   build/bench/simulator_bench --benchmark_filter='BM_EventLoop/bert-large'
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "model/budget.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace slackswap {
namespace {

constexpr char kHardware[] = "a100-80gb-pcie4";
constexpr int64_t kSyntheticOps = 100'000;

// Everything a benchmark needs, built once per (workload, plan) and shared
// by both benchmarks of that pair.
struct Case {
  Graph graph;
  Hardware hw;
  Plan plan;
  OpDurations durations;
  Schedule schedule;
  SimOptions opts;
  std::string note;  // how the case was set up, for the log
};

template <typename T>
T OrDie(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) {
    std::fprintf(stderr, "simulator_bench: %s: %s\n", what.c_str(),
                 v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

Graph BuildGraph(const std::string& workload) {
  if (workload != "synthetic-100k") {
    return OrDie(BuildTransformer(OrDie(FindWorkload(workload), workload)),
                 workload);
  }
  return SyntheticTransformer(kSyntheticOps);
}

// Every other saved activation (in production order) swapped, prefetched
// when backward begins; the rest recomputed. A swapped tensor needed at or
// before the first backward op (read by it, or by a recompute chain that
// runs before it) cannot be prefetched there and is kept instead.
Plan MixedPlan(const Graph& g, const OpDurations& durations) {
  Plan plan = Plan::KeepAll(g);
  plan.policy = "bench-mixed";
  const GraphIndex& idx = g.index;
  bool swap = true;
  for (int32_t t : idx.saved) {
    Decision& d = plan.decisions[t];
    if (swap) {
      d.action = Action::kSwap;
      d.prefetch_after_op = idx.first_backward_op;
    } else {
      d.action = Action::kRecompute;
    }
    swap = !swap;
  }
  const std::vector<int32_t> need =
      FirstNeedOps(OrDie(LowerWithoutPrefetches(g, plan, durations), g.name));
  for (int32_t t : idx.saved) {
    Decision& d = plan.decisions[t];
    if (d.action == Action::kSwap && need[t] <= idx.first_backward_op) {
      d = Decision();
    }
  }
  return plan;
}

Case* GetCase(const std::string& workload, const std::string& plan_name) {
  static auto* cases = new std::map<std::string, std::unique_ptr<Case>>;
  const std::string key = workload + "/" + plan_name;
  auto it = cases->find(key);
  if (it != cases->end()) return it->second.get();

  auto c = std::make_unique<Case>();
  c->graph = BuildGraph(workload);
  c->hw = OrDie(FindHardware(kHardware), kHardware);
  c->durations = OrDie(ComputeDurations(c->graph, c->hw), key);
  c->opts.budget_bytes = 0;
  if (plan_name == "keep_all") {
    c->plan = Plan::KeepAll(c->graph);
    c->note = "keep all, no budget";
  } else {
    c->plan = MixedPlan(c->graph, c->durations);
    c->opts.budget_bytes =
        Budget::Fraction(0.5).Resolve(c->graph.index.saved_bytes);
    c->note = absl::StrCat(
        "mixed (", c->plan.CountAction(Action::kSwap), " swapped, ",
        c->plan.CountAction(Action::kRecompute), " recomputed), budget 0.5");
  }
  c->schedule = OrDie(LowerPlan(c->graph, c->plan, c->durations), key);
  // An infeasible case falls back (unlimited pinned host memory when that
  // ran out, else no budget) so that every case simulates the whole step.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const SimResult probe = OrDie(
        SimulateSchedule(c->graph, c->hw, c->durations, c->schedule, c->opts),
        key);
    if (probe.feasible) break;
    absl::StrAppend(&c->note, "; infeasible (", probe.infeasible_reason, ")");
    if (absl::StartsWith(probe.infeasible_reason, "pinned host memory") &&
        c->hw.pinned_host_memory_bytes < std::numeric_limits<int64_t>::max()) {
      c->hw.pinned_host_memory_bytes = std::numeric_limits<int64_t>::max();
      absl::StrAppend(&c->note, ", so unlimited pinned host memory");
    } else {
      c->opts.budget_bytes = 0;
      absl::StrAppend(&c->note, ", so no budget");
    }
  }
  std::fprintf(stderr, "%s: %zu ops, %zu tasks, %s\n", key.c_str(),
               c->graph.ops.size(), c->schedule.tasks.size(), c->note.c_str());
  Case* out = c.get();
  cases->emplace(key, std::move(c));
  return out;
}

void Report(benchmark::State& state, int64_t events, const SimResult& last) {
  state.counters["events_per_second"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events"] =
      benchmark::Counter(static_cast<double>(last.events_processed));
  state.counters["throughput_retained"] = last.throughput_retained;
  if (last.device.has_value()) {
    // Steps the allocator model ran to its steady state (the step and its
    // replays).
    state.counters["allocator_steps"] = last.device->steps;
  }
}

// Runs `simulate` (returning absl::StatusOr<SimResult>) once per iteration
// and reports its events per second.
template <typename SimulateFn>
void RunSimulations(benchmark::State& state, SimulateFn simulate) {
  int64_t events = 0;
  SimResult last;
  for (auto _ : state) {
    absl::StatusOr<SimResult> r = simulate();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    events += r->events_processed;
    benchmark::DoNotOptimize(r->step_ns);
    last = *std::move(r);
  }
  Report(state, events, last);
}

void BM_EventLoop(benchmark::State& state, const std::string& workload,
                  const std::string& plan) {
  const Case& c = *GetCase(workload, plan);
  RunSimulations(state, [&c] {
    return SimulateSchedule(c.graph, c.hw, c.durations, c.schedule, c.opts);
  });
}

void BM_EventLoopNode(benchmark::State& state, const std::string& workload,
                      const std::string& plan) {
  const Case& c = *GetCase(workload, plan);
  Node node = OrDie(FindNode("dgx-a100-80gb"), "dgx-a100-80gb");
  node.gpu = c.hw;
  std::vector<RankStep> ranks;
  for (int32_t gpu = 0; gpu < node.num_gpus; ++gpu) {
    ranks.push_back({.gpu = gpu,
                     .graph = &c.graph,
                     .durations = &c.durations,
                     .schedule = &c.schedule});
  }
  int64_t events = 0;
  NodeSimResult last;
  for (auto _ : state) {
    absl::StatusOr<NodeSimResult> r = SimulateNode(node, ranks, c.opts);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    events += r->events_processed;
    benchmark::DoNotOptimize(r->step_ns);
    last = *std::move(r);
  }
  state.counters["events_per_second"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["throughput_retained"] = last.throughput_retained;
  state.counters["feasible"] = last.feasible ? 1 : 0;
}

void BM_Lower(benchmark::State& state, const std::string& workload,
              const std::string& plan) {
  const Case& c = *GetCase(workload, plan);
  for (auto _ : state) {
    absl::StatusOr<Schedule> s = LowerPlan(c.graph, c.plan, c.durations);
    if (!s.ok()) {
      state.SkipWithError(s.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(s->tasks.data());
  }
  state.counters["tasks"] =
      benchmark::Counter(static_cast<double>(c.schedule.tasks.size()));
}

void BM_Simulate(benchmark::State& state, const std::string& workload,
                 const std::string& plan) {
  const Case& c = *GetCase(workload, plan);
  RunSimulations(state,
                 [&c] { return Simulate(c.graph, c.hw, c.plan, c.opts); });
}

void BM_SimulateDevice(benchmark::State& state, const std::string& workload,
                       const std::string& plan) {
  const Case& c = *GetCase(workload, plan);
  SimOptions opts = c.opts;
  opts.device.enabled = true;
  RunSimulations(state,
                 [&c, &opts] { return Simulate(c.graph, c.hw, c.plan, opts); });
}

}  // namespace

void RegisterBenchmarks() {
  for (const std::string workload :
       {"bert-large", "gpt2-xl", "llama-7b", "synthetic-100k"}) {
    for (const std::string plan : {"keep_all", "mixed"}) {
      const std::string suffix = workload + "/" + plan;
      benchmark::RegisterBenchmark(("BM_EventLoop/" + suffix).c_str(),
                                   BM_EventLoop, workload, plan)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_EventLoopNode/" + suffix).c_str(),
                                   BM_EventLoopNode, workload, plan)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_Lower/" + suffix).c_str(), BM_Lower,
                                   workload, plan)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_Simulate/" + suffix).c_str(),
                                   BM_Simulate, workload, plan)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_SimulateDevice/" + suffix).c_str(),
                                   BM_SimulateDevice, workload, plan)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace slackswap
