#include "server/shared_tier.h"

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "io/proto_file.h"
#include "server/shared_entries.h"

namespace slackswap {
namespace {

// 64 random bits in hex: marks of different replicas (and of one replica
// restarted) never share a token.
std::string RandomReplicaId() {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("%016x", id);
}

}  // namespace

SharedTier::SharedTier(SharedStore* store, SharedTierOptions options,
                       RequestLog* log)
    : store_(store),
      options_(std::move(options)),
      log_(log),
      replica_id_(RandomReplicaId()) {}

SharedStoreObserver* SharedTier::observer() const { return store_->observer(); }

void SharedTier::Lease::KeepAlive() {
  if (tier_ == nullptr || Clock::now() < renew_at) return;
  const std::chrono::milliseconds ttl = tier_->options_.mark_ttl;
  renew_at = Clock::now() + ttl / 3;
  tier_->store_->RenewMarkAsync(mark_key, token, ttl);
}

void SharedTier::Discarded(const char* kind, const std::string& key,
                           absl::string_view why) {
  if (observer() != nullptr) observer()->SharedLookup(kind, "discarded");
  if (log_ != nullptr) {
    log_->Event("warning", "shared store entry discarded",
                {{"kind", kind}, {"key", key}, {"why", std::string(why)}});
  }
}

std::optional<std::string> SharedTier::FindOrLead(const char* kind,
                                                  absl::string_view request_key,
                                                  const Accept& accept,
                                                  const StopFn& stop,
                                                  Lease* lease, bool* stopped) {
  *stopped = false;
  const std::string key = SharedKey(options_.ns, kind, request_key);
  const std::string mark = MarkKey(key);
  auto report = [this, kind](const char* result) {
    if (observer() != nullptr) observer()->SharedLookup(kind, result);
  };
  auto waited = [this](const char* outcome) {
    if (observer() != nullptr) observer()->SharedWait(outcome);
  };
  bool waiting = false;
  std::chrono::milliseconds poll = options_.first_poll;
  for (;;) {
    SharedStore::Probe p = store_->Lookup(key, mark, Clock::time_point::max());
    switch (p.state) {
      case SharedStore::Probe::kValue: {
        absl::StatusOr<absl::string_view> payload =
            OpenResult(request_key, p.value, options_.fleet_secret);
        if (!payload.ok()) {
          Discarded(kind, key, payload.status().message());
        } else if (!accept(*payload)) {
          Discarded(kind, key, "does not parse as this build's answer");
        } else {
          report("hit");
          if (waiting) waited("answered");
          return std::string(*payload);
        }
        // Planned here; the answer overwrites the bad value.
        if (waiting) waited("took_over");
        return std::nullopt;
      }
      case SharedStore::Probe::kOversized:
        Discarded(kind, key, "larger than --shared_store_max_entry_mb");
        if (waiting) waited("took_over");
        return std::nullopt;
      case SharedStore::Probe::kUnavailable:
        report("unavailable");
        if (waiting) waited("took_over");
        return std::nullopt;
      case SharedStore::Probe::kAbsent: {
        const std::string token =
            absl::StrCat(replica_id_, "-", next_token_.fetch_add(1));
        const SharedStore::Mark m = store_->TryMark(
            mark, token, options_.mark_ttl, Clock::time_point::max());
        if (m == SharedStore::Mark::kTheirs) break;  // raced: wait for it
        if (m == SharedStore::Mark::kOurs) {
          lease->tier_ = this;
          lease->mark_key = mark;
          lease->token = token;
          lease->renew_at = Clock::now() + options_.mark_ttl / 3;
        }
        report(m == SharedStore::Mark::kOurs ? "miss" : "unavailable");
        if (waiting) waited("took_over");
        return std::nullopt;
      }
      case SharedStore::Probe::kMarked:
        break;
    }
    // Another replica is planning it: wait for its answer.
    waiting = true;
    if (StopRequested(stop)) {
      *stopped = true;
      report("miss");
      waited("stopped");
      return std::nullopt;
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(2 * poll, options_.max_poll);
    if (StopRequested(stop)) {
      *stopped = true;
      report("miss");
      waited("stopped");
      return std::nullopt;
    }
  }
}

void SharedTier::Publish(const char* kind, absl::string_view request_key,
                         absl::string_view payload, Lease* lease) {
  store_->PutAsync(SharedKey(options_.ns, kind, request_key),
                   SealResult(request_key, payload, options_.fleet_secret),
                   options_.result_ttl);
  Release(lease);
}

void SharedTier::Release(Lease* lease) {
  if (lease->tier_ == nullptr) return;
  store_->UnmarkAsync(std::move(lease->mark_key), std::move(lease->token));
  lease->tier_ = nullptr;
}

std::optional<std::string> SharedTier::FindGraph(absl::string_view digest) {
  const std::string key = SharedGraphKey(options_.ns, digest);
  SharedStore::Probe p = store_->Lookup(key, "", Clock::time_point::max());
  switch (p.state) {
    case SharedStore::Probe::kValue:
      if (!GraphBytesMatch(p.value, digest)) {
        Discarded("graph", key, "its bytes do not hash to its digest");
        return std::nullopt;
      }
      if (observer() != nullptr) observer()->SharedLookup("graph", "hit");
      return std::move(p.value);
    case SharedStore::Probe::kOversized:
      Discarded("graph", key, "larger than --shared_store_max_entry_mb");
      return std::nullopt;
    case SharedStore::Probe::kUnavailable:
      if (observer() != nullptr) {
        observer()->SharedLookup("graph", "unavailable");
      }
      return std::nullopt;
    case SharedStore::Probe::kAbsent:
    case SharedStore::Probe::kMarked:
      break;
  }
  if (observer() != nullptr) observer()->SharedLookup("graph", "miss");
  return std::nullopt;
}

void SharedTier::PublishGraph(absl::string_view digest,
                              const v1::OperatorGraph& graph,
                              int64_t canonical_bytes) {
  if (canonical_bytes > store_->options().max_entry_bytes) {
    if (observer() != nullptr) observer()->SharedWriteDropped("oversized");
    return;
  }
  std::string bytes;
  if (!SerializeDeterministic(graph, &bytes)) return;
  store_->PutAsync(SharedGraphKey(options_.ns, digest), std::move(bytes),
                   options_.graph_ttl);
}

}  // namespace slackswap
