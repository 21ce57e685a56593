#include "server/planner_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/format.h"
#include "common/mutex.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "io/proto_file.h"

namespace slackswap {
namespace {

using Clock = std::chrono::steady_clock;

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

// Requests up to this size are looked up in the cache on the gRPC thread.
constexpr size_t kLookUpOnGrpcThreadBytes = 16 << 10;

// Equal requests give equal keys (map entries in key order).
std::string CacheKey(const v1::PlanRequest& req) {
  std::string key;
  SerializeDeterministic(req, &key);
  return key;
}

v1::ServerInfoResponse ServerInfoFor(const PlanningCore& core,
                                     const ServiceOptions& options) {
  v1::ServerInfoResponse info = core.Info();
  info.mutable_limits()->set_max_message_bytes(options.max_message_bytes);
  info.mutable_limits()->set_max_request_seconds(options.max_request_s);
  return info;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s,
                          const grpc::CallbackServerContext* ctx,
                          Clock::time_point limit) {
  if (s.ok()) return grpc::Status::OK;
  if (s.code() == absl::StatusCode::kCancelled && ctx != nullptr &&
      ctx->deadline() <= std::chrono::system_clock::now()) {
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

PlannerService::PlannerService(const ServiceOptions& options,
                               ServiceMetrics* metrics, RequestLog* log)
    : options_(options),
      metrics_(metrics),
      log_(log),
      observer_(std::make_unique<MetricsObserver>(metrics)),
      core_(options.limits, observer_.get()),
      info_(ServerInfoFor(core_, options)),
      held_(options.max_queued_bytes),
      cache_(options.cache_bytes),
      pool_(options.threads, options.max_queue) {}

PlannerService::~PlannerService() { Shutdown(); }

Clock::time_point PlannerService::TimeLimit() const {
  if (options_.max_request_s <= 0) return Clock::time_point::max();
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(
             std::chrono::duration<double>(options_.max_request_s));
}

void PlannerService::Shutdown() { pool_.Shutdown(); }

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

void PlannerService::Record(const char* method,
                            grpc::CallbackServerContext* ctx,
                            const grpc::Status& status, double seconds,
                            const std::string& detail) {
  const std::string code = CodeName(status.error_code());
  metrics_->RequestFinished(method, code, seconds);
  metrics_->SetQueueDepth(pool_.queue_depth());
  std::string full = detail;
  if (!status.ok()) {
    absl::StrAppend(&full, full.empty() ? "" : " ", status.error_message());
  }
  log_->Request(method, code, seconds * 1e3, ctx->peer(), full);
}

grpc::Status PlannerService::AfterSubmit(const char* method, bool queued) {
  metrics_->SetQueueDepth(pool_.queue_depth());
  if (queued) return grpc::Status::OK;
  metrics_->Rejected(method);
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("the work queue is full (", options_.max_queue,
                   " waiting, --max_queue); retry later"));
}

int64_t PlannerService::HeldBytes(const grpc::ByteBuffer& raw) {
  // A parsed graph takes about 12 times its wire size (measured on graphs
  // of 10^3 to 10^6 ops); a built-in workload is built on the worker.
  constexpr int64_t kParsedBytesPerWireByte = 12;
  constexpr int64_t kMinimumBytes = 1 << 20;
  return std::max<int64_t>(
      kMinimumBytes,
      kParsedBytesPerWireByte * static_cast<int64_t>(raw.Length()));
}

grpc::Status PlannerService::ReserveHeld(const char* method, int64_t bytes) {
  if (held_.TryReserve(bytes)) return grpc::Status::OK;
  metrics_->Rejected(method);
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

grpc::ServerUnaryReactor* PlannerService::RunUnary(
    const char* method, grpc::CallbackServerContext* ctx,
    const grpc::ByteBuffer& raw, const std::function<absl::Status()>& parse,
    std::function<absl::Status(const StopFn&, std::string* detail)> work,
    std::function<bool(std::string* detail)> answer_now) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const Clock::time_point start = Clock::now();
  metrics_->RequestStarted();
  // Held while the call waits and plans; given back as it finishes.
  auto held = std::make_shared<int64_t>(0);
  auto finish = [this, method, ctx, reactor, start, held](
                    grpc::Status status, const std::string& detail) {
    held_.Release(*held);
    Record(method, ctx, status, SecondsSince(start), detail);
    reactor->Finish(std::move(status));
  };
  if (grpc::Status auth = Authorize(ctx); !auth.ok()) {
    finish(std::move(auth), "");
    return reactor;
  }
  const int64_t bytes = HeldBytes(raw);
  if (grpc::Status refused = ReserveHeld(method, bytes); !refused.ok()) {
    finish(std::move(refused), "");
    return reactor;
  }
  *held = bytes;
  if (absl::Status parsed = parse(); !parsed.ok()) {
    finish(ToGrpcStatus(parsed, ctx), "unparsable request");
    return reactor;
  }
  // What the quick answer learned (a cache miss) goes on the log line too.
  std::string early_detail;
  if (answer_now && answer_now(&early_detail)) {
    finish(grpc::Status::OK, early_detail);
    return reactor;
  }
  const Clock::time_point limit = TimeLimit();
  const bool queued =
      pool_.TrySubmit([ctx, limit, work = std::move(work), finish,
                       detail = std::move(early_detail)]() mutable {
        // A call that waited past its deadline or was cancelled in the queue
        // costs no planning.
        const StopFn stop = [ctx, limit] {
          return ctx->IsCancelled() || Clock::now() >= limit;
        };
        absl::Status s = stop() ? absl::CancelledError("cancelled while queued")
                                : work(stop, &detail);
        finish(ToGrpcStatus(s, ctx, limit), detail);
      });
  if (grpc::Status rejected = AfterSubmit(method, queued); !rejected.ok()) {
    finish(std::move(rejected), "");
  }
  return reactor;
}

grpc::ServerUnaryReactor* PlannerService::Plan(grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* raw,
                                               grpc::ByteBuffer* resp) {
  auto req = std::make_shared<v1::PlanRequest>();
  // Schedulers ask the same question again and again: the deterministic
  // serialization of the request is the key, and the cache holds the answer
  // as a hit is served (cache_hit set, no server time), in bytes. Small
  // requests (built-in workloads) are looked up on the gRPC thread, so a hit
  // does not wait behind planning calls in the queue; large inline graphs
  // are keyed on the worker. The key is made once, by whichever looks up.
  auto key = std::make_shared<std::string>();
  auto answer_from_cache = [this, req, resp, key](std::string* detail) {
    *key = CacheKey(*req);
    std::optional<std::string> hit = cache_.Lookup(*key);
    if (!hit.has_value()) {
      metrics_->CacheMiss();
      *detail = "cache=miss";
      return false;
    }
    metrics_->CacheHit();
    *detail = "cache=hit";
    SetResponse(*hit, resp);
    return true;
  };
  const bool cached = cache_.capacity_bytes() > 0;
  const bool small = raw->Length() <= kLookUpOnGrpcThreadBytes;
  return RunUnary(
      "Plan", ctx, *raw, [raw, req] { return ParseRequest(*raw, req.get()); },
      [this, req, resp, cached, small, key, answer_from_cache](
          const StopFn& stop, std::string* detail) {
        if (cached && !small && answer_from_cache(detail)) {
          return absl::OkStatus();
        }
        absl::StatusOr<v1::PlanResponse> out = core_.PlanStep(*req, stop);
        if (!out.ok()) return out.status();
        SetResponse(*out, resp);
        if (cached) {
          out->set_cache_hit(true);
          out->set_server_seconds(0);
          cache_.Insert(std::move(*key), out->SerializeAsString());
        }
        return absl::OkStatus();
      },
      cached && small ? std::function<bool(std::string*)>(answer_from_cache)
                      : nullptr);
}

template <typename Request, typename Respond>
grpc::ServerUnaryReactor* PlannerService::Answer(
    const char* method, grpc::CallbackServerContext* ctx,
    const grpc::ByteBuffer* raw, grpc::ByteBuffer* resp, Respond respond) {
  auto req = std::make_shared<Request>();
  return RunUnary(
      method, ctx, *raw, [raw, req] { return ParseRequest(*raw, req.get()); },
      [req, resp, respond](const StopFn& stop, std::string*) -> absl::Status {
        auto out = respond(*req, stop);
        if (!out.ok()) return out.status();
        SetResponse(*out, resp);
        return absl::OkStatus();
      });
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
      "Fit", ctx, raw, resp,
      [this](const v1::FitRequest& req, const StopFn& stop) {
        return core_.FitStep(req, stop);
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
  auto req = std::make_shared<v1::ServerInfoRequest>();
  // Fixed at start-up: answered on the gRPC thread.
  return RunUnary(
      "ServerInfo", ctx, *raw,
      [raw, req] { return ParseRequest(*raw, req.get()); },
      [this, resp](const StopFn&, std::string*) {
        SetResponse(info_, resp);
        return absl::OkStatus();
      },
      [this, resp](std::string*) {
        SetResponse(info_, resp);
        return true;
      });
}

// Streams sweep points as the worker computes them. The worker queues
// messages; one write is in flight at a time; the call finishes once the
// worker is done and every queued message is written.
class PlannerService::SweepReactor
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  SweepReactor(PlannerService* service, grpc::CallbackServerContext* ctx,
               const grpc::ByteBuffer* raw)
      : service_(service),
        ctx_(ctx),
        start_(Clock::now()),
        limit_(service->TimeLimit()) {
    service_->metrics_->RequestStarted();
    if (grpc::Status auth = service_->Authorize(ctx); !auth.ok()) {
      Done(std::move(auth));
      return;
    }
    const int64_t bytes = HeldBytes(*raw);
    if (grpc::Status refused = service_->ReserveHeld("Sweep", bytes);
        !refused.ok()) {
      Done(std::move(refused));
      return;
    }
    held_ = bytes;
    if (absl::Status parsed = ParseRequest(*raw, &req_); !parsed.ok()) {
      Done(ToGrpcStatus(parsed, ctx));
      return;
    }
    const bool queued = service_->pool_.TrySubmit([this] { Work(); });
    if (grpc::Status rejected = service_->AfterSubmit("Sweep", queued);
        !rejected.ok()) {
      Done(std::move(rejected));
    }
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) client_gone_ = true;
    }
    Pump();
  }

  void OnDone() override { delete this; }

 private:
  void Work() {
    const StopFn stop = [this] {
      return ctx_->IsCancelled() || Clock::now() >= limit_;
    };
    absl::Status s = service_->core_.SweepBudgets(
        req_, stop, [this](const v1::SweepResponse& msg) {
          grpc::ByteBuffer bytes;
          SetResponse(msg, &bytes);
          {
            MutexLock lock(&mu_);
            if (client_gone_) return false;
            pending_.push_back(std::move(bytes));
          }
          Pump();
          return true;
        });
    Done(ToGrpcStatus(s, ctx_, limit_));
  }

  // Records the outcome and lets Pump finish once the queue is written.
  // Touches nothing of this after Pump: once done_ is set, another thread's
  // Pump may finish the call, and OnDone deletes this.
  void Done(grpc::Status status) {
    service_->held_.Release(held_);
    service_->Record("Sweep", ctx_, status, SecondsSince(start_), "");
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
  // Set in the constructor, read by the worker.
  v1::SweepRequest req_;
  int64_t held_ = 0;

  Mutex mu_;
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlannerService::Sweep(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw) {
  return new SweepReactor(this, ctx, raw);
}

}  // namespace slackswap
