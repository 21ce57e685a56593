// Identical requests in flight share one computation: the first to join a
// key leads (computes), the others follow (wait for its outcome). The
// computation's stop function asks AllGone: it stops only when every
// waiter's caller has gone, so one cancelled caller does not cancel the
// others' answer.
//
//   SingleFlight flights;
//   if (flights.Join(key, {gone, deliver})) {  // this caller leads
//     const StopFn stop = [&] { return flights.AllGone(key); };
//     ... compute ...
//     flights.Finish(key, status, answer, answer_for_followers);
//   }  // else `deliver` runs when the leader finishes
//
// Thread-safe: every method may be called from any thread.
#ifndef SLACKSWAP_SERVER_SINGLE_FLIGHT_H_
#define SLACKSWAP_SERVER_SINGLE_FLIGHT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/mutex.h"

namespace slackswap {

class SingleFlight {
 public:
  struct Waiter {
    // Whether this waiter's caller has gone (cancelled, past its deadline).
    std::function<bool()> gone;
    // Receives the outcome: the status and, when OK, the answer's bytes.
    // Runs on the thread that calls Finish, with no lock held.
    std::function<void(const absl::Status&, const std::string& bytes)> deliver;
  };

  // Joins the computation of `key`: returns true when there was none (the
  // caller leads and must call Finish), false when `waiter` now follows one.
  bool Join(const std::string& key, Waiter waiter);

  // True when every waiter of `key` (the leader included) has gone, or
  // there is no computation of `key`.
  bool AllGone(const std::string& key) const;

  // Ends the computation of `key`: the leader gets `bytes`, the followers
  // `follower_bytes` (the same answer, marked as shared), or all get
  // `status` when it is not OK. REQUIRES: the caller leads `key`.
  void Finish(const std::string& key, const absl::Status& status,
              const std::string& bytes, const std::string& follower_bytes);

  // Followers served by another's computation, in all.
  int64_t followers() const;

 private:
  mutable Mutex mu_;
  // The waiters of each computation in flight, the leader first.
  absl::flat_hash_map<std::string, std::vector<Waiter>> flights_
      ABSL_GUARDED_BY(mu_);
  int64_t followers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SINGLE_FLIGHT_H_
