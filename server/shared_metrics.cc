#include "server/shared_metrics.h"

#include <vector>

namespace slackswap {
namespace {

// A shared-store call: 0.1 ms on loopback, up to the call timeout.
std::vector<double> CallSecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,   0.025,   0.05,   0.1,   0.25,   1};
}

}  // namespace

SharedMetrics::SharedMetrics(prometheus::Registry& registry) {
  up_ = &prometheus::BuildGauge()
             .Name("slackswap_shared_store_up")
             .Help(
                 "1 while the shared store (--shared_store) answers, 0 while "
                 "it is down or not configured.")
             .Register(registry)
             .Add({});
  auto& calls = prometheus::BuildCounter()
                    .Name("slackswap_shared_store_calls_total")
                    .Help(
                        "Commands sent to the shared store, by op (get, "
                        "mark, set, unmark) and result (ok, error: a "
                        "timeout, a lost connection or a Redis error).")
                    .Register(registry);
  auto& seconds = prometheus::BuildHistogram()
                      .Name("slackswap_shared_store_call_seconds")
                      .Help(
                          "Time of one shared-store command, in seconds, "
                          "by op.")
                      .Register(registry);
  for (const char* op : kOps) {
    calls_[{op, true}] = &calls.Add({{"op", op}, {"result", "ok"}});
    calls_[{op, false}] = &calls.Add({{"op", op}, {"result", "error"}});
    call_seconds_[op] = &seconds.Add({{"op", op}}, CallSecondsBuckets());
  }
  auto& lookups =
      prometheus::BuildCounter()
          .Name("slackswap_shared_lookups_total")
          .Help(
              "Lookups of the shared tier after the local cache or store "
              "missed, by kind (graph, plan, fit, sweep) and result: hit, "
              "miss, "
              "discarded (a value that failed its checks), unavailable "
              "(the store down or the call failed).")
          .Register(registry);
  for (const char* kind : kKinds) {
    for (const char* result : kLookupResults) {
      lookups_[{kind, result}] =
          &lookups.Add({{"kind", kind}, {"result", result}});
    }
  }
  auto& dropped = prometheus::BuildCounter()
                      .Name("slackswap_shared_writes_dropped_total")
                      .Help(
                          "Writes to the shared store not sent, by reason: "
                          "oversized (--shared_store_max_entry_mb), "
                          "queue_full, down.")
                      .Register(registry);
  for (const char* reason : kDropReasons) {
    dropped_[reason] = &dropped.Add({{"reason", reason}});
  }
  auto& waits = prometheus::BuildCounter()
                    .Name("slackswap_shared_waits_total")
                    .Help(
                        "Waits for another replica's planning of the same "
                        "request, by outcome: answered, took_over (its "
                        "mark went without an answer), stopped (the "
                        "caller went or its deadline passed).")
                    .Register(registry);
  for (const char* outcome : kWaitOutcomes) {
    waits_[outcome] = &waits.Add({{"outcome", outcome}});
  }
}

void SharedMetrics::SharedCall(const char* op, bool ok, double seconds) {
  if (auto it = calls_.find(std::make_pair(std::string(op), ok));
      it != calls_.end()) {
    it->second->Increment();
  }
  if (auto it = call_seconds_.find(op); it != call_seconds_.end()) {
    it->second->Observe(seconds);
  }
}

void SharedMetrics::SharedWriteDropped(const char* reason) {
  if (auto it = dropped_.find(reason); it != dropped_.end()) {
    it->second->Increment();
  }
}

void SharedMetrics::SharedUp(bool up) { up_->Set(up ? 1 : 0); }

void SharedMetrics::SharedLookup(const char* kind, const char* result) {
  if (auto it =
          lookups_.find(std::make_pair(std::string(kind), std::string(result)));
      it != lookups_.end()) {
    it->second->Increment();
  }
}

void SharedMetrics::SharedWait(const char* outcome) {
  if (auto it = waits_.find(outcome); it != waits_.end()) {
    it->second->Increment();
  }
}

}  // namespace slackswap
