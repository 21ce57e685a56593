#include "server/planner_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/format.h"
#include "common/mutex.h"
#include "core/admission.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "io/proto_file.h"
#include "io/request_key.h"
#include "server/shared_entries.h"

namespace slackswap {
namespace {

// How long after a large call its memory is given back: long enough for
// gRPC and the worker to free what the call held after its OnDone.
constexpr std::chrono::milliseconds kTrimDelay(100);
// The planning threads' nice value: planning is batch work, and a cache hit
// answered on a gRPC thread should not wait for a core behind it.
constexpr int kWorkerNice = 10;

// A message on an arena of its own that the pointer owns: parsing a large
// request allocates a block at a time, not once per op and tensor, and
// frees everything at once (on a cache hit, malloc and free were most of
// the time).
template <typename Message>
std::shared_ptr<Message> NewArenaMessage() {
  auto arena = std::make_shared<google::protobuf::Arena>();
  Message* message =
      google::protobuf::Arena::CreateMessage<Message>(arena.get());
  return std::shared_ptr<Message>(std::move(arena), message);
}

using Clock = std::chrono::steady_clock;
using RejectReason = ServiceMetrics::RejectReason;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// Forwards what the core measures to the service's metrics.
class MetricsObserver : public CoreObserver {
 public:
  explicit MetricsObserver(ServiceMetrics* metrics) : metrics_(metrics) {}
  void GraphOps(int64_t ops) override { metrics_->GraphOps(ops); }
  void PolicyRun(const std::string& policy, double planner_seconds,
                 double simulator_seconds, double retained,
                 bool feasible) override {
    metrics_->PolicyRun(policy, planner_seconds, simulator_seconds, retained,
                        feasible);
  }
  void FitProfile(const std::string& verdict) override {
    metrics_->FitProfile(verdict);
  }
  void FitNode(const std::string& node_name,
               const std::string& verdict) override {
    metrics_->FitNode(node_name, verdict);
  }
  void PlanAdmitted(const std::string& scope) override {
    metrics_->PlanAdmitted(scope);
  }
  void NodeSimulation(double seconds) override {
    metrics_->NodeSimulation(seconds);
  }

 private:
  ServiceMetrics* const metrics_;
};

// Equal-time comparison: the token check does not leak how much matched.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// Parses raw request bytes into `msg`; INVALID_ARGUMENT naming the message
// type when they are not one.
absl::Status ParseRequest(const grpc::ByteBuffer& raw,
                          google::protobuf::Message* msg) {
  grpc::ByteBuffer bytes(raw);  // shares the slices; the reader needs it
  grpc::ProtoBufferReader reader(&bytes);
  if (!msg->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request is not a valid ", msg->GetDescriptor()->full_name(), " (",
        bytes.Length(), " bytes that the protobuf parser refused)"));
  }
  return absl::OkStatus();
}

// `msg` serialized into `out`.
void SetResponse(const google::protobuf::Message& msg, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  (void)grpc::GenericSerialize<grpc::ProtoBufferWriter,
                               google::protobuf::Message>(msg, out,
                                                          &own_buffer);
}

// Bytes already serialized, into `out`.
void SetResponse(const std::string& bytes, grpc::ByteBuffer* out) {
  grpc::Slice slice(bytes);
  *out = grpc::ByteBuffer(&slice, 1);
}

// A graph held in the store is charged this many times its canonical wire
// size: the converted, indexed domain graph (measured, malloc's bytes in
// use: 2.4-2.7 times on gpt2-xl at 48 and 10,000 layers, 7.1-7.6 on
// 200,000-link chains and fan-outs and a 400,000-op forward chain, whose
// names are short).
constexpr int64_t kStoredBytesPerWireByte = 4;

// Threads for the shared tier's Plan lookups: each mostly waits on Redis
// (or on another replica's planning), so there are more than cores.
constexpr int kSharedLookupThreads = 8;

// The most sweep messages computed but not yet written before the sweep
// pauses: a client not reading stops costing planning.
constexpr size_t kMaxUnsentSweepMessages = 8;

// A client cancels its call when its own deadline passes, and the server's
// copy of that deadline is later by the time the call's headers took to
// arrive (and by gRPC rounding the timeout up), so the client's cancellation
// can reach the server before the server's deadline passes (CI saw it on a
// loaded 2-core machine with a 200,000-op request). A cancellation this
// close to the deadline is taken for the deadline: a caller gone either way
// loses nothing by the name.
constexpr std::chrono::milliseconds kDeadlineSkew(500);

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s,
                          const grpc::CallbackServerContext* ctx,
                          Clock::time_point limit) {
  if (s.ok()) return grpc::Status::OK;
  if (s.code() == absl::StatusCode::kCancelled && ctx != nullptr &&
      ctx->deadline() <= std::chrono::system_clock::now() + kDeadlineSkew) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "deadline exceeded while planning");
  }
  if (s.code() == absl::StatusCode::kCancelled && Clock::now() >= limit) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the call reached the server's time limit for one "
                        "request (--max_request_s) while planning");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// One unary call from its arrival to its end: replied to once (from any
// thread), then, once gRPC has sent the reply, its metrics and log line
// record the whole call, reply sent included.
class PlannerService::UnaryCall : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(PlannerService* service, const char* method,
            grpc::CallbackServerContext* ctx)
      : service_(service), method_(method), ctx_(ctx), start_(Clock::now()) {
    service_->metrics_->RequestStarted();
  }

  // The memory reserved for this call, given back at the reply.
  void Hold(int64_t bytes) { held_ = bytes; }
  int64_t held() const { return held_; }

  // Finishes the call. `detail` goes on its log line. Call exactly once.
  void Reply(grpc::Status status, std::string detail) {
    service_->held_.Release(held_);
    status_ = status;
    detail_ = std::move(detail);
    replied_ = true;
    Finish(std::move(status));
  }
  // Whether Reply was called (by the thread that called it).
  bool replied() const { return replied_; }
  grpc::CallbackServerContext* ctx() const { return ctx_; }

  // The log line first: once the metrics count the call, its line is
  // written.
  void OnDone() override {
    const double seconds = SecondsSince(start_);
    const std::string code = CodeName(status_.error_code());
    if (detail_ != PlanAnswerer::kCacheHit || service_->SampleCacheHitLog()) {
      std::string full = detail_;
      if (!status_.ok()) {
        absl::StrAppend(&full, full.empty() ? "" : " ",
                        status_.error_message());
      }
      service_->log_->Request(method_, code, seconds * 1e3, ctx_->peer(), full);
    }
    service_->metrics_->RequestFinished(method_, code, seconds);
    service_->metrics_->SetQueueDepth(service_->pool_.queue_depth());
    service_->AfterLargeCall(held_);
    delete this;
  }

 private:
  PlannerService* const service_;
  const char* const method_;
  grpc::CallbackServerContext* const ctx_;
  const Clock::time_point start_;
  int64_t held_ = 0;
  // Set by Reply, read by OnDone (which gRPC runs after Finish).
  grpc::Status status_;
  std::string detail_;
  bool replied_ = false;
};

const std::vector<std::string>& PlannerService::MethodNames() {
  static const auto* const names = [] {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            v1::Planner::service_full_name());
    auto* out = new std::vector<std::string>;
    for (int i = 0; i < service->method_count(); ++i) {
      out->push_back(service->method(i)->name());
    }
    return out;
  }();
  return *names;
}

namespace {

std::unique_ptr<SharedTier> MakeSharedTier(const ServiceOptions& options,
                                           RequestLog* log) {
  if (options.shared_store == nullptr) return nullptr;
  // The catalogs and the planner version name the answers' namespace.
  const v1::ServerInfoResponse info = PlanningCore(options.limits).Info();
  SharedTierOptions tier;
  tier.ns =
      SharedNamespace(info.planner_version(), info.hardware_catalog_sha256(),
                      info.node_catalog_sha256(), options.shared_fleet_secret);
  tier.fleet_secret = options.shared_fleet_secret;
  auto ms = [](double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3));
  };
  tier.result_ttl = ms(options.shared_result_ttl_s);
  tier.graph_ttl = ms(options.graph_ttl_s);
  tier.mark_ttl = ms(options.shared_mark_s);
  return std::make_unique<SharedTier>(options.shared_store, std::move(tier),
                                      log);
}

}  // namespace

PlannerService::PlannerService(const ServiceOptions& options,
                               ServiceMetrics* metrics, RequestLog* log)
    : options_(options),
      metrics_(metrics),
      log_(log),
      observer_(std::make_unique<MetricsObserver>(metrics)),
      graphs_(options.graph_store_bytes, absl::Seconds(options.graph_ttl_s)),
      workload_graphs_(options.workload_graph_bytes,
                       absl::Seconds(options.graph_ttl_s)),
      shared_(MakeSharedTier(options, log)),
      graph_source_(
          &graphs_, shared_.get(), kStoredBytesPerWireByte,
          [this](const v1::OperatorGraph& graph) {
            return core_.PrepareGraph(graph, StopFn());
          },
          &workload_graphs_),
      core_(options.limits, observer_.get(), &graph_source_),
      info_([&] {
        v1::ServerInfoResponse info = core_.Info();
        info.mutable_limits()->set_max_message_bytes(options.max_message_bytes);
        info.mutable_limits()->set_max_request_seconds(options.max_request_s);
        info.set_graph_store_bytes(options.graph_store_bytes);
        info.set_graph_ttl_seconds(options.graph_ttl_s);
        return info;
      }()),
      held_(options.max_queued_bytes),
      plans_(options.cache_bytes, &core_, metrics, shared_.get()),
      pool_(options.threads, options.max_queue, kWorkerNice),
      shared_lookups_(shared_ == nullptr
                          ? nullptr
                          : std::make_unique<WorkQueue>(kSharedLookupThreads,
                                                        options.max_queue)),
      trimmer_(kTrimDelay) {
  metrics_->Declare(MethodNames(), PolicyNames());
}

PlannerService::~PlannerService() { Shutdown(); }

Clock::time_point PlannerService::TimeLimit() const {
  if (options_.max_request_s <= 0) return Clock::time_point::max();
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(
             std::chrono::duration<double>(options_.max_request_s));
}

void PlannerService::Shutdown() {
  // Lookups may still queue planning: they drain first.
  if (shared_lookups_ != nullptr) shared_lookups_->Shutdown();
  pool_.Shutdown();
}

bool PlannerService::SampleCacheHitLog() {
  const int every = options_.log_cache_hits_every;
  if (every <= 0) return false;
  return cache_hits_logged_.fetch_add(1, std::memory_order_relaxed) % every ==
         0;
}

grpc::Status PlannerService::Authorize(grpc::CallbackServerContext* ctx) const {
  if (options_.auth_token.empty()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    // The scheme is case-insensitive (RFC 7235), the token is not.
    constexpr absl::string_view kScheme = "bearer ";
    if (absl::StartsWithIgnoreCase(value, kScheme) &&
        SameSecret(value.substr(kScheme.size()), options_.auth_token)) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong bearer token (authorization metadata)");
}

grpc::Status PlannerService::CheckAlive(
    const char* method, grpc::CallbackServerContext* ctx) const {
  if (ctx->deadline() > std::chrono::system_clock::now() &&
      !ctx->IsCancelled()) {
    return grpc::Status::OK;
  }
  metrics_->Rejected(method, RejectReason::kDeadline);
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      "the call's deadline passed before any work");
}

int64_t PlannerService::HeldBytes(const grpc::ByteBuffer& raw) {
  // A built-in workload is built on the worker, from a small request.
  constexpr int64_t kMinimumBytes = 1 << 20;
  return std::max<int64_t>(
      kMinimumBytes, ParsedRequestBytes(static_cast<int64_t>(raw.Length())));
}

grpc::Status PlannerService::ReserveHeld(const char* method, int64_t bytes) {
  if (held_.TryReserve(bytes)) return grpc::Status::OK;
  metrics_->Rejected(method, RejectReason::kMemory);
  const int64_t capacity = held_.capacity_bytes();
  if (bytes > capacity) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("this request would hold an estimated ",
                     FormatBytes(bytes),
                     " while it is planned; the server "
                     "holds at most ",
                     FormatBytes(capacity), " of requests (--max_queued_mb)"));
  }
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("the server holds an estimated ",
                   FormatBytes(held_.reserved()), " of requests, and this one ",
                   FormatBytes(bytes), " more would pass ",
                   FormatBytes(capacity), " (--max_queued_mb); retry later"));
}

absl::Status PlannerService::Submit(const char* method,
                                    std::function<void()> task) {
  const Clock::time_point queued = Clock::now();
  const bool accepted =
      pool_.TrySubmit([this, method, queued, task = std::move(task)] {
        metrics_->QueueWait(method, SecondsSince(queued));
        task();
      });
  metrics_->SetQueueDepth(pool_.queue_depth());
  if (accepted) return absl::OkStatus();
  metrics_->Rejected(method, RejectReason::kQueueFull);
  return absl::ResourceExhaustedError(
      absl::StrCat("the work queue is full (", options_.max_queue,
                   " waiting, --max_queue); retry later"));
}

void PlannerService::AfterLargeCall(int64_t held_bytes) {
  if (options_.trim_after_bytes > 0 &&
      held_bytes >= options_.trim_after_bytes) {
    trimmer_.Request();
  }
}

grpc::Status PlannerService::AdmitCall(const char* method,
                                       grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer& raw,
                                       int64_t* held) {
  if (grpc::Status auth = Authorize(ctx); !auth.ok()) return auth;
  if (grpc::Status alive = CheckAlive(method, ctx); !alive.ok()) return alive;
  const int64_t bytes = HeldBytes(raw);
  if (grpc::Status refused = ReserveHeld(method, bytes); !refused.ok()) {
    return refused;
  }
  *held = bytes;
  return grpc::Status::OK;
}

PlannerService::UnaryCall* PlannerService::Admit(
    const char* method, grpc::CallbackServerContext* ctx,
    const grpc::ByteBuffer& raw, const std::function<absl::Status()>& parse) {
  auto* call = new UnaryCall(this, method, ctx);
  int64_t held = 0;
  if (grpc::Status admitted = AdmitCall(method, ctx, raw, &held);
      !admitted.ok()) {
    call->Reply(std::move(admitted), "");
    return call;
  }
  call->Hold(held);
  if (absl::Status parsed = parse(); !parsed.ok()) {
    call->Reply(ToGrpcStatus(parsed, ctx), "unparsable request");
  }
  return call;
}

template <typename Request, typename Respond>
grpc::ServerUnaryReactor* PlannerService::Answer(
    const char* method, grpc::CallbackServerContext* ctx,
    const grpc::ByteBuffer* raw, grpc::ByteBuffer* resp, Respond respond,
    bool on_grpc_thread) {
  std::shared_ptr<Request> req = NewArenaMessage<Request>();
  UnaryCall* call = Admit(method, ctx, *raw,
                          [raw, req] { return ParseRequest(*raw, req.get()); });
  if (call->replied()) return call;
  if (on_grpc_thread) {
    auto out = respond(*req, StopFn{});
    if (out.ok()) SetResponse(*out, resp);
    call->Reply(ToGrpcStatus(out.status(), ctx), "");
    return call;
  }
  const Clock::time_point limit = TimeLimit();
  absl::Status queued =
      Submit(method, [this, method, call, ctx, req, resp, limit, respond] {
        // A call that waited past its deadline or was cancelled in the
        // queue costs no planning.
        const StopFn stop = [ctx, limit] {
          return ctx->IsCancelled() || Clock::now() >= limit;
        };
        if (stop()) {
          metrics_->Rejected(method, RejectReason::kDeadline);
          call->Reply(ToGrpcStatus(absl::CancelledError("cancelled while "
                                                        "queued"),
                                   ctx, limit),
                      "");
          return;
        }
        auto out = respond(*req, stop);
        if (out.ok()) SetResponse(*out, resp);
        call->Reply(ToGrpcStatus(out.status(), ctx, limit), "");
      });
  if (!queued.ok()) call->Reply(ToGrpcStatus(queued, ctx), "");
  return call;
}

grpc::ServerUnaryReactor* PlannerService::Plan(grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* raw,
                                               grpc::ByteBuffer* resp) {
  std::shared_ptr<v1::PlanRequest> req = NewArenaMessage<v1::PlanRequest>();
  UnaryCall* call = Admit("Plan", ctx, *raw,
                          [raw, req] { return ParseRequest(*raw, req.get()); });
  if (call->replied()) return call;
  const Clock::time_point limit = TimeLimit();
  plans_.Answer(
      std::move(req), [ctx] { return ctx->IsCancelled(); }, limit,
      [this](std::function<void()> task) {
        return Submit("Plan", std::move(task));
      },
      [this](std::function<void()> task) {
        if (shared_lookups_ != nullptr &&
            shared_lookups_->TrySubmit(std::move(task))) {
          return absl::OkStatus();
        }
        return absl::ResourceExhaustedError("shared lookups queue full");
      },
      [call, ctx, resp, limit](const absl::Status& s, const std::string& bytes,
                               const char* cache) {
        if (s.ok()) SetResponse(bytes, resp);
        call->Reply(ToGrpcStatus(s, ctx, limit), cache);
      });
  return call;
}

absl::StatusOr<v1::FitResponse> PlannerService::SharedFit(v1::FitRequest& req,
                                                          const StopFn& stop) {
  if (shared_ == nullptr) return core_.FitStep(req, stop);
  const std::string key = FitRequestKey(req);
  // The namespace holds the planner version; a payload must parse.
  const SharedTier::Accept accept = [](absl::string_view payload) {
    v1::FitResponse r;
    return r.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
  };
  SharedTier::Lease lease;
  bool stopped = false;
  if (std::optional<std::string> answer =
          shared_->FindOrLead("fit", key, accept, stop, &lease, &stopped)) {
    v1::FitResponse out;
    out.ParseFromString(*answer);
    return out;
  }
  if (stopped) {
    return absl::CancelledError(
        "cancelled while another replica planned the same");
  }
  const StopFn planning_stop = [&stop, &lease] {
    lease.KeepAlive();
    return stop();
  };
  absl::StatusOr<v1::FitResponse> out = core_.FitStep(req, planning_stop);
  if (!out.ok()) {
    shared_->Release(&lease);
    return out;
  }
  // Served from the tier, an answer took no server time.
  v1::FitResponse stored = *out;
  stored.set_server_seconds(0);
  shared_->Publish("fit", key, stored.SerializeAsString(), &lease);
  return out;
}

grpc::ServerUnaryReactor* PlannerService::Simulate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::SimulateRequest>(
      "Simulate", ctx, raw, resp,
      [this](const v1::SimulateRequest& req, const StopFn& stop) {
        return core_.SimulateStep(req, stop);
      });
}

grpc::ServerUnaryReactor* PlannerService::Fit(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* raw,
                                              grpc::ByteBuffer* resp) {
  return Answer<v1::FitRequest>(
      "Fit", ctx, raw, resp, [this](v1::FitRequest& req, const StopFn& stop) {
        return SharedFit(req, stop);
      });
}

grpc::ServerUnaryReactor* PlannerService::ListHardwareProfiles(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::ListHardwareProfilesRequest>(
      "ListHardwareProfiles", ctx, raw, resp,
      [this](const v1::ListHardwareProfilesRequest&, const StopFn&) {
        return absl::StatusOr<v1::ListHardwareProfilesResponse>(
            core_.ListHardwareProfiles());
      });
}

grpc::ServerUnaryReactor* PlannerService::ListNodes(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::ListNodesRequest>(
      "ListNodes", ctx, raw, resp,
      [this](const v1::ListNodesRequest&, const StopFn&) {
        return absl::StatusOr<v1::ListNodesResponse>(core_.ListNodes());
      });
}

grpc::ServerUnaryReactor* PlannerService::ListWorkloads(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::ListWorkloadsRequest>(
      "ListWorkloads", ctx, raw, resp,
      [this](const v1::ListWorkloadsRequest&, const StopFn&) {
        return core_.ListWorkloads();
      });
}

grpc::ServerUnaryReactor* PlannerService::GetWorkload(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::GetWorkloadRequest>(
      "GetWorkload", ctx, raw, resp,
      [this](const v1::GetWorkloadRequest& req, const StopFn&) {
        return core_.GetWorkload(req);
      });
}

grpc::ServerUnaryReactor* PlannerService::ServerInfo(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  // Fixed at start-up: answered on the gRPC thread.
  return Answer<v1::ServerInfoRequest>(
      "ServerInfo", ctx, raw, resp,
      [this](const v1::ServerInfoRequest&, const StopFn&) {
        return absl::StatusOr<v1::ServerInfoResponse>(info_);
      },
      /*on_grpc_thread=*/true);
}

grpc::ServerUnaryReactor* PlannerService::PutGraph(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* resp) {
  return Answer<v1::PutGraphRequest>(
      "PutGraph", ctx, raw, resp,
      [this](v1::PutGraphRequest& req,
             const StopFn& stop) -> absl::StatusOr<v1::PutGraphResponse> {
        v1::OperatorGraph& pb = *req.mutable_graph();
        int64_t canonical_bytes = 0;
        v1::PutGraphResponse out;
        out.set_graph_sha256(GraphDigest(pb, &canonical_bytes));
        out.set_graph_bytes(canonical_bytes);
        out.set_ttl_seconds(options_.graph_ttl_s);
        const int64_t charge = kStoredBytesPerWireByte * canonical_bytes;
        if (charge > graphs_.capacity_bytes()) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "graph: it would take an estimated ", FormatBytes(charge),
              " in the graph store, which holds ",
              FormatBytes(graphs_.capacity_bytes()),
              " (--graph_store_mb); send it inline instead"));
        }
        absl::StatusOr<Graph> graph = core_.PrepareGraph(pb, stop);
        if (!graph.ok()) return graph.status();
        graphs_.Put(out.graph_sha256(),
                    std::make_shared<const Graph>(*std::move(graph)), charge);
        if (shared_ != nullptr) {
          shared_->PublishGraph(out.graph_sha256(), pb, canonical_bytes);
        }
        return out;
      });
}

// Streams sweep points as they are computed, one unit of the sweep per task
// on the pool: after each unit the next one queues at the back (other calls
// take their turn), and when kMaxUnsentSweepMessages messages wait to be
// written (the client is not reading), the sweep pauses until writes drain.
// One write is in flight at a time; the call finishes once the sweep is done
// and every queued message is written.
class PlannerService::SweepReactor
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  SweepReactor(PlannerService* service, grpc::CallbackServerContext* ctx,
               const grpc::ByteBuffer* raw)
      : service_(service),
        ctx_(ctx),
        start_(Clock::now()),
        limit_(service->TimeLimit()),
        stop_([this] {
          // A long sweep keeps its mark on the shared key alive.
          lease_.KeepAlive();
          return ctx_->IsCancelled() || Clock::now() >= limit_;
        }) {
    service_->metrics_->RequestStarted();
    if (grpc::Status admitted = service_->AdmitCall("Sweep", ctx, *raw, &held_);
        !admitted.ok()) {
      Done(std::move(admitted));
      return;
    }
    if (absl::Status parsed = ParseRequest(*raw, &req_); !parsed.ok()) {
      Done(ToGrpcStatus(parsed, ctx));
      return;
    }
    absl::Status queued = service_->Submit("Sweep", [this] { Start(); });
    if (!queued.ok()) Done(ToGrpcStatus(queued, ctx));
  }

  void OnWriteDone(bool ok) override {
    bool resume = false;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) client_gone_ = true;
      if (paused_ && pending_.size() < kMaxUnsentSweepMessages) {
        paused_ = false;
        resume = true;
      }
    }
    if (resume) Continue();
    Pump();
  }

  // A paused sweep has nothing queued: the cancellation resumes it, and it
  // then stops.
  void OnCancel() override {
    bool resume = false;
    {
      MutexLock lock(&mu_);
      client_gone_ = true;
      resume = paused_;
      paused_ = false;
    }
    if (resume) Continue();
  }

  void OnDone() override {
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      status = status_;
    }
    const double seconds = SecondsSince(start_);
    const std::string code = CodeName(status.error_code());
    service_->log_->Request(
        "Sweep", code, seconds * 1e3, ctx_->peer(),
        status.ok() ? std::string() : std::string(status.error_message()));
    service_->metrics_->RequestFinished("Sweep", code, seconds);
    service_->metrics_->SetQueueDepth(service_->pool_.queue_depth());
    service_->AfterLargeCall(held_);
    delete this;
  }

 private:
  // On a worker: validates and admits the sweep, then runs its first unit.
  void Start() {
    if (stop_()) {
      service_->metrics_->Rejected("Sweep", RejectReason::kDeadline);
      Done(ToGrpcStatus(absl::CancelledError("cancelled while queued"), ctx_,
                        limit_));
      return;
    }
    if (service_->shared_ != nullptr) {
      bool stopped = false;
      if (std::optional<std::string> answer = FindShared(&stopped)) {
        Replay(*answer);
        return;
      }
      if (stopped) {
        Done(ToGrpcStatus(absl::CancelledError(
                              "cancelled while another replica swept the same"),
                          ctx_, limit_));
        return;
      }
      recording_ = true;
    }
    absl::StatusOr<std::unique_ptr<SweepRun>> run =
        service_->core_.StartSweep(req_, stop_);
    if (!run.ok()) {
      Done(ToGrpcStatus(run.status(), ctx_, limit_));
      return;
    }
    run_ = *std::move(run);
    RunUnit();
  }

  // On a worker: one unit of the sweep, then the next queued, or a pause.
  void RunUnit() {
    if (stop_()) {
      Done(ToGrpcStatus(absl::CancelledError("stopped"), ctx_, limit_));
      return;
    }
    absl::Status s = run_->Next([this](const v1::SweepResponse& msg) {
      grpc::ByteBuffer bytes;
      SetResponse(msg, &bytes);
      if (recording_) Record(msg);
      {
        MutexLock lock(&mu_);
        if (client_gone_) return false;
        pending_.push_back(std::move(bytes));
      }
      Pump();
      return true;
    });
    if (!s.ok() || run_->Done()) {
      if (s.ok() && recording_) {
        service_->shared_->Publish("sweep", shared_key_, recorded_, &lease_);
      }
      Done(ToGrpcStatus(s, ctx_, limit_));
      return;
    }
    {
      MutexLock lock(&mu_);
      if (pending_.size() >= kMaxUnsentSweepMessages) {
        paused_ = true;  // OnWriteDone or OnCancel resumes
        return;
      }
    }
    Continue();
  }

  // Another replica's answer to this sweep (or its sweeping in flight),
  // from the shared tier; nullopt when this replica sweeps it.
  std::optional<std::string> FindShared(bool* stopped) {
    shared_key_ = SweepRequestKey(req_);
    const std::string& version = service_->info_.planner_version();
    const SharedTier::Accept accept = [&version](absl::string_view payload) {
      std::vector<absl::string_view> parts;
      if (!UnpackMessages(payload, &parts) || parts.empty()) return false;
      for (absl::string_view part : parts) {
        v1::SweepResponse msg;
        if (!msg.ParseFromArray(part.data(), static_cast<int>(part.size())) ||
            msg.planner_version() != version) {
          return false;
        }
      }
      return true;
    };
    return service_->shared_->FindOrLead("sweep", shared_key_, accept, stop_,
                                         &lease_, stopped);
  }

  // Streams a shared answer's messages (checked by FindShared), then ends.
  void Replay(const std::string& packed) {
    std::vector<absl::string_view> parts;
    UnpackMessages(packed, &parts);
    {
      MutexLock lock(&mu_);
      for (absl::string_view part : parts) {
        grpc::Slice slice(part.data(), part.size());
        pending_.emplace_back(&slice, 1);
      }
    }
    Done(grpc::Status::OK);
  }

  // Keeps `msg` for the shared tier while the whole stream fits in one
  // entry; past that, the sweep is not shared.
  void Record(const v1::SweepResponse& msg) {
    const std::string bytes = msg.SerializeAsString();
    if (static_cast<int64_t>(recorded_.size() + bytes.size() + 4) >
        service_->options_.shared_store->options().max_entry_bytes) {
      recording_ = false;
      recorded_.clear();
      recorded_.shrink_to_fit();
      return;
    }
    AppendPacked(bytes, &recorded_);
  }

  // Queues the next unit at the back of the pool.
  void Continue() {
    if (!service_->pool_.Continue([this] { RunUnit(); })) {
      Done(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is shutting down"));
    }
  }

  // Records the outcome and lets Pump finish once the queue is written.
  // Touches nothing of this after Pump: once done_ is set, another thread's
  // Pump may finish the call, and OnDone deletes this.
  void Done(grpc::Status status) {
    if (lease_.held()) service_->shared_->Release(&lease_);
    recorded_.clear();
    recorded_.shrink_to_fit();
    service_->held_.Release(held_);
    run_.reset();  // the sweep's memory goes now, not when the call ends
    Pump(std::move(status));
  }

  // Starts the next write, or finishes. `outcome`, if set, is the call's
  // status: it marks the work done in the same critical section that decides
  // what to do next, so the caller never needs the lock (or this) again.
  // Never holds mu_ across a gRPC call: Finish may run OnDone, which deletes
  // this, on another thread.
  void Pump(std::optional<grpc::Status> outcome = std::nullopt) {
    const grpc::ByteBuffer* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      if (outcome.has_value()) {
        done_ = true;
        status_ = *std::move(outcome);
      }
      if (writing_ || finished_) return;
      if (!pending_.empty() && !client_gone_) {
        current_ = std::move(pending_.front());
        pending_.pop_front();
        writing_ = true;
        next = &current_;
      } else if (done_) {
        finished_ = true;
        finish = true;
        status = status_;
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      Finish(std::move(status));
    }
  }

  // Immutable after construction.
  PlannerService* const service_;
  grpc::CallbackServerContext* const ctx_;
  const Clock::time_point start_;
  const Clock::time_point limit_;
  const StopFn stop_;
  // Set in the constructor, then used by one task at a time.
  v1::SweepRequest req_;
  int64_t held_ = 0;
  std::unique_ptr<SweepRun> run_;
  // The shared tier's part: the sweep's key, this replica's mark on it, and
  // the messages sent so far (packed) while they fit in one entry.
  std::string shared_key_;
  SharedTier::Lease lease_;
  bool recording_ = false;
  std::string recorded_;

  Mutex mu_;
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlannerService::Sweep(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw) {
  return new SweepReactor(this, ctx, raw);
}

}  // namespace slackswap
