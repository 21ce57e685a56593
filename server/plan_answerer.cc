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
                          const Submit& submit, Deliver deliver) {
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
  absl::Status queued =
      submit([this, req, key, limit] { Lead(*req, *key, limit); });
  if (!queued.ok()) flights_.Finish(*key, queued, "", "");
}

void PlanAnswerer::Lead(const v1::PlanRequest& req, const std::string& key,
                        Clock::time_point limit) {
  // The planning stops when every caller waiting for it has gone.
  const StopFn stop = [this, &key, limit] {
    return flights_.AllGone(key) || Clock::now() >= limit;
  };
  if (stop()) {
    // A call that waited past its deadline or was cancelled in the queue
    // costs no planning.
    metrics_->Rejected("Plan", ServiceMetrics::RejectReason::kDeadline);
    flights_.Finish(key, absl::CancelledError("cancelled while queued"), "",
                    "");
    return;
  }
  SharedTier::Lease lease;
  if (shared_ != nullptr) {
    // What another replica stored is served as this one's cache would
    // serve it: the same bytes, a hit.
    const SharedTier::Accept accept = [this](absl::string_view payload) {
      v1::PlanResponse r;
      return r.ParseFromArray(payload.data(),
                              static_cast<int>(payload.size())) &&
             r.planner_version() == planner_version_;
    };
    bool stopped = false;
    if (std::optional<std::string> answer =
            shared_->FindOrLead("plan", key, accept, stop, &lease, &stopped)) {
      if (cache_.capacity_bytes() > 0) cache_.Insert(key, *answer);
      flights_.Finish(key, absl::OkStatus(), *answer, *answer);
      return;
    }
    if (stopped) {
      flights_.Finish(key,
                      absl::CancelledError(
                          "cancelled while another replica planned the same"),
                      "", "");
      return;
    }
  }
  // A long planning renews this replica's mark on the key as it goes.
  const StopFn planning_stop = [&stop, &lease] {
    lease.KeepAlive();
    return stop();
  };
  absl::StatusOr<v1::PlanResponse> out = core_->PlanStep(req, planning_stop);
  if (!out.ok()) {
    if (shared_ != nullptr) shared_->Release(&lease);
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
    if (shared_ != nullptr) shared_->Publish("plan", key, stored, &lease);
    if (cache_.capacity_bytes() > 0) cache_.Insert(key, std::move(stored));
  }
  flights_.Finish(key, absl::OkStatus(), bytes, shared);
}

}  // namespace slackswap
