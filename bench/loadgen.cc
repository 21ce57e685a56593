// loadgen: a closed-loop load generator for slackswapd's Plan method.
//
//   loadgen --server=127.0.0.1:50051 --concurrency=8 --duration_s=10
//   loadgen --server=localhost:50051 --requests=100 --concurrency=4 --json
//
// Keeps exactly --concurrency Plan calls in flight on one async gRPC client
// (a CompletionQueue driven by one thread): each finished call starts the
// next until --duration_s has passed or --requests calls were sent, then the
// calls still in flight finish (each has a --deadline_s). Reports calls
// sent, OK, errors by code, requests/s (all completed calls; ok_per_s: OK
// ones), the latency of OK calls (p50/p90/p99/max) and loadgen's own CPU
// time, as text or, with --json, as one JSON object on stdout.
//
// Requests: --workload (or the graph in --graph_file, inline) on --hardware
// at --budget (a fraction of the
// unconstrained activation peak) with --policies. --distinct=N cycles the
// budget through N values (budget + i * 1e-6, i < N) so that a server's
// plan cache sees N different requests; --invalid_every=K makes every K-th
// call invalid (budget_fraction -1), counted apart and expected to fail
// with INVALID_ARGUMENT.
//
// --max_failures (default 10,000) stops sending once that many valid calls
// have failed: a server that went away fails calls as fast as they are sent.
//
// Loopback only: the server's host must be 127.0.0.1, localhost or [::1].
// Exit status: 0 when every valid call succeeded and every invalid one got
// INVALID_ARGUMENT; 1 otherwise; 2 on bad flags; 3 when the server cannot
// be reached.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/json_quote.h"
#include "grpcpp/grpcpp.h"
#include "io/proto_file.h"
#include "slackswap/v1/planner_service.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "HOST:PORT of slackswapd; HOST must be 127.0.0.1, localhost or "
          "[::1]. A comma-separated list of replicas: each call goes to the "
          "next in turn (round robin, as a Kubernetes Service spreads "
          "calls).");
ABSL_FLAG(int32_t, concurrency, 1, "Calls kept in flight (1..10000).");
ABSL_FLAG(double, duration_s, 10,
          "Stop sending after this many seconds (0 < d <= 3600).");
ABSL_FLAG(int64_t, requests, 0,
          "Stop sending after this many calls; 0: only --duration_s bounds "
          "the run (and at most 10,000,000 calls).");
ABSL_FLAG(std::string, workload, "gpt2-xl",
          "Built-in workload: bert-large, gpt2-xl or llama-7b.");
ABSL_FLAG(std::string, graph_file, "",
          "An operator graph file (.pb, .txtpb, .json) sent inline in every "
          "call instead of --workload.");
ABSL_FLAG(std::string, hardware, "a100-80gb-pcie4", "Hardware profile name.");
ABSL_FLAG(std::string, policies, "slackswap",
          "Comma-separated policy names; empty: all of them.");
ABSL_FLAG(double, budget, 0.5,
          "Budget as a fraction of the unconstrained activation peak.");
ABSL_FLAG(int32_t, distinct, 1,
          "Number of distinct valid requests, cycled (different budgets).");
ABSL_FLAG(int32_t, invalid_every, 0,
          "Every K-th call is invalid (expects INVALID_ARGUMENT); 0: none.");
ABSL_FLAG(int32_t, timeline_points, 0, "PlanRequest.timeline_points.");
ABSL_FLAG(bool, include_reasons, false, "PlanRequest.include_reasons.");
ABSL_FLAG(double, deadline_s, 60, "Deadline of each call, seconds.");
ABSL_FLAG(double, connect_timeout_s, 10,
          "How long to wait for the channel to connect before the run.");
ABSL_FLAG(int64_t, max_failures, 10'000,
          "Stop sending once this many valid calls have failed (a server "
          "that went away fails calls as fast as they are sent); 0: never.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object.");

namespace slackswap {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxRequests = 10'000'000;
constexpr int32_t kMaxConcurrency = 10'000;
constexpr double kMaxDurationS = 3600;

// OK when `server` is HOST:PORT with a loopback HOST and a valid port.
absl::Status CheckLoopback(absl::string_view server) {
  const size_t colon = server.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server must be HOST:PORT, got \"", server, "\""));
  }
  const absl::string_view host = server.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(server.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server: bad port in \"", server, "\""));
  }
  if (host != "127.0.0.1" && host != "localhost" && host != "[::1]") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--server: loopback only (127.0.0.1, localhost or [::1]), got host \"",
        host, "\""));
  }
  return absl::OkStatus();
}

struct Options {
  std::string server;
  // --server split at its commas.
  std::vector<std::string> servers;
  int32_t concurrency;
  double duration_s;
  int64_t max_requests;
  int32_t distinct;
  int32_t invalid_every;
  double deadline_s;
  int64_t max_failures;
};

absl::StatusOr<Options> ReadOptions() {
  Options o;
  o.server = absl::GetFlag(FLAGS_server);
  o.servers = absl::StrSplit(o.server, ',');
  for (const std::string& server : o.servers) {
    if (absl::Status s = CheckLoopback(server); !s.ok()) return s;
  }
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.duration_s = absl::GetFlag(FLAGS_duration_s);
  o.max_requests = absl::GetFlag(FLAGS_requests);
  o.distinct = absl::GetFlag(FLAGS_distinct);
  o.invalid_every = absl::GetFlag(FLAGS_invalid_every);
  o.deadline_s = absl::GetFlag(FLAGS_deadline_s);
  o.max_failures = absl::GetFlag(FLAGS_max_failures);
  if (o.concurrency < 1 || o.concurrency > kMaxConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency must be in [1, ", kMaxConcurrency, "]"));
  }
  if (!(o.duration_s > 0 && o.duration_s <= kMaxDurationS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--duration_s must be in (0, ", kMaxDurationS, "]"));
  }
  if (o.max_requests < 0 || o.max_requests > kMaxRequests) {
    return absl::InvalidArgumentError(
        absl::StrCat("--requests must be in [0, ", kMaxRequests, "]"));
  }
  if (o.max_requests == 0) o.max_requests = kMaxRequests;
  if (o.distinct < 1 || o.distinct > 1'000'000) {
    return absl::InvalidArgumentError("--distinct must be in [1, 1000000]");
  }
  if (o.invalid_every < 0) {
    return absl::InvalidArgumentError("--invalid_every must be >= 0");
  }
  if (o.max_failures < 0) {
    return absl::InvalidArgumentError("--max_failures must be >= 0");
  }
  if (!(o.deadline_s > 0 && o.deadline_s <= kMaxDurationS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline_s must be in (0, ", kMaxDurationS, "]"));
  }
  return o;
}

// The requests to cycle through: `distinct` valid ones, then one invalid.
absl::StatusOr<std::vector<v1::PlanRequest>> BuildRequests(int32_t distinct) {
  v1::PlanRequest base;
  if (const std::string path = absl::GetFlag(FLAGS_graph_file); !path.empty()) {
    absl::Status read =
        ReadProtoFile(path, base.mutable_step()->mutable_graph_inline());
    if (!read.ok()) return read;
  } else {
    base.mutable_step()->mutable_workload()->set_name(
        absl::GetFlag(FLAGS_workload));
  }
  base.mutable_step()->set_hardware_name(absl::GetFlag(FLAGS_hardware));
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty())) {
    base.add_policies(std::string(p));
  }
  base.set_timeline_points(absl::GetFlag(FLAGS_timeline_points));
  base.set_include_reasons(absl::GetFlag(FLAGS_include_reasons));
  std::vector<v1::PlanRequest> out;
  out.reserve(distinct + 1);
  for (int32_t i = 0; i < distinct; ++i) {
    out.push_back(base);
    out.back().set_budget_fraction(absl::GetFlag(FLAGS_budget) + i * 1e-6);
  }
  out.push_back(base);
  out.back().set_budget_fraction(-1);  // INVALID_ARGUMENT
  return out;
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// One call in flight; its address is the completion queue tag.
struct Call {
  grpc::ClientContext ctx;
  v1::PlanResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::PlanResponse>> rpc;
  Clock::time_point start;
  bool invalid = false;
};

struct Report {
  int64_t sent = 0;
  int64_t valid_sent = 0;
  int64_t ok = 0;
  int64_t cache_hits = 0;
  std::map<std::string, int64_t> valid_errors;  // code -> count
  int64_t invalid_sent = 0;
  int64_t invalid_rejected = 0;                   // INVALID_ARGUMENT
  std::map<std::string, int64_t> invalid_others;  // any other code
  double wall_s = 0;
  double cpu_s = 0;            // this process, user + system
  std::vector<double> ok_ms;   // sorted after the run
  std::string first_error;     // of a valid call, for the report
  bool stopped_early = false;  // --max_failures reached
};

class LoadGen {
 public:
  LoadGen(const Options& o,
          const std::vector<std::shared_ptr<grpc::Channel>>& channels,
          std::vector<v1::PlanRequest> requests)
      : o_(o), requests_(std::move(requests)) {
    for (const auto& channel : channels) {
      stubs_.push_back(v1::Planner::NewStub(channel));
    }
  }

  Report Run() {
    const Clock::time_point begin = Clock::now();
    const double cpu_begin = ProcessCpuSeconds();
    end_ = begin + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(o_.duration_s));
    for (int32_t i = 0; i < o_.concurrency && MaySend(); ++i) Start();
    void* tag = nullptr;
    bool ok = false;
    while (in_flight_ > 0 && cq_.Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      Finished(*call, Clock::now());
      delete call;
      --in_flight_;
      if (MaySend()) Start();
    }
    report_.wall_s =
        std::chrono::duration<double>(Clock::now() - begin).count();
    report_.cpu_s = ProcessCpuSeconds() - cpu_begin;
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
    std::sort(report_.ok_ms.begin(), report_.ok_ms.end());
    return std::move(report_);
  }

 private:
  bool MaySend() {
    if (o_.max_failures > 0 && failures_ >= o_.max_failures) {
      report_.stopped_early = true;
      return false;
    }
    return report_.sent < o_.max_requests && Clock::now() < end_;
  }

  void Start() {
    auto* call = new Call;
    const int64_t k = report_.sent++;
    call->invalid = o_.invalid_every > 0 && (k + 1) % o_.invalid_every == 0;
    const v1::PlanRequest* req;
    if (call->invalid) {
      ++report_.invalid_sent;
      req = &requests_.back();
    } else {
      req = &requests_[report_.valid_sent % o_.distinct];
      ++report_.valid_sent;
    }
    call->start = Clock::now();
    call->ctx.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(o_.deadline_s)));
    call->rpc =
        stubs_[static_cast<size_t>(k) % stubs_.size()]->PrepareAsyncPlan(
            &call->ctx, *req, &cq_);
    call->rpc->StartCall();
    call->rpc->Finish(&call->resp, &call->status, call);
    ++in_flight_;
  }

  void Finished(const Call& call, Clock::time_point now) {
    const grpc::StatusCode code = call.status.error_code();
    if (call.invalid) {
      if (code == grpc::StatusCode::INVALID_ARGUMENT) {
        ++report_.invalid_rejected;
      } else {
        ++report_.invalid_others[CodeName(code)];
      }
      return;
    }
    if (code == grpc::StatusCode::OK) {
      ++report_.ok;
      if (call.resp.cache_hit()) ++report_.cache_hits;
      report_.ok_ms.push_back(
          std::chrono::duration<double, std::milli>(now - call.start).count());
      return;
    }
    ++report_.valid_errors[CodeName(code)];
    ++failures_;
    if (report_.first_error.empty()) {
      report_.first_error =
          absl::StrCat(CodeName(code), ": ", call.status.error_message());
    }
  }

  const Options o_;
  // One per replica, taken in turn.
  std::vector<std::unique_ptr<v1::Planner::Stub>> stubs_;
  const std::vector<v1::PlanRequest> requests_;
  grpc::CompletionQueue cq_;
  Clock::time_point end_;
  int64_t in_flight_ = 0;
  int64_t failures_ = 0;
  Report report_;
};

// The q-quantile of sorted values (nearest rank); 0 when empty.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  if (static_cast<double>(rank) < q * static_cast<double>(sorted.size())) {
    ++rank;
  }
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

std::string JsonCounts(const std::map<std::string, int64_t>& counts) {
  return absl::StrCat("{",
                      absl::StrJoin(counts, ",",
                                    [](std::string* out, const auto& kv) {
                                      absl::StrAppend(out, JsonQuote(kv.first),
                                                      ":", kv.second);
                                    }),
                      "}");
}

std::string TextCounts(const std::map<std::string, int64_t>& counts) {
  if (counts.empty()) return "none";
  return absl::StrJoin(counts, ", ", absl::PairFormatter(" "));
}

int64_t Total(const std::map<std::string, int64_t>& counts) {
  int64_t n = 0;
  for (const auto& [code, count] : counts) n += count;
  return n;
}

void Print(const Options& o, const Report& r, bool json) {
  const double rps = r.wall_s > 0 ? static_cast<double>(r.sent) / r.wall_s : 0;
  const double ok_ps = r.wall_s > 0 ? static_cast<double>(r.ok) / r.wall_s : 0;
  const double p50 = Quantile(r.ok_ms, 0.50);
  const double p90 = Quantile(r.ok_ms, 0.90);
  const double p99 = Quantile(r.ok_ms, 0.99);
  const double max = r.ok_ms.empty() ? 0 : r.ok_ms.back();
  if (json) {
    std::printf(
        "%s\n",
        absl::StrFormat(
            "{\"server\":%s,\"workload\":%s,\"policies\":%s,\"budget\":%g,"
            "\"concurrency\":%d,\"distinct\":%d,\"invalid_every\":%d,"
            "\"sent\":%d,\"valid_sent\":%d,\"ok\":%d,\"cache_hits\":%d,"
            "\"errors\":%s,\"invalid_sent\":%d,\"invalid_rejected\":%d,"
            "\"invalid_other\":%s,\"wall_s\":%.3f,\"client_cpu_s\":%.3f,"
            "\"requests_per_s\":%.1f,\"ok_per_s\":%.1f,"
            "\"latency_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
            "\"max\":%.3f},\"first_error\":%s,\"stopped_early\":%s}",
            JsonQuote(o.server), JsonQuote(absl::GetFlag(FLAGS_workload)),
            JsonQuote(absl::GetFlag(FLAGS_policies)),
            absl::GetFlag(FLAGS_budget), o.concurrency, o.distinct,
            o.invalid_every, r.sent, r.valid_sent, r.ok, r.cache_hits,
            JsonCounts(r.valid_errors), r.invalid_sent, r.invalid_rejected,
            JsonCounts(r.invalid_others), r.wall_s, r.cpu_s, rps, ok_ps, p50,
            p90, p99, max, JsonQuote(r.first_error),
            r.stopped_early ? "true" : "false")
            .c_str());
    return;
  }
  std::printf(
      "server        %s, concurrency %d, %s / %s at budget %g\n",
      o.server.c_str(), o.concurrency, absl::GetFlag(FLAGS_workload).c_str(),
      absl::GetFlag(FLAGS_policies).c_str(), absl::GetFlag(FLAGS_budget));
  std::printf(
      "sent          %lld in %.3f s: %.1f requests/s, %.1f OK/s (loadgen "
      "CPU %.3f s)\n",
      static_cast<long long>(r.sent), r.wall_s, rps, ok_ps, r.cpu_s);
  std::printf(
      "valid         %lld sent, %lld OK (%lld cache hits), %lld "
      "failed: %s\n",
      static_cast<long long>(r.valid_sent), static_cast<long long>(r.ok),
      static_cast<long long>(r.cache_hits),
      static_cast<long long>(Total(r.valid_errors)),
      TextCounts(r.valid_errors).c_str());
  if (r.invalid_sent > 0) {
    std::printf("invalid       %lld sent, %lld INVALID_ARGUMENT, other: %s\n",
                static_cast<long long>(r.invalid_sent),
                static_cast<long long>(r.invalid_rejected),
                TextCounts(r.invalid_others).c_str());
  }
  std::printf(
      "latency (OK)  p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max "
      "%.3f ms\n",
      p50, p90, p99, max);
  if (!r.first_error.empty()) {
    std::printf("first error   %s\n", r.first_error.c_str());
  }
  if (r.stopped_early) {
    std::printf("stopped early after --max_failures=%lld failed calls\n",
                static_cast<long long>(absl::GetFlag(FLAGS_max_failures)));
  }
}

int Main() {
  absl::StatusOr<Options> o = ReadOptions();
  if (!o.ok()) {
    std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::vector<v1::PlanRequest>> requests =
      BuildRequests(o->distinct);
  if (!requests.ok()) {
    std::fprintf(stderr, "--graph_file: %s\n",
                 requests.status().ToString().c_str());
    return 2;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  const auto connect_deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(
              absl::GetFlag(FLAGS_connect_timeout_s)));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& server : o->servers) {
    channels.push_back(grpc::CreateCustomChannel(
        server, grpc::InsecureChannelCredentials(), args));
    if (!channels.back()->WaitForConnected(connect_deadline)) {
      std::fprintf(stderr, "UNAVAILABLE: cannot connect to %s\n",
                   server.c_str());
      return 3;
    }
  }
  LoadGen gen(*o, channels, *std::move(requests));
  const Report r = gen.Run();
  Print(*o, r, absl::GetFlag(FLAGS_json));
  const bool valid_ok = r.ok == r.valid_sent;
  const bool invalid_ok = r.invalid_rejected == r.invalid_sent;
  return valid_ok && invalid_ok ? 0 : 1;
}

}  // namespace
}  // namespace slackswap

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "closed-loop load for slackswapd: loadgen --server=127.0.0.1:PORT "
      "--concurrency=C [--duration_s=S] [--requests=N] [--json]");
  absl::ParseCommandLine(argc, argv);
  return slackswap::Main();
}
