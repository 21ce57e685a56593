// The service under traffic, end to end against a real slackswapd on
// loopback: identical requests in flight share one planning (and a caller
// that gives up does not take the others' answer with it), graphs stored
// once are named by digest, an unread sweep stops costing planning and
// never holds up a small plan, and every labelled series exists at zero.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/request_key.h"
#include "model/workloads.h"
#include "planner/version.h"
#include "slackswap/v1/planner_service.grpc.pb.h"
#include "tests/service_test_util.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace {

using ::slackswap::testutil::AwaitMetric;
using ::slackswap::testutil::CommandResult;
using ::slackswap::testutil::ConcurrentPlans;
using ::slackswap::testutil::Gpt2Plan;
using ::slackswap::testutil::kSlowdown;
using ::slackswap::testutil::MetricValue;
using ::slackswap::testutil::RunCommand;
using ::slackswap::testutil::Scrape;
using ::slackswap::testutil::ScrapeWhenIdle;
using ::slackswap::testutil::ServedPlanner;
using ::slackswap::testutil::SetDeadline;
using ::slackswap::testutil::SlackswapdProcess;
using std::chrono::seconds;
using ::testing::HasSubstr;

// Occupies the server's one worker: a plan of a deep GPT-2 (slackswap),
// started on its own thread; returns once the worker is planning it.
class Blocker {
 public:
  explicit Blocker(ServedPlanner& server)
      : req_(Gpt2Plan(3000, 0.5, {"slackswap"})) {
    SetDeadline(ctx_);
    thread_ = std::thread([this, stub = &server.stub()] {
      status_ = stub->Plan(&ctx_, req_, &resp_);
    });
    busy_ = AwaitMetric(
        server, "slackswap_graph_ops_count", {},
        [](double v) { return v >= 1; }, seconds(20));
  }
  ~Blocker() {
    if (thread_.joinable()) thread_.join();
  }
  bool busy() const { return busy_.has_value() && *busy_ >= 1; }
  // Joins, and says whether it planned.
  bool Ok() {
    if (thread_.joinable()) thread_.join();
    return status_.ok();
  }

 private:
  const v1::PlanRequest req_;
  grpc::ClientContext ctx_;
  v1::PlanResponse resp_;
  grpc::Status status_;
  std::thread thread_;
  std::optional<double> busy_;
};

// 64 identical requests arrive while the one worker is busy: they cost one
// planning, counted once in the planner's metrics, 63 times as coalesced,
// and every caller gets the same plan.
TEST(TrafficTest, IdenticalRequestsInFlightShareOnePlanning) {
  ServedPlanner server({"--threads=1", "--max_queue=128", "--cache_mb=0"});
  ASSERT_TRUE(server.started()) << server.error();
  Blocker blocker(server);
  ASSERT_TRUE(blocker.busy());
  constexpr int kCalls = 64;
  const std::vector<v1::PlanRequest> reqs(kCalls,
                                          Gpt2Plan(48, 0.5, {"capuchin"}));
  std::vector<v1::PlanResponse> resps;
  const std::vector<grpc::Status> statuses =
      ConcurrentPlans(server.stub(), reqs, &resps);
  int coalesced = 0;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    EXPECT_EQ(resps[i].report().SerializeAsString(),
              resps[0].report().SerializeAsString());
    EXPECT_EQ(resps[i].planner_version(), PlannerVersion());
    coalesced += resps[i].coalesced();
  }
  EXPECT_EQ(coalesced, kCalls - 1);
  EXPECT_TRUE(blocker.Ok());
  const std::string scrape = ScrapeWhenIdle(server);
  EXPECT_EQ(MetricValue(scrape, "slackswap_planner_seconds_count",
                        {{"policy", "capuchin"}}),
            1)
      << scrape;
  EXPECT_EQ(MetricValue(scrape, "slackswap_coalesced_requests_total"),
            kCalls - 1);
}

// The leader of a shared planning gives up; its follower still gets the
// answer, planned for it.
TEST(TrafficTest, ACallerGivingUpDoesNotCancelTheOthers) {
  ServedPlanner server({"--threads=1", "--cache_mb=0"});
  ASSERT_TRUE(server.started()) << server.error();
  Blocker blocker(server);
  ASSERT_TRUE(blocker.busy());
  const v1::PlanRequest req = Gpt2Plan(48, 0.5, {"capuchin"});
  grpc::ClientContext leader_ctx;
  SetDeadline(leader_ctx);
  v1::PlanResponse leader_resp;
  grpc::Status leader_status;
  std::thread leader([&] {
    leader_status = server.stub().Plan(&leader_ctx, req, &leader_resp);
  });
  ASSERT_TRUE(AwaitMetric(
                  server, "slackswap_inflight_requests", {},
                  [](double v) { return v >= 2; }, seconds(10))
                  .has_value());
  grpc::ClientContext follower_ctx;
  SetDeadline(follower_ctx);
  v1::PlanResponse follower_resp;
  grpc::Status follower_status;
  std::thread follower([&] {
    follower_status = server.stub().Plan(&follower_ctx, req, &follower_resp);
  });
  ASSERT_TRUE(AwaitMetric(
                  server, "slackswap_coalesced_requests_total", {},
                  [](double v) { return v >= 1; }, seconds(10))
                  .has_value());
  leader_ctx.TryCancel();
  leader.join();
  follower.join();
  EXPECT_EQ(leader_status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(follower_status.ok()) << follower_status.error_message();
  EXPECT_TRUE(follower_resp.coalesced());
  EXPECT_TRUE(follower_resp.report().results(0).result().feasible());
  EXPECT_TRUE(blocker.Ok());
}

// A graph stored once is named by its digest: the same answer as inline,
// and the same cache entry; an unknown digest is NOT_FOUND (expiry is
// server/graph_store_test.cc's, on its own clock).
TEST(TrafficTest, GraphsStoredOnceAreNamedByDigest) {
  ServedPlanner server({});
  ASSERT_TRUE(server.started()) << server.error();
  v1::PutGraphRequest put;
  *put.mutable_graph() = GraphToProto(*BuildWorkload("bert-large", {}));
  v1::OperatorGraph local = put.graph();
  const std::string digest = GraphDigest(local);

  grpc::ClientContext put_ctx;
  SetDeadline(put_ctx);
  v1::PutGraphResponse stored;
  grpc::Status s = server.stub().PutGraph(&put_ctx, put, &stored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(stored.graph_sha256(), digest);
  EXPECT_GT(stored.graph_bytes(), 0);

  v1::PlanRequest inline_req;
  *inline_req.mutable_step()->mutable_graph_inline() = put.graph();
  inline_req.mutable_step()->set_hardware_name(testutil::kHardware);
  inline_req.set_budget_fraction(0.5);
  inline_req.add_policies("capuchin");
  v1::PlanRequest by_digest = inline_req;
  by_digest.mutable_step()->set_graph_sha256(digest);
  v1::PlanResponse a, b;
  grpc::ClientContext a_ctx, b_ctx;
  SetDeadline(a_ctx);
  SetDeadline(b_ctx);
  ASSERT_TRUE(server.stub().Plan(&a_ctx, by_digest, &a).ok());
  ASSERT_TRUE(server.stub().Plan(&b_ctx, inline_req, &b).ok());
  EXPECT_EQ(a.report().SerializeAsString(), b.report().SerializeAsString());
  EXPECT_FALSE(a.cache_hit());
  EXPECT_TRUE(b.cache_hit());  // one question, one cache entry

  v1::PlanRequest unknown = by_digest;
  unknown.mutable_step()->set_graph_sha256(std::string(64, '0'));
  grpc::ClientContext u_ctx;
  SetDeadline(u_ctx);
  v1::PlanResponse u;
  s = server.stub().Plan(&u_ctx, unknown, &u);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("send it with PutGraph or inline"));
}

// Calls of `method` that `server` answered with `code` (-1: no series).
double Requests(const SlackswapdProcess& server, const std::string& method,
                const std::string& code) {
  return MetricValue(ScrapeWhenIdle(server), "slackswap_requests_total",
                     {{"method", method}, {"code", code}})
      .value_or(-1);
}

// The CLI sends a graph file by digest: the first time the server does not
// hold it, so the CLI stores it (PutGraph) and asks again; after that one
// call does, whichever method names it.
TEST(TrafficTest, TheCliSendsAGraphOnceAndThenByDigest) {
  SlackswapdProcess server({});
  ASSERT_TRUE(server.started()) << server.error();
  const std::string path = ::testing::TempDir() + "/traffic_test_bert.pb";
  {
    const CommandResult wrote = RunCommand(
        {SLACKSWAP_BIN, "workload", "--workload", "bert-large", "--out", path});
    ASSERT_EQ(wrote.exit_status, 0) << wrote.output;
  }
  const CommandResult fit =
      RunCommand({SLACKSWAP_BIN, "fit", "--graph", path, "--hardware",
                  "a100-80gb-pcie4", "--server", server.target()});
  ASSERT_EQ(fit.exit_status, 0) << fit.output;
  EXPECT_EQ(Requests(server, "Fit", "NOT_FOUND"), 1);
  EXPECT_EQ(Requests(server, "PutGraph", "OK"), 1);
  EXPECT_EQ(Requests(server, "Fit", "OK"), 1);
  for (const char* budget : {"0.5", "0.6"}) {
    const CommandResult plan =
        RunCommand({SLACKSWAP_BIN, "plan", "--graph", path, "--budget", budget,
                    "--policy", "capuchin", "--server", server.target()});
    ASSERT_EQ(plan.exit_status, 0) << plan.output;
    EXPECT_THAT(plan.output, HasSubstr("capuchin"));
  }
  EXPECT_EQ(Requests(server, "Plan", "NOT_FOUND"), 0);
  EXPECT_EQ(Requests(server, "PutGraph", "OK"), 1);
  EXPECT_EQ(Requests(server, "Plan", "OK"), 2);
  // A server without a store gets the graph inline.
  SlackswapdProcess no_store({"--graph_store_mb=0"});
  ASSERT_TRUE(no_store.started()) << no_store.error();
  const CommandResult inline_plan =
      RunCommand({SLACKSWAP_BIN, "plan", "--graph", path, "--budget", "0.5",
                  "--policy", "capuchin", "--server", no_store.target()});
  EXPECT_EQ(inline_plan.exit_status, 0) << inline_plan.output;
  EXPECT_EQ(Requests(no_store, "Plan", "NOT_FOUND"), 1);
  EXPECT_EQ(Requests(no_store, "PutGraph", "RESOURCE_EXHAUSTED"), 1);
  EXPECT_EQ(Requests(no_store, "Plan", "OK"), 1);
}

// Unread sweeps on a one-worker server: each unit of each sweep takes its
// turn in the queue, so a small plan waits for at most a unit or two, not
// for whole sweeps; and a sweep whose client reads nothing pauses once its
// unsent messages pile up, then finishes when the client reads.
TEST(TrafficTest, UnreadSweepsPauseAndNeverHoldUpAPlan) {
  SlackswapdProcess server({"--threads=1", "--cache_mb=0"});
  ASSERT_TRUE(server.started()) << server.error();
  // A small receive window, no bandwidth probing: an unread stream blocks
  // after a few messages.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      server.target(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Planner::NewStub(channel);

  v1::SweepRequest sweep;
  sweep.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  sweep.mutable_step()->mutable_workload()->set_layers(8);
  sweep.mutable_step()->set_hardware_name(testutil::kHardware);
  sweep.set_from(0.01);
  sweep.set_to(1.0);
  sweep.set_step_fraction(0.001);  // 991 budgets
  sweep.add_policies("capuchin");
  constexpr int kSweeps = 4;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::SweepResponse>>> readers;
  for (int i = 0; i < kSweeps; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    SetDeadline(*contexts.back(), seconds(120));
    readers.push_back(stub->Sweep(contexts.back().get(), sweep));
  }
  ASSERT_TRUE(AwaitMetric(
                  server, "slackswap_planner_seconds_count",
                  {{"policy", "capuchin"}}, [](double v) { return v >= 40; },
                  seconds(20))
                  .has_value());

  // A small plan now: answered while the sweeps are far from done.
  grpc::ClientContext plan_ctx;
  SetDeadline(plan_ctx);
  v1::PlanResponse plan;
  ASSERT_TRUE(
      stub->Plan(&plan_ctx, Gpt2Plan(2, 0.5, {"swap_only"}), &plan).ok());
  const double planned_then =
      *MetricValue(Scrape(server), "slackswap_planner_seconds_count",
                   {{"policy", "capuchin"}});
  EXPECT_LT(planned_then, kSweeps * 991 / 2);

  // Unread, they pause: the count settles well short of every point. (The
  // polls end as soon as it settles; their number only bounds the wait.)
  double last = -1, now = 0;
  for (int i = 0; i < 50 * kSlowdown && now != last; ++i) {
    last = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    now = *MetricValue(Scrape(server), "slackswap_planner_seconds_count",
                       {{"policy", "capuchin"}});
  }
  EXPECT_EQ(now, last) << "still planning unread sweeps";
  EXPECT_LT(now, kSweeps * 991 / 2);

  // Reading, each gets every point.
  for (int i = 0; i < kSweeps; ++i) {
    v1::SweepResponse msg;
    int points = 0;
    while (readers[i]->Read(&msg)) points += msg.has_point();
    const grpc::Status s = readers[i]->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(points, 991);
  }
}

// Dashboards and alerts read 0 before the first event, not "no data".
TEST(TrafficTest, EveryLabelledSeriesExistsFromStartUp) {
  SlackswapdProcess server({});
  ASSERT_TRUE(server.started()) << server.error();
  const std::string scrape = Scrape(server);
  for (const char* method : {"Plan", "Sweep", "PutGraph", "ServerInfo"}) {
    EXPECT_EQ(MetricValue(scrape, "slackswap_rejected_requests_total",
                          {{"method", method}, {"reason", "queue_full"}}),
              0)
        << method;
    EXPECT_EQ(MetricValue(scrape, "slackswap_requests_total",
                          {{"method", method}, {"code", "INTERNAL"}}),
              0)
        << method;
    EXPECT_EQ(MetricValue(scrape, "slackswap_queue_wait_seconds_count",
                          {{"method", method}}),
              0)
        << method;
  }
  EXPECT_EQ(MetricValue(scrape, "slackswap_planner_seconds_count",
                        {{"policy", "optimal"}}),
            0);
}

}  // namespace
}  // namespace slackswap
