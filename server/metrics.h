// The service's Prometheus metrics: one registry of every slackswap_* family,
// recording methods for the RPC handlers, and an optional HTTP exposer that
// serves the registry at /metrics on its own port.
//
//   ServiceMetrics metrics(/*version=*/"0.1.0", /*commit=*/"abc1234");
//   absl::Status started = metrics.StartExposer("0.0.0.0:9090");
//   if (!started.ok()) return started;
//
//   metrics.RequestStarted();
//   ...
//   metrics.PolicyRun("slackswap", planner_s, simulator_s, retained, feasible);
//   metrics.RequestFinished("Plan", "OK", elapsed_seconds);
//
// The metrics (each with HELP text):
//   slackswap_requests_total{method,code}          counter
//   slackswap_request_duration_seconds{method}     histogram (end to end)
//   slackswap_queue_wait_seconds{method}           histogram
//   slackswap_inflight_requests                    gauge (streams too)
//   slackswap_queue_depth                          gauge
//   slackswap_rejected_requests_total{method,reason}
//                                                  counter (refused at once)
//   slackswap_cache_hits_total                     counter
//   slackswap_cache_misses_total                   counter
//   slackswap_coalesced_requests_total             counter
//   slackswap_graph_ops                            histogram (ops per graph)
//   slackswap_planner_seconds{policy}              histogram
//   slackswap_simulator_seconds{policy}            histogram
//   slackswap_throughput_retained{policy}          histogram (feasible runs)
//   slackswap_fit_profiles_total{verdict}          counter (Fit answers)
//   slackswap_fit_nodes_total{node,verdict}        counter (Fit node answers)
//   slackswap_plans_total{scope}                   counter (Plan requests)
//   slackswap_node_simulation_seconds              histogram
//   slackswap_build_info{version,commit}           gauge, always 1
//
// Every label value becomes a time series that lives as long as this object,
// so pass only values from a small fixed set (method names, gRPC code names
// such as "OK" or "INVALID_ARGUMENT", known policy names), never raw input.
// Declare() creates the series of every known label value at zero, so that
// dashboards and alerts see them before their first event.
//
// Thread-safe: every method may be called from any thread, concurrently with
// scrapes.
#ifndef SLACKSWAP_SERVER_METRICS_H_
#define SLACKSWAP_SERVER_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace slackswap {

class ServiceMetrics {
 public:
  // Bucket upper bounds of the histograms.
  // slackswap_request_duration_seconds: 0.0005 s .. 30 s, 1-2.5-5 per
  // decade.
  static std::vector<double> RequestSecondsBuckets();
  // slackswap_planner_seconds, slackswap_simulator_seconds and
  // slackswap_node_simulation_seconds: 0.0001 s .. 30 s.
  static std::vector<double> StageSecondsBuckets();
  // slackswap_graph_ops: 10, 50, 100, 500, ..., 5e6, 1e7.
  static std::vector<double> GraphOpsBuckets();
  // slackswap_throughput_retained: 0.5 .. 1.0, finer towards 1.
  static std::vector<double> RetainedBuckets();

  // Creates every family, and sets slackswap_build_info{version,commit} to 1.
  ServiceMetrics(const std::string& version, const std::string& commit);
  ~ServiceMetrics();

  ServiceMetrics(const ServiceMetrics&) = delete;
  ServiceMetrics& operator=(const ServiceMetrics&) = delete;

  // Serves the registry over HTTP at /metrics on `address`, "host:port" such
  // as "0.0.0.0:9090" or "127.0.0.1:0" (port 0: any free port; see
  // exposer_port()); other paths answer 404. Returns UNAVAILABLE when the
  // server cannot start (the port is taken, the address is malformed),
  // INVALID_ARGUMENT for an empty address, FAILED_PRECONDITION when already
  // started. The exposer stops when this object is destroyed, which then
  // takes up to ~2 s (civetweb's listener poll interval).
  absl::Status StartExposer(const std::string& address);

  // The port the exposer listens on, or 0 when it is not started.
  int exposer_port() const;

  // An RPC began: raises slackswap_inflight_requests. Pair each call with
  // one RequestFinished.
  void RequestStarted();
  // An RPC ended with status `code` (a gRPC code name such as "OK") after
  // `seconds`: counts it, observes its latency, lowers the in-flight gauge.
  void RequestFinished(const std::string& method, const std::string& code,
                       double seconds);
  // Why an RPC was refused at once.
  enum class RejectReason {
    kQueueFull,  // the work queue is full
    kMemory,     // the held-memory budget (--max_queued_mb)
    kDeadline,   // its deadline had passed (or it was cancelled) on arrival
  };
  static const char* ReasonLabel(RejectReason reason);

  // Creates at zero the series of every method (with every gRPC code and
  // every rejection reason) and every policy.
  void Declare(const std::vector<std::string>& methods,
               const std::vector<std::string>& policies);

  // An RPC was refused. Counts only the rejection: an RPC that was reported
  // started still reports its end.
  void Rejected(const std::string& method, RejectReason reason);
  // How long a call waited in the work queue before a worker took it.
  void QueueWait(const std::string& method, double seconds);
  // A request answered by an identical one's planning in flight.
  void Coalesced();
  void SetQueueDepth(int depth);

  void CacheHit();
  void CacheMiss();

  // The number of ops of a graph the service was asked to plan.
  void GraphOps(int64_t ops);

  // One policy planned and simulated: observes its planner and simulator
  // time and, only when the plan was feasible, the throughput retained
  // (a fraction, 1.0 = unconstrained).
  void PolicyRun(const std::string& policy, double planner_seconds,
                 double simulator_seconds, double retained, bool feasible);

  // A Fit request answered for one hardware profile: `verdict` is one of
  // kFitVerdicts (core/planning_core.h): fits, fits_with_plan or
  // does_not_fit. Each verdict's series exists from the start, at 0.
  void FitProfile(const std::string& verdict);

  // A Fit request answered for one node: `node_name` labels the series when
  // it is a catalog node's (model/node.h NodeCatalog), and every other name
  // (inline nodes) counts as node="inline", so that request input never
  // becomes a label. `verdict` as FitProfile's. Every node's and verdict's
  // series exists from the start, at 0.
  void FitNode(const std::string& node_name, const std::string& verdict);

  // A Plan request admitted for planning: `scope` is one of kPlanScopes
  // (core/plan_scopes.h), gpu or node. Both series exist from the start.
  void PlanAdmitted(const std::string& scope);

  // One node simulation (a plan run on every rank of a node) took `seconds`.
  void NodeSimulation(double seconds);

  // The whole registry in the Prometheus text exposition format.
  std::string Scrape() const;

  // The registry, for callers that add their own collectables.
  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

 private:
  struct PolicyHistograms {
    prometheus::Histogram* planner_seconds = nullptr;
    prometheus::Histogram* simulator_seconds = nullptr;
    prometheus::Histogram* retained = nullptr;
  };

  // The per-label metrics, created on first use. The returned objects live
  // as long as the registry.
  prometheus::Counter& RequestsCounter(const std::string& method,
                                       const std::string& code);
  prometheus::Histogram& DurationHistogram(const std::string& method);
  prometheus::Histogram& QueueWaitHistogram(const std::string& method);
  prometheus::Counter& RejectedCounter(const std::string& method,
                                       RejectReason reason);
  PolicyHistograms ForPolicy(const std::string& policy);

  // Immutable after construction (the metric objects themselves are
  // thread-safe).
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_family_;
  prometheus::Family<prometheus::Histogram>& duration_family_;
  prometheus::Family<prometheus::Histogram>& queue_wait_family_;
  prometheus::Family<prometheus::Counter>& rejected_family_;
  prometheus::Family<prometheus::Histogram>& planner_family_;
  prometheus::Family<prometheus::Histogram>& simulator_family_;
  prometheus::Family<prometheus::Histogram>& retained_family_;
  prometheus::Gauge& inflight_;
  prometheus::Gauge& queue_depth_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Counter& coalesced_;
  prometheus::Histogram& graph_ops_;
  prometheus::Histogram& node_simulation_;
  // The counters of a fixed set of label values, every series created in
  // the constructor; a value outside the set is not counted.
  // By verdict.
  absl::flat_hash_map<std::string, prometheus::Counter*> fit_profiles_;
  // By node label (a catalog node's name, or "inline") and verdict.
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Counter*>
      fit_nodes_;
  // By scope.
  absl::flat_hash_map<std::string, prometheus::Counter*> plans_;

  mutable Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Counter*>
      requests_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Histogram*> durations_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Histogram*> queue_waits_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::string, RejectReason>,
                      prometheus::Counter*>
      rejected_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, PolicyHistograms> policies_
      ABSL_GUARDED_BY(mu_);

  mutable Mutex exposer_mu_;
  // Declared last: stops serving before the registry goes.
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(exposer_mu_);
  int exposer_port_ ABSL_GUARDED_BY(exposer_mu_) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_METRICS_H_
