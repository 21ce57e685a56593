// End-to-end tests of the real `slackswapd` (path compiled in as
// SLACKSWAPD_BIN) on loopback, through the generated C++ gRPC stubs: health,
// planning (remote answers equal the local core's), the plan cache, the
// catalog, streamed sweeps, error codes, deadlines, cancellation, admission
// control, graceful shutdown, the Prometheus scrape and server reflection.
// Every test starts the server it needs on free ports and stops it; every
// wait is bounded.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "common/sha256.h"
#include "common/version.h"
#include "core/planning_core.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/workloads.h"
#include "planner/policy.h"
#include "planner/version.h"
#include "slackswap/v1/planner_service.grpc.pb.h"
#include "testing/hostile_graphs.h"
#include "tests/service_test_util.h"
#include "tests/slackswapd_process.h"

#ifndef SLACKSWAP_BIN
#error "SLACKSWAP_BIN must name the slackswap CLI binary"
#endif

namespace slackswap {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::slackswap::testutil::AwaitMetric;
using ::slackswap::testutil::CommandResult;
using ::slackswap::testutil::ConcurrentPlans;
using ::slackswap::testutil::Connect;
using ::slackswap::testutil::Deterministic;
using ::slackswap::testutil::FindOnPath;
using ::slackswap::testutil::Gpt2Plan;
using ::slackswap::testutil::Gpt2Sweep;
using ::slackswap::testutil::HttpGet;
using ::slackswap::testutil::HttpResponse;
using ::slackswap::testutil::JsonField;
using ::slackswap::testutil::kSlowdown;
using ::slackswap::testutil::kStopMargin;
using ::slackswap::testutil::LogLine;
using ::slackswap::testutil::MetricValue;
using ::slackswap::testutil::ParseMetrics;
using ::slackswap::testutil::PlannerStub;
using ::slackswap::testutil::RunCommand;
using ::slackswap::testutil::Scrape;
using ::slackswap::testutil::ScrapeWhenIdle;
using ::slackswap::testutil::ServedPlanner;
using ::slackswap::testutil::SetDeadline;
using ::slackswap::testutil::SlackswapdProcess;
using ::slackswap::testutil::SteadyClock;
using ::slackswap::testutil::WithoutTimings;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kPlanner[] = "slackswap.v1.Planner";

// Keeps libgrpc++_reflection (and with it the reflection protos'
// descriptors in the generated pool) linked in, for the reflection test.
[[maybe_unused]] void (*volatile kLinkReflection)() =
    &grpc::reflection::InitProtoReflectionServerBuilderPlugin;

// Matches the server's log line for one finished call of `method`.
std::function<bool(const std::string&)> IsRequestLine(
    const std::string& method) {
  return [method](const std::string& line) {
    return JsonField(line, "msg") == "request" &&
           JsonField(line, "method") == method;
  };
}

std::function<bool(const std::string&)> IsEvent(const std::string& msg) {
  return
      [msg](const std::string& line) { return JsonField(line, "msg") == msg; };
}

int CountRequestLines(const SlackswapdProcess& server,
                      const std::string& method) {
  const auto match = IsRequestLine(method);
  int n = 0;
  for (const LogLine& l : server.Lines()) n += match(l.text) ? 1 : 0;
  return n;
}

double MillisBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// --- health -----------------------------------------------------------------

TEST(ServerHealthTest, ServingUntilSigtermThenExitsZero) {
  SlackswapdProcess server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  std::unique_ptr<Health::Stub> health = Health::NewStub(Connect(server));
  for (const char* service : {"", kPlanner}) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    HealthCheckRequest req;
    req.set_service(service);
    HealthCheckResponse resp;
    const grpc::Status s = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING)
        << "service \"" << service << "\"";
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    HealthCheckRequest req;
    req.set_service("no.such.Service");
    HealthCheckResponse resp;
    EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }

  const CommandResult cli =
      RunCommand({SLACKSWAP_BIN, "health", "--server", server.target()});
  EXPECT_EQ(cli.exit_status, 0) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("is SERVING"));

  // Close our connection first: with an idle client connection open, gRPC's
  // shutdown takes ~5 s longer (its graceful GOAWAY), which this test does
  // not need to spend.
  health.reset();
  ASSERT_TRUE(server.SendSignal(SIGTERM));
  EXPECT_EQ(server.Wait(), 0);
  const std::string log = server.LogText();
  EXPECT_THAT(log, HasSubstr("\"msg\":\"draining\""));
  EXPECT_THAT(log, HasSubstr("\"signal\":\"SIGTERM\""));
  EXPECT_THAT(log, HasSubstr("\"msg\":\"stopped\""));

  // Nothing listens any more: the CLI says so and exits 1.
  const CommandResult gone = RunCommand(
      {SLACKSWAP_BIN, "health", "--server", server.target(), "--timeout", "5"});
  EXPECT_EQ(gone.exit_status, 1) << gone.output;
  EXPECT_THAT(gone.output, HasSubstr("UNAVAILABLE"));
}

TEST(ServerHealthTest, BadFlagsFailAtStartupWithExitOne) {
  SlackswapdProcess server({"--max_queue=0"});
  EXPECT_FALSE(server.started());
  EXPECT_THAT(server.error(), HasSubstr("no \"serving\" line"));
  EXPECT_THAT(server.LogText(), HasSubstr("\"msg\":\"startup failed\""));
  EXPECT_THAT(server.LogText(), HasSubstr("--max_queue"));
  EXPECT_EQ(server.Wait(), 1);
  // 4096 MiB would wrap gRPC's int message limit to 0 (every call refused).
  SlackswapdProcess wraps({"--max_message_mb=4096"});
  EXPECT_FALSE(wraps.started());
  EXPECT_THAT(wraps.LogText(),
              HasSubstr("max_message_mb must be in [1, 1024], got 4096"));
  EXPECT_EQ(wraps.Wait(), 1);
}

// --- plan -------------------------------------------------------------------

TEST(ServerPlanTest, RemotePlanEqualsLocalCore) {
  ServedPlanner server({"--threads=2"});
  ASSERT_TRUE(server.started()) << server.error();
  const PlanningCore local(CoreLimits{});

  std::vector<v1::PlanRequest> requests;
  // Small graphs, every policy, with reasons and a timeline.
  v1::PlanRequest small = Gpt2Plan(4, 0.5, {});
  small.set_include_reasons(true);
  small.set_timeline_points(64);
  requests.push_back(small);
  v1::PlanRequest bytes = Gpt2Plan(2, 0.5, {"slackswap", "capuchin"});
  bytes.clear_budget_fraction();
  bytes.set_budget_bytes(int64_t{1} << 30);
  bytes.mutable_step()->set_hardware_name("h100-pcie5");
  requests.push_back(bytes);
  // The full GPT-2 XL, every policy.
  v1::PlanRequest full = Gpt2Plan(std::nullopt, 0.5, {});
  full.set_include_reasons(true);
  requests.push_back(full);
  // The first request's workload again, at another budget: its graph is
  // the one the server kept built (--workload_graphs_mb).
  v1::PlanRequest again = Gpt2Plan(4, 0.3, {});
  again.set_include_reasons(true);
  requests.push_back(again);

  for (const v1::PlanRequest& req : requests) {
    SCOPED_TRACE(req.ShortDebugString());
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse remote;
    const grpc::Status s = server.stub().Plan(&ctx, req, &remote);
    ASSERT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
    absl::StatusOr<v1::PlanResponse> mine = local.PlanStep(req, {});
    ASSERT_TRUE(mine.ok()) << mine.status();

    EXPECT_FALSE(remote.cache_hit());
    EXPECT_GT(remote.server_seconds(), 0);
    const int policies = req.policies_size() > 0 ? req.policies_size() : 5;
    ASSERT_EQ(remote.report().results_size(), policies);
    for (const v1::PolicyResult& p : remote.report().results()) {
      EXPECT_GT(p.planning_seconds(), 0) << p.policy();
    }
    const v1::PlanReport a = WithoutTimings(remote);
    const v1::PlanReport b = WithoutTimings(*mine);
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(b, a)) << diff;
    EXPECT_EQ(Deterministic(a), Deterministic(b));
  }
}

// Fit over the wire: the local core's answer, counted by verdict, and
// admitted by cost like Plan (it plans each profile many times).
TEST(ServerFitTest, FitIsTheLocalAnswerCountedAndAdmittedByCost) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  v1::FitRequest req;
  req.mutable_workload()->set_name("llama-7b");
  req.add_profiles()->set_hardware_name("a100-40gb-pcie4");
  req.add_profiles()->set_hardware_name("a100-80gb-pcie4");
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::FitResponse remote;
  const grpc::Status s = server.stub().Fit(&ctx, req, &remote);
  ASSERT_TRUE(s.ok()) << s.error_message();
  absl::StatusOr<v1::FitResponse> mine =
      PlanningCore(CoreLimits{}).FitStep(req, {});
  ASSERT_TRUE(mine.ok()) << mine.status();
  remote.clear_server_seconds();
  mine->clear_server_seconds();
  EXPECT_EQ(Deterministic(remote), Deterministic(*mine));
  ASSERT_EQ(remote.results_size(), 2);
  EXPECT_EQ(remote.results(0).hardware_name(), "a100-80gb-pcie4");
  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Fit"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_fit_profiles_total",
                        {{"verdict", "fits"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_fit_profiles_total",
                        {{"verdict", "fits_with_plan"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_fit_profiles_total",
                        {{"verdict", "does_not_fit"}}),
            0);
  // The CLI's fit prints the same table through the server as locally.
  const std::vector<std::string> fit = {
      SLACKSWAP_BIN, "fit",        "--workload",
      "llama-7b",    "--hardware", "a100-40gb-pcie4,a100-80gb-pcie4"};
  std::vector<std::string> through = fit;
  through.insert(through.end(), {"--server", server.target()});
  const CommandResult via_server = RunCommand(through);
  const CommandResult local = RunCommand(fit);
  EXPECT_EQ(via_server.exit_status, 0) << via_server.output;
  EXPECT_EQ(via_server.output, local.output);
  EXPECT_THAT(local.output, HasSubstr("a100-40gb-pcie4  with plan"));

  // With one second a request, one Plan of llama-7b is admitted; a Fit over
  // 16 profiles is refused before any work, with its estimate.
  ServedPlanner strict({"--threads=1", "--max_request_s=1"});
  ASSERT_TRUE(strict.started()) << strict.error();
  v1::FitRequest many;
  many.mutable_workload()->set_name("llama-7b");
  for (int i = 0; i < 16; ++i) {
    many.add_profiles()->set_hardware_name("h100-pcie5");
  }
  grpc::ClientContext fit_ctx;
  SetDeadline(fit_ctx);
  v1::FitResponse refused;
  const grpc::Status r = strict.stub().Fit(&fit_ctx, many, &refused);
  EXPECT_EQ(r.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.error_message(), HasSubstr("would take an estimated"));
  v1::PlanRequest plan;
  plan.mutable_step()->mutable_workload()->set_name("llama-7b");
  plan.mutable_step()->set_hardware_name("h100-pcie5");
  plan.set_budget_fraction(0.5);
  plan.add_policies("slackswap");
  grpc::ClientContext plan_ctx;
  SetDeadline(plan_ctx);
  v1::PlanResponse planned;
  const grpc::Status p = strict.stub().Plan(&plan_ctx, plan, &planned);
  EXPECT_TRUE(p.ok()) << p.error_message();
}

TEST(ServerPlanTest, SecondIdenticalPlanIsACacheHit) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  // A call's log line is written once gRPC has sent its reply, so the client
  // can send the next call first: each call waits for its own line, and the
  // details are in the order the calls were made.
  size_t lines_seen = server.Lines().size();
  std::vector<std::string> details;
  auto plan = [&](const v1::PlanRequest& req, v1::PlanResponse* resp) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = server.stub().Plan(&ctx, req, resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::optional<LogLine> line = server.WaitForLine(
        IsRequestLine("Plan"), std::chrono::seconds(10), lines_seen);
    ASSERT_TRUE(line.has_value()) << server.LogText();
    lines_seen = line->index + 1;
    details.push_back(JsonField(line->text, "detail").value_or("?"));
  };

  const v1::PlanRequest req = Gpt2Plan(4, 0.5, {"slackswap", "capuchin"});
  v1::PlanResponse first;
  v1::PlanResponse second;
  plan(req, &first);
  plan(req, &second);
  EXPECT_FALSE(first.cache_hit());
  EXPECT_GT(first.server_seconds(), 0);
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.server_seconds(), 0);
  // The cached report is the first one, wall times included.
  EXPECT_EQ(Deterministic(second.report()), Deterministic(first.report()));

  // A different request is not a hit.
  v1::PlanResponse third;
  plan(Gpt2Plan(4, 0.6, {"slackswap", "capuchin"}), &third);
  EXPECT_FALSE(third.cache_hit());
  EXPECT_THAT(details,
              ::testing::ElementsAre("cache=miss", "cache=hit", "cache=miss"));

  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_cache_hits_total"), 1) << scrape;
  EXPECT_EQ(MetricValue(scrape, "slackswap_cache_misses_total"), 2) << scrape;
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "OK"}}),
            3);
}

// --- catalog ----------------------------------------------------------------

TEST(ServerCatalogTest, ListsProfilesAndWorkloadsAndGetsAGraph) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  const PlanningCore local(CoreLimits{});

  v1::ListHardwareProfilesResponse profiles;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = server.stub().ListHardwareProfiles(
        &ctx, v1::ListHardwareProfilesRequest(), &profiles);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<std::string> names;
  for (const auto& p : profiles.profiles()) names.push_back(p.name());
  EXPECT_THAT(names, UnorderedElementsAre("a100-80gb-pcie4", "a100-40gb-pcie4",
                                          "h100-pcie5", "gh200-c2c"));
  EXPECT_EQ(Deterministic(profiles),
            Deterministic(local.ListHardwareProfiles()));

  v1::ListWorkloadsResponse workloads;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = server.stub().ListWorkloads(
        &ctx, v1::ListWorkloadsRequest(), &workloads);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  names.clear();
  for (const auto& w : workloads.workloads()) {
    names.push_back(w.name());
    EXPECT_GT(w.layers(), 0) << w.name();
    EXPECT_GT(w.ops(), 0) << w.name();
    EXPECT_GT(w.saved_activation_bytes(), 0) << w.name();
  }
  EXPECT_THAT(names, UnorderedElementsAre("bert-large", "gpt2-xl", "llama-7b"));
  absl::StatusOr<v1::ListWorkloadsResponse> my_workloads =
      local.ListWorkloads();
  ASSERT_TRUE(my_workloads.ok()) << my_workloads.status();
  EXPECT_EQ(Deterministic(workloads), Deterministic(*my_workloads));

  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("gpt2-xl");
  get.mutable_workload()->set_layers(2);
  v1::GetWorkloadResponse graph;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = server.stub().GetWorkload(&ctx, get, &graph);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The README's figures for the 2-layer GPT-2 XL.
  EXPECT_EQ(graph.graph().ops_size(), 58);
  EXPECT_EQ(graph.graph().tensors_size(), 98);
  absl::StatusOr<v1::GetWorkloadResponse> mine = local.GetWorkload(get);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(Deterministic(graph), Deterministic(*mine));
}

TEST(ServerCatalogTest, ListsNodesAsTheCoreDoes) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  v1::ListNodesResponse nodes;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s =
        server.stub().ListNodes(&ctx, v1::ListNodesRequest(), &nodes);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<std::string> names;
  for (const v1::NodeProfile& n : nodes.nodes()) {
    names.push_back(n.name());
    // Each node stands alone: its GPU inline, valid on the way back in.
    EXPECT_TRUE(n.has_gpu_inline()) << n.name();
    absl::StatusOr<Node> node = NodeFromProto(n);
    EXPECT_TRUE(node.ok()) << node.status();
  }
  EXPECT_THAT(names, ::testing::ElementsAreArray(NodeNames()));
  EXPECT_EQ(Deterministic(nodes),
            Deterministic(PlanningCore(CoreLimits{}).ListNodes()));

  // ServerInfo names them and digests the same answer.
  v1::ServerInfoResponse info;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s =
        server.stub().ServerInfo(&ctx, v1::ServerInfoRequest(), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_THAT(info.nodes(), ::testing::ElementsAreArray(NodeNames()));
  EXPECT_EQ(info.node_catalog_sha256(),
            Sha256Hex(Sha256::Of(Deterministic(nodes))));
}

TEST(ServerSimulateTest, ANodeSimulationIsTheLocalCoresAnswer) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  v1::SimulateRequest req;
  req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  req.mutable_step()->mutable_workload()->set_layers(2);
  req.mutable_step()->set_node_name("dgx-a100-80gb");
  req.mutable_step()->set_ranks(4);
  req.set_timeline_points(16);
  v1::SimulateResponse remote;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = server.stub().Simulate(&ctx, req, &remote);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  absl::StatusOr<v1::SimulateResponse> local =
      PlanningCore(CoreLimits{}).SimulateStep(req, {});
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(remote.node().ranks_size(), 4);
  EXPECT_EQ(remote.result().step_ns(), remote.node().step_ns());
  // Every figure but the server's time is the local core's.
  remote.clear_server_seconds();
  local->clear_server_seconds();
  EXPECT_EQ(Deterministic(remote), Deterministic(*local));

  // Plan takes the node too: every result is the node's.
  v1::PlanRequest plan;
  *plan.mutable_step() = req.step();
  plan.set_budget_fraction(0.5);
  plan.add_policies("slackswap");
  v1::PlanResponse planned;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  const grpc::Status s = server.stub().Plan(&ctx, plan, &planned);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(planned.report().node_name(), remote.node().node_name());
  ASSERT_EQ(planned.report().results_size(), 1);
  EXPECT_EQ(planned.report().results(0).node().ranks_size(), 4);

  // Counted as a node plan; the Simulate and slackswap's result each ran
  // the node once.
  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_plans_total", {{"scope", "node"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_plans_total", {{"scope", "gpu"}}),
            0);
  EXPECT_EQ(MetricValue(scrape, "slackswap_node_simulation_seconds_count", {}),
            2);
  EXPECT_GT(MetricValue(scrape, "slackswap_node_simulation_seconds_sum", {}),
            0);
}

TEST(ServerCatalogTest, ServerInfoNamesTheBuildTheRegistryAndTheLimits) {
  ServedPlanner server({"--threads=1", "--max_message_mb=8",
                        "--max_request_s=30", "--max_graph_ops=5000"});
  ASSERT_TRUE(server.started()) << server.error();
  v1::ServerInfoResponse info;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  const grpc::Status s =
      server.stub().ServerInfo(&ctx, v1::ServerInfoRequest(), &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.version(), Version());
  EXPECT_EQ(info.commit(), Commit());
  ASSERT_EQ(info.policies_size(), static_cast<int>(PolicyRegistry().size()));
  for (int i = 0; i < info.policies_size(); ++i) {
    EXPECT_EQ(info.policies(i).name(), PolicyRegistry()[i].name);
    EXPECT_EQ(info.policies(i).unbudgeted_reference(),
              PolicyRegistry()[i].unbudgeted_reference);
  }
  EXPECT_THAT(info.workloads(), ::testing::ElementsAreArray(WorkloadNames()));
  EXPECT_THAT(info.hardware_profiles(),
              ::testing::ElementsAreArray(HardwareNames()));
  EXPECT_EQ(info.limits().max_message_bytes(), 8 << 20);
  EXPECT_EQ(info.limits().max_request_seconds(), 30);
  EXPECT_EQ(info.limits().max_graph_ops(), 5000);
  EXPECT_EQ(info.limits().max_workload_layers(),
            CoreLimits{}.max_workload_layers);
  EXPECT_EQ(info.limits().max_fit_profiles(), kMaxFitProfiles);

  // The CLI lists the same through it.
  const std::string target = server.target();
  for (const char* what : {"policies", "hardware", "nodes", "workloads"}) {
    CommandResult remote =
        RunCommand({SLACKSWAP_BIN, "list", what, "--json", "--server", target});
    CommandResult local = RunCommand({SLACKSWAP_BIN, "list", what, "--json"});
    EXPECT_EQ(remote.exit_status, 0) << remote.output;
    EXPECT_EQ(remote.output, local.output) << what;
  }
}

// --- sweep ------------------------------------------------------------------

TEST(ServerSweepTest, StreamsEachPointAsItIsComputed) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();

  v1::SweepRequest req = Gpt2Sweep(100);
  req.set_from(0.3);
  req.set_to(0.6);
  req.set_step_fraction(0.1);
  req.add_policies("slackswap");
  req.add_policies("capuchin");
  req.set_target(0.9);
  constexpr int kBudgets = 4;
  constexpr int kPolicies = 2;

  grpc::ClientContext ctx;
  SetDeadline(ctx);
  std::vector<v1::SweepResponse> got;
  std::unique_ptr<grpc::ClientReader<v1::SweepResponse>> reader =
      server.stub().Sweep(&ctx, req);
  for (v1::SweepResponse msg; reader->Read(&msg);) got.push_back(msg);
  const grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();

  int points = 0;
  int targets = 0;
  for (const v1::SweepResponse& m : got) {
    points += m.has_point() ? 1 : 0;
    targets += m.has_target() ? 1 : 0;
    if (m.has_target()) {
      EXPECT_DOUBLE_EQ(m.target().target(), 0.9);
      EXPECT_TRUE(m.target().reached()) << m.target().ShortDebugString();
      EXPECT_GE(m.target().throughput_retained(), 0.9);
    }
  }
  EXPECT_EQ(points, kBudgets * kPolicies);
  EXPECT_EQ(targets, kPolicies);
  // Points come first, budget by budget, each budget's policies in registry
  // order, whatever the request's.
  for (int i = 0; i < kBudgets * kPolicies && i < static_cast<int>(got.size());
       ++i) {
    ASSERT_TRUE(got[i].has_point()) << i;
    EXPECT_EQ(got[i].point().policy(), i % 2 == 0 ? "capuchin" : "slackswap");
    EXPECT_EQ(got[i].planner_version(), PlannerVersion());
    EXPECT_NEAR(got[i].point().budget_fraction(), 0.3 + 0.1 * (i / 2), 1e-9);
  }

  // Streamed, not batched, is shown where it cannot depend on timing
  // (TrafficTest.UnreadSweepsPauseAndNeverHoldUpAPlan): an unread sweep
  // stops planning well short of its points, which a server that planned
  // them all before sending could not do. Comparing when the first point
  // arrived with when the server's log line was read compared two threads'
  // clocks, which a loaded machine can reorder.
  std::optional<LogLine> done =
      server.WaitForLine(IsRequestLine("Sweep"), seconds(10));
  ASSERT_TRUE(done.has_value()) << server.LogText();
  EXPECT_EQ(JsonField(done->text, "code"), "OK");

  // Same messages as the local core, in the same order.
  const PlanningCore local(CoreLimits{});
  std::vector<v1::SweepResponse> mine;
  const absl::Status ls =
      local.SweepBudgets(req, {}, [&](const v1::SweepResponse& m) {
        mine.push_back(m);
        return true;
      });
  ASSERT_TRUE(ls.ok()) << ls;
  ASSERT_EQ(mine.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Deterministic(got[i]), Deterministic(mine[i]))
        << i << ": " << got[i].ShortDebugString() << " vs "
        << mine[i].ShortDebugString();
  }
}

// --- errors -----------------------------------------------------------------

TEST(ServerErrorsTest, BadRequestsGetTheRightCodeNamingTheField) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  auto plan = [&](const v1::PlanRequest& req) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    return server.stub().Plan(&ctx, req, &resp);
  };

  grpc::Status s = plan(Gpt2Plan(2, 0.5, {"no-such-policy"}));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("policies[0]"));

  s = plan(Gpt2Plan(2, 0.5, {"slackswap", "nope"}));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("policies[1]"));

  v1::PlanRequest negative = Gpt2Plan(2, 0.5, {"slackswap"});
  negative.set_budget_bytes(-1);
  s = plan(negative);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("budget_bytes"));

  v1::PlanRequest unknown = Gpt2Plan(std::nullopt, 0.5, {"slackswap"});
  unknown.mutable_step()->mutable_workload()->set_name("gpt-9");
  s = plan(unknown);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("step.workload"));

  v1::PlanRequest tpu = Gpt2Plan(2, 0.5, {"slackswap"});
  tpu.mutable_step()->set_hardware_name("tpu");
  s = plan(tpu);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("step.hardware_name"));

  v1::PlanRequest no_step = Gpt2Plan(2, 0.5, {"slackswap"});
  no_step.clear_step();
  s = plan(no_step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("step"));

  // One byte: no policy can get there. An answer, not an error: the
  // results, infeasible, and why.
  v1::PlanRequest tiny = Gpt2Plan(2, 0.5, {"slackswap", "recompute_only"});
  tiny.set_budget_bytes(1);
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    s = server.stub().Plan(&ctx, tiny, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(resp.report().budget_unmet(),
                HasSubstr("the lowest activation peak reachable is"));
    EXPECT_GT(resp.report().results(0).min_budget_bytes(), 1);
  }

  v1::SweepRequest sweep = Gpt2Sweep();
  sweep.add_policies("bogus");
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  auto reader = server.stub().Sweep(&ctx, sweep);
  v1::SweepResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("policies[0]"));

  // Each failure was logged and counted under its code.
  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "INVALID_ARGUMENT"}}),
            4);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "NOT_FOUND"}}),
            2);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(server.WaitForLines(IsRequestLine("Plan"), 7, seconds(10)).size(),
            7u)
      << server.LogText();
  EXPECT_EQ(CountRequestLines(server, "Plan"), 7);
}

TEST(ServerErrorsTest, GraphOverMaxGraphOpsIsResourceExhausted) {
  ServedPlanner server({"--threads=1", "--max_graph_ops=100"});
  ASSERT_TRUE(server.started()) << server.error();

  // 2 layers (58 ops) fit; the full model does not.
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    const grpc::Status s =
        server.stub().Plan(&ctx, Gpt2Plan(2, 0.5, {"slackswap"}), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    const grpc::Status s = server.stub().Plan(
        &ctx, Gpt2Plan(std::nullopt, 0.5, {"slackswap"}), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(), HasSubstr("step.workload"));
    EXPECT_THAT(s.error_message(), HasSubstr("limit of 100"));
  }
  // GetWorkload is held to the same limit.
  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("gpt2-xl");
  get.mutable_workload()->set_layers(4);
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::GetWorkloadResponse refused;
    const grpc::Status s = server.stub().GetWorkload(&ctx, get, &refused);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(), HasSubstr("limit of 100"));
  }
  // The same through an inline graph (4 layers, built locally).
  absl::StatusOr<v1::GetWorkloadResponse> graph =
      PlanningCore(CoreLimits{}).GetWorkload(get);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_GT(graph->graph().ops_size(), 100);
  v1::PlanRequest inline_req = Gpt2Plan(std::nullopt, 0.5, {"slackswap"});
  *inline_req.mutable_step()->mutable_graph_inline() = graph->graph();
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::PlanResponse resp;
  const grpc::Status s = server.stub().Plan(&ctx, inline_req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("step.graph_inline.ops"));
}

TEST(ServerErrorsTest, MessageOverMaxMessageSizeIsRefusedByGrpc) {
  // The graph comes from a server with the default limit, which also shows
  // the same request is fine there.
  ServedPlanner big({"--threads=1"});
  ASSERT_TRUE(big.started()) << big.error();
  ServedPlanner small({"--threads=1", "--max_message_mb=1"});
  ASSERT_TRUE(small.started()) << small.error();

  // GPT-2 XL's 48 layers take ~160 kB; ten times as deep is over 1 MiB.
  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("gpt2-xl");
  get.mutable_workload()->set_layers(480);
  v1::GetWorkloadResponse graph;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = big.stub().GetWorkload(&ctx, get, &graph);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  v1::PlanRequest req = Gpt2Plan(std::nullopt, 0.5, {"slackswap"});
  *req.mutable_step()->mutable_graph_inline() = graph.graph();
  ASSERT_GT(req.ByteSizeLong(), size_t{1} << 20);
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    const grpc::Status s = big.stub().Plan(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    const grpc::Status s = small.stub().Plan(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(), HasSubstr("larger than max"));
  }
  // A response over the limit is refused too.
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::GetWorkloadResponse resp;
    const grpc::Status s = small.stub().GetWorkload(&ctx, get, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
  }
  // gRPC refused the oversized request before the handler: no Plan line.
  // The server still serves small requests.
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    const grpc::Status s =
        small.stub().Plan(&ctx, Gpt2Plan(2, 0.5, {"slackswap"}), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_TRUE(small.WaitForLine(IsRequestLine("Plan"), seconds(5)).has_value());
  EXPECT_EQ(CountRequestLines(small, "Plan"), 1) << small.LogText();
}

// --- deadlines and cancellation
// -----------------------------------------------

// Far more work than any bound below, from a small graph: slackswap alone
// on a chain of `links` under a 1-byte budget. It fails, and its lowest
// reachable budget is searched (up to 24 more plannings, which the
// admission estimate does not count): on a machine like CI's, 2.4 s for
// 20,000 links (a 1 MB request) and 6.8 s for 50,000, against estimates
// of 0.6 s and 1.5 s (5 us per graph element; core/admission.cc).
v1::PlanRequest HugePlan(int64_t links = 20'000) {
  v1::PlanRequest req;
  *req.mutable_step() = testutil::InlineStep(testutil::ChainGraph(links));
  req.set_budget_bytes(1);
  req.add_policies("slackswap");
  return req;
}

// A request of a few bytes (a workload reference) that plans for about a
// second on a machine like CI's: gpt2-xl of 600 layers under a 1-byte
// budget, every policy failing and each one's lowest reachable budget
// searched. For deadlines of milliseconds, which HugePlan's megabyte could
// spend on the wire before the server sees the call (under the
// sanitizers, it did).
v1::PlanRequest LongPlanOfASmallRequest() {
  v1::PlanRequest req = Gpt2Plan(600, 0.5, {});
  req.set_budget_bytes(1);
  return req;
}

// Admitted well under the server's time limit, then planning for far
// longer: the limit sits twice above HugePlan(50'000)'s estimate and over
// twice below its planning time.
TEST(ServerDeadlineTest, TheServersTimeLimitStopsCallsWithNoDeadline) {
  constexpr int kLimitSeconds = 3;
  ServedPlanner server(
      {"--threads=1", absl::StrCat("--max_request_s=", kLimitSeconds)});
  ASSERT_TRUE(server.started()) << server.error();
  const v1::PlanRequest req = HugePlan(50'000);
  grpc::ClientContext ctx;  // no deadline of its own
  v1::PlanResponse resp;
  const SteadyClock::time_point start = SteadyClock::now();
  const grpc::Status s = server.stub().Plan(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max_request_s"));
  // The limit the server promises, with the request's set-up and sending
  // (slower under the sanitizers) and kStopMargin to spare.
  EXPECT_LT(
      SteadyClock::now() - start,
      seconds(kLimitSeconds) + seconds(2 * kSlowdown) + testutil::kStopMargin);
}

TEST(ServerDeadlineTest, ExpiredDeadlineStopsTheWork) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  // Connect first, so the deadline is spent on the call.
  ASSERT_TRUE(server.channel()->WaitForConnected(
      std::chrono::system_clock::now() + seconds(10)));

  grpc::ClientContext ctx;
  SetDeadline(ctx, milliseconds(50));
  v1::PlanResponse resp;
  const grpc::Status s =
      server.stub().Plan(&ctx, LongPlanOfASmallRequest(), &resp);
  const SteadyClock::time_point returned = SteadyClock::now();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << s.error_message();

  // The server gave up on it too: its log line comes within the margin.
  std::optional<LogLine> line =
      server.WaitForLine(IsRequestLine("Plan"), kStopMargin);
  ASSERT_TRUE(line.has_value()) << "the server kept planning:\n"
                                << server.LogText();
  EXPECT_THAT(JsonField(line->text, "code").value_or(""),
              AnyOf("DEADLINE_EXCEEDED", "CANCELLED"));
  EXPECT_LT(MillisBetween(returned, line->read_at), kStopMargin.count());
  double ms = 0;
  ASSERT_TRUE(absl::SimpleAtod(JsonField(line->text, "ms").value_or(""), &ms));
  EXPECT_LT(ms, kStopMargin.count());
  std::cerr << "[ info ] server logged "
            << JsonField(line->text, "code").value_or("") << " after " << ms
            << " ms, " << MillisBetween(returned, line->read_at)
            << " ms after the client's DEADLINE_EXCEEDED\n";
  std::optional<double> inflight = AwaitMetric(
      server, "slackswap_inflight_requests", {},
      [](double v) { return v == 0; }, kStopMargin);
  EXPECT_EQ(inflight, 0);
  // And is free for the next call at once.
  grpc::ClientContext next;
  SetDeadline(next, seconds(10));
  EXPECT_TRUE(
      server.stub().Plan(&next, Gpt2Plan(2, 0.5, {"slackswap"}), &resp).ok());
}

// The server logs the call CANCELLED within kStopMargin of the cancel and
// the in-flight gauge returns to 0.
void ExpectStoppedSoonAfterCancel(SlackswapdProcess& server,
                                  const std::string& method,
                                  SteadyClock::time_point cancelled) {
  std::optional<LogLine> line =
      server.WaitForLine(IsRequestLine(method), 2 * kStopMargin);
  ASSERT_TRUE(line.has_value()) << server.LogText();
  EXPECT_EQ(JsonField(line->text, "code"), "CANCELLED");
  const double stop_ms = MillisBetween(cancelled, line->read_at);
  EXPECT_LT(stop_ms, kStopMargin.count())
      << "the server went on for " << stop_ms << " ms";
  std::cerr << "[ info ] " << method << " stopped " << stop_ms
            << " ms after the cancel\n";
  EXPECT_EQ(AwaitMetric(
                server, "slackswap_inflight_requests", {},
                [](double v) { return v == 0; }, kStopMargin),
            0);
}

TEST(ServerCancelTest, CancelledSweepStopsWithinMilliseconds) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();

  // 91 budgets x 5 policies of a 300-layer GPT-2 XL: seconds of work.
  v1::SweepRequest req = Gpt2Sweep(300);
  req.set_from(0.1);
  req.set_to(1.0);
  req.set_step_fraction(0.01);
  constexpr int kPoints = 91 * 5;

  grpc::ClientContext ctx;
  SetDeadline(ctx);
  auto reader = server.stub().Sweep(&ctx, req);
  v1::SweepResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  ASSERT_TRUE(msg.has_point());
  const SteadyClock::time_point cancelled = SteadyClock::now();
  ctx.TryCancel();
  int more = 0;
  while (reader->Read(&msg) && more < kPoints) ++more;
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_LT(more, kPoints - 1);

  ExpectStoppedSoonAfterCancel(server, "Sweep", cancelled);
}

TEST(ServerCancelTest, CancelledPlanStopsWithinMilliseconds) {
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();

  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::PlanResponse resp;
  grpc::Status status;
  const v1::PlanRequest req = HugePlan();
  std::thread call([&] { status = server.stub().Plan(&ctx, req, &resp); });
  // Cancel once the worker is planning: the graph is built (the core
  // reports its size) and the call is still in flight.
  const std::optional<double> graphs = AwaitMetric(
      server, "slackswap_graph_ops_count", {}, [](double v) { return v >= 1; },
      seconds(20));
  EXPECT_EQ(graphs, 1);
  const SteadyClock::time_point cancelled = SteadyClock::now();
  ctx.TryCancel();
  call.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED)
      << status.error_message();

  ExpectStoppedSoonAfterCancel(server, "Plan", cancelled);
}

// --- admission control and shutdown
// -------------------------------------------

TEST(ServerLoadTest, BurstBeyondTheQueueIsRejectedAndCounted) {
  ServedPlanner server({"--threads=1", "--max_queue=1", "--cache_mb=0"});
  ASSERT_TRUE(server.started()) << server.error();
  constexpr int kCalls = 20;
  // Distinct budgets: identical requests would share one planning.
  std::vector<v1::PlanRequest> reqs;
  for (int i = 0; i < kCalls; ++i) {
    reqs.push_back(Gpt2Plan(300, 0.3 + 0.01 * i, {}));
  }

  const std::vector<grpc::Status> statuses =
      ConcurrentPlans(server.stub(), reqs);
  int ok = 0;
  int rejected = 0;
  for (const grpc::Status& s : statuses) {
    if (s.ok()) {
      ++ok;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++rejected;
      EXPECT_THAT(s.error_message(), HasSubstr("--max_queue"));
    } else {
      ADD_FAILURE() << "unexpected " << s.error_code() << ": "
                    << s.error_message();
    }
  }
  EXPECT_EQ(ok + rejected, kCalls);
  EXPECT_GE(ok, 1);
  EXPECT_GE(rejected, 1);
  std::cerr << "[ info ] " << ok << " OK, " << rejected
            << " RESOURCE_EXHAUSTED\n";

  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_rejected_requests_total",
                        {{"method", "Plan"}, {"reason", "queue_full"}}),
            rejected)
      << scrape;
  EXPECT_EQ(MetricValue(scrape, "slackswap_rejected_requests_total",
                        {{"method", "Plan"}, {"reason", "deadline"}}),
            0);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "RESOURCE_EXHAUSTED"}}),
            rejected);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "OK"}}),
            ok);
  EXPECT_EQ(MetricValue(scrape, "slackswap_inflight_requests"), 0);
  EXPECT_EQ(MetricValue(scrape, "slackswap_queue_depth"), 0);
}

TEST(ServerShutdownTest, SigtermDrainsEveryAcceptedCall) {
  ServedPlanner server({"--threads=1", "--max_queue=8"});
  ASSERT_TRUE(server.started()) << server.error();
  const std::shared_ptr<grpc::Channel>& channel = server.channel();
  constexpr int kCalls = 6;
  std::vector<v1::PlanRequest> reqs;
  for (int i = 0; i < kCalls; ++i) {
    reqs.push_back(Gpt2Plan(600, 0.40 + 0.05 * i, {}));
  }

  std::vector<grpc::Status> statuses;
  std::vector<v1::PlanResponse> resps;
  std::thread calls(
      [&] { statuses = ConcurrentPlans(server.stub(), reqs, &resps); });
  // Every call reached the server (one runs, five wait).
  const std::optional<double> inflight = AwaitMetric(
      server, "slackswap_inflight_requests", {},
      [](double v) { return v >= kCalls; }, seconds(10));
  EXPECT_EQ(inflight, kCalls);
  ASSERT_TRUE(server.SendSignal(SIGTERM));
  ASSERT_TRUE(server.WaitForLine(IsEvent("draining"), seconds(5)).has_value())
      << server.LogText();

  // The server shut its listener and sent GOAWAY on the connection that
  // carries the draining calls: the client's channel leaves READY. (Health
  // flips to NOT_SERVING just before that; the "draining" line comes first.)
  const auto state_deadline = std::chrono::system_clock::now() + seconds(5);
  while (channel->GetState(false) == GRPC_CHANNEL_READY &&
         channel->WaitForStateChange(GRPC_CHANNEL_READY, state_deadline)) {
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);

  // Health is no longer SERVING, or nobody answers.
  {
    auto health = Health::NewStub(Connect(server));
    grpc::ClientContext ctx;
    SetDeadline(ctx, seconds(5));
    HealthCheckRequest req;
    req.set_service(kPlanner);
    HealthCheckResponse resp;
    const grpc::Status s = health->Check(&ctx, req, &resp);
    if (s.ok()) {
      EXPECT_EQ(resp.status(), HealthCheckResponse::NOT_SERVING);
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
          << s.error_message();
    }
  }
  // New calls are refused, on a new connection and on the draining one.
  std::unique_ptr<v1::Planner::Stub> fresh = PlannerStub(server);
  for (const auto& [name, on] :
       {std::pair{"new", fresh.get()}, std::pair{"draining", &server.stub()}}) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, seconds(5));
    v1::PlanResponse resp;
    const grpc::Status s =
        on->Plan(&ctx, Gpt2Plan(2, 0.5, {"slackswap"}), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
        << name << " connection: " << s.error_code() << ": "
        << s.error_message();
  }

  calls.join();
  ASSERT_EQ(statuses.size(), static_cast<size_t>(kCalls));
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_code()
                                  << " " << statuses[i].error_message();
    EXPECT_EQ(resps[i].report().results_size(), 5) << i;
  }
  EXPECT_EQ(server.Wait(), 0);
  EXPECT_THAT(server.LogText(), HasSubstr("\"msg\":\"stopped\""));
  EXPECT_EQ(CountRequestLines(server, "Plan"), kCalls) << server.LogText();
}

// --- metrics ----------------------------------------------------------------

TEST(ServerMetricsTest, ScrapePassesPromtoolAndCountsRequests) {
  const std::string promtool = FindOnPath("promtool");
  ASSERT_FALSE(promtool.empty())
      << "promtool is not on PATH (Debian package prometheus)";
  ServedPlanner server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();

  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    ASSERT_TRUE(server.stub().Plan(&ctx, Gpt2Plan(2, 0.5, {}), &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::PlanResponse resp;
    EXPECT_EQ(
        server.stub().Plan(&ctx, Gpt2Plan(2, 0.5, {"x"}), &resp).error_code(),
        grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::ListWorkloadsResponse resp;
    ASSERT_TRUE(server.stub()
                    .ListWorkloads(&ctx, v1::ListWorkloadsRequest(), &resp)
                    .ok());
  }

  const std::string scrape = ScrapeWhenIdle(server);
  const CommandResult check =
      RunCommand({promtool, "check", "metrics"}, scrape);
  EXPECT_EQ(check.exit_status, 0) << check.output;
  EXPECT_EQ(check.output, "");

  EXPECT_THAT(
      scrape,
      HasSubstr("slackswap_requests_total{code=\"OK\",method=\"Plan\"}"));
  EXPECT_THAT(scrape, HasSubstr("slackswap_request_duration_seconds_bucket"));
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "Plan"}, {"code", "INVALID_ARGUMENT"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                        {{"method", "ListWorkloads"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(MetricValue(scrape, "slackswap_request_duration_seconds_bucket",
                        {{"method", "Plan"}, {"le", "+Inf"}}),
            2);
  EXPECT_EQ(MetricValue(scrape, "slackswap_request_duration_seconds_count",
                        {{"method", "Plan"}}),
            2);
  EXPECT_EQ(MetricValue(scrape, "slackswap_inflight_requests"), 0);
  // All five policies ran once, each observed.
  for (const char* policy :
       {"ideal", "recompute_only", "swap_only", "capuchin", "slackswap"}) {
    EXPECT_EQ(MetricValue(scrape, "slackswap_planner_seconds_count",
                          {{"policy", policy}}),
              1)
        << policy;
  }
  bool build_info = false;
  for (const auto& sample : ParseMetrics(scrape)) {
    if (sample.name == "slackswap_build_info") {
      build_info = true;
      EXPECT_EQ(sample.value, 1);
      EXPECT_THAT(sample.labels, ::testing::Contains(::testing::Pair(
                                     "version", std::string(Version()))));
      EXPECT_THAT(sample.labels, ::testing::Contains(::testing::Pair(
                                     "commit", std::string(Commit()))));
    }
  }
  EXPECT_TRUE(build_info) << scrape;

  const HttpResponse other = HttpGet(server.metrics_port(), "/other");
  EXPECT_GT(other.status, 0) << other.error;
  EXPECT_NE(other.status, 200) << other.body;
}

// --- reflection -------------------------------------------------------------

// A minimal grpc.reflection.v1alpha client: the request and response
// classes are the ones compiled into libgrpc++_reflection, found by name in
// the generated pool and used through the reflection API; the call goes
// through the generic stub.
class ReflectionClient {
 public:
  explicit ReflectionClient(std::shared_ptr<grpc::Channel> channel)
      : stub_(std::move(channel)) {
    const auto* pool = google::protobuf::DescriptorPool::generated_pool();
    request_type_ = pool->FindMessageTypeByName(
        "grpc.reflection.v1alpha.ServerReflectionRequest");
    response_type_ = pool->FindMessageTypeByName(
        "grpc.reflection.v1alpha.ServerReflectionResponse");
  }

  bool available() const {
    return request_type_ != nullptr && response_type_ != nullptr;
  }

  // One request per message, answers in order; "" when a step failed (and a
  // test failure says which).
  std::vector<std::unique_ptr<google::protobuf::Message>> Ask(
      const std::vector<std::pair<std::string, std::string>>& questions) {
    std::vector<std::unique_ptr<google::protobuf::Message>> answers;
    grpc::ClientContext ctx;
    SetDeadline(ctx, seconds(20));
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub_.PrepareCall(
            &ctx,
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            &cq);
    auto step = [&](const char* what) {
      void* tag = nullptr;
      bool ok = false;
      const auto r = cq.AsyncNext(
          &tag, &ok, std::chrono::system_clock::now() + seconds(20));
      EXPECT_EQ(r, grpc::CompletionQueue::GOT_EVENT) << what;
      EXPECT_TRUE(ok) << what;
      return r == grpc::CompletionQueue::GOT_EVENT && ok;
    };
    call->StartCall(this);
    bool alive = step("start");
    for (const auto& [field, value] : questions) {
      if (!alive) break;
      std::unique_ptr<google::protobuf::Message> req(
          factory()->GetPrototype(request_type_)->New());
      const auto* f = request_type_->FindFieldByName(field);
      EXPECT_NE(f, nullptr) << field;
      if (f == nullptr) break;
      req->GetReflection()->SetString(req.get(), f, value);
      const std::string bytes = req->SerializeAsString();
      grpc::Slice slice(bytes);
      grpc::ByteBuffer out(&slice, 1);
      call->Write(out, this);
      if (!(alive = step("write"))) break;
      grpc::ByteBuffer in;
      call->Read(&in, this);
      if (!(alive = step("read"))) break;
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(in.Dump(&slices).ok());
      std::string got;
      for (const grpc::Slice& s : slices) {
        got.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      std::unique_ptr<google::protobuf::Message> resp(
          factory()->GetPrototype(response_type_)->New());
      EXPECT_TRUE(resp->ParseFromString(got));
      answers.push_back(std::move(resp));
    }
    if (alive) {
      call->WritesDone(this);
      step("writes done");
    }
    grpc::Status status;
    call->Finish(&status, this);
    step("finish");
    EXPECT_TRUE(status.ok()) << status.error_message();
    return answers;
  }

 private:
  static google::protobuf::MessageFactory* factory() {
    return google::protobuf::MessageFactory::generated_factory();
  }

  grpc::GenericStub stub_;
  const google::protobuf::Descriptor* request_type_ = nullptr;
  const google::protobuf::Descriptor* response_type_ = nullptr;
};

// The sub-message `name` of `m` (set or default).
const google::protobuf::Message& Sub(const google::protobuf::Message& m,
                                     const std::string& name) {
  const auto* f = m.GetDescriptor()->FindFieldByName(name);
  EXPECT_NE(f, nullptr) << name;
  return m.GetReflection()->GetMessage(m, f);
}

TEST(ServerReflectionTest, ListsServicesAndServesThePlannerSchema) {
  SlackswapdProcess server({"--threads=1"});
  ASSERT_TRUE(server.started()) << server.error();
  ReflectionClient client(Connect(server));
  ASSERT_TRUE(client.available())
      << "libgrpc++_reflection's descriptors are not in the generated pool";

  const auto answers = client.Ask(
      {{"list_services", "*"}, {"file_containing_symbol", kPlanner}});
  ASSERT_EQ(answers.size(), 2u);

  std::vector<std::string> services;
  const google::protobuf::Message& list =
      Sub(*answers[0], "list_services_response");
  const auto* service_field = list.GetDescriptor()->FindFieldByName("service");
  ASSERT_NE(service_field, nullptr);
  for (int i = 0; i < list.GetReflection()->FieldSize(list, service_field);
       ++i) {
    const google::protobuf::Message& s =
        list.GetReflection()->GetRepeatedMessage(list, service_field, i);
    services.push_back(s.GetReflection()->GetString(
        s, s.GetDescriptor()->FindFieldByName("name")));
  }
  EXPECT_THAT(services, ::testing::IsSupersetOf(std::vector<std::string>{
                            kPlanner, "grpc.health.v1.Health",
                            "grpc.reflection.v1alpha.ServerReflection"}));

  // The files: planner_service.proto and everything it imports, enough to
  // rebuild the service's schema with nothing compiled in.
  const google::protobuf::Message& files =
      Sub(*answers[1], "file_descriptor_response");
  const auto* fdp =
      files.GetDescriptor()->FindFieldByName("file_descriptor_proto");
  ASSERT_NE(fdp, nullptr);
  google::protobuf::SimpleDescriptorDatabase db;
  std::vector<std::string> names;
  for (int i = 0; i < files.GetReflection()->FieldSize(files, fdp); ++i) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(
        files.GetReflection()->GetRepeatedString(files, fdp, i)));
    names.push_back(file.name());
    db.Add(file);
  }
  EXPECT_THAT(names, ::testing::Contains("slackswap/v1/planner_service.proto"));
  google::protobuf::DescriptorPool pool(&db);
  const google::protobuf::ServiceDescriptor* planner =
      pool.FindServiceByName(kPlanner);
  ASSERT_NE(planner, nullptr) << ::testing::PrintToString(names);
  // Every rpc the .proto declares.
  std::ifstream proto(std::string(SLACKSWAP_SOURCE_DIR) +
                      "/proto/slackswap/v1/planner_service.proto");
  const std::string text((std::istreambuf_iterator<char>(proto)),
                         std::istreambuf_iterator<char>());
  const std::regex rpc(R"(\n\s*rpc\s+(\w+)\s*\()");
  int declared = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), rpc), end; it != end;
       ++it) {
    ++declared;
    EXPECT_NE(planner->FindMethodByName((*it)[1].str()), nullptr) << (*it)[1];
  }
  EXPECT_GE(declared, 8);
  EXPECT_EQ(planner->method_count(), declared);
  const google::protobuf::MethodDescriptor* sweep =
      planner->FindMethodByName("Sweep");
  ASSERT_NE(sweep, nullptr);
  EXPECT_TRUE(sweep->server_streaming());
  EXPECT_FALSE(sweep->client_streaming());
  // The reflected request type is the one this test was compiled with.
  const google::protobuf::MethodDescriptor* plan =
      planner->FindMethodByName("Plan");
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->input_type()->DebugString(),
            v1::PlanRequest::descriptor()->DebugString());
  EXPECT_EQ(plan->output_type()->DebugString(),
            v1::PlanResponse::descriptor()->DebugString());
}

}  // namespace
}  // namespace slackswap
