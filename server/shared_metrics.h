// The shared tier's Prometheus metrics, in the service's registry: every
// series of its fixed label sets exists from the start, at zero, so that
// dashboards and alerts see them before the first event (and on a replica
// without --shared_store, where they stay at zero).
//
//   SharedMetrics shared_metrics(metrics.registry());
//   auto store = SharedStore::Start(options, &shared_metrics, &log);
//
// The metrics:
//   slackswap_shared_store_up                         gauge (1: connected)
//   slackswap_shared_store_calls_total{op,result}     counter (ok, error)
//   slackswap_shared_store_call_seconds{op}           histogram
//   slackswap_shared_lookups_total{kind,result}       counter
//   slackswap_shared_writes_dropped_total{reason}     counter
//   slackswap_shared_waits_total{outcome}             counter
//
// Thread-safe.
#ifndef SLACKSWAP_SERVER_SHARED_METRICS_H_
#define SLACKSWAP_SERVER_SHARED_METRICS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/shared_store.h"

namespace slackswap {

class SharedMetrics : public SharedStoreObserver {
 public:
  // The label values.
  static constexpr const char* kOps[] = {"get", "mark", "set", "unmark"};
  static constexpr const char* kKinds[] = {"graph", "plan", "fit", "sweep"};
  static constexpr const char* kLookupResults[] = {"hit", "miss", "discarded",
                                                   "unavailable"};
  static constexpr const char* kDropReasons[] = {"oversized", "queue_full",
                                                 "down"};
  static constexpr const char* kWaitOutcomes[] = {"answered", "took_over",
                                                  "stopped"};

  // REQUIRES: the registry outlives this.
  explicit SharedMetrics(prometheus::Registry& registry);

  void SharedCall(const char* op, bool ok, double seconds) override;
  void SharedWriteDropped(const char* reason) override;
  void SharedUp(bool up) override;
  void SharedLookup(const char* kind, const char* result) override;
  void SharedWait(const char* outcome) override;

 private:
  // Immutable after construction (the metrics are thread-safe); a label
  // outside the fixed sets is not counted.
  prometheus::Gauge* up_;
  absl::flat_hash_map<std::pair<std::string, bool>, prometheus::Counter*>
      calls_;
  absl::flat_hash_map<std::string, prometheus::Histogram*> call_seconds_;
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Counter*>
      lookups_;
  absl::flat_hash_map<std::string, prometheus::Counter*> dropped_;
  absl::flat_hash_map<std::string, prometheus::Counter*> waits_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SHARED_METRICS_H_
