#include "cli/backend.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "core/planning_core.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "io/proto_file.h"
#include "slackswap/v1/planner_service.grpc.pb.h"

namespace slackswap {
namespace {

class LocalBackend : public Backend {
 public:
  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& req) override {
    return core_.Plan(req, {});
  }
  absl::Status Sweep(const v1::SweepRequest& req,
                     const std::function<void(const v1::SweepResponse&)>&
                         on_message) override {
    return core_.Sweep(req, {}, [&](const v1::SweepResponse& r) {
      on_message(r);
      return true;
    });
  }
  absl::StatusOr<v1::SimulateResponse> Simulate(
      const v1::SimulateRequest& req) override {
    return core_.Simulate(req, {});
  }
  absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) override {
    return core_.GetWorkload(req);
  }

 private:
  PlanningCore core_{CoreLimits{}};
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

class RemoteBackend : public Backend {
 public:
  explicit RemoteBackend(RemoteOptions options)
      : options_(std::move(options)),
        channel_(MakeChannel(options_)),
        stub_(v1::Planner::NewStub(channel_)) {}

  static std::shared_ptr<grpc::Channel> MakeChannel(const RemoteOptions& o) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    return grpc::CreateCustomChannel(o.target, o.credentials, args);
  }

  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& req) override {
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::PlanResponse resp;
    SLACKSWAP_RETURN_IF_ERROR(FromGrpc(stub_->Plan(&ctx, req, &resp)));
    return resp;
  }
  absl::Status Sweep(const v1::SweepRequest& req,
                     const std::function<void(const v1::SweepResponse&)>&
                         on_message) override {
    grpc::ClientContext ctx;
    Prepare(ctx);
    std::unique_ptr<grpc::ClientReader<v1::SweepResponse>> reader =
        stub_->Sweep(&ctx, req);
    v1::SweepResponse msg;
    while (reader->Read(&msg)) on_message(msg);
    return FromGrpc(reader->Finish());
  }
  absl::StatusOr<v1::SimulateResponse> Simulate(
      const v1::SimulateRequest& req) override {
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::SimulateResponse resp;
    SLACKSWAP_RETURN_IF_ERROR(FromGrpc(stub_->Simulate(&ctx, req, &resp)));
    return resp;
  }
  absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) override {
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::GetWorkloadResponse resp;
    SLACKSWAP_RETURN_IF_ERROR(FromGrpc(stub_->GetWorkload(&ctx, req, &resp)));
    return resp;
  }

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  void Prepare(grpc::ClientContext& ctx) const {
    if (options_.timeout.count() > 0) {
      ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    }
    if (!options_.token.empty()) {
      ctx.AddMetadata("authorization", "Bearer " + options_.token);
    }
  }

 private:
  // Immutable after construction.
  const RemoteOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
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

const std::set<std::string>& BackendFlags() {
  static const std::set<std::string> flags = {
      "server", "tls-ca", "tls-cert", "tls-key", "auth-token-file", "timeout"};
  return flags;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendFromFlags(const Flags& flags) {
  if (!flags.Has("server")) {
    for (const std::string& f : BackendFlags()) {
      if (flags.Has(f)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f, " needs --server"));
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
  if (o.timeout.count() == 0) o.timeout = std::chrono::seconds(5);
  auto channel = RemoteBackend::MakeChannel(o);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + o.timeout);
  if (!o.token.empty()) ctx.AddMetadata("authorization", "Bearer " + o.token);
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
