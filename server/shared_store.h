// The fleet's shared memory on Redis: what one replica computed (a plan, a
// fit, a stored graph) read back by the others, and marks that say "this
// replica is planning that key" so that replicas asked the same question
// plan it once. Optional (--shared_store); it is a cache, never state.
//
// Redis is never a single point of failure: every call has a deadline
// (the shorter of --shared_store_timeout_ms and the caller's), and the
// first call that fails in transport marks the store down. While down,
// every call answers kUnavailable at once, without touching the network,
// and a background thread reconnects with backoff (100 ms doubling to 2 s)
// and marks it up again once a PING answers within a call's timeout. A
// store that goes down again within 5 s of coming up (slow, not dead)
// keeps backing off, so requests pay one timeout per attempt at most. Writes
// are queued and sent by that thread, off every reply's path; a write that
// would take the queue past its byte bound, or that meets the store down, is
// dropped and counted.
//
//   auto store = SharedStore::Start(options, &observer, &log);
//   SharedStore::Probe p = store->Lookup(key, mark_key, deadline);
//   if (p.state == SharedStore::Probe::kValue) return Use(p.value);
//   store->PutAsync(key, value, ttl);
//
// Values are opaque here: what they mean and whether they can be trusted
// is for the caller (server/shared_entries.h checks them).
//
// Thread-safe: every method may be called from any thread.
#ifndef SLACKSWAP_SERVER_SHARED_STORE_H_
#define SLACKSWAP_SERVER_SHARED_STORE_H_

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "server/redis_connection.h"
#include "server/redis_url.h"
#include "server/request_log.h"

namespace slackswap {

// What the store reports, for metrics.
class SharedStoreObserver {
 public:
  virtual ~SharedStoreObserver() = default;
  // One Redis command: `op` is "get", "mark", "set" or "unmark"; whether it
  // succeeded (a transport failure or a Redis error is not), its time.
  virtual void SharedCall(const char* op, bool ok, double seconds) = 0;
  // A write not sent: the queue full, the store down, or the entry larger
  // than max_entry_bytes.
  virtual void SharedWriteDropped(const char* reason) = 0;
  // The store went up (connected, PING answered) or down.
  virtual void SharedUp(bool up) = 0;
  // One lookup of the shared tier (server/shared_tier.h): `kind` is
  // "graph", "plan", "fit" or "sweep"; `result` is "hit", "miss", "discarded"
  // (a value that failed its checks) or "unavailable".
  virtual void SharedLookup(const char* kind, const char* result) = 0;
  // A wait for another replica's planning of the same key ended: "answered"
  // (its answer arrived), "took_over" (its mark went without an answer, so
  // this replica planned) or "stopped" (the caller went or its deadline
  // passed).
  virtual void SharedWait(const char* outcome) = 0;
};

struct SharedStoreOptions {
  RedisEndpoint endpoint;
  // Every call's bound (the caller's deadline may cut it shorter).
  std::chrono::milliseconds call_timeout{50};
  // A (re)connection's bound, in the background thread.
  std::chrono::milliseconds connect_timeout{1000};
  // The largest value written or read back; a longer one read back is
  // reported as oversized, never held whole.
  int64_t max_entry_bytes = 16 << 20;
  // Writes waiting to be sent, in bytes.
  int64_t max_queued_write_bytes = 64 << 20;
  // Connections kept open between calls.
  int max_idle_connections = 8;
};

class SharedStore {
 public:
  using Clock = std::chrono::steady_clock;

  // What a key holds.
  struct Probe {
    enum State {
      kValue,        // `value` holds it
      kOversized,    // a value longer than max_entry_bytes (not read)
      kMarked,       // no value, but another replica marked it as planning
      kAbsent,       // neither
      kUnavailable,  // the store is down or the call failed
    };
    State state = kAbsent;
    std::string value;
  };

  // How marking a key went.
  enum class Mark { kOurs, kTheirs, kUnavailable };

  // Checks the options (a TLS authority file that cannot be read is
  // INVALID_ARGUMENT) and starts the background thread, which connects.
  // Redis need not be up: the store starts down and connects when it can.
  // REQUIRES: observer and log, if set, outlive the store.
  static absl::StatusOr<std::unique_ptr<SharedStore>> Start(
      SharedStoreOptions options, SharedStoreObserver* observer,
      RequestLog* log);

  // Sends what is queued for up to `flush` (bounded), then stops the thread.
  ~SharedStore();

  SharedStore(const SharedStore&) = delete;
  SharedStore& operator=(const SharedStore&) = delete;

  // The value under `key`; when there is none and `mark_key` is not empty,
  // whether another replica marked it. One round trip.
  Probe Lookup(const std::string& key, const std::string& mark_key,
               Clock::time_point deadline);

  // Marks `mark_key` as planned by `token` for `ttl`, unless it is marked.
  Mark TryMark(const std::string& mark_key, const std::string& token,
               std::chrono::milliseconds ttl, Clock::time_point deadline);

  // Queues SET key value PX ttl.
  void PutAsync(std::string key, std::string value,
                std::chrono::milliseconds ttl);
  // Queues the removal of `mark_key`, if `token` still holds it.
  void UnmarkAsync(std::string mark_key, std::string token);
  // Queues a renewal of `mark_key`'s ttl, if `token` still holds it.
  void RenewMarkAsync(std::string mark_key, std::string token,
                      std::chrono::milliseconds ttl);

  bool up() const;
  // Blocks until the write queue is empty (sent or dropped) or `timeout`
  // passed; returns whether it is empty. For tests and shutdown.
  bool Flush(std::chrono::milliseconds timeout);

  const SharedStoreOptions& options() const { return options_; }
  SharedStoreObserver* observer() const { return observer_; }

 private:
  struct Write {
    enum Kind { kSet, kUnmark, kRenew } kind = kSet;
    std::string key;
    std::string value;  // kSet: the value; kUnmark, kRenew: the token
    std::chrono::milliseconds ttl{0};
    int64_t bytes() const {
      return static_cast<int64_t>(key.size() + value.size()) + 64;
    }
  };

  SharedStore(SharedStoreOptions options, std::shared_ptr<SSL_CTX> tls,
              SharedStoreObserver* observer, RequestLog* log);

  // Runs one command on a pooled connection (opening one if none is idle),
  // timed and reported as `op`. UNAVAILABLE at once while the store is
  // down. A transport failure drops the connection and, unless the
  // caller's own deadline cut the call short, marks the store down.
  absl::StatusOr<RedisReply> Call(const char* op,
                                  const std::vector<absl::string_view>& args,
                                  Clock::time_point caller_deadline);
  void Enqueue(Write w);
  void MarkDown(const absl::Status& why);
  // The background thread: reconnects while down, sends queued writes.
  void Loop();
  // One attempt to connect and PING; on success the store is up.
  void TryConnect();
  void Send(const Write& w);

  // Immutable after construction.
  const SharedStoreOptions options_;
  const std::shared_ptr<SSL_CTX> tls_;
  SharedStoreObserver* const observer_;
  RequestLog* const log_;

  mutable Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The address the background thread resolved last (valid when up_).
  sockaddr_storage addr_ ABSL_GUARDED_BY(mu_){};
  std::vector<std::unique_ptr<RedisConnection>> idle_ ABSL_GUARDED_BY(mu_);
  std::deque<Write> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // A write taken off the queue and not yet sent.
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  // Connection attempts that failed in a row (for the backoff and logs).
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  // The last failed attempt's error ("" while up).
  std::string last_error_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_SHARED_STORE_H_
