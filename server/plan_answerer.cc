#include "server/plan_answerer.h"

#include <optional>
#include <utility>

#include "io/request_key.h"

namespace slackswap {

PlanAnswerer::PlanAnswerer(int64_t cache_bytes, const PlanningCore* core,
                           ServiceMetrics* metrics, SharedTier* shared)
    : core_(core),
      metrics_(metrics),
      shared_(shared),
      planner_version_(core->Info().planner_version()),
      cache_(cache_bytes) {}

void PlanAnswerer::Answer(std::shared_ptr<v1::PlanRequest> req,
                          std::function<bool()> gone, Clock::time_point limit,
                          const Submit& submit, const Submit& submit_lookup,
                          Deliver deliver) {
  auto key = std::make_shared<const std::string>(PlanRequestKey(*req));
  const bool cached = cache_.capacity_bytes() > 0;
  if (cached) {
    if (std::optional<std::string> hit = cache_.Lookup(*key)) {
      metrics_->CacheHit();
      deliver(absl::OkStatus(), *hit, kCacheHit);
      return;
    }
    metrics_->CacheMiss();
  }
  const char* detail = cached ? "cache=miss" : "";
  const bool leads = flights_.Join(
      *key,
      {std::move(gone), [deliver = std::move(deliver), detail](
                            const absl::Status& s, const std::string& bytes) {
         deliver(s, bytes, detail);
       }});
  if (!leads) {
    metrics_->Coalesced();
    return;
  }
  if (shared_ != nullptr && submit_lookup([this, req, key, limit, submit] {
                              LookUp(req, key, limit, submit);
                            }).ok()) {
    return;
  }
  // No shared tier, or its lookups' queue is full: planned here.
  absl::Status queued = submit(
      [this, req, key, limit] { Lead(*req, *key, limit, /*lease=*/nullptr); });
  if (!queued.ok()) flights_.Finish(*key, queued, "", "");
}

StopFn PlanAnswerer::StopFor(const std::string& key, Clock::time_point limit) {
  // The work stops when every caller waiting for it has gone.
  return [this, &key, limit] {
    return flights_.AllGone(key) || Clock::now() >= limit;
  };
}

bool PlanAnswerer::FinishedIfStopped(const std::string& key,
                                     const StopFn& stop) {
  if (!stop()) return false;
  // A call that waited past its deadline or was cancelled in the queue
  // costs no planning.
  metrics_->Rejected("Plan", ServiceMetrics::RejectReason::kDeadline);
  flights_.Finish(key, absl::CancelledError("cancelled while queued"), "", "");
  return true;
}

void PlanAnswerer::LookUp(std::shared_ptr<v1::PlanRequest> req,
                          std::shared_ptr<const std::string> key,
                          Clock::time_point limit, const Submit& submit) {
  const StopFn stop = StopFor(*key, limit);
  if (FinishedIfStopped(*key, stop)) return;
  // What another replica stored is served as this one's cache would serve
  // it: the same bytes, a hit.
  const SharedTier::Accept accept = [this](absl::string_view payload) {
    v1::PlanResponse r;
    return r.ParseFromArray(payload.data(), static_cast<int>(payload.size())) &&
           r.planner_version() == planner_version_;
  };
  auto lease = std::make_shared<SharedTier::Lease>();
  bool stopped = false;
  if (std::optional<std::string> answer = shared_->FindOrLead(
          "plan", *key, accept, stop, lease.get(), &stopped)) {
    if (cache_.capacity_bytes() > 0) cache_.Insert(*key, *answer);
    flights_.Finish(*key, absl::OkStatus(), *answer, *answer);
    return;
  }
  if (stopped) {
    flights_.Finish(*key,
                    absl::CancelledError(
                        "cancelled while another replica planned the same"),
                    "", "");
    return;
  }
  absl::Status queued = submit(
      [this, req, key, limit, lease] { Lead(*req, *key, limit, lease.get()); });
  if (!queued.ok()) {
    shared_->Release(lease.get());
    flights_.Finish(*key, queued, "", "");
  }
}

void PlanAnswerer::Lead(const v1::PlanRequest& req, const std::string& key,
                        Clock::time_point limit, SharedTier::Lease* lease) {
  const StopFn stop = StopFor(key, limit);
  if (FinishedIfStopped(key, stop)) {
    if (lease != nullptr) shared_->Release(lease);
    return;
  }
  // A long planning renews this replica's mark on the key as it goes.
  const StopFn planning_stop = [&stop, lease] {
    if (lease != nullptr) lease->KeepAlive();
    return stop();
  };
  absl::StatusOr<v1::PlanResponse> out = core_->PlanStep(req, planning_stop);
  if (!out.ok()) {
    if (lease != nullptr) shared_->Release(lease);
    flights_.Finish(key, out.status(), "", "");
    return;
  }
  const std::string bytes = out->SerializeAsString();
  out->set_coalesced(true);
  const std::string shared = out->SerializeAsString();
  if (cache_.capacity_bytes() > 0 || shared_ != nullptr) {
    // Stored as a hit is served: no server time, no coalescing.
    out->set_coalesced(false);
    out->set_cache_hit(true);
    out->set_server_seconds(0);
    std::string stored = out->SerializeAsString();
    if (shared_ != nullptr) {
      SharedTier::Lease none;
      shared_->Publish("plan", key, stored, lease != nullptr ? lease : &none);
    }
    if (cache_.capacity_bytes() > 0) cache_.Insert(key, std::move(stored));
  }
  flights_.Finish(key, absl::OkStatus(), bytes, shared);
}

}  // namespace slackswap
