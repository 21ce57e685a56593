#include "server/shared_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace slackswap {
namespace {

// The value under KEYS[1], at most ARGV[1] + 1 bytes of it (so that a
// longer one shows as oversized without crossing the wire whole); else 1
// when KEYS[2] (a mark) exists, else 0.
constexpr char kLookupScript[] =
    "local v = redis.call('GETRANGE', KEYS[1], 0, ARGV[1]) "
    "if v ~= '' then return v end "
    "if #KEYS > 1 and redis.call('EXISTS', KEYS[2]) == 1 then return 1 end "
    "return 0";
// A mark is removed or renewed only by the replica that holds it: another
// may have taken it over once it expired.
constexpr char kUnmarkScript[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) end return 0";
constexpr char kRenewScript[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{2000};
// Up for less than this before going down again: the backoff goes on.
constexpr std::chrono::seconds kStableUp{5};
// While down, one failed attempt in this many is logged (the first, and
// each whose error differs from the last, always).
constexpr int kLogEveryFailures = 10;

double SecondsSince(SharedStore::Clock::time_point start) {
  return std::chrono::duration<double>(SharedStore::Clock::now() - start)
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedStore>> SharedStore::Start(
    SharedStoreOptions options, SharedStoreObserver* observer,
    RequestLog* log) {
  if (options.endpoint.host.empty()) {
    return absl::InvalidArgumentError("--shared_store: no host");
  }
  if (options.call_timeout.count() <= 0 ||
      options.connect_timeout.count() <= 0 || options.max_entry_bytes <= 0 ||
      options.max_queued_write_bytes < 0 || options.max_idle_connections < 0) {
    return absl::InvalidArgumentError(
        "shared store: timeouts and sizes must be positive");
  }
  std::shared_ptr<SSL_CTX> tls;
  if (options.endpoint.tls) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
        MakeRedisTlsContext(options.endpoint.tls_ca_file);
    if (!ctx.ok()) return ctx.status();
    tls = *std::move(ctx);
  }
  // Said before the background thread starts, which may connect (and say
  // so) at once.
  if (observer != nullptr) observer->SharedUp(false);
  return std::unique_ptr<SharedStore>(
      new SharedStore(std::move(options), std::move(tls), observer, log));
}

SharedStore::SharedStore(SharedStoreOptions options,
                         std::shared_ptr<SSL_CTX> tls,
                         SharedStoreObserver* observer, RequestLog* log)
    : options_(std::move(options)),
      tls_(std::move(tls)),
      observer_(observer),
      log_(log),
      thread_([this] { Loop(); }) {}

SharedStore::~SharedStore() {
  Flush(std::chrono::seconds(1));
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool SharedStore::up() const {
  MutexLock l(&mu_);
  return up_;
}

bool SharedStore::Flush(std::chrono::milliseconds timeout) {
  MutexLock l(&mu_);
  return mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                  mu_) { return queue_.empty() && !sending_; },
                              timeout);
}

absl::StatusOr<RedisReply> SharedStore::Call(
    const char* op, const std::vector<absl::string_view>& args,
    Clock::time_point caller_deadline) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point own = start + options_.call_timeout;
  const Clock::time_point deadline = std::min(own, caller_deadline);
  if (deadline <= start) {
    // The caller's time is up: no call, and nothing said of Redis.
    return absl::DeadlineExceededError("shared store: no time left");
  }
  absl::Status failed;
  absl::StatusOr<RedisReply> reply;
  std::unique_ptr<RedisConnection> conn;
  // A connection kept idle may have been closed by a Redis that restarted
  // meanwhile: then one fresh connection is tried before the store is
  // marked down.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = false;
    sockaddr_storage addr{};
    {
      MutexLock l(&mu_);
      if (!up_) return absl::UnavailableError("shared store: down");
      if (attempt == 0 && !idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
        reused = true;
      } else {
        addr = addr_;
      }
    }
    failed = absl::OkStatus();
    if (!reused) {
      absl::StatusOr<std::unique_ptr<RedisConnection>> opened =
          RedisConnection::Open(options_.endpoint, addr, tls_, deadline,
                                options_.max_entry_bytes);
      if (!opened.ok()) {
        failed = opened.status();
        break;
      }
      conn = *std::move(opened);
    }
    reply = conn->Command(args, deadline);
    if (reply.ok()) break;
    failed = reply.status();
    conn.reset();
    if (!reused || failed.code() == absl::StatusCode::kDeadlineExceeded) break;
  }
  if (observer_ != nullptr) {
    observer_->SharedCall(op, failed.ok() && !reply->is_error(),
                          SecondsSince(start));
  }
  if (!failed.ok()) {
    // A call the caller's own deadline cut short says nothing of Redis.
    const bool callers_fault =
        failed.code() == absl::StatusCode::kDeadlineExceeded && own > deadline;
    if (!callers_fault) MarkDown(failed);
    return failed;
  }
  MutexLock l(&mu_);
  if (up_ && static_cast<int>(idle_.size()) < options_.max_idle_connections) {
    idle_.push_back(std::move(conn));
  }
  return reply;
}

void SharedStore::MarkDown(const absl::Status& why) {
  std::vector<std::unique_ptr<RedisConnection>> closing;
  bool was_up = false;
  {
    MutexLock l(&mu_);
    was_up = up_;
    up_ = false;
    closing.swap(idle_);
  }
  if (!was_up) return;
  if (observer_ != nullptr) observer_->SharedUp(false);
  if (log_ != nullptr) {
    log_->Event("warning", "shared store down; serving from local caches",
                {{"store", options_.endpoint.Redacted()},
                 {"error", std::string(why.message())}});
  }
}

SharedStore::Probe SharedStore::Lookup(const std::string& key,
                                       const std::string& mark_key,
                                       Clock::time_point deadline) {
  const std::string max = absl::StrCat(options_.max_entry_bytes);
  std::vector<absl::string_view> args = {"EVAL", kLookupScript,
                                         mark_key.empty() ? "1" : "2", key};
  if (!mark_key.empty()) args.push_back(mark_key);
  args.push_back(max);
  absl::StatusOr<RedisReply> r = Call("get", args, deadline);
  Probe p;
  if (!r.ok() || r->is_error()) {
    p.state = Probe::kUnavailable;
  } else if (r->type == RedisReply::Type::kString) {
    if (static_cast<int64_t>(r->str.size()) > options_.max_entry_bytes) {
      p.state = Probe::kOversized;
    } else {
      p.state = Probe::kValue;
      p.value = std::move(r->str);
    }
  } else if (r->type == RedisReply::Type::kInteger && r->integer == 1) {
    p.state = Probe::kMarked;
  } else {
    p.state = Probe::kAbsent;
  }
  return p;
}

SharedStore::Mark SharedStore::TryMark(const std::string& mark_key,
                                       const std::string& token,
                                       std::chrono::milliseconds ttl,
                                       Clock::time_point deadline) {
  const std::string ms = absl::StrCat(std::max<int64_t>(ttl.count(), 1));
  absl::StatusOr<RedisReply> r =
      Call("mark", {"SET", mark_key, token, "NX", "PX", ms}, deadline);
  if (!r.ok() || r->is_error()) return Mark::kUnavailable;
  return r->type == RedisReply::Type::kStatus ? Mark::kOurs : Mark::kTheirs;
}

void SharedStore::PutAsync(std::string key, std::string value,
                           std::chrono::milliseconds ttl) {
  if (static_cast<int64_t>(value.size()) > options_.max_entry_bytes) {
    if (observer_ != nullptr) observer_->SharedWriteDropped("oversized");
    return;
  }
  Enqueue({Write::kSet, std::move(key), std::move(value), ttl});
}

void SharedStore::UnmarkAsync(std::string mark_key, std::string token) {
  Enqueue({Write::kUnmark, std::move(mark_key), std::move(token), {}});
}

void SharedStore::RenewMarkAsync(std::string mark_key, std::string token,
                                 std::chrono::milliseconds ttl) {
  Enqueue({Write::kRenew, std::move(mark_key), std::move(token), ttl});
}

void SharedStore::Enqueue(Write w) {
  const char* dropped = nullptr;
  {
    MutexLock l(&mu_);
    if (!up_) {
      dropped = "down";
    } else if (queued_bytes_ + w.bytes() > options_.max_queued_write_bytes) {
      dropped = "queue_full";
    } else {
      queued_bytes_ += w.bytes();
      queue_.push_back(std::move(w));
    }
  }
  if (dropped != nullptr && observer_ != nullptr) {
    observer_->SharedWriteDropped(dropped);
  }
}

void SharedStore::Send(const Write& w) {
  const std::string ms = absl::StrCat(std::max<int64_t>(w.ttl.count(), 1));
  // Writes have the call timeout, not a caller's deadline: nobody waits.
  const Clock::time_point no_caller = Clock::time_point::max();
  absl::StatusOr<RedisReply> r;
  switch (w.kind) {
    case Write::kSet:
      r = Call("set", {"SET", w.key, w.value, "PX", ms}, no_caller);
      break;
    case Write::kUnmark:
      r = Call("unmark", {"EVAL", kUnmarkScript, "1", w.key, w.value},
               no_caller);
      break;
    case Write::kRenew:
      r = Call("mark", {"EVAL", kRenewScript, "1", w.key, w.value, ms},
               no_caller);
      break;
  }
  // A failed write is counted by Call (slackswap_shared_store_calls_total).
}

void SharedStore::TryConnect() {
  const Clock::time_point deadline = Clock::now() + options_.connect_timeout;
  absl::Status failed;
  absl::StatusOr<sockaddr_storage> addr = ResolveRedisHost(options_.endpoint);
  std::unique_ptr<RedisConnection> conn;
  if (!addr.ok()) {
    failed = addr.status();
  } else {
    absl::StatusOr<std::unique_ptr<RedisConnection>> opened =
        RedisConnection::Open(options_.endpoint, *addr, tls_, deadline,
                              options_.max_entry_bytes);
    if (!opened.ok()) {
      failed = opened.status();
    } else {
      conn = *std::move(opened);
      // Up means answering within a call's time, not only connecting.
      absl::StatusOr<RedisReply> pong = conn->Command(
          {"PING"}, std::min(deadline, Clock::now() + options_.call_timeout));
      if (!pong.ok()) {
        failed = pong.status();
      } else if (pong->is_error()) {
        failed = absl::UnavailableError(
            absl::StrCat("shared store: PING answered ", pong->str));
      }
    }
  }
  int failures = 0;
  bool new_error = false;
  {
    MutexLock l(&mu_);
    if (failed.ok()) {
      up_ = true;
      addr_ = *addr;
      idle_.push_back(std::move(conn));
      failures_ = 0;
      last_error_.clear();
    } else {
      failures = ++failures_;
      new_error = failed.message() != last_error_;
      last_error_ = std::string(failed.message());
    }
  }
  if (failed.ok()) {
    if (observer_ != nullptr) observer_->SharedUp(true);
    if (log_ != nullptr) {
      log_->Event("info", "shared store connected",
                  {{"store", options_.endpoint.Redacted()}});
    }
  } else if (log_ != nullptr &&
             (new_error || (failures - 1) % kLogEveryFailures == 0)) {
    log_->Event("warning", "shared store unreachable; retrying",
                {{"store", options_.endpoint.Redacted()},
                 {"attempts", absl::StrCat(failures)},
                 {"error", std::string(failed.message())}});
  }
}

void SharedStore::Loop() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  Clock::time_point next_try = Clock::now();
  // When the store last came up, while it is up.
  std::optional<Clock::time_point> up_since;
  for (;;) {
    Write w;
    bool connect = false;
    int64_t dropped = 0;
    {
      MutexLock l(&mu_);
      if (stopping_) {
        queue_.clear();
        queued_bytes_ = 0;
        return;
      }
      if (!up_) {
        // Writes would wait an unknown time: dropped, and counted.
        dropped = static_cast<int64_t>(queue_.size());
        queue_.clear();
        queued_bytes_ = 0;
        const Clock::time_point now = Clock::now();
        if (up_since.has_value()) {
          // Down again. After a short time up (a Redis that answers PING
          // but not the calls in time), the next attempt waits, longer each
          // time, so that requests do not pay a timeout after every
          // reconnection; after a long time up, it starts at once.
          if (now - *up_since < kStableUp) {
            next_try = now + backoff;
            backoff = std::min(2 * backoff, kMaxBackoff);
          } else {
            backoff = kFirstBackoff;
            next_try = now;
          }
          up_since.reset();
        }
        if (now >= next_try) {
          connect = true;
        } else {
          mu_.AwaitWithTimeout(
              [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
              next_try - now);
          continue;
        }
      } else if (queue_.empty()) {
        mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !up_ || !queue_.empty();
        });
        continue;
      } else {
        w = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= w.bytes();
        sending_ = true;
      }
    }
    for (int64_t i = 0; i < dropped && observer_ != nullptr; ++i) {
      observer_->SharedWriteDropped("down");
    }
    if (connect) {
      TryConnect();
      if (up()) {
        up_since = Clock::now();
      } else {
        next_try = Clock::now() + backoff;
        backoff = std::min(2 * backoff, kMaxBackoff);
      }
      continue;
    }
    Send(w);
    MutexLock l(&mu_);
    sending_ = false;
  }
}

}  // namespace slackswap
