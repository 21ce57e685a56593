// The slackswap.v1.Planner gRPC service on the callback API: handlers are
// thin. Each call is checked (auth, a deadline already passed), its
// request parsed, answered from the plan cache when it can be, or queued on
// the fixed worker pool, which runs the planning core; gRPC's threads never
// plan. A full queue answers RESOURCE_EXHAUSTED at once. Cancellation and
// deadlines reach the planner's and simulator's loops through the core's
// stop function.
//
// Every method is registered raw (bytes in, bytes out): the service parses
// each request itself, so bytes that are not the method's request message
// get INVALID_ARGUMENT saying so, counted and logged like any other call
// (gRPC's own parser would answer a bare UNIMPLEMENTED, before any handler
// runs), and cached answers go out as the stored bytes.
//
// Plan calls are answered by a PlanAnswerer (server/plan_answerer.h): from
// the cache on the gRPC thread, or by one planning shared by identical
// requests in flight. Graphs stored with PutGraph are named by digest.
// With a shared store (ServiceOptions.shared_store) plans, fits and graphs
// are also looked up in, and written to, the fleet's Redis
// (server/shared_tier.h), so that replicas answer for each other.
// A sweep runs one unit at a time (core SweepRun), each unit a task at the
// back of the queue, and pauses while the client is not reading; with a
// shared tier, a sweep another replica ran is streamed from it, and one
// run here is shared once it completes (when its stream fits in an entry).
//
//   ServiceMetrics metrics("0.1.0", "abc1234");
//   PlannerService service(ServiceOptions{}, &metrics, &log);
//   builder.RegisterService(&service);
//   ...
//   server->Shutdown(deadline);   // in-flight calls finish first
//   service.Shutdown();           // then the pool drains
#ifndef SLACKSWAP_SERVER_PLANNER_SERVICE_H_
#define SLACKSWAP_SERVER_PLANNER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/planning_core.h"
#include "grpcpp/grpcpp.h"
#include "server/graph_store.h"
#include "server/memory_budget.h"
#include "server/memory_trimmer.h"
#include "server/metrics.h"
#include "server/plan_answerer.h"
#include "server/request_log.h"
#include "server/shared_graph_source.h"
#include "server/shared_store.h"
#include "server/shared_tier.h"
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
  // The graph store (PutGraph): bytes it may hold, and how long an unused
  // graph stays.
  int64_t graph_store_bytes = 64 << 20;
  double graph_ttl_s = 3600;
  // The built-in workloads' graphs kept built (expiring as stored graphs
  // do): bytes they may hold; 0: each request builds its own.
  int64_t workload_graph_bytes = 32 << 20;
  // Log one cache hit in this many (0: none); every other call is logged.
  int log_cache_hits_every = 100;
  // After a call that held at least this much, give freed memory back to
  // the system (malloc_trim); 0: never.
  int64_t trim_after_bytes = 64 << 20;
  CoreLimits limits;
  // The fleet's shared tier (--shared_store), or null: plans, fits and
  // stored graphs are looked up there after this replica's own cache and
  // store, and written there once computed. REQUIRES: outlives the service.
  SharedStore* shared_store = nullptr;
  // How long a shared plan or fit lives in Redis (graphs: graph_ttl_s),
  // and how long a replica's mark on a key it plans lives unless renewed.
  double shared_result_ttl_s = 86400;
  // Results written to and read from the shared store are sealed with a
  // MAC under this secret (--shared_store_secret_file); empty: by digests,
  // which anyone who can write to the Redis can forge.
  std::string shared_fleet_secret;
  double shared_mark_s = 10;
};

// The Planner service with every method taking and giving raw bytes.
using RawPlannerService = v1::Planner::WithRawCallbackMethod_Plan<
    v1::Planner::WithRawCallbackMethod_Sweep<
        v1::Planner::WithRawCallbackMethod_Simulate<
            v1::Planner::WithRawCallbackMethod_ListHardwareProfiles<
                v1::Planner::WithRawCallbackMethod_ListNodes<
                    v1::Planner::WithRawCallbackMethod_ListWorkloads<
                        v1::Planner::WithRawCallbackMethod_GetWorkload<
                            v1::Planner::WithRawCallbackMethod_ServerInfo<
                                v1::Planner::WithRawCallbackMethod_PutGraph<
                                    v1::Planner::WithRawCallbackMethod_Fit<
                                        v1::Planner::Service>>>>>>>>>>;

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
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
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
  // on the worker pool; not cached locally, shared through the shared tier
  // when there is one.
  grpc::ServerUnaryReactor* Fit(grpc::CallbackServerContext* ctx,
                                const grpc::ByteBuffer* req,
                                grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* PutGraph(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;

  // The methods, as metrics and logs name them.
  static const std::vector<std::string>& MethodNames();

  // Drains the worker pool. REQUIRES: the gRPC server is shut down.
  void Shutdown();

 private:
  class UnaryCall;
  class SweepReactor;
  friend class UnaryCall;
  friend class SweepReactor;

  // When the server's own time limit for a call that starts now ends.
  std::chrono::steady_clock::time_point TimeLimit() const;
  // UNAUTHENTICATED unless the call carries the token (when one is set).
  grpc::Status Authorize(grpc::CallbackServerContext* ctx) const;
  // DEADLINE_EXCEEDED, counted as a rejection, when the call's deadline has
  // passed or it was cancelled before any work.
  grpc::Status CheckAlive(const char* method,
                          grpc::CallbackServerContext* ctx) const;
  // The estimated memory a call holds while it waits and plans: its parsed
  // request, from the raw size.
  static int64_t HeldBytes(const grpc::ByteBuffer& raw);
  // Reserves `bytes` of the held-memory budget, or counts the rejection and
  // returns RESOURCE_EXHAUSTED saying whether the request is too large for
  // this server or the server is busy.
  grpc::Status ReserveHeld(const char* method, int64_t bytes);
  // Queues `task` on the pool, timing its wait; on a full queue counts the
  // rejection and returns RESOURCE_EXHAUSTED.
  absl::Status Submit(const char* method, std::function<void()> task);
  // After a call that held `held_bytes`: gives freed memory back to the
  // system shortly, when that was large (options_.trim_after_bytes).
  void AfterLargeCall(int64_t held_bytes);
  // A Fit's answer: another replica's from the shared tier, or planned
  // here (and then shared).
  absl::StatusOr<v1::FitResponse> SharedFit(v1::FitRequest& req,
                                            const StopFn& stop);
  // Whether this cache hit gets a log line (one in
  // options_.log_cache_hits_every).
  bool SampleCacheHitLog();

  // Every call's admission, unary or streaming: authorized, alive, and the
  // memory its request holds reserved (set in `held`); else the error to
  // finish it with (counted as a rejection where it is one).
  grpc::Status AdmitCall(const char* method, grpc::CallbackServerContext* ctx,
                         const grpc::ByteBuffer& raw, int64_t* held);
  // A unary call admitted (AdmitCall) with its request parsed by `parse`;
  // when either failed, the call has been replied to with the error
  // (call->replied()).
  UnaryCall* Admit(const char* method, grpc::CallbackServerContext* ctx,
                   const grpc::ByteBuffer& raw,
                   const std::function<absl::Status()>& parse);
  // Admit, then `respond(stop)` on a worker (or on the gRPC thread when
  // `on_grpc_thread`), its absl::StatusOr<Message> serialized into `resp`.
  template <typename Request, typename Respond>
  grpc::ServerUnaryReactor* Answer(const char* method,
                                   grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* raw,
                                   grpc::ByteBuffer* resp, Respond respond,
                                   bool on_grpc_thread = false);

  // Immutable after construction.
  const ServiceOptions options_;
  ServiceMetrics* const metrics_;
  RequestLog* const log_;
  const std::unique_ptr<CoreObserver> observer_;
  // Thread-safe by themselves.
  GraphStore graphs_;
  GraphStore workload_graphs_;
  // Null without a shared store.
  const std::unique_ptr<SharedTier> shared_;
  SharedGraphSource graph_source_;
  const PlanningCore core_;
  const v1::ServerInfoResponse info_;
  MemoryBudget held_;
  PlanAnswerer plans_;
  WorkQueue pool_;
  // The shared tier's Plan lookups (and waits for other replicas), off the
  // planning threads; null without a shared store.
  const std::unique_ptr<WorkQueue> shared_lookups_;
  MemoryTrimmer trimmer_;
  // Cache hits answered, for sampling their log lines.
  std::atomic<int64_t> cache_hits_logged_{0};
};

// absl and gRPC share status codes; DEADLINE_EXCEEDED replaces CANCELLED
// when the call's deadline has passed or is less than half a second away (a
// client's deadline timer cancels the call just before the server's copy of
// the deadline passes), or when the server's time limit (`limit`) has
// passed.
grpc::Status ToGrpcStatus(const absl::Status& s,
                          const grpc::CallbackServerContext* ctx,
                          std::chrono::steady_clock::time_point limit =
                              std::chrono::steady_clock::time_point::max());

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_PLANNER_SERVICE_H_
