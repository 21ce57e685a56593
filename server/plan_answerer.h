// Answers Plan requests the cheapest way there is: from the plan cache when
// the same request was planned before, else by joining the planning of an
// identical request in flight (single flight); else, with a shared tier
// (server/shared_tier.h), from the fleet's Redis (another replica's answer,
// or its planning in flight) on a lookup thread of its own, so that a
// shared hit never waits behind plannings; else by leading a planning on
// the worker pool, and storing its answer in the cache and the tier. The
// Plan handler parses and admits the call, then hands it here.
//
// Schedulers ask the same question again and again: the key is the digest
// of the request's canonical form (io/request_key.h), made on the calling
// (gRPC) thread whatever the request's size, so that a hit never waits
// behind planning calls in the queue.
//
//   PlanAnswerer answers(/*cache_bytes=*/64 << 20, &core, &metrics);
//   answers.Answer(req, gone, limit, submit, submit_lookup,
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
  // hit, else on the thread that finds it in the shared tier or finishes
  // the planning. `gone` says whether this caller has gone (the work stops
  // when every caller waiting for it has); `limit` is when the server's
  // time limit for the call ends. `submit` queues planning; `submit_lookup`
  // queues the shared tier's lookups (unused without one; when its queue
  // is full the request is planned here).
  void Answer(std::shared_ptr<v1::PlanRequest> req, std::function<bool()> gone,
              Clock::time_point limit, const Submit& submit,
              const Submit& submit_lookup, Deliver deliver);

 private:
  // The flight `key`'s stop function.
  StopFn StopFor(const std::string& key, Clock::time_point limit);
  // When `stop` says so, ends the flight as cancelled (counted as a
  // deadline rejection) and returns true.
  bool FinishedIfStopped(const std::string& key, const StopFn& stop);
  // On a lookup thread: the shared tier's answer for the flight `key`, or
  // its planning queued with `submit` (holding the tier's mark in a lease).
  void LookUp(std::shared_ptr<v1::PlanRequest> req,
              std::shared_ptr<const std::string> key, Clock::time_point limit,
              const Submit& submit);
  // On a worker: plans the request the flight `key` waits for, stores the
  // answer and delivers it to every caller. `lease`, if set, is this
  // replica's mark on the key in the shared tier.
  void Lead(const v1::PlanRequest& req, const std::string& key,
            Clock::time_point limit, SharedTier::Lease* lease);

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
