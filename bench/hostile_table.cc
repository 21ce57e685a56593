// The hostile-input table of docs/RELIABILITY.md, measured: each case
// against a fresh, real slackswapd on loopback with its default flags (plus
// the case's own), the status returned, the time to answer as the client
// sees it, and the server's peak resident memory. Not a ctest test (the
// statuses are asserted by core/hostile_input_test.cc and
// tests/hostile_service_test.cc); a measurement to rerun:
//
//   build/bench/hostile_table          # prints the table's rows
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "model/hardware.h"
#include "slackswap/v1/planner_service.grpc.pb.h"
#include "testing/hostile_graphs.h"
#include "tests/service_test_util.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace {

using Clock = std::chrono::steady_clock;
using testutil::SlackswapdProcess;

struct Outcome {
  grpc::Status status;
  double seconds = 0;
};

template <typename Call>
Outcome Timed(Call call) {
  const Clock::time_point start = Clock::now();
  Outcome o;
  o.status = call();
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

Outcome Plan(const SlackswapdProcess& server, const v1::PlanRequest& req) {
  auto stub = v1::Planner::NewStub(testutil::Connect(server));
  return Timed([&] {
    grpc::ClientContext ctx;
    testutil::SetDeadline(ctx, std::chrono::seconds(200));
    v1::PlanResponse resp;
    return stub->Plan(&ctx, req, &resp);
  });
}

Outcome Simulate(const SlackswapdProcess& server,
                 const v1::SimulateRequest& req) {
  auto stub = v1::Planner::NewStub(testutil::Connect(server));
  return Timed([&] {
    grpc::ClientContext ctx;
    testutil::SetDeadline(ctx, std::chrono::seconds(200));
    v1::SimulateResponse resp;
    return stub->Simulate(&ctx, req, &resp);
  });
}

Outcome Raw(const SlackswapdProcess& server, const std::string& bytes) {
  const std::shared_ptr<grpc::Channel> channel = testutil::Connect(server);
  return Timed([&] { return testutil::SendRawPlan(channel, bytes); });
}
void Row(const std::string& input, const SlackswapdProcess& server,
         const Outcome& o, const std::string& note = "") {
  // Long messages are cut at a word, never inside a number.
  constexpr size_t kMaxMessage = 160;
  std::string message = o.status.error_message();
  if (message.size() > kMaxMessage) {
    const size_t space = message.rfind(' ', kMaxMessage);
    message =
        message.substr(0, space == std::string::npos ? kMaxMessage : space) +
        " ...";
  }
  absl::StrReplaceAll({{"|", "\\\\|"}, {"\n", " "}}, &message);
  std::printf("| %s | `%s%s%s` | %.3f s | %lld MB | %s |\n", input.c_str(),
              absl::StatusCodeToString(
                  static_cast<absl::StatusCode>(o.status.error_code()))
                  .c_str(),
              message.empty() ? "" : ": ", message.c_str(), o.seconds,
              static_cast<long long>(server.PeakResidentKb() / 1024),
              note.c_str());
  std::fflush(stdout);
}

v1::PlanRequest PlanOf(const v1::OperatorGraph& g, double budget,
                       std::vector<std::string> policies = {}) {
  v1::PlanRequest req;
  *req.mutable_step() = testutil::InlineStep(g);
  req.set_budget_fraction(budget);
  for (const std::string& p : policies) req.add_policies(p);
  return req;
}

TEST(HostileTable, Measure) {
  std::printf(
      "| input | status returned | time to answer | server peak RSS | also "
      "measured |\n"
      "|---|---|---|---|---|\n");
  {
    SlackswapdProcess server({"--threads=2"});
    ASSERT_TRUE(server.started()) << server.error();
    const v1::OperatorGraph chain = testutil::ChainGraph(35'000);
    v1::SimulateRequest sim;
    *sim.mutable_step() = testutil::InlineStep(chain);
    *sim.mutable_plan() = testutil::RecomputeEverything(chain);
    Row(absl::StrFormat("Simulate: a 35,000-link chain, every activation "
                        "recomputed (%.1f MB)",
                        sim.ByteSizeLong() / 1e6),
        server, Simulate(server, sim));
    const v1::PlanRequest plan = PlanOf(testutil::ChainGraph(50'000), 0.3);
    Row(absl::StrFormat("Plan: a 50,000-link chain at budget 0.3, every "
                        "policy (%.1f MB)",
                        plan.ByteSizeLong() / 1e6),
        server, Plan(server, plan));
    const v1::PlanRequest fwd =
        PlanOf(testutil::ForwardChainGraph(400'000), 0.5, {"slackswap"});
    Row(absl::StrFormat("Plan: a 400,000-op forward chain (%.1f MB)",
                        fwd.ByteSizeLong() / 1e6),
        server, Plan(server, fwd));
    v1::PlanRequest many = PlanOf(testutil::ChainGraph(10), 0.5);
    for (int i = 0; i < 3000; ++i) many.add_policies("slackswap");
    Row("Plan: `policies` = \"slackswap\" x 3,000", server, Plan(server, many));
    many = PlanOf(testutil::ChainGraph(10), 0.5);
    for (int i = 0; i < 60; ++i) many.add_policies("slackswap");
    Row("Plan: `policies` = \"slackswap\" x 60 (planned once)", server,
        Plan(server, many));
    v1::PlanRequest hw = PlanOf(testutil::ChainGraph(10), 0.5, {"swap_only"});
    v1::HardwareProfile profile =
        HardwareToProto(*FindHardware("a100-80gb-pcie4"));
    profile.set_h2d_gbps(1e-300);
    profile.set_d2h_gbps(1e-300);
    *hw.mutable_step()->mutable_hardware_inline() = profile;
    Row("Plan: inline hardware with link rates of 1e-300 GB/s", server,
        Plan(server, hw));
    v1::PlanRequest kind = PlanOf(testutil::ChainGraph(10), 0.5);
    v1::OpCost* cost = kind.mutable_step()
                           ->mutable_graph_inline()
                           ->mutable_ops(3)
                           ->mutable_cost();
    cost->clear_duration_ns();
    cost->set_flops(1e12);
    Row("Plan: an op with FLOPs and no kind", server, Plan(server, kind));
    v1::PlanRequest name = PlanOf(testutil::ChainGraph(10), 0.5);
    name.mutable_step()->set_hardware_name(std::string(20'000, 'x'));
    Row("Plan: a 20 KB hardware name", server, Plan(server, name));
    const std::string whole =
        PlanOf(testutil::ChainGraph(100), 0.5).SerializeAsString();
    Row("Plan: a request cut in half (correctly framed)", server,
        Raw(server, whole.substr(0, whole.size() / 2)));
    std::string noise;
    uint32_t x = 12345;
    for (int i = 0; i < 4096; ++i) {
      x = x * 1103515245 + 12345;
      noise.push_back(static_cast<char>(x >> 24));
    }
    Row("Plan: 4 KB of random bytes", server, Raw(server, noise));
  }
  {
    SlackswapdProcess server({"--threads=2", "--max_request_s=5"});
    ASSERT_TRUE(server.started()) << server.error();
    const v1::PlanRequest dup =
        PlanOf(testutil::DuplicateInputGraph(200'000), 0.5);
    Row("Plan: one op listing the same input 200,000 times "
        "(`--max_request_s=5`)",
        server, Plan(server, dup));
    const v1::PlanRequest slow = PlanOf(testutil::ChainGraph(200'000), 0.3);
    Row("Plan: a 200,000-link chain at 0.3, every policy "
        "(`--max_request_s=5`)",
        server, Plan(server, slow));
  }
  {
    SlackswapdProcess server({"--threads=2", "--max_message_mb=128"});
    ASSERT_TRUE(server.started()) << server.error();
    const v1::PlanRequest big = PlanOf(testutil::ChainGraph(500'000), 0.5);
    Row(absl::StrFormat("Plan: a 1,000,000-op chain (%.1f MB, "
                        "`--max_message_mb=128`)",
                        big.ByteSizeLong() / 1e6),
        server, Plan(server, big));
  }
  {
    SlackswapdProcess server(
        {"--threads=2", "--max_message_mb=128", "--max_queued_mb=2048"});
    ASSERT_TRUE(server.started()) << server.error();
    const v1::PlanRequest big = PlanOf(testutil::ChainGraph(500'000), 0.5);
    Row("Plan: the same, `--max_queued_mb=2048`", server, Plan(server, big));
  }
  {
    // SIGTERM while a call plans a hostile graph: the call is answered
    // within the grace period and the process exits.
    SlackswapdProcess server({"--threads=1", "--grace_s=2",
                              "--max_request_s=60", "--max_message_mb=64",
                              "--max_queued_mb=1024", "--max_request_mb=4096"});
    ASSERT_TRUE(server.started()) << server.error();
    const v1::PlanRequest slow =
        PlanOf(testutil::DuplicateInputGraph(1'000'000), 0.5);
    auto stub = v1::Planner::NewStub(testutil::Connect(server));
    grpc::ClientContext ctx;
    testutil::SetDeadline(ctx, std::chrono::seconds(120));
    v1::PlanResponse resp;
    std::thread signal([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      server.SendSignal(SIGTERM);
    });
    const Clock::time_point start = Clock::now();
    Outcome o;
    o.status = stub->Plan(&ctx, slow, &resp);
    o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    signal.join();
    const int64_t peak = server.PeakResidentKb() / 1024;
    const int code = server.Wait(std::chrono::seconds(60));
    const double exited =
        std::chrono::duration<double>(Clock::now() - start).count();
    std::printf(
        "| Plan: an input listed 1,000,000 times, SIGTERM 0.2 s in "
        "(`--grace_s=2`) | `%s` | %.3f s | %lld MB | process exited %d, %.2f "
        "s after the call began |\n",
        absl::StatusCodeToString(
            static_cast<absl::StatusCode>(o.status.error_code()))
            .c_str(),
        o.seconds, static_cast<long long>(peak), code, exited);
  }
  {
    // A client deadline on a request that would plan for seconds: when did
    // the server answer, by its own log line?
    SlackswapdProcess server({"--threads=1", "--max_message_mb=64",
                              "--max_queued_mb=1024", "--max_request_mb=4096"});
    ASSERT_TRUE(server.started()) << server.error();
    for (const auto& [what, graph] :
         std::vector<std::pair<std::string, v1::OperatorGraph>>{
             {"a 200,000-link chain", testutil::ChainGraph(200'000)},
             {"a 400,000-op forward chain",
              testutil::ForwardChainGraph(400'000)},
             {"a fan-out of 200,000", testutil::FanOutGraph(200'000)}}) {
      const size_t from = server.Lines().size();
      auto stub = v1::Planner::NewStub(testutil::Connect(server));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(1));
      v1::PlanResponse resp;
      const v1::PlanRequest req = PlanOf(graph, 0.3);
      const Outcome o = Timed([&] { return stub->Plan(&ctx, req, &resp); });
      const auto line = server.WaitForLine(
          [](const std::string& text) {
            return testutil::JsonField(text, "msg") == "request";
          },
          std::chrono::seconds(60), from);
      const std::string ms =
          line.has_value() ? testutil::JsonField(line->text, "ms").value_or("?")
                           : "?";
      Row(absl::StrCat("Plan: ", what,
                       " at 0.3, every policy, a 1 s deadline "
                       "(`--max_request_mb=4096`)"),
          server, o, absl::StrCat("the server's log: ", ms, " ms"));
    }
  }
}

}  // namespace
}  // namespace slackswap
