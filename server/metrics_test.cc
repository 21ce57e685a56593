#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/node.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The samples of a text exposition, by "name{labels}" exactly as
// prometheus-cpp writes them: the labels sorted by name, then "le".
class Scraped {
 public:
  explicit Scraped(std::string text) : text_(std::move(text)) {
    for (absl::string_view line : absl::StrSplit(text_, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      double value = 0;
      if (space == absl::string_view::npos ||
          !absl::SimpleAtod(line.substr(space + 1), &value)) {
        ADD_FAILURE() << "bad sample line: " << line;
        continue;
      }
      samples_[std::string(line.substr(0, space))] = value;
    }
  }

  // The value of `series`; NaN, and a test failure, when it is absent.
  double at(const std::string& series) const {
    auto it = samples_.find(series);
    if (it == samples_.end()) {
      ADD_FAILURE() << "no sample " << series << " in:\n" << text_;
      return std::numeric_limits<double>::quiet_NaN();
    }
    return it->second;
  }
  bool has(const std::string& series) const {
    return samples_.contains(series);
  }
  const std::map<std::string, double>& samples() const { return samples_; }

 private:
  std::string text_;
  std::map<std::string, double> samples_;
};

// Records at least one value in every metric.
void RecordOneOfEach(ServiceMetrics& metrics) {
  metrics.RequestStarted();
  metrics.RequestFinished("Plan", "OK", 0.012);
  metrics.RequestStarted();
  metrics.RequestFinished("Sweep", "DEADLINE_EXCEEDED", 3.5);
  metrics.RequestStarted();  // still in flight
  metrics.Rejected("Plan", ServiceMetrics::RejectReason::kQueueFull);
  metrics.QueueWait("Plan", 0.003);
  metrics.Coalesced();
  metrics.SetQueueDepth(3);
  metrics.CacheHit();
  metrics.CacheMiss();
  metrics.GraphOps(12'345);
  metrics.PolicyRun("slackswap", 0.004, 0.02, 0.97, /*feasible=*/true);
  metrics.PolicyRun("recompute-only", 0.001, 0.03, 0.0, /*feasible=*/false);
  metrics.FitProfile("fits");
  metrics.FitNode("dgx-a100-80gb", "fits_with_plan");
  metrics.PlanAdmitted("node");
  metrics.NodeSimulation(0.05);
}

TEST(ServiceMetricsTest, BuildInfoIsOne) {
  ServiceMetrics metrics("1.2.3", "abc1234");
  EXPECT_EQ(
      Scraped(metrics.Scrape())
          .at("slackswap_build_info{commit=\"abc1234\",version=\"1.2.3\"}"),
      1);
}

TEST(ServiceMetricsTest, EveryFamilyHasHelpText) {
  ServiceMetrics metrics("v", "c");
  RecordOneOfEach(metrics);
  const std::string text = metrics.Scrape();
  for (const char* name :
       {"slackswap_requests_total", "slackswap_request_duration_seconds",
        "slackswap_inflight_requests", "slackswap_queue_depth",
        "slackswap_rejected_requests_total", "slackswap_cache_hits_total",
        "slackswap_cache_misses_total", "slackswap_graph_ops",
        "slackswap_planner_seconds", "slackswap_simulator_seconds",
        "slackswap_throughput_retained", "slackswap_fit_profiles_total",
        "slackswap_fit_nodes_total", "slackswap_plans_total",
        "slackswap_node_simulation_seconds", "slackswap_build_info"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# HELP ", name, " ")));
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", name, " ")));
  }
}

TEST(ServiceMetricsTest, CountsRequestsByMethodAndCode) {
  ServiceMetrics metrics("v", "c");
  metrics.RequestStarted();
  metrics.RequestStarted();
  metrics.RequestStarted();
  EXPECT_EQ(Scraped(metrics.Scrape()).at("slackswap_inflight_requests"), 3);
  metrics.RequestFinished("Plan", "OK", 0.003);
  metrics.RequestFinished("Plan", "INVALID_ARGUMENT", 0.0001);
  EXPECT_EQ(Scraped(metrics.Scrape()).at("slackswap_inflight_requests"), 1);
  metrics.RequestStarted();
  metrics.RequestFinished("Plan", "OK", 2.0);

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_requests_total{code=\"OK\",method=\"Plan\"}"), 2);
  EXPECT_EQ(s.at("slackswap_requests_total{code=\"INVALID_ARGUMENT\","
                 "method=\"Plan\"}"),
            1);
  EXPECT_FALSE(s.has("slackswap_requests_total{code=\"OK\",method=\"Sweep\"}"));
  EXPECT_EQ(s.at("slackswap_inflight_requests"), 1);

  const std::string h = "slackswap_request_duration_seconds";
  EXPECT_EQ(s.at(h + "_count{method=\"Plan\"}"), 3);
  EXPECT_DOUBLE_EQ(s.at(h + "_sum{method=\"Plan\"}"), 2.0031);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"0.0005\"}"), 1);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"0.001\"}"), 1);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"0.005\"}"), 2);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"1\"}"), 2);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"2.5\"}"), 3);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"30\"}"), 3);
  EXPECT_EQ(s.at(h + "_bucket{method=\"Plan\",le=\"+Inf\"}"), 3);
}

TEST(ServiceMetricsTest, RejectionsQueueAndCache) {
  using Reason = ServiceMetrics::RejectReason;
  ServiceMetrics metrics("v", "c");
  metrics.Rejected("Plan", Reason::kQueueFull);
  metrics.Rejected("Plan", Reason::kQueueFull);
  metrics.Rejected("Plan", Reason::kDeadline);
  metrics.Rejected("Sweep", Reason::kMemory);
  metrics.Coalesced();
  metrics.SetQueueDepth(7);
  metrics.SetQueueDepth(5);
  metrics.CacheHit();
  metrics.CacheMiss();
  metrics.CacheMiss();

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_rejected_requests_total{method=\"Plan\",reason="
                 "\"queue_full\"}"),
            2);
  EXPECT_EQ(s.at("slackswap_rejected_requests_total{method=\"Plan\",reason="
                 "\"deadline\"}"),
            1);
  EXPECT_EQ(s.at("slackswap_rejected_requests_total{method=\"Sweep\",reason="
                 "\"memory\"}"),
            1);
  EXPECT_EQ(s.at("slackswap_coalesced_requests_total"), 1);
  EXPECT_EQ(s.at("slackswap_queue_depth"), 5);
  EXPECT_EQ(s.at("slackswap_cache_hits_total"), 1);
  EXPECT_EQ(s.at("slackswap_cache_misses_total"), 2);
}

// Before any event, every declared series exists at zero: dashboards and
// alerts see 0, not "no data".
TEST(ServiceMetricsTest, DeclaredSeriesExistAtZero) {
  ServiceMetrics metrics("v", "c");
  metrics.Declare({"Plan", "Sweep"}, {"slackswap"});
  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_requests_total{code=\"OK\",method=\"Plan\"}"), 0);
  EXPECT_EQ(s.at("slackswap_requests_total{code=\"UNAUTHENTICATED\","
                 "method=\"Sweep\"}"),
            0);
  EXPECT_EQ(s.at("slackswap_rejected_requests_total{method=\"Sweep\",reason="
                 "\"queue_full\"}"),
            0);
  EXPECT_EQ(s.at("slackswap_queue_wait_seconds_count{method=\"Plan\"}"), 0);
  EXPECT_EQ(s.at("slackswap_request_duration_seconds_count{method=\"Sweep\"}"),
            0);
  EXPECT_EQ(s.at("slackswap_planner_seconds_count{policy=\"slackswap\"}"), 0);
}

TEST(ServiceMetricsTest, GraphOpsHistogram) {
  ServiceMetrics metrics("v", "c");
  metrics.GraphOps(40);
  metrics.GraphOps(2'000);
  metrics.GraphOps(20'000'000);

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_graph_ops_bucket{le=\"10\"}"), 0);
  EXPECT_EQ(s.at("slackswap_graph_ops_bucket{le=\"50\"}"), 1);
  EXPECT_EQ(s.at("slackswap_graph_ops_bucket{le=\"5000\"}"), 2);
  EXPECT_EQ(s.at("slackswap_graph_ops_bucket{le=\"10000000\"}"), 2);
  EXPECT_EQ(s.at("slackswap_graph_ops_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(s.at("slackswap_graph_ops_count"), 3);
  EXPECT_EQ(s.at("slackswap_graph_ops_sum"), 20'002'040);
}

TEST(ServiceMetricsTest, PolicyRunObservesRetainedOnlyWhenFeasible) {
  ServiceMetrics metrics("v", "c");
  metrics.PolicyRun("slackswap", 0.002, 0.010, 0.96, /*feasible=*/true);
  metrics.PolicyRun("slackswap", 0.004, 0.020, 0.10, /*feasible=*/false);
  metrics.PolicyRun("swap-only", 0.001, 0.015, 1.0, /*feasible=*/true);

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_planner_seconds_count{policy=\"slackswap\"}"), 2);
  EXPECT_DOUBLE_EQ(s.at("slackswap_planner_seconds_sum{policy=\"slackswap\"}"),
                   0.006);
  EXPECT_EQ(s.at("slackswap_simulator_seconds_count{policy=\"slackswap\"}"), 2);
  EXPECT_DOUBLE_EQ(
      s.at("slackswap_simulator_seconds_sum{policy=\"slackswap\"}"), 0.03);
  EXPECT_EQ(s.at("slackswap_throughput_retained_count{policy=\"slackswap\"}"),
            1);
  EXPECT_DOUBLE_EQ(
      s.at("slackswap_throughput_retained_sum{policy=\"slackswap\"}"), 0.96);
  EXPECT_EQ(s.at("slackswap_throughput_retained_bucket{policy=\"slackswap\","
                 "le=\"0.95\"}"),
            0);
  EXPECT_EQ(s.at("slackswap_throughput_retained_bucket{policy=\"slackswap\","
                 "le=\"0.97\"}"),
            1);
  EXPECT_EQ(s.at("slackswap_throughput_retained_bucket{policy=\"swap-only\","
                 "le=\"0.999\"}"),
            0);
  EXPECT_EQ(s.at("slackswap_throughput_retained_bucket{policy=\"swap-only\","
                 "le=\"1\"}"),
            1);
  EXPECT_EQ(s.at("slackswap_planner_seconds_count{policy=\"swap-only\"}"), 1);
}

// Plan requests by what they plan for; only the known scopes are series.
TEST(ServiceMetricsTest, PlansByScope) {
  ServiceMetrics metrics("v", "c");
  {
    const Scraped s(metrics.Scrape());
    EXPECT_EQ(s.at("slackswap_plans_total{scope=\"gpu\"}"), 0);
    EXPECT_EQ(s.at("slackswap_plans_total{scope=\"node\"}"), 0);
  }
  metrics.PlanAdmitted("node");
  metrics.PlanAdmitted("node");
  metrics.PlanAdmitted("gpu");
  metrics.PlanAdmitted("cluster");
  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_plans_total{scope=\"gpu\"}"), 1);
  EXPECT_EQ(s.at("slackswap_plans_total{scope=\"node\"}"), 2);
  EXPECT_FALSE(s.has("slackswap_plans_total{scope=\"cluster\"}"));
}

TEST(ServiceMetricsTest, NodeSimulationHistogram) {
  ServiceMetrics metrics("v", "c");
  const std::string h = "slackswap_node_simulation_seconds";
  EXPECT_EQ(Scraped(metrics.Scrape()).at(h + "_count"), 0);
  metrics.NodeSimulation(0.00005);
  metrics.NodeSimulation(0.2);
  metrics.NodeSimulation(45);

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at(h + "_count"), 3);
  EXPECT_DOUBLE_EQ(s.at(h + "_sum"), 45.20005);
  EXPECT_EQ(s.at(h + "_bucket{le=\"0.0001\"}"), 1);
  EXPECT_EQ(s.at(h + "_bucket{le=\"0.1\"}"), 1);
  EXPECT_EQ(s.at(h + "_bucket{le=\"0.25\"}"), 2);
  EXPECT_EQ(s.at(h + "_bucket{le=\"30\"}"), 2);
  EXPECT_EQ(s.at(h + "_bucket{le=\"+Inf\"}"), 3);
}

// Fit answers per node: a catalog node under its name, any other name as
// node="inline", so that request input never becomes a series.
TEST(ServiceMetricsTest, FitNodesByCatalogNodeOrInline) {
  ServiceMetrics metrics("v", "c");
  ASSERT_FALSE(NodeCatalog().empty());
  auto series = [](const std::string& node, const std::string& verdict) {
    return absl::StrCat("slackswap_fit_nodes_total{node=\"", node,
                        "\",verdict=\"", verdict, "\"}");
  };
  {
    // Every catalog node's and inline's series, each verdict, at zero.
    const Scraped s(metrics.Scrape());
    std::vector<std::string> nodes = {"inline"};
    for (const Node& node : NodeCatalog()) nodes.push_back(node.name);
    for (const std::string& node : nodes) {
      for (const char* verdict : {"fits", "fits_with_plan", "does_not_fit"}) {
        EXPECT_EQ(s.at(series(node, verdict)), 0);
      }
    }
  }
  const std::string catalog = NodeCatalog().front().name;
  metrics.FitNode(catalog, "fits_with_plan");
  metrics.FitNode(catalog, "fits_with_plan");
  metrics.FitNode(catalog, "does_not_fit");
  metrics.FitNode("my-own-rig", "does_not_fit");
  metrics.FitNode("", "fits");
  metrics.FitNode(catalog, "maybe");  // no such verdict: not counted

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at(series(catalog, "fits_with_plan")), 2);
  EXPECT_EQ(s.at(series(catalog, "does_not_fit")), 1);
  EXPECT_EQ(s.at(series(catalog, "fits")), 0);
  EXPECT_EQ(s.at(series("inline", "does_not_fit")), 1);
  EXPECT_EQ(s.at(series("inline", "fits")), 1);
  int fit_node_series = 0;
  for (const auto& [name, value] : s.samples()) {
    if (absl::StartsWith(name, "slackswap_fit_nodes_total{")) {
      ++fit_node_series;
    }
  }
  EXPECT_EQ(fit_node_series, 3 * static_cast<int>(NodeCatalog().size() + 1));
  // Fit's per-profile counter is apart.
  EXPECT_EQ(s.at("slackswap_fit_profiles_total{verdict=\"does_not_fit\"}"), 0);
}

TEST(ServiceMetricsTest, BucketsAreIncreasing) {
  for (const std::vector<double>& buckets :
       {ServiceMetrics::RequestSecondsBuckets(),
        ServiceMetrics::StageSecondsBuckets(),
        ServiceMetrics::GraphOpsBuckets(), ServiceMetrics::RetainedBuckets()}) {
    ASSERT_FALSE(buckets.empty());
    for (size_t i = 1; i < buckets.size(); ++i) {
      EXPECT_LT(buckets[i - 1], buckets[i]);
    }
  }
  EXPECT_EQ(ServiceMetrics::RequestSecondsBuckets().front(), 0.0005);
  EXPECT_EQ(ServiceMetrics::RequestSecondsBuckets().back(), 30);
  EXPECT_EQ(ServiceMetrics::GraphOpsBuckets().front(), 10);
  EXPECT_EQ(ServiceMetrics::GraphOpsBuckets().back(), 1e7);
  EXPECT_EQ(ServiceMetrics::RetainedBuckets().size(), 13);
}

TEST(ServiceMetricsTest, ConcurrentRecordingAndScraping) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  ServiceMetrics metrics("v", "c");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      const std::string method = t % 2 == 0 ? "Plan" : "Sweep";
      const std::string policy = absl::StrCat("policy", t % 3);
      for (int i = 0; i < kPerThread; ++i) {
        metrics.RequestStarted();
        metrics.PolicyRun(policy, 0.001, 0.002, 0.9, i % 2 == 0);
        metrics.GraphOps(100 + i);
        if (i % 10 == 0) {
          metrics.Rejected(method, ServiceMetrics::RejectReason::kQueueFull);
        }
        metrics.RequestFinished(method, i % 5 == 0 ? "CANCELLED" : "OK", 0.01);
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_THAT(metrics.Scrape(), HasSubstr("slackswap_build_info"));
  }
  for (std::thread& thread : threads) thread.join();

  const Scraped s(metrics.Scrape());
  EXPECT_EQ(s.at("slackswap_inflight_requests"), 0);
  EXPECT_EQ(s.at("slackswap_graph_ops_count"), kThreads * kPerThread);
  double requests = 0;
  for (const auto& [series, value] : s.samples()) {
    if (series.rfind("slackswap_requests_total{", 0) == 0) requests += value;
  }
  EXPECT_EQ(requests, kThreads * kPerThread);
}

// A minimal blocking HTTP/1.0 client: GETs `path` from 127.0.0.1:`port` and
// returns the whole response (status line, headers and body).
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, 0);
    if (n <= 0) {
      close(fd);
      return absl::InternalError("send() failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) {
      close(fd);
      return absl::InternalError("recv() failed");
    }
    if (n == 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

// The status code of an HTTP response ("HTTP/1.1 200 OK" -> 200), or -1.
int StatusCode(const std::string& response) {
  std::vector<std::string> parts = absl::StrSplit(response, ' ');
  int code = -1;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &code)) return -1;
  return code;
}

// The body of an HTTP response.
std::string Body(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

TEST(ServiceMetricsTest, ExposerServesMetricsOverHttp) {
  ServiceMetrics metrics("1.0", "deadbee");
  EXPECT_EQ(metrics.exposer_port(), 0);
  ASSERT_TRUE(metrics.StartExposer("127.0.0.1:0").ok());
  const int port = metrics.exposer_port();
  ASSERT_GT(port, 0);
  metrics.CacheHit();
  metrics.RequestStarted();
  metrics.RequestFinished("Plan", "OK", 0.25);

  absl::StatusOr<std::string> response = HttpGet(port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(StatusCode(*response), 200) << *response;
  const Scraped s(Body(*response));
  EXPECT_EQ(s.at("slackswap_cache_hits_total"), 1);
  EXPECT_EQ(s.at("slackswap_requests_total{code=\"OK\",method=\"Plan\"}"), 1);
  EXPECT_EQ(s.at("slackswap_build_info{commit=\"deadbee\",version=\"1.0\"}"),
            1);

  absl::StatusOr<std::string> with_query = HttpGet(port, "/metrics?x=1");
  ASSERT_TRUE(with_query.ok()) << with_query.status();
  EXPECT_EQ(StatusCode(*with_query), 200) << *with_query;

  for (const char* other :
       {"/", "/metricsx", "/metrics/", "/metrics/x", "/other", "/healthz"}) {
    absl::StatusOr<std::string> not_found = HttpGet(port, other);
    ASSERT_TRUE(not_found.ok()) << not_found.status();
    EXPECT_EQ(StatusCode(*not_found), 404) << other << ": " << *not_found;
    EXPECT_THAT(*not_found, Not(HasSubstr("slackswap_")));
  }
}

TEST(ServiceMetricsTest, StartExposerTwiceFails) {
  ServiceMetrics metrics("v", "c");
  ASSERT_TRUE(metrics.StartExposer("127.0.0.1:0").ok());
  const int port = metrics.exposer_port();
  const absl::Status again = metrics.StartExposer("127.0.0.1:0");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_EQ(metrics.exposer_port(), port);
}

TEST(ServiceMetricsTest, StartExposerOnAUsedPortFails) {
  ServiceMetrics first("v", "c");
  ASSERT_TRUE(first.StartExposer("127.0.0.1:0").ok());
  const int port = first.exposer_port();

  ServiceMetrics second("v", "c");
  const absl::Status status =
      second.StartExposer(absl::StrCat("127.0.0.1:", port));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(port)));
  EXPECT_EQ(second.exposer_port(), 0);
  // The failure left it startable elsewhere.
  EXPECT_TRUE(second.StartExposer("127.0.0.1:0").ok());

  // The first still serves.
  absl::StatusOr<std::string> response = HttpGet(port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(StatusCode(*response), 200);
}

TEST(ServiceMetricsTest, StartExposerRejectsBadAddresses) {
  ServiceMetrics metrics("v", "c");
  EXPECT_EQ(metrics.StartExposer("").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics.StartExposer("127.0.0.1:99999").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(metrics.exposer_port(), 0);
}

// Runs `command` under /bin/sh, and returns its stdout; sets *exit_code.
std::string RunShell(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return output;
  }
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, n);
  }
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST(ServiceMetricsTest, ScrapePassesPromtoolLint) {
  int exit_code = 0;
  const std::string promtool = std::string(absl::StripTrailingAsciiWhitespace(
      RunShell("command -v promtool", &exit_code)));
  if (exit_code != 0 || promtool.empty()) {
    FAIL() << "promtool is not on PATH; it comes with Debian's prometheus "
              "package (apt-get install prometheus)";
  }

  ServiceMetrics metrics("0.1.0", "0123abc");
  RecordOneOfEach(metrics);
  const std::string text = metrics.Scrape();

  const std::string path =
      absl::StrCat(testing::TempDir(), "/scrape_", getpid(), ".prom");
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good()) << path;
  }
  const std::string output = RunShell(
      absl::StrCat("'", promtool, "' check metrics < '", path, "' 2>&1"),
      &exit_code);
  std::remove(path.c_str());
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, IsEmpty()) << "scrape:\n" << text;
}

}  // namespace
}  // namespace slackswap
