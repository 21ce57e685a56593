// The shared tier end to end: a real redis-server and three real slackswapd
// replicas on loopback, each test starting and stopping its own.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/planning_core.h"
#include "gtest/gtest.h"
#include "io/proto_file.h"
#include "io/request_key.h"
#include "server/shared_entries.h"
#include "tests/redis_process.h"
#include "tests/service_test_util.h"

namespace slackswap {
namespace {

using testutil::AwaitMetric;
using testutil::ConcurrentPlans;
using testutil::Deterministic;
using testutil::Gpt2Plan;
using testutil::MetricValue;
using testutil::RedisProcess;
using testutil::ScrapeWhenIdle;
using testutil::ServedPlanner;
using testutil::SetDeadline;
using testutil::SlackswapdProcess;
using testutil::WithoutTimings;

constexpr std::chrono::seconds kAwait(20);

// The report without the wall times, serialized.
std::string ReportWithoutTimings(const v1::PlanResponse& resp) {
  return Deterministic(WithoutTimings(resp));
}

// The local core's answer (what the CLI plans), without wall times.
std::string LocalReport(const v1::PlanRequest& req) {
  absl::StatusOr<v1::PlanResponse> mine =
      PlanningCore(CoreLimits{}).PlanStep(req, {});
  EXPECT_TRUE(mine.ok()) << mine.status();
  return mine.ok() ? ReportWithoutTimings(*mine) : "";
}

double Metric(const SlackswapdProcess& server, const std::string& name,
              const std::map<std::string, std::string>& labels = {}) {
  return MetricValue(ScrapeWhenIdle(server), name, labels).value_or(-1);
}

// Plannings of the slackswap policy a replica ran.
double Plannings(const SlackswapdProcess& server) {
  return Metric(server, "slackswap_planner_seconds_count",
                {{"policy", "slackswap"}});
}

grpc::Status Plan(ServedPlanner& server, const v1::PlanRequest& req,
                  v1::PlanResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  return server.stub().Plan(&ctx, req, resp);
}

// Redis's keys matching `pattern`, waiting (bounded) until there are at
// least `count`: writes reach Redis off the reply's path.
std::vector<std::string> AwaitKeys(RedisProcess& redis,
                                   const std::string& pattern, size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + kAwait;
  std::chrono::milliseconds poll(5);
  std::vector<std::string> keys;
  while (std::chrono::steady_clock::now() < deadline) {
    keys = absl::StrSplit(redis.Cli({"--scan", "--pattern", pattern}), '\n',
                          absl::SkipEmpty());
    if (keys.size() >= count) break;
    std::this_thread::sleep_for(poll);
    poll = std::min(2 * poll, std::chrono::milliseconds(100));
  }
  return keys;
}

// A redis-server and three replicas sharing it.
class SharedTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.available())
        << "redis-server is missing: bash scripts/setup.sh test installs it";
    ASSERT_TRUE(redis_.Start()) << redis_.error();
    for (int i = 0; i < 3; ++i) {
      replicas_.push_back(
          std::make_unique<ServedPlanner>(std::vector<std::string>{
              "--threads=2", absl::StrCat("--shared_store=", redis_.url())}));
      ASSERT_TRUE(replicas_.back()->started()) << replicas_.back()->error();
    }
    for (auto& r : replicas_) {
      ASSERT_EQ(AwaitMetric(
                    *r, "slackswap_shared_store_up", {},
                    [](double v) { return v == 1; }, kAwait),
                1)
          << r->LogText();
    }
  }

  ServedPlanner& replica(int i) { return *replicas_[i]; }

  RedisProcess redis_;
  std::vector<std::unique_ptr<ServedPlanner>> replicas_;
};

TEST_F(SharedTierTest, AGraphPutOnOneReplicaIsFoundByDigestOnTheOthers) {
  v1::GetWorkloadRequest get;
  get.mutable_workload()->set_name("gpt2-xl");
  get.mutable_workload()->set_layers(2);
  v1::GetWorkloadResponse workload;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(replica(0).stub().GetWorkload(&ctx, get, &workload).ok());
  }
  v1::PutGraphRequest put;
  *put.mutable_graph() = workload.graph();
  v1::PutGraphResponse stored;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(replica(0).stub().PutGraph(&ctx, put, &stored).ok());
  }
  ASSERT_EQ(
      AwaitKeys(redis_, "slackswap:*:graph:" + stored.graph_sha256(), 1).size(),
      1u);
  v1::PlanRequest req;
  req.mutable_step()->set_graph_sha256(stored.graph_sha256());
  req.mutable_step()->set_hardware_name(testutil::kHardware);
  req.set_budget_fraction(0.5);
  req.add_policies("slackswap");
  for (int i : {1, 2}) {
    // Another budget each: else replica 2 would find replica 1's plan.
    req.set_budget_fraction(0.4 + 0.1 * i);
    v1::PlanResponse resp;
    const grpc::Status s = Plan(replica(i), req, &resp);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
    EXPECT_EQ(Metric(replica(i), "slackswap_shared_lookups_total",
                     {{"kind", "graph"}, {"result", "hit"}}),
              1);
  }
  // A replica outside the fleet does not have it.
  ServedPlanner alone({"--threads=1"});
  ASSERT_TRUE(alone.started()) << alone.error();
  v1::PlanResponse resp;
  EXPECT_EQ(Plan(alone, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SharedTierTest, APlanComputedOnOneReplicaIsAHitOnTheOthers) {
  const v1::PlanRequest req = Gpt2Plan(4, 0.45, {"slackswap", "capuchin"});
  v1::PlanResponse first;
  ASSERT_TRUE(Plan(replica(0), req, &first).ok());
  EXPECT_FALSE(first.cache_hit());
  ASSERT_EQ(AwaitKeys(redis_, "slackswap:*:plan:*", 1).size(), 1u);
  v1::PlanResponse local_hit;
  ASSERT_TRUE(Plan(replica(0), req, &local_hit).ok());
  EXPECT_TRUE(local_hit.cache_hit());
  for (int i : {1, 2}) {
    v1::PlanResponse shared_hit;
    ASSERT_TRUE(Plan(replica(i), req, &shared_hit).ok());
    // The very bytes replica 0's own cache serves.
    EXPECT_EQ(shared_hit.SerializeAsString(), local_hit.SerializeAsString())
        << i;
    EXPECT_EQ(Plannings(replica(i)), 0) << i;
    EXPECT_EQ(Metric(replica(i), "slackswap_shared_lookups_total",
                     {{"kind", "plan"}, {"result", "hit"}}),
              1);
  }
  EXPECT_EQ(ReportWithoutTimings(first), LocalReport(req));
}

TEST_F(SharedTierTest, IdenticalRequestsSpreadOverReplicasArePlannedOnce) {
  const v1::PlanRequest req = Gpt2Plan(8, 0.35, {"slackswap"});
  constexpr int kCalls = 32;
  std::vector<std::vector<grpc::Status>> statuses(3);
  std::vector<std::vector<v1::PlanResponse>> answers(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    const int calls = kCalls / 3 + (i < kCalls % 3 ? 1 : 0);
    threads.emplace_back([&, i, calls] {
      statuses[i] = ConcurrentPlans(replica(i).stub(),
                                    std::vector<v1::PlanRequest>(calls, req),
                                    &answers[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string expected = LocalReport(req);
  int ok = 0;
  for (int i = 0; i < 3; ++i) {
    for (size_t j = 0; j < statuses[i].size(); ++j) {
      EXPECT_TRUE(statuses[i][j].ok()) << statuses[i][j].error_message();
      if (!statuses[i][j].ok()) continue;
      ++ok;
      EXPECT_EQ(ReportWithoutTimings(answers[i][j]), expected);
    }
  }
  EXPECT_EQ(ok, kCalls);
  double plannings = 0;
  for (int i = 0; i < 3; ++i) plannings += Plannings(replica(i));
  EXPECT_EQ(plannings, 1);
}

// A corrupted value under a plan's key is discarded, counted, and the plan
// computed again (and written back, so the next replica hits); wrong bytes
// under a graph's digest never become a graph.
TEST_F(SharedTierTest, ACorruptedEntryIsRejectedAndRecomputed) {
  const v1::PlanRequest req = Gpt2Plan(4, 0.55, {"slackswap"});
  v1::PlanResponse first;
  ASSERT_TRUE(Plan(replica(0), req, &first).ok());
  std::vector<std::string> keys = AwaitKeys(redis_, "slackswap:*:plan:*", 1);
  ASSERT_EQ(keys.size(), 1u);
  const std::string sealed = redis_.Cli({"GET", keys[0]});
  ASSERT_GT(sealed.size(), 100u);
  // Same length, one payload byte changed: only the digests can tell.
  std::string corrupt = sealed;
  corrupt[sealed.size() - 10] ^= 0x20;
  ASSERT_TRUE(redis_.SetBytes(keys[0], corrupt)) << redis_.error();

  v1::PlanResponse recomputed;
  ASSERT_TRUE(Plan(replica(1), req, &recomputed).ok());
  EXPECT_EQ(ReportWithoutTimings(recomputed), ReportWithoutTimings(first));
  EXPECT_EQ(Metric(replica(1), "slackswap_shared_lookups_total",
                   {{"kind", "plan"}, {"result", "discarded"}}),
            1);
  EXPECT_EQ(Plannings(replica(1)), 1);
  ASSERT_TRUE(replica(1).WaitForLine(
      [](const std::string& line) {
        return testutil::JsonField(line, "msg") ==
               "shared store entry discarded";
      },
      kAwait));
  // Replica 1 wrote its answer back over the corrupt one.
  const auto deadline = std::chrono::steady_clock::now() + kAwait;
  while (redis_.Cli({"GET", keys[0]}) == corrupt &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  v1::PlanResponse hit;
  ASSERT_TRUE(Plan(replica(2), req, &hit).ok());
  EXPECT_EQ(Plannings(replica(2)), 0);
  EXPECT_EQ(ReportWithoutTimings(hit), ReportWithoutTimings(first));

  // Bytes that do not hash to the digest they are stored under.
  const std::string digest(64, 'a');
  const size_t plan_at = keys[0].find(":plan:");
  ASSERT_NE(plan_at, std::string::npos);
  const std::string graph_key =
      absl::StrCat(keys[0].substr(0, plan_at), ":graph:", digest);
  ASSERT_EQ(redis_.Cli({"SET", graph_key, "not the graph"}), "OK");
  v1::PlanRequest by_digest = req;
  by_digest.mutable_step()->set_graph_sha256(digest);
  v1::PlanResponse missing;
  EXPECT_EQ(Plan(replica(2), by_digest, &missing).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Metric(replica(2), "slackswap_shared_lookups_total",
                   {{"kind", "graph"}, {"result", "discarded"}}),
            1);
}

// Redis killed in the middle of a load run: no call fails, every answer is
// the local core's, and the tier is back in use soon after Redis restarts.
TEST_F(SharedTierTest, RedisKilledMidLoadFailsNoCall) {
  std::vector<v1::PlanRequest> requests;
  std::vector<std::string> expected;
  for (int i = 0; i < 12; ++i) {
    requests.push_back(Gpt2Plan(2, 0.3 + 0.03 * i, {"slackswap"}));
    expected.push_back(LocalReport(requests.back()));
  }
  std::atomic<int> failed{0};
  std::atomic<int> wrong{0};
  std::atomic<int> done{0};
  // Three clients, each asking every request of every replica in turn.
  auto client = [&](int first) {
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < requests.size(); ++i) {
        v1::PlanResponse resp;
        const grpc::Status s =
            Plan(replica((first + i) % 3), requests[i], &resp);
        if (!s.ok()) {
          ++failed;
          ADD_FAILURE() << s.error_code() << ": " << s.error_message();
        } else if (ReportWithoutTimings(resp) != expected[i]) {
          ++wrong;
        }
        ++done;
      }
    }
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) clients.emplace_back(client, c);
  // Kill it once a quarter of the calls are answered.
  const auto deadline = std::chrono::steady_clock::now() + kAwait;
  while (done < 18 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  redis_.Kill();
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(done, 72);
  // The kill landed in the run: some replica's lookup met it.
  double errors = 0;
  for (int i = 0; i < 3; ++i) {
    errors += Metric(replica(i), "slackswap_shared_store_calls_total",
                     {{"op", "get"}, {"result", "error"}});
  }
  EXPECT_GE(errors, 1);

  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(redis_.Start()) << redis_.error();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(AwaitMetric(
                  replica(i), "slackswap_shared_store_up", {},
                  [](double v) { return v == 1; }, kAwait),
              1)
        << i;
  }
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - restarted)
                             .count();
  // The reconnection backoff is at most 2 s; a loaded machine gets slack.
  EXPECT_LT(seconds, 10) << "the tier came back " << seconds << " s after";
  const v1::PlanRequest fresh = Gpt2Plan(2, 0.8, {"slackswap"});
  v1::PlanResponse a;
  ASSERT_TRUE(Plan(replica(0), fresh, &a).ok());
  ASSERT_EQ(AwaitKeys(redis_, "slackswap:*:plan:*", 1).size(), 1u);
  v1::PlanResponse b;
  const double before = Plannings(replica(1));
  ASSERT_TRUE(Plan(replica(1), fresh, &b).ok());
  EXPECT_EQ(Plannings(replica(1)), before);
  EXPECT_TRUE(b.cache_hit());
}

TEST_F(SharedTierTest, AFitComputedOnOneReplicaIsAHitOnTheOthers) {
  v1::FitRequest req;
  req.mutable_workload()->set_name("gpt2-xl");
  req.mutable_workload()->set_layers(4);
  req.add_profiles()->set_hardware_name("a100-40gb-pcie4");
  req.add_profiles()->set_hardware_name("a100-80gb-pcie4");
  v1::FitResponse first;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(replica(0).stub().Fit(&ctx, req, &first).ok());
  }
  EXPECT_GT(first.server_seconds(), 0);
  ASSERT_EQ(AwaitKeys(redis_, "slackswap:*:fit:*", 1).size(), 1u);
  v1::FitResponse shared;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(replica(1).stub().Fit(&ctx, req, &shared).ok());
  }
  EXPECT_EQ(Metric(replica(1), "slackswap_shared_lookups_total",
                   {{"kind", "fit"}, {"result", "hit"}}),
            1);
  // Served from the tier, it took no server time; the rest is the same.
  EXPECT_EQ(shared.server_seconds(), 0);
  first.clear_server_seconds();
  EXPECT_EQ(Deterministic(shared), Deterministic(first));
}

// Every message of a sweep, in order, serialized; empty on an error.
std::vector<std::string> Sweep(ServedPlanner& server,
                               const v1::SweepRequest& req) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  std::unique_ptr<grpc::ClientReader<v1::SweepResponse>> reader =
      server.stub().Sweep(&ctx, req);
  std::vector<std::string> out;
  v1::SweepResponse msg;
  while (reader->Read(&msg)) out.push_back(Deterministic(msg));
  const grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  if (!s.ok()) out.clear();
  return out;
}

TEST_F(SharedTierTest, ASweepRunOnOneReplicaIsStreamedFromTheTierOnOthers) {
  v1::SweepRequest req = testutil::Gpt2Sweep(2);
  req.set_from(0.3);
  req.set_to(0.6);
  const std::vector<std::string> first = Sweep(replica(0), req);
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(AwaitKeys(redis_, "slackswap:*:sweep:*", 1).size(), 1u);
  const double plannings = Plannings(replica(1));
  EXPECT_EQ(Sweep(replica(1), req), first);
  EXPECT_EQ(Plannings(replica(1)), plannings);
  EXPECT_EQ(Metric(replica(1), "slackswap_shared_lookups_total",
                   {{"kind", "sweep"}, {"result", "hit"}}),
            1);
}

// The namespace the replicas share, from what they say of themselves and
// the fleet's secret ("" without one).
std::string Namespace(ServedPlanner& server,
                      const std::string& fleet_secret = "") {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::ServerInfoResponse info;
  EXPECT_TRUE(server.stub().ServerInfo(&ctx, {}, &info).ok());
  return SharedNamespace(info.planner_version(), info.hardware_catalog_sha256(),
                         info.node_catalog_sha256(), fleet_secret);
}

// A mark left by a replica that died while planning: the waiter plans
// itself once it expires; and no wait outlives its caller's deadline.
TEST_F(SharedTierTest, AWaitEndsWithTheMarkOrTheCallersDeadline) {
  const std::string ns = Namespace(replica(0));
  v1::PlanRequest orphaned = Gpt2Plan(2, 0.62, {"slackswap"});
  v1::PlanRequest keyed = orphaned;
  const std::string mark =
      MarkKey(SharedKey(ns, "plan", PlanRequestKey(keyed)));
  ASSERT_EQ(redis_.Cli({"SET", mark, "a-dead-replica", "PX", "1500"}), "OK");
  v1::PlanResponse resp;
  ASSERT_TRUE(Plan(replica(0), orphaned, &resp).ok());
  EXPECT_EQ(ReportWithoutTimings(resp), LocalReport(orphaned));
  EXPECT_EQ(Metric(replica(0), "slackswap_shared_waits_total",
                   {{"outcome", "took_over"}}),
            1);
  EXPECT_EQ(Plannings(replica(0)), 1);

  v1::PlanRequest stuck = Gpt2Plan(2, 0.63, {"slackswap"});
  keyed = stuck;
  const std::string long_mark =
      MarkKey(SharedKey(ns, "plan", PlanRequestKey(keyed)));
  ASSERT_EQ(redis_.Cli({"SET", long_mark, "a-slow-replica", "PX", "60000"}),
            "OK");
  const auto start = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  SetDeadline(ctx, std::chrono::seconds(1));
  const grpc::Status s = replica(1).stub().Plan(&ctx, stuck, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The replica stops waiting at the deadline, long before the mark goes.
  EXPECT_EQ(
      AwaitMetric(
          replica(1), "slackswap_shared_waits_total", {{"outcome", "stopped"}},
          [](double v) { return v == 1; }, kAwait),
      1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Plannings(replica(1)), 0);
}

// What a client of the Redis without the fleet's secret can write: a real
// answer (to another request) sealed by digests under the asked request's
// key. A fleet with a secret discards it and plans; a fleet without one
// serves it, which is why the secret exists.
TEST(SharedTierSecretTest, AForgedAnswerIsServedOnlyWhereThereIsNoSecret) {
  RedisProcess redis;
  ASSERT_TRUE(redis.available())
      << "redis-server is missing: bash scripts/setup.sh test installs it";
  ASSERT_TRUE(redis.Start()) << redis.error();
  const std::string secret = "5f0c1e9a7b3d2468ace13579bdf02468aceg13579bdf0246";
  const std::string secret_file = ::testing::TempDir() + "/shared_fleet_secret";
  ASSERT_TRUE(WriteFile(secret_file, secret + "\n").ok());
  const std::string url = "--shared_store=" + redis.url();
  ServedPlanner keyed_a(
      {"--threads=1", url, "--shared_store_secret_file=" + secret_file});
  ServedPlanner keyed_b(
      {"--threads=1", url, "--shared_store_secret_file=" + secret_file});
  ServedPlanner open({"--threads=1", url});
  for (ServedPlanner* r : {&keyed_a, &keyed_b, &open}) {
    ASSERT_TRUE(r->started()) << r->error();
    ASSERT_EQ(AwaitMetric(
                  *r, "slackswap_shared_store_up", {},
                  [](double v) { return v == 1; }, kAwait),
              1)
        << r->LogText();
  }
  // Each says how it seals; the one without a secret warns.
  auto seal_is = [](const std::string& seal) {
    return [seal](const std::string& line) {
      return testutil::JsonField(line, "shared_store_seal") == seal;
    };
  };
  EXPECT_TRUE(keyed_a.WaitForLine(seal_is("mac"), kAwait)) << keyed_a.LogText();
  EXPECT_TRUE(open.WaitForLine(seal_is("digests"), kAwait)) << open.LogText();
  EXPECT_NE(open.LogText().find("sealed without a secret"), std::string::npos);
  EXPECT_EQ(keyed_a.LogText().find("sealed without a secret"),
            std::string::npos);

  const v1::PlanRequest req = Gpt2Plan(4, 0.55, {"slackswap"});
  v1::PlanResponse honest;
  ASSERT_TRUE(Plan(keyed_a, req, &honest).ok());
  const std::string keyed_ns = Namespace(keyed_a, secret);
  v1::PlanRequest keyed_req = req;
  const std::string request_key = PlanRequestKey(keyed_req);
  const std::string keyed_key = SharedKey(keyed_ns, "plan", request_key);
  ASSERT_EQ(AwaitKeys(redis, keyed_key, 1).size(), 1u);
  EXPECT_EQ(redis.Cli({"GET", keyed_key}).substr(0, 4), "ssm1");

  // The forger's choice: a real answer of this build, to another budget.
  absl::StatusOr<v1::PlanResponse> chosen =
      PlanningCore(CoreLimits{}).PlanStep(Gpt2Plan(4, 0.9, {"slackswap"}), {});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_NE(ReportWithoutTimings(*chosen), ReportWithoutTimings(honest));
  const std::string forged =
      SealResult(request_key, chosen->SerializeAsString(), "");
  ASSERT_TRUE(redis.SetBytes(keyed_key, forged)) << redis.error();
  const std::string open_key = SharedKey(Namespace(open), "plan", request_key);
  ASSERT_NE(open_key, keyed_key);
  ASSERT_TRUE(redis.SetBytes(open_key, forged)) << redis.error();

  v1::PlanResponse from_keyed;
  ASSERT_TRUE(Plan(keyed_b, req, &from_keyed).ok());
  EXPECT_EQ(ReportWithoutTimings(from_keyed), ReportWithoutTimings(honest));
  EXPECT_EQ(Metric(keyed_b, "slackswap_shared_lookups_total",
                   {{"kind", "plan"}, {"result", "discarded"}}),
            1);
  EXPECT_EQ(Plannings(keyed_b), 1);

  v1::PlanResponse from_open;
  ASSERT_TRUE(Plan(open, req, &from_open).ok());
  EXPECT_EQ(ReportWithoutTimings(from_open), ReportWithoutTimings(*chosen));
  EXPECT_EQ(Plannings(open), 0);
}

TEST(SharedTierStartTest, AShortOrStrayFleetSecretFailsStartUpNamingTheFlag) {
  const std::string short_file = ::testing::TempDir() + "/shared_short_secret";
  // 31 bytes, and the newline does not count.
  ASSERT_TRUE(WriteFile(short_file, std::string(31, 'x') + "\n").ok());
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{
           {"--shared_store=redis://127.0.0.1:1",
            "--shared_store_secret_file=" + short_file},
           {"--shared_store_secret_file=" + short_file},
           {"--shared_store=redis://127.0.0.1:1",
            "--shared_store_secret_file=" + short_file + ".missing"}}) {
    SlackswapdProcess server(flags, std::chrono::seconds(10));
    EXPECT_FALSE(server.started()) << flags.back();
    EXPECT_NE(server.Wait(), 0) << flags.back();
    EXPECT_NE(server.LogText().find("--shared_store_secret_file"),
              std::string::npos)
        << server.LogText();
  }
}

TEST(SharedTierStartTest, AMalformedUrlFailsStartUpNamingTheFlag) {
  for (const std::string url :
       {"http://127.0.0.1:6379", "redis://127.0.0.1:99999", "redis://",
        "redis://h/db"}) {
    SlackswapdProcess server({"--shared_store=" + url},
                             std::chrono::seconds(10));
    EXPECT_FALSE(server.started()) << url;
    EXPECT_NE(server.Wait(), 0) << url;
    EXPECT_NE(server.LogText().find("--shared_store"), std::string::npos)
        << server.LogText();
  }
}

// Redis down at start-up: the replica serves from its own caches, says so,
// and joins the tier once Redis comes up; a wrong password keeps it out.
TEST(SharedTierStartTest, AnUnreachableStoreAtStartUpIsRetried) {
  RedisProcess redis({"--requirepass", "right-password"});
  ASSERT_TRUE(redis.available());
  ASSERT_TRUE(redis.Start()) << redis.error();
  const int port = redis.port();
  redis.Kill();
  const std::string dir = ::testing::TempDir();
  const std::string right = dir + "/shared_right_password";
  const std::string wrong = dir + "/shared_wrong_password";
  ASSERT_TRUE(WriteFile(right, "right-password\n").ok());
  ASSERT_TRUE(WriteFile(wrong, "wrong-password\n").ok());
  const std::string url =
      absl::StrCat("--shared_store=redis://127.0.0.1:", port);
  ServedPlanner good(
      {"--threads=1", url, "--shared_store_password_file=" + right});
  ServedPlanner bad(
      {"--threads=1", url, "--shared_store_password_file=" + wrong});
  ASSERT_TRUE(good.started()) << good.error();
  ASSERT_TRUE(bad.started()) << bad.error();
  auto unreachable = [](const std::string& line) {
    return testutil::JsonField(line, "msg") ==
           "shared store unreachable; retrying";
  };
  ASSERT_TRUE(good.WaitForLine(unreachable, kAwait)) << good.LogText();
  v1::PlanResponse resp;
  ASSERT_TRUE(Plan(good, Gpt2Plan(2, 0.5, {"slackswap"}), &resp).ok());

  ASSERT_TRUE(redis.Start()) << redis.error();
  EXPECT_EQ(AwaitMetric(
                good, "slackswap_shared_store_up", {},
                [](double v) { return v == 1; }, kAwait),
            1)
      << good.LogText();
  // The refused AUTH is logged with its reason, and the replica stays out.
  std::optional<testutil::LogLine> refused = bad.WaitForLine(
      [](const std::string& line) {
        return line.find("AUTH refused") != std::string::npos;
      },
      kAwait);
  EXPECT_TRUE(refused.has_value()) << bad.LogText();
  EXPECT_EQ(Metric(bad, "slackswap_shared_store_up"), 0);
  ASSERT_TRUE(Plan(bad, Gpt2Plan(2, 0.5, {"slackswap"}), &resp).ok());
}

}  // namespace
}  // namespace slackswap
