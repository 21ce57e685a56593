// The slackswap.v1.Planner gRPC service on the callback API: handlers are
// thin. Each call is checked (auth), its request parsed, answered from the
// plan cache when it can be, or queued on the fixed worker pool, which runs
// the planning core; gRPC's threads never plan. A full queue answers
// RESOURCE_EXHAUSTED at once. Cancellation and deadlines reach the planner's
// and simulator's loops through the core's stop function.
//
// Every method is registered raw (bytes in, bytes out): the service parses
// each request itself, so bytes that are not the method's request message
// get INVALID_ARGUMENT saying so, counted and logged like any other call
// (gRPC's own parser would answer a bare UNIMPLEMENTED, before any handler
// runs), and cached answers go out as the stored bytes.
//
//   ServiceMetrics metrics("0.1.0", "abc1234");
//   PlannerService service(ServiceOptions{}, &metrics);
//   builder.RegisterService(&service);
//   ...
//   server->Shutdown(deadline);   // in-flight calls finish first
//   service.Shutdown();           // then the pool drains
#ifndef SLACKSWAP_SERVER_PLANNER_SERVICE_H_
#define SLACKSWAP_SERVER_PLANNER_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/planning_core.h"
#include "grpcpp/grpcpp.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/request_log.h"
#include "server/work_queue.h"
#include "slackswap/v1/planner_service.grpc.pb.h"

namespace slackswap {

struct ServiceOptions {
  int threads = 2;
  int max_queue = 64;
  int64_t cache_bytes = 64 << 20;
  // When set, every call must carry `authorization: Bearer <token>`.
  std::string auth_token;
  // Longest a call may plan, whatever its deadline; 0: no limit.
  double max_request_s = 120;
  // The largest request or response gRPC accepts (reported by ServerInfo).
  int64_t max_message_bytes = 16 << 20;
  // The estimated memory of the requests held at once (waiting or being
  // planned): a call that would go beyond is refused with
  // RESOURCE_EXHAUSTED. 0: no limit.
  int64_t max_queued_bytes = 0;
  CoreLimits limits;
};

// The Planner service with every method taking and giving raw bytes.
using RawPlannerService = v1::Planner::WithRawCallbackMethod_Plan<
    v1::Planner::WithRawCallbackMethod_Sweep<
        v1::Planner::WithRawCallbackMethod_Simulate<
            v1::Planner::WithRawCallbackMethod_ListHardwareProfiles<
                v1::Planner::WithRawCallbackMethod_ListWorkloads<
                    v1::Planner::WithRawCallbackMethod_GetWorkload<
                        v1::Planner::WithRawCallbackMethod_ServerInfo<
                            v1::Planner::WithRawCallbackMethod_Fit<
                                v1::Planner::Service>>>>>>>>;

class PlannerService final : public RawPlannerService {
 public:
  // REQUIRES: metrics and log outlive the service.
  PlannerService(const ServiceOptions& options, ServiceMetrics* metrics,
                 RequestLog* log);
  ~PlannerService() override;

  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Sweep(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) override;
  grpc::ServerUnaryReactor* Simulate(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListHardwareProfiles(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListWorkloads(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetWorkload(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  // Plans once per profile: admitted by cost (core/admission.h) like Plan,
  // on the worker pool; not cached.
  grpc::ServerUnaryReactor* Fit(grpc::CallbackServerContext* ctx,
                                const grpc::ByteBuffer* req,
                                grpc::ByteBuffer* resp) override;

  // Drains the worker pool. REQUIRES: the gRPC server is shut down.
  void Shutdown();

 private:
  class SweepReactor;
  friend class SweepReactor;

  // A finished call: metrics and one log line.
  void Record(const char* method, grpc::CallbackServerContext* ctx,
              const grpc::Status& status, double seconds,
              const std::string& detail);
  // When the server's own time limit for a call that starts now ends.
  std::chrono::steady_clock::time_point TimeLimit() const;
  // UNAUTHENTICATED unless the call carries the token (when one is set).
  grpc::Status Authorize(grpc::CallbackServerContext* ctx) const;
  // Updates the queue depth after a TrySubmit; when it was refused (the
  // queue is full), counts the rejection and returns RESOURCE_EXHAUSTED.
  grpc::Status AfterSubmit(const char* method, bool queued);
  // The estimated memory a call holds while it waits and plans: its parsed
  // request, from the raw size.
  static int64_t HeldBytes(const grpc::ByteBuffer& raw);
  // Reserves `bytes` of the held-memory budget, or counts the rejection and
  // returns RESOURCE_EXHAUSTED saying whether the request is too large for
  // this server or the server is busy.
  grpc::Status ReserveHeld(const char* method, int64_t bytes);
  // Checks auth, reserves the call's held memory, then parses the request
  // with `parse` (INVALID_ARGUMENT finishes the call); then runs `work` on
  // the pool and finishes the call with its status. If `answer_now` (run on
  // the gRPC thread after parsing) returns true, the call is answered OK at
  // once instead.
  grpc::ServerUnaryReactor* RunUnary(
      const char* method, grpc::CallbackServerContext* ctx,
      const grpc::ByteBuffer& raw, const std::function<absl::Status()>& parse,
      std::function<absl::Status(const StopFn&, std::string* detail)> work,
      std::function<bool(std::string* detail)> answer_now = nullptr);

  // RunUnary for a method whose answer `respond(request, stop)` (an
  // absl::StatusOr of the response message) computes on a worker.
  template <typename Request, typename Respond>
  grpc::ServerUnaryReactor* Answer(const char* method,
                                   grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* raw,
                                   grpc::ByteBuffer* resp, Respond respond);

  // Immutable after construction.
  const ServiceOptions options_;
  ServiceMetrics* const metrics_;
  RequestLog* const log_;
  const std::unique_ptr<CoreObserver> observer_;
  const PlanningCore core_;
  const v1::ServerInfoResponse info_;
  // Thread-safe by themselves.
  MemoryBudget held_;
  PlanCache cache_;
  WorkQueue pool_;
};

// absl and gRPC share status codes; DEADLINE_EXCEEDED replaces CANCELLED
// when the call's deadline, or the server's time limit (`limit`, if past),
// has passed.
grpc::Status ToGrpcStatus(const absl::Status& s,
                          const grpc::CallbackServerContext* ctx,
                          std::chrono::steady_clock::time_point limit =
                              std::chrono::steady_clock::time_point::max());

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_PLANNER_SERVICE_H_
