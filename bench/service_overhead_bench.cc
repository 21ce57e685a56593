// Google Benchmark: what a Plan request costs the server beyond planning.
// For one gpt2-xl PlanRequest (slackswap at budget 0.5 on a100-80gb-pcie4)
// it times:
//   BM_CorePlan/<case>       (a) PlanningCore::PlanStep: resolve the workload,
//                                analyse, plan and simulate, build the
//                                response message;
//   BM_ParseSerialize/<case> (b) PlanRequest::ParseFromString of the
//                                serialized request plus
//                                PlanResponse::SerializeToString of the
//                                response (what the gRPC layer does per call);
//   BM_CacheHitPath/<case>   (c) a plan-cache hit as the server answered
//                                one before its keys were digests: the
//                                request's deterministic serialization as
//                                the key, PlanCache::Lookup (hash, lock,
//                                copy) and ParseFromString of the response
//                                (the server now keys by io/request_key.h's
//                                digest and sends the stored bytes
//                                unparsed: docs/PERFORMANCE.md);
//   BM_Ratio/<case>          (a) and (b) timed back to back in each
//                                iteration on the thread's CPU clock; its
//                                counter plan_over_wire is sum(a) / sum(b).
// Cases: `plain` (no timeline, no reasons: the default request),
// `timeline200_reasons` (timeline_points=200, include_reasons=true: a larger
// response) and `all_policies` (the five policies, a five-times larger
// response and about five times the planning).
//
//   taskset -c 1 build/bench/service_overhead_bench
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/planning_core.h"
#include "io/proto_file.h"
#include "server/plan_cache.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {
namespace {

// This thread's CPU time: BM_Ratio's two parts are timed on it, so other
// processes sharing the core do not skew the ratio.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

v1::PlanRequest MakeRequest(const std::string& which) {
  v1::PlanRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  if (which != "all_policies") req.add_policies("slackswap");
  if (which == "timeline200_reasons") {
    req.set_timeline_points(200);
    req.set_include_reasons(true);
  }
  return req;
}

v1::PlanResponse PlanOnce(const PlanningCore& core,
                          const v1::PlanRequest& req) {
  absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, {});
  if (!resp.ok()) {
    std::fprintf(stderr, "Plan failed: %s\n", resp.status().ToString().c_str());
    std::abort();
  }
  return *std::move(resp);
}

// (b): the request arrives serialized and is parsed; the response leaves
// serialized.
void ParseAndSerialize(const std::string& wire_req,
                       const v1::PlanResponse& resp, std::string* out) {
  v1::PlanRequest parsed;
  if (!parsed.ParseFromString(wire_req)) std::abort();
  benchmark::DoNotOptimize(parsed);
  out->clear();
  if (!resp.SerializeToString(out)) std::abort();
  benchmark::DoNotOptimize(out->data());
}

void SetSizes(benchmark::State& state, const std::string& wire_req,
              const v1::PlanResponse& resp) {
  state.counters["request_bytes"] = static_cast<double>(wire_req.size());
  state.counters["response_bytes"] = static_cast<double>(resp.ByteSizeLong());
}

void BM_CorePlan(benchmark::State& state, std::string which) {
  const PlanningCore core{CoreLimits{}};
  const v1::PlanRequest req = MakeRequest(which);
  v1::PlanResponse last;
  for (auto _ : state) {
    last = PlanOnce(core, req);
    benchmark::DoNotOptimize(last);
  }
  SetSizes(state, req.SerializeAsString(), last);
}

void BM_ParseSerialize(benchmark::State& state, std::string which) {
  const PlanningCore core{CoreLimits{}};
  const v1::PlanRequest req = MakeRequest(which);
  const std::string wire_req = req.SerializeAsString();
  const v1::PlanResponse resp = PlanOnce(core, req);
  std::string out;
  for (auto _ : state) ParseAndSerialize(wire_req, resp, &out);
  SetSizes(state, wire_req, resp);
}

void BM_CacheHitPath(benchmark::State& state, std::string which) {
  const PlanningCore core{CoreLimits{}};
  const v1::PlanRequest req = MakeRequest(which);
  PlanCache cache(/*capacity_bytes=*/64 << 20);
  std::string key;
  SerializeDeterministic(req, &key);
  cache.Insert(key, PlanOnce(core, req).SerializeAsString());
  for (auto _ : state) {
    SerializeDeterministic(req, &key);
    std::optional<std::string> hit = cache.Lookup(key);
    v1::PlanResponse resp;
    if (!hit.has_value() || !resp.ParseFromString(*hit)) std::abort();
    benchmark::DoNotOptimize(resp);
  }
}

void BM_Ratio(benchmark::State& state, std::string which) {
  const PlanningCore core{CoreLimits{}};
  const v1::PlanRequest req = MakeRequest(which);
  const std::string wire_req = req.SerializeAsString();
  std::string out;
  double plan_s = 0;
  double wire_s = 0;
  int64_t response_bytes = 0;
  for (auto _ : state) {
    const double t0 = ThreadCpuSeconds();
    v1::PlanResponse resp = PlanOnce(core, req);
    const double t1 = ThreadCpuSeconds();
    ParseAndSerialize(wire_req, resp, &out);
    const double t2 = ThreadCpuSeconds();
    plan_s += t1 - t0;
    wire_s += t2 - t1;
    response_bytes = static_cast<int64_t>(out.size());
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plan_ms"] = plan_s / n * 1e3;
  state.counters["wire_us"] = wire_s / n * 1e6;
  state.counters["plan_over_wire"] = wire_s > 0 ? plan_s / wire_s : 0;
  state.counters["response_bytes"] = static_cast<double>(response_bytes);
}

}  // namespace

void RegisterBenchmarks() {
  for (const char* which : {"plain", "timeline200_reasons", "all_policies"}) {
    const std::string w = which;
    benchmark::RegisterBenchmark(("BM_CorePlan/" + w).c_str(), BM_CorePlan, w)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_ParseSerialize/" + w).c_str(),
                                 BM_ParseSerialize, w)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_CacheHitPath/" + w).c_str(),
                                 BM_CacheHitPath, w)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_Ratio/" + w).c_str(), BM_Ratio, w)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace slackswap
