#include "cli/backend.h"

#include <chrono>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "cli/defaults.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "core/planning_core.h"
#include "core/request_convert.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "io/proto_file.h"
#include "io/request_key.h"
#include "slackswap/v1/planner_service.grpc.pb.h"

namespace slackswap {
namespace {

// The graph HoldLocalGraph holds, and its key.
struct Held {
  Mutex mu;
  std::string key ABSL_GUARDED_BY(mu);
  std::shared_ptr<const Graph> graph ABSL_GUARDED_BY(mu);
  int64_t count ABSL_GUARDED_BY(mu) = 0;
};

Held& HeldGraph() {
  static Held* const held = new Held;
  return *held;
}

// The held graphs, for the local core.
class HeldGraphs : public GraphSource {
 public:
  std::shared_ptr<const Graph> Find(const std::string& sha256) override {
    return LocalGraph(sha256);
  }
};

class LocalBackend : public Backend {
 public:
  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& req) override {
    SLACKSWAP_RETURN_IF_ERROR(CheckHeldSize(req.step(), "step."));
    return core_.PlanStep(req, {});
  }
  absl::Status Sweep(const v1::SweepRequest& req,
                     const std::function<void(const v1::SweepResponse&)>&
                         on_message) override {
    SLACKSWAP_RETURN_IF_ERROR(CheckHeldSize(req.step(), "step."));
    return core_.SweepBudgets(req, {}, [&](const v1::SweepResponse& r) {
      on_message(r);
      return true;
    });
  }
  absl::StatusOr<v1::SimulateResponse> Simulate(
      const v1::SimulateRequest& req) override {
    SLACKSWAP_RETURN_IF_ERROR(CheckHeldSize(req.step(), "step."));
    return core_.SimulateStep(req, {});
  }
  absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) override {
    return core_.GetWorkload(req);
  }
  absl::StatusOr<v1::ServerInfoResponse> ServerInfo() override {
    return core_.Info();
  }
  absl::StatusOr<v1::ListHardwareProfilesResponse> ListHardwareProfiles()
      override {
    return core_.ListHardwareProfiles();
  }
  absl::StatusOr<v1::ListNodesResponse> ListNodes() override {
    return core_.ListNodes();
  }
  absl::StatusOr<v1::ListWorkloadsResponse> ListWorkloads() override {
    return core_.ListWorkloads();
  }
  absl::StatusOr<v1::FitResponse> Fit(const v1::FitRequest& req) override {
    SLACKSWAP_RETURN_IF_ERROR(CheckHeldSize(req, ""));
    return core_.FitStep(req, {});
  }

 private:
  // A held graph stands for the inline graph the request would have
  // carried: the core's first check of a request is an inline graph's size,
  // and a held graph gets the same, with the same message.
  template <typename Message>
  absl::Status CheckHeldSize(const Message& m, const std::string& prefix) {
    if (m.graph_case() != Message::kGraphSha256) return absl::OkStatus();
    std::shared_ptr<const Graph> g = LocalGraph(m.graph_sha256());
    if (g == nullptr) return absl::OkStatus();
    return CheckGraphSize(static_cast<int64_t>(g->ops.size()),
                          static_cast<int64_t>(g->tensors.size()),
                          prefix + "graph_inline", limits_);
  }

  const CoreLimits limits_;
  HeldGraphs held_;
  PlanningCore core_{limits_, /*observer=*/nullptr, &held_};
};

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

struct RemoteOptions {
  std::string target;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;
  std::chrono::milliseconds timeout{0};
};

std::shared_ptr<grpc::Channel> MakeChannel(const RemoteOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return grpc::CreateCustomChannel(o.target, o.credentials, args);
}

// Sets the call's deadline (if o.timeout > 0) and bearer token (if any).
void PrepareContext(const RemoteOptions& o, grpc::ClientContext* ctx) {
  if (o.timeout.count() > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() + o.timeout);
  }
  if (!o.token.empty()) {
    ctx->AddMetadata("authorization", "Bearer " + o.token);
  }
}

class RemoteBackend : public Backend {
 public:
  explicit RemoteBackend(RemoteOptions options)
      : options_(std::move(options)),
        stub_(v1::Planner::NewStub(MakeChannel(options_))) {}

  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& req) override {
    return WithGraphByDigest(req, [this](const v1::PlanRequest& r) {
      return Call(&v1::Planner::Stub::Plan, r);
    });
  }
  absl::Status Sweep(const v1::SweepRequest& req,
                     const std::function<void(const v1::SweepResponse&)>&
                         on_message) override {
    return WithGraphByDigest(req, [&](const v1::SweepRequest& r) {
      grpc::ClientContext ctx;
      PrepareContext(options_, &ctx);
      std::unique_ptr<grpc::ClientReader<v1::SweepResponse>> reader =
          stub_->Sweep(&ctx, r);
      v1::SweepResponse msg;
      while (reader->Read(&msg)) on_message(msg);
      return FromGrpc(reader->Finish());
    });
  }
  absl::StatusOr<v1::SimulateResponse> Simulate(
      const v1::SimulateRequest& req) override {
    return WithGraphByDigest(req, [this](const v1::SimulateRequest& r) {
      return Call(&v1::Planner::Stub::Simulate, r);
    });
  }
  absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) override {
    return Call(&v1::Planner::Stub::GetWorkload, req);
  }
  absl::StatusOr<v1::ServerInfoResponse> ServerInfo() override {
    return Call(&v1::Planner::Stub::ServerInfo, v1::ServerInfoRequest());
  }
  absl::StatusOr<v1::ListHardwareProfilesResponse> ListHardwareProfiles()
      override {
    return Call(&v1::Planner::Stub::ListHardwareProfiles,
                v1::ListHardwareProfilesRequest());
  }
  absl::StatusOr<v1::ListNodesResponse> ListNodes() override {
    return Call(&v1::Planner::Stub::ListNodes, v1::ListNodesRequest());
  }
  absl::StatusOr<v1::ListWorkloadsResponse> ListWorkloads() override {
    return Call(&v1::Planner::Stub::ListWorkloads, v1::ListWorkloadsRequest());
  }
  absl::StatusOr<v1::FitResponse> Fit(const v1::FitRequest& req) override {
    return WithGraphByDigest(req, [this](const v1::FitRequest& r) {
      return Call(&v1::Planner::Stub::Fit, r);
    });
  }

 private:
  // Whether the server answered that it does not hold the graph a request
  // named by digest (it never did, it expired, another replica holds it),
  // or that it does not know digests at all (an older server).
  static bool GraphNotThere(const absl::Status& s) {
    const absl::string_view message = s.message();
    return (absl::IsNotFound(s) &&
            absl::StrContains(message, "graph_sha256: no graph")) ||
           (absl::IsInvalidArgument(s) &&
            absl::StrContains(message, "set graph_inline or workload"));
  }

  // Where a request holds its graph: the step, or (Fit) the request.
  static v1::StepSpec* GraphHolder(v1::PlanRequest* r) {
    return r->mutable_step();
  }
  static v1::StepSpec* GraphHolder(v1::SweepRequest* r) {
    return r->mutable_step();
  }
  static v1::StepSpec* GraphHolder(v1::SimulateRequest* r) {
    return r->mutable_step();
  }
  static v1::FitRequest* GraphHolder(v1::FitRequest* r) { return r; }

  // `send(req)`, an inline graph sent by digest: a scheduler asking about
  // one job again and again sends its megabytes once. If the server does
  // not hold it, it is stored (PutGraph) and the request sent again; a
  // server that cannot store it gets it inline.
  template <typename Request, typename Send>
  std::invoke_result_t<Send, const Request&> WithGraphByDigest(
      Request req, const Send& send) {
    auto* holder = GraphHolder(&req);
    if (!holder->has_graph_inline()) return send(req);
    v1::PutGraphRequest put;
    put.mutable_graph()->Swap(holder->mutable_graph_inline());
    holder->set_graph_sha256(GraphDigest(*put.mutable_graph()));
    auto answer = send(req);
    if (!GraphNotThere(StatusOf(answer))) return answer;
    if (Call(&v1::Planner::Stub::PutGraph, put).ok()) {
      answer = send(req);
      if (!GraphNotThere(StatusOf(answer))) return answer;
    }
    holder->mutable_graph_inline()->Swap(put.mutable_graph());
    return send(req);
  }
  static absl::Status StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static absl::Status StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }

  // One unary call of the stub's `method`.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (v1::Planner::Stub::*method)(grpc::ClientContext*,
                                                const Request&, Response*),
      const Request& req) const {
    grpc::ClientContext ctx;
    PrepareContext(options_, &ctx);
    Response resp;
    SLACKSWAP_RETURN_IF_ERROR(
        FromGrpc((stub_.get()->*method)(&ctx, req, &resp)));
    return resp;
  }

  // Immutable after construction.
  const RemoteOptions options_;
  const std::unique_ptr<v1::Planner::Stub> stub_;
};

absl::StatusOr<RemoteOptions> RemoteOptionsFromFlags(const Flags& flags) {
  RemoteOptions o;
  o.target = *flags.Get("server");
  if (flags.Has("tls-ca") || flags.Has("tls-cert")) {
    grpc::SslCredentialsOptions ssl;
    if (flags.Has("tls-ca")) {
      SLACKSWAP_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                                 ReadFile(*flags.Get("tls-ca")));
    }
    if (flags.Has("tls-cert") != flags.Has("tls-key")) {
      return absl::InvalidArgumentError(
          "--tls-cert and --tls-key go together (mutual TLS)");
    }
    if (flags.Has("tls-cert")) {
      SLACKSWAP_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                                 ReadFile(*flags.Get("tls-cert")));
      SLACKSWAP_ASSIGN_OR_RETURN(ssl.pem_private_key,
                                 ReadFile(*flags.Get("tls-key")));
    }
    o.credentials = grpc::SslCredentials(ssl);
  } else {
    o.credentials = grpc::InsecureChannelCredentials();
  }
  if (flags.Has("auth-token-file")) {
    SLACKSWAP_ASSIGN_OR_RETURN(std::string token,
                               ReadFile(*flags.Get("auth-token-file")));
    o.token = std::string(absl::StripAsciiWhitespace(token));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<double> timeout,
                             flags.GetDouble("timeout"));
  if (timeout.has_value()) {
    if (*timeout <= 0) {
      return absl::InvalidArgumentError("--timeout must be > 0 seconds");
    }
    o.timeout =
        std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
  }
  return o;
}

}  // namespace

bool IsLocal(const Flags& flags) { return !flags.Has("server"); }

std::string HoldLocalGraph(Graph g) {
  Held& held = HeldGraph();
  MutexLock lock(&held.mu);
  held.key = absl::StrFormat("%064x", ++held.count);
  held.graph = std::make_shared<const Graph>(std::move(g));
  return held.key;
}

std::shared_ptr<const Graph> LocalGraph(const std::string& key) {
  Held& held = HeldGraph();
  MutexLock lock(&held.mu);
  return key == held.key ? held.graph : nullptr;
}

const FlagSpecs& BackendFlags() {
  static const FlagSpecs* const flags = new FlagSpecs{
      {"server", "HOST:PORT", "run on this slackswapd instead of locally"},
      {"tls-ca", "FILE", "PEM CA bundle: talk TLS to --server"},
      {"tls-cert", "FILE", "PEM client certificate (mutual TLS)"},
      {"tls-key", "FILE", "PEM client private key (mutual TLS)"},
      {"auth-token-file", "FILE", "file holding the server's bearer token"},
      {"timeout", "SECONDS", "deadline of each call to --server", "none"},
  };
  return *flags;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendFromFlags(const Flags& flags) {
  if (IsLocal(flags)) {
    for (const FlagSpec& f : BackendFlags()) {
      if (flags.Has(f.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f.name, " needs --server"));
      }
    }
    return std::unique_ptr<Backend>(new LocalBackend());
  }
  SLACKSWAP_ASSIGN_OR_RETURN(RemoteOptions o, RemoteOptionsFromFlags(flags));
  return std::unique_ptr<Backend>(new RemoteBackend(std::move(o)));
}

absl::Status CheckHealth(const Flags& flags) {
  if (!flags.Has("server")) {
    return absl::InvalidArgumentError("health needs --server HOST:PORT");
  }
  SLACKSWAP_ASSIGN_OR_RETURN(RemoteOptions o, RemoteOptionsFromFlags(flags));
  if (o.timeout.count() == 0) o.timeout = kDefaultHealthTimeout;
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(o));
  grpc::ClientContext ctx;
  PrepareContext(o, &ctx);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  SLACKSWAP_RETURN_IF_ERROR(FromGrpc(stub->Check(&ctx, req, &resp)));
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat(o.target, " is ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                         resp.status())));
  }
  return absl::OkStatus();
}

}  // namespace slackswap
