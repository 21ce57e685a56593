#include "server/metrics.h"

#include <cstring>
#include <exception>

#include "CivetServer.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "core/fit_verdicts.h"
#include "core/plan_scopes.h"
#include "model/node.h"
#include "prometheus/text_serializer.h"

namespace slackswap {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Registry;

Family<Counter>& NewCounter(Registry& registry, const std::string& name,
                            const std::string& help) {
  return BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Gauge>& NewGauge(Registry& registry, const std::string& name,
                        const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Histogram>& NewHistogram(Registry& registry, const std::string& name,
                                const std::string& help) {
  return BuildHistogram().Name(name).Help(help).Register(registry);
}

// The path the exposer serves. civetweb would also route "/metricsx" and
// "/metrics/..." to the handler registered for it.
constexpr char kMetricsPath[] = "/metrics";

// civetweb's begin_request callback: answers 404 to every path but
// kMetricsPath, and lets civetweb route the rest.
int OnlyMetricsPath(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info != nullptr && info->local_uri != nullptr &&
      std::strcmp(info->local_uri, kMetricsPath) == 0) {
    return 0;
  }
  mg_send_http_error(conn, 404, "%s", "Not Found");
  return 404;
}

// The counter of `key` in `counters` (a fixed set, created at start-up)
// goes up; a key outside the set is dropped rather than made a new series.
template <typename Key>
void IncrementIfKnown(const absl::flat_hash_map<Key, Counter*>& counters,
                      const Key& key) {
  auto it = counters.find(key);
  if (it != counters.end()) it->second->Increment();
}

// slackswap_fit_nodes_total's node label for every node outside the catalog.
constexpr char kInlineNode[] = "inline";

const CivetCallbacks& ExposerCallbacks() {
  static const CivetCallbacks* const callbacks = [] {
    auto* c = new CivetCallbacks();
    c->begin_request = &OnlyMetricsPath;
    return c;
  }();
  return *callbacks;
}

}  // namespace

std::vector<double> ServiceMetrics::RequestSecondsBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,   1,      2.5,   5,    10,    30};
}

std::vector<double> ServiceMetrics::StageSecondsBuckets() {
  std::vector<double> buckets = {0.0001, 0.00025};
  for (double bound : RequestSecondsBuckets()) buckets.push_back(bound);
  return buckets;
}

std::vector<double> ServiceMetrics::GraphOpsBuckets() {
  return {10, 50, 100, 500, 1e3, 5e3, 1e4, 5e4, 1e5, 5e5, 1e6, 5e6, 1e7};
}

std::vector<double> ServiceMetrics::RetainedBuckets() {
  return {0.5,  0.6,  0.7,  0.8,   0.85,  0.9, 0.95,
          0.97, 0.98, 0.99, 0.995, 0.999, 1.0};
}

ServiceMetrics::ServiceMetrics(const std::string& version,
                               const std::string& commit)
    : registry_(std::make_shared<Registry>()),
      requests_family_(NewCounter(*registry_, "slackswap_requests_total",
                                  "RPCs finished, by method and gRPC status "
                                  "code.")),
      duration_family_(NewHistogram(*registry_,
                                    "slackswap_request_duration_seconds",
                                    "RPC latency in seconds, by method.")),
      queue_wait_family_(NewHistogram(*registry_,
                                      "slackswap_queue_wait_seconds",
                                      "Time calls waited in the work queue "
                                      "before a worker took them, in "
                                      "seconds, by method.")),
      rejected_family_(NewCounter(*registry_,
                                  "slackswap_rejected_requests_total",
                                  "RPCs refused at once, by method and "
                                  "reason: queue_full (the work queue), "
                                  "memory (--max_queued_mb), deadline "
                                  "(expired or cancelled on arrival).")),
      planner_family_(NewHistogram(*registry_, "slackswap_planner_seconds",
                                   "Time a policy spent planning one "
                                   "request, in seconds, by policy.")),
      simulator_family_(NewHistogram(*registry_, "slackswap_simulator_seconds",
                                     "Time spent simulating one policy's "
                                     "plan, in seconds, by policy.")),
      retained_family_(NewHistogram(*registry_, "slackswap_throughput_retained",
                                    "Throughput retained by feasible plans, "
                                    "as a fraction of the unconstrained "
                                    "step, by policy.")),
      inflight_(NewGauge(*registry_, "slackswap_inflight_requests",
                         "RPCs being served now.")
                    .Add({})),
      queue_depth_(NewGauge(*registry_, "slackswap_queue_depth",
                            "Requests waiting in the work queue.")
                       .Add({})),
      cache_hits_(NewCounter(*registry_, "slackswap_cache_hits_total",
                             "Requests answered from the plan cache.")
                      .Add({})),
      cache_misses_(NewCounter(*registry_, "slackswap_cache_misses_total",
                               "Plan cache lookups that found nothing.")
                        .Add({})),
      coalesced_(NewCounter(*registry_, "slackswap_coalesced_requests_total",
                            "Requests answered by the planning of an "
                            "identical request in flight.")
                     .Add({})),
      graph_ops_(NewHistogram(*registry_, "slackswap_graph_ops",
                              "Ops in each graph the service was asked to "
                              "plan.")
                     .Add({}, GraphOpsBuckets())),
      node_simulation_(NewHistogram(*registry_,
                                    "slackswap_node_simulation_seconds",
                                    "Time one simulation of a plan on every "
                                    "rank of a node took (a policy's result "
                                    "of a node Plan, or a Simulate on a "
                                    "node), in seconds.")
                           .Add({}, StageSecondsBuckets())) {
  Family<Counter>& fit_profiles =
      NewCounter(*registry_, "slackswap_fit_profiles_total",
                 "Hardware profiles Fit requests were answered for, by "
                 "verdict: fits (as it is), fits_with_plan, does_not_fit.");
  Family<Counter>& fit_nodes = NewCounter(
      *registry_, "slackswap_fit_nodes_total",
      "Nodes Fit requests were answered for, by node (a catalog node's name, "
      "or inline) and verdict: fits (as it is), fits_with_plan, "
      "does_not_fit.");
  std::vector<std::string> nodes = {kInlineNode};
  for (const Node& node : NodeCatalog()) nodes.push_back(node.name);
  for (const char* verdict : kFitVerdicts) {
    fit_profiles_[verdict] = &fit_profiles.Add({{"verdict", verdict}});
    for (const std::string& node : nodes) {
      fit_nodes_[{node, verdict}] =
          &fit_nodes.Add({{"node", node}, {"verdict", verdict}});
    }
  }
  Family<Counter>& plans =
      NewCounter(*registry_, "slackswap_plans_total",
                 "Plan requests admitted for planning, by scope: gpu (one "
                 "GPU) or node (the ranks of a node).");
  for (const char* scope : kPlanScopes) {
    plans_[scope] = &plans.Add({{"scope", scope}});
  }
  NewGauge(*registry_, "slackswap_build_info",
           "Build of the running service; always 1.")
      .Add({{"version", version}, {"commit", commit}})
      .Set(1);
}

ServiceMetrics::~ServiceMetrics() = default;

absl::Status ServiceMetrics::StartExposer(const std::string& address) {
  if (address.empty()) {
    return absl::InvalidArgumentError("metrics address is empty");
  }
  MutexLock lock(&exposer_mu_);
  if (exposer_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics exposer already started on port ", exposer_port_));
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<int> ports;
  // prometheus-cpp and civetweb report failures by throwing; nothing else
  // in this project does, so the exceptions stop here.
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2,
                                                    &ExposerCallbacks());
    exposer->RegisterCollectable(registry_, kMetricsPath);
    ports = exposer->GetListeningPorts();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on \"", address, "\": ", e.what()));
  }
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on \"", address, "\": no listening port"));
  }
  exposer_ = std::move(exposer);
  exposer_port_ = ports.front();
  return absl::OkStatus();
}

int ServiceMetrics::exposer_port() const {
  MutexLock lock(&exposer_mu_);
  return exposer_port_;
}

prometheus::Counter& ServiceMetrics::RequestsCounter(const std::string& method,
                                                     const std::string& code) {
  MutexLock lock(&mu_);
  Counter*& counter = requests_[std::make_pair(method, code)];
  if (counter == nullptr) {
    counter = &requests_family_.Add({{"method", method}, {"code", code}});
  }
  return *counter;
}

prometheus::Histogram& ServiceMetrics::DurationHistogram(
    const std::string& method) {
  MutexLock lock(&mu_);
  Histogram*& histogram = durations_[method];
  if (histogram == nullptr) {
    histogram =
        &duration_family_.Add({{"method", method}}, RequestSecondsBuckets());
  }
  return *histogram;
}

prometheus::Histogram& ServiceMetrics::QueueWaitHistogram(
    const std::string& method) {
  MutexLock lock(&mu_);
  Histogram*& histogram = queue_waits_[method];
  if (histogram == nullptr) {
    histogram =
        &queue_wait_family_.Add({{"method", method}}, StageSecondsBuckets());
  }
  return *histogram;
}

const char* ServiceMetrics::ReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kQueueFull:
      return "queue_full";
    case RejectReason::kMemory:
      return "memory";
    case RejectReason::kDeadline:
      return "deadline";
  }
  return "unknown";
}

prometheus::Counter& ServiceMetrics::RejectedCounter(const std::string& method,
                                                     RejectReason reason) {
  MutexLock lock(&mu_);
  Counter*& counter = rejected_[std::make_pair(method, reason)];
  if (counter == nullptr) {
    counter = &rejected_family_.Add(
        {{"method", method}, {"reason", ReasonLabel(reason)}});
  }
  return *counter;
}

void ServiceMetrics::Declare(const std::vector<std::string>& methods,
                             const std::vector<std::string>& policies) {
  for (const std::string& method : methods) {
    for (int code = 0; code <= 16; ++code) {
      RequestsCounter(method, absl::StatusCodeToString(
                                  static_cast<absl::StatusCode>(code)));
    }
    DurationHistogram(method);
    QueueWaitHistogram(method);
    for (RejectReason reason : {RejectReason::kQueueFull, RejectReason::kMemory,
                                RejectReason::kDeadline}) {
      RejectedCounter(method, reason);
    }
  }
  for (const std::string& policy : policies) ForPolicy(policy);
}

ServiceMetrics::PolicyHistograms ServiceMetrics::ForPolicy(
    const std::string& policy) {
  MutexLock lock(&mu_);
  auto [it, inserted] = policies_.try_emplace(policy);
  if (inserted) {
    const prometheus::Labels labels = {{"policy", policy}};
    it->second.planner_seconds =
        &planner_family_.Add(labels, StageSecondsBuckets());
    it->second.simulator_seconds =
        &simulator_family_.Add(labels, StageSecondsBuckets());
    it->second.retained = &retained_family_.Add(labels, RetainedBuckets());
  }
  return it->second;
}

void ServiceMetrics::RequestStarted() { inflight_.Increment(); }

void ServiceMetrics::RequestFinished(const std::string& method,
                                     const std::string& code, double seconds) {
  RequestsCounter(method, code).Increment();
  DurationHistogram(method).Observe(seconds);
  inflight_.Decrement();
}

void ServiceMetrics::Rejected(const std::string& method, RejectReason reason) {
  RejectedCounter(method, reason).Increment();
}

void ServiceMetrics::QueueWait(const std::string& method, double seconds) {
  QueueWaitHistogram(method).Observe(seconds);
}

void ServiceMetrics::Coalesced() { coalesced_.Increment(); }

void ServiceMetrics::SetQueueDepth(int depth) { queue_depth_.Set(depth); }

void ServiceMetrics::CacheHit() { cache_hits_.Increment(); }

void ServiceMetrics::CacheMiss() { cache_misses_.Increment(); }

void ServiceMetrics::GraphOps(int64_t ops) {
  graph_ops_.Observe(static_cast<double>(ops));
}

void ServiceMetrics::PolicyRun(const std::string& policy,
                               double planner_seconds, double simulator_seconds,
                               double retained, bool feasible) {
  const PolicyHistograms histograms = ForPolicy(policy);
  histograms.planner_seconds->Observe(planner_seconds);
  histograms.simulator_seconds->Observe(simulator_seconds);
  if (feasible) histograms.retained->Observe(retained);
}

void ServiceMetrics::FitProfile(const std::string& verdict) {
  IncrementIfKnown(fit_profiles_, verdict);
}

void ServiceMetrics::FitNode(const std::string& node_name,
                             const std::string& verdict) {
  // Only catalog nodes have series of their own.
  std::pair<std::string, std::string> key(node_name, verdict);
  if (!fit_nodes_.contains(key)) key.first = kInlineNode;
  IncrementIfKnown(fit_nodes_, key);
}

void ServiceMetrics::PlanAdmitted(const std::string& scope) {
  IncrementIfKnown(plans_, scope);
}

void ServiceMetrics::NodeSimulation(double seconds) {
  node_simulation_.Observe(seconds);
}

std::string ServiceMetrics::Scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace slackswap
