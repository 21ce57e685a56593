// Client-side helpers for tests that talk to a real slackswapd
// (tests/slackswapd_process.h) over gRPC: a served planner with its stub, a
// channel of the test's own, call deadlines, the reference requests, and
// bounded polling of its metrics.
//
//   ServedPlanner server({"--threads=1"});
//   ASSERT_TRUE(server.started()) << server.error();
//   grpc::ClientContext ctx;
//   SetDeadline(ctx);
//   v1::PlanResponse resp;
//   grpc::Status s =
//       server.stub().Plan(&ctx, Gpt2Plan(2, 0.5, {"slackswap"}), &resp);
#ifndef SLACKSWAP_TESTS_SERVICE_TEST_UTIL_H_
#define SLACKSWAP_TESTS_SERVICE_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "slackswap/v1/planner_service.grpc.pb.h"
#include "slackswap/v1/planner_service.pb.h"
#include "testing/timing.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace testutil {

// The reference GPU of the tests' requests.
inline constexpr char kHardware[] = "a100-80gb-pcie4";
// Generous per-call deadline: a hung server fails the call, not the run.
inline constexpr std::chrono::seconds kRpcTimeout(60);

// A channel to `server` with a connection of its own (never shared with
// another test's channel) and 256 MiB message limits.
std::shared_ptr<grpc::Channel> Connect(const SlackswapdProcess& server);

// A Planner stub on a new Connect(server) channel.
std::unique_ptr<v1::Planner::Stub> PlannerStub(const SlackswapdProcess& server);

// A slackswapd started with `flags` (as SlackswapdProcess starts it) and a
// Planner stub on a Connect channel to it. The channel connects at the first
// call; the stub and channel go before the process is stopped, so no idle
// connection holds up its shutdown. Check started() before use.
class ServedPlanner : public SlackswapdProcess {
 public:
  explicit ServedPlanner(const std::vector<std::string>& flags);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::Planner::Stub& stub() { return *stub_; }

 private:
  // Immutable after construction.
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Planner::Stub> stub_;
};

// Sets the call's deadline `timeout` from now.
void SetDeadline(grpc::ClientContext& ctx,
                 std::chrono::milliseconds timeout = kRpcTimeout);

// `g` inline, on kHardware.
v1::StepSpec InlineStep(const v1::OperatorGraph& g);

// Sends `bytes` as the body of a Plan call, unparsed (the generic stub), and
// returns the call's status.
grpc::Status SendRawPlan(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& bytes,
                         std::chrono::milliseconds timeout = kRpcTimeout);

// GPT-2 XL on kHardware; `layers` overrides the depth.
v1::PlanRequest Gpt2Plan(std::optional<int64_t> layers, double fraction,
                         const std::vector<std::string>& policies);

// A Sweep of GPT-2 XL on kHardware with the server's default range and
// policies; `layers` overrides the depth.
v1::SweepRequest Gpt2Sweep(std::optional<int64_t> layers = std::nullopt);

// The body of GET /metrics (a test failure unless it answered 200).
std::string Scrape(const SlackswapdProcess& server);
// Scrape once no call is in flight: a call is counted as gRPC finishes
// sending its reply, a moment after the client has it.
std::string ScrapeWhenIdle(const SlackswapdProcess& server);

// Scrapes until `sample{labels}` satisfies `ok`, for at most `timeout`;
// returns the last value seen (nullopt if the sample never appeared).
std::optional<double> AwaitMetric(
    const SlackswapdProcess& server, const std::string& name,
    const std::map<std::string, std::string>& labels,
    const std::function<bool(double)>& ok, std::chrono::milliseconds timeout);

// `m`'s deterministic serialization: equal messages give equal bytes (map
// order included).
std::string Deterministic(const google::protobuf::Message& m);

// The report without the wall times, which differ from run to run.
v1::PlanReport WithoutTimings(const v1::PlanResponse& resp);

// Starts one Plan call per request at once, on the callback API, and waits
// for all of them (bounded by their deadlines); returns each call's status.
std::vector<grpc::Status> ConcurrentPlans(
    v1::Planner::Stub& stub, const std::vector<v1::PlanRequest>& reqs,
    std::vector<v1::PlanResponse>* responses = nullptr);

}  // namespace testutil
}  // namespace slackswap

#endif  // SLACKSWAP_TESTS_SERVICE_TEST_UTIL_H_
