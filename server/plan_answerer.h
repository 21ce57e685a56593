// Answers Plan requests the cheapest way there is: from the plan cache when
// the same request was planned before, else by joining the planning of an
// identical request in flight (single flight), else on the worker pool:
// from the fleet's shared tier when one is set (another replica's answer,
// or its planning in flight, server/shared_tier.h), else by leading a
// planning of its own and storing its answer in both. The Plan handler
// parses and admits the call, then hands it here.
//
// Schedulers ask the same question again and again: the key is the digest
// of the request's canonical form (io/request_key.h), made on the calling
// (gRPC) thread whatever the request's size, so that a hit never waits
// behind planning calls in the queue.
//
//   PlanAnswerer answers(/*cache_bytes=*/64 << 20, &core, &metrics);
//   answers.Answer(req, gone, limit, submit,
//                  [call](const absl::Status& s, const std::string& bytes,
//                         const char* detail) { call->Reply(...); });
//
// Thread-safe: Answer may be called from any thread.
#ifndef SLACKSWAP_SERVER_PLAN_ANSWERER_H_
#define SLACKSWAP_SERVER_PLAN_ANSWERER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/planning_core.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/shared_tier.h"
#include "server/single_flight.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

class PlanAnswerer {
 public:
  using Clock = std::chrono::steady_clock;
  // Receives a call's answer, exactly once: the status, the response's
  // bytes when OK, and what the call's log line says of the cache ("" when
  // there is no cache).
  using Deliver = std::function<void(
      const absl::Status& status, const std::string& bytes, const char* cache)>;
  // Queues a task on the worker pool, or says why not (RESOURCE_EXHAUSTED).
  using Submit = std::function<absl::Status(std::function<void()> task)>;

  // What a cache hit's log line says: hits are logged one in many.
  static constexpr char kCacheHit[] = "cache=hit";

  // REQUIRES: core, metrics and shared (if set) outlive the answerer.
  PlanAnswerer(int64_t cache_bytes, const PlanningCore* core,
               ServiceMetrics* metrics, SharedTier* shared = nullptr);

  PlanAnswerer(const PlanAnswerer&) = delete;
  PlanAnswerer& operator=(const PlanAnswerer&) = delete;

  // Answers `req` through `deliver`: at once on this thread for a cache
  // hit, else on the thread that finishes the planning. `gone` says whether
  // this caller has gone (the planning stops when every caller waiting for
  // it has); `limit` is when the server's time limit for the call ends.
  void Answer(std::shared_ptr<v1::PlanRequest> req, std::function<bool()> gone,
              Clock::time_point limit, const Submit& submit, Deliver deliver);

 private:
  // On a worker: plans the request the flight `key` waits for, stores the
  // answer and delivers it to every caller.
  void Lead(const v1::PlanRequest& req, const std::string& key,
            Clock::time_point limit);

  // Immutable after construction.
  const PlanningCore* const core_;
  ServiceMetrics* const metrics_;
  SharedTier* const shared_;
  const std::string planner_version_;
  // Thread-safe by themselves.
  PlanCache cache_;
  SingleFlight flights_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_PLAN_ANSWERER_H_
