#include "tests/service_test_util.h"

#include <future>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "io/proto_file.h"

namespace slackswap {
namespace testutil {

std::shared_ptr<grpc::Channel> Connect(const SlackswapdProcess& server) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  // A connection of its own, never shared with another test's channel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(server.target(),
                                   grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<v1::Planner::Stub> PlannerStub(
    const SlackswapdProcess& server) {
  return v1::Planner::NewStub(Connect(server));
}

ServedPlanner::ServedPlanner(const std::vector<std::string>& flags)
    : SlackswapdProcess(flags),
      channel_(Connect(*this)),
      stub_(v1::Planner::NewStub(channel_)) {}

void SetDeadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

v1::StepSpec InlineStep(const v1::OperatorGraph& g) {
  v1::StepSpec step;
  *step.mutable_graph_inline() = g;
  step.set_hardware_name(kHardware);
  return step;
}

grpc::Status SendRawPlan(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& bytes,
                         std::chrono::milliseconds timeout) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/slackswap.v1.Planner/Plan", grpc::StubOptions(),
                 &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

v1::PlanRequest Gpt2Plan(std::optional<int64_t> layers, double fraction,
                         const std::vector<std::string>& policies) {
  v1::PlanRequest req;
  v1::WorkloadRef* w = req.mutable_step()->mutable_workload();
  w->set_name("gpt2-xl");
  if (layers.has_value()) w->set_layers(*layers);
  req.mutable_step()->set_hardware_name(kHardware);
  req.set_budget_fraction(fraction);
  for (const std::string& p : policies) req.add_policies(p);
  return req;
}

v1::SweepRequest Gpt2Sweep(std::optional<int64_t> layers) {
  v1::SweepRequest req;
  v1::WorkloadRef* w = req.mutable_step()->mutable_workload();
  w->set_name("gpt2-xl");
  if (layers.has_value()) w->set_layers(*layers);
  req.mutable_step()->set_hardware_name(kHardware);
  return req;
}

std::string Scrape(const SlackswapdProcess& server) {
  HttpResponse r = HttpGet(server.metrics_port(), "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  return r.body;
}

std::string ScrapeWhenIdle(const SlackswapdProcess& server) {
  const std::optional<double> inflight = AwaitMetric(
      server, "slackswap_inflight_requests", {},
      [](double v) { return v == 0; }, std::chrono::seconds(10));
  EXPECT_EQ(inflight, 0) << "calls still in flight";
  return Scrape(server);
}

std::optional<double> AwaitMetric(
    const SlackswapdProcess& server, const std::string& name,
    const std::map<std::string, std::string>& labels,
    const std::function<bool(double)>& ok, std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  std::optional<double> value;
  while (true) {
    value = MetricValue(Scrape(server), name, labels);
    if (value.has_value() && ok(*value)) return value;
    if (SteadyClock::now() >= deadline) return value;
    // A poll interval, not a wait for something to happen.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<grpc::Status> ConcurrentPlans(
    v1::Planner::Stub& stub, const std::vector<v1::PlanRequest>& reqs,
    std::vector<v1::PlanResponse>* responses) {
  const size_t n = reqs.size();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::PlanResponse> resps(n);
  std::vector<grpc::Status> statuses(n);
  absl::Mutex mu;
  size_t done = 0;
  for (size_t i = 0; i < n; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    SetDeadline(*contexts.back());
    stub.async()->Plan(contexts.back().get(), &reqs[i], &resps[i],
                       [&, i](grpc::Status s) {
                         absl::MutexLock lock(&mu);
                         statuses[i] = std::move(s);
                         ++done;
                       });
  }
  absl::MutexLock lock(&mu);
  auto all_done = [&] { return done == n; };
  // Each call has its own deadline, so this always ends.
  mu.Await(absl::Condition(&all_done));
  if (responses != nullptr) *responses = std::move(resps);
  return statuses;
}

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(SerializeDeterministic(m, &out));
  return out;
}

v1::PlanReport WithoutTimings(const v1::PlanResponse& resp) {
  v1::PlanReport r = resp.report();
  for (v1::PolicyResult& p : *r.mutable_results()) p.clear_planning_seconds();
  return r;
}

}  // namespace testutil
}  // namespace slackswap
