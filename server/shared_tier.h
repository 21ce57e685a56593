// The shared tier's protocol, over a SharedStore: lookup order, marks and
// waits, and the checks on what comes back.
//
// A result (plan, fit) is looked up in Redis after the replica's own cache
// missed. When Redis has none, the replica marks the key as its own to plan
// (SET NX with an expiry, renewed while it plans) and plans; another
// replica asked the same meanwhile sees the mark and waits, polling, for
// the answer, within its caller's deadline; if the mark expires or goes
// without an answer (its owner died or failed), the waiter plans itself.
// An answer is written back asynchronously, then the mark removed.
//
//   SharedTier::Lease lease;
//   bool stopped = false;
//   if (std::optional<std::string> answer = tier.FindOrLead(
//           "plan", key, accept, stop, &lease, &stopped)) {
//     return *answer;                 // another replica's, checked
//   }
//   if (stopped) return Cancelled();
//   ... plan, calling lease.KeepAlive() from the stop function ...
//   tier.Publish("plan", key, bytes, &lease);  // or Release(&lease)
//
// Every value read back must pass OpenResult (server/shared_entries.h) and
// the caller's `accept` (for a graph: its bytes must hash to its digest);
// one that does not is discarded, counted and logged, and the key planned
// here as if absent. When Redis is down every call returns at once (see
// SharedStore) and the tier behaves as a miss.
//
// Thread-safe; a Lease is used by one thread.
#ifndef SLACKSWAP_SERVER_SHARED_TIER_H_
#define SLACKSWAP_SERVER_SHARED_TIER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/stop.h"
#include "server/request_log.h"
#include "server/shared_store.h"
#include "slackswap/v1/graph.pb.h"

namespace slackswap {

struct SharedTierOptions {
  // SharedNamespace (server/shared_entries.h) of this build's answers.
  std::string ns;
  // Seals results with a MAC when set (server/shared_entries.h); the same
  // secret makes `ns`.
  std::string fleet_secret;
  std::chrono::milliseconds result_ttl{std::chrono::hours(24)};
  std::chrono::milliseconds graph_ttl{std::chrono::hours(1)};
  // A mark lives this long unless renewed (its owner renews it every third
  // of it while planning): a dead owner's waiters take over within it.
  std::chrono::milliseconds mark_ttl{std::chrono::seconds(10)};
  // Waiters poll from `first_poll`, doubling up to `max_poll`.
  std::chrono::milliseconds first_poll{2};
  std::chrono::milliseconds max_poll{25};
};

class SharedTier {
 public:
  using Clock = std::chrono::steady_clock;
  // Checks a payload read back (it parses, it is this build's answer).
  using Accept = std::function<bool(absl::string_view payload)>;

  // This replica's mark on a key it plans.
  class Lease {
   public:
    // Renews the mark when a third of its time has passed; costs a clock
    // read otherwise, so the planning's stop function may call it.
    void KeepAlive();
    bool held() const { return tier_ != nullptr; }

   private:
    friend class SharedTier;
    SharedTier* tier_ = nullptr;
    std::string mark_key;
    std::string token;
    Clock::time_point renew_at;
  };

  // REQUIRES: store and log (if set) outlive the tier.
  SharedTier(SharedStore* store, SharedTierOptions options, RequestLog* log);

  // Another replica's checked answer to `request_key`, or nullopt: then
  // this replica plans it (with the mark in `lease` when it could take
  // it), unless `*stopped` says that stop() ended a wait.
  std::optional<std::string> FindOrLead(const char* kind,
                                        absl::string_view request_key,
                                        const Accept& accept,
                                        const StopFn& stop, Lease* lease,
                                        bool* stopped);
  // Writes `payload` as the answer to `request_key`, then releases `lease`.
  void Publish(const char* kind, absl::string_view request_key,
               absl::string_view payload, Lease* lease);
  // Removes the mark without an answer (the planning failed or stopped).
  void Release(Lease* lease);

  // A stored graph's canonical bytes, checked against `digest`; nullopt
  // when absent, unavailable or discarded.
  std::optional<std::string> FindGraph(absl::string_view digest);
  // Writes a graph stored with PutGraph (its unknown fields dropped, as
  // GraphDigest leaves it) under its digest; one over the entry size bound
  // is counted as dropped without being serialized.
  void PublishGraph(absl::string_view digest, const v1::OperatorGraph& graph,
                    int64_t canonical_bytes);

  const SharedTierOptions& options() const { return options_; }

 private:
  void Discarded(const char* kind, const std::string& key,
                 absl::string_view why);
  SharedStoreObserver* observer() const;

  // Immutable after construction.
  SharedStore* const store_;
  const SharedTierOptions options_;
  RequestLog* const log_;
  // This process's part of every mark's token.
  const std::string replica_id_;

  std::atomic<int64_t> next_token_{0};
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SHARED_TIER_H_
