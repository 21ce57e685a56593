#include "server/shared_store.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "server/redis_url.h"
#include "tests/redis_process.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace {

using testutil::RedisProcess;
using Probe = SharedStore::Probe;

constexpr auto kAwait = std::chrono::seconds(20);

SharedStore::Clock::time_point Soon() {
  return SharedStore::Clock::now() + std::chrono::seconds(5);
}

// Counts what the store reports.
class CountingObserver : public SharedStoreObserver {
 public:
  void SharedCall(const char*, bool ok, double) override {
    ok ? ++ok_calls : ++failed_calls;
  }
  void SharedWriteDropped(const char* reason) override {
    MutexLock l(&mu_);
    last_drop_ = reason;
    ++drops;
  }
  std::string last_drop() {
    MutexLock l(&mu_);
    return last_drop_;
  }
  void SharedUp(bool up) override {
    ups += up ? 1 : 0;
    last_up = up;
  }
  void SharedLookup(const char*, const char*) override {}
  void SharedWait(const char*) override {}

  std::atomic<int> ok_calls{0};
  std::atomic<int> failed_calls{0};
  std::atomic<int> drops{0};
  std::atomic<int> ups{0};
  std::atomic<bool> last_up{false};

 private:
  Mutex mu_;
  std::string last_drop_ ABSL_GUARDED_BY(mu_);
};

bool AwaitUp(const SharedStore& store, bool up) {
  const auto deadline = std::chrono::steady_clock::now() + kAwait;
  while (store.up() != up) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class SharedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.available()) << "redis-server is missing";
    ASSERT_TRUE(redis_.Start()) << redis_.error();
  }

  std::unique_ptr<SharedStore> Start(int64_t max_entry_bytes = 1 << 20) {
    SharedStoreOptions o;
    absl::StatusOr<RedisEndpoint> e = ParseRedisUrl(redis_.url());
    EXPECT_TRUE(e.ok()) << e.status();
    o.endpoint = *e;
    o.max_entry_bytes = max_entry_bytes;
    absl::StatusOr<std::unique_ptr<SharedStore>> store =
        SharedStore::Start(o, &observer_, nullptr);
    EXPECT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE(AwaitUp(**store, true));
    // The observer's last word agrees (it hears a moment after up()): the
    // start's "down" never follows the background thread's "up".
    const auto deadline = std::chrono::steady_clock::now() + kAwait;
    while (!observer_.last_up && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(observer_.last_up);
    return *std::move(store);
  }

  // DEBUG SLEEP stands for a Redis that stops answering.
  RedisProcess redis_{{"--enable-debug-command", "local"}};
  CountingObserver observer_;
};

TEST_F(SharedStoreTest, ValuesAndMarksRoundTrip) {
  std::unique_ptr<SharedStore> store = Start();
  EXPECT_EQ(store->Lookup("k", "k:m", Soon()).state, Probe::kAbsent);
  store->PutAsync("k", std::string("v\0alue", 6), std::chrono::seconds(60));
  ASSERT_TRUE(store->Flush(kAwait));
  Probe p = store->Lookup("k", "k:m", Soon());
  ASSERT_EQ(p.state, Probe::kValue);
  EXPECT_EQ(p.value, std::string("v\0alue", 6));
  // The ttl is set.
  const int64_t pttl = std::stoll(redis_.Cli({"PTTL", "k"}));
  EXPECT_GT(pttl, 50'000);
  EXPECT_LE(pttl, 60'000);

  EXPECT_EQ(store->TryMark("m", "me", std::chrono::seconds(10), Soon()),
            SharedStore::Mark::kOurs);
  EXPECT_EQ(store->TryMark("m", "you", std::chrono::seconds(10), Soon()),
            SharedStore::Mark::kTheirs);
  EXPECT_EQ(store->Lookup("absent", "m", Soon()).state, Probe::kMarked);
  // Only the holder's token removes the mark.
  store->UnmarkAsync("m", "you");
  ASSERT_TRUE(store->Flush(kAwait));
  EXPECT_EQ(redis_.Cli({"GET", "m"}), "me");
  store->RenewMarkAsync("m", "me", std::chrono::seconds(100));
  ASSERT_TRUE(store->Flush(kAwait));
  EXPECT_GT(std::stoll(redis_.Cli({"PTTL", "m"})), 10'000);
  store->UnmarkAsync("m", "me");
  ASSERT_TRUE(store->Flush(kAwait));
  EXPECT_EQ(store->Lookup("absent", "m", Soon()).state, Probe::kAbsent);
  EXPECT_EQ(observer_.failed_calls, 0);
}

TEST_F(SharedStoreTest, ValuesOverTheBoundAreNeitherWrittenNorRead) {
  std::unique_ptr<SharedStore> store = Start(/*max_entry_bytes=*/100);
  store->PutAsync("big", std::string(101, 'x'), std::chrono::seconds(60));
  EXPECT_EQ(observer_.drops, 1);
  EXPECT_EQ(observer_.last_drop(), "oversized");
  ASSERT_TRUE(store->Flush(kAwait));
  EXPECT_EQ(redis_.Cli({"EXISTS", "big"}), "0");
  ASSERT_EQ(redis_.Cli({"SET", "big", std::string(5000, 'y')}), "OK");
  EXPECT_EQ(store->Lookup("big", "", Soon()).state, Probe::kOversized);
  ASSERT_EQ(redis_.Cli({"SET", "fits", std::string(100, 'y')}), "OK");
  EXPECT_EQ(store->Lookup("fits", "", Soon()).state, Probe::kValue);
}

TEST_F(SharedStoreTest, AValueOfAnotherTypeIsUnavailableNotACrash) {
  std::unique_ptr<SharedStore> store = Start();
  ASSERT_EQ(redis_.Cli({"LPUSH", "list", "a"}), "1");
  EXPECT_EQ(store->Lookup("list", "", Soon()).state, Probe::kUnavailable);
  // A Redis error is not the store going down.
  EXPECT_TRUE(store->up());
}

TEST_F(SharedStoreTest, DownAnswersAtOnceDropsWritesAndComesBack) {
  std::unique_ptr<SharedStore> store = Start();
  redis_.Kill();
  EXPECT_EQ(store->Lookup("k", "", Soon()).state, Probe::kUnavailable);
  EXPECT_FALSE(store->up());
  const int calls = observer_.ok_calls + observer_.failed_calls;
  // Down: nothing is sent.
  EXPECT_EQ(store->Lookup("k", "", Soon()).state, Probe::kUnavailable);
  EXPECT_EQ(store->TryMark("m", "t", std::chrono::seconds(1), Soon()),
            SharedStore::Mark::kUnavailable);
  EXPECT_EQ(observer_.ok_calls + observer_.failed_calls, calls);
  store->PutAsync("k", "v", std::chrono::seconds(60));
  EXPECT_EQ(observer_.last_drop(), "down");

  ASSERT_TRUE(redis_.Start()) << redis_.error();
  ASSERT_TRUE(AwaitUp(*store, true));
  store->PutAsync("k", "v", std::chrono::seconds(60));
  ASSERT_TRUE(store->Flush(kAwait));
  EXPECT_EQ(store->Lookup("k", "", Soon()).state, Probe::kValue);
}

// A Redis that stops answering (DEBUG SLEEP) costs one call its timeout;
// then the store is down and calls return without waiting.
TEST_F(SharedStoreTest, ASlowStoreIsMarkedDown) {
  std::unique_ptr<SharedStore> store = Start();
  std::thread sleeper([this] { redis_.Cli({"DEBUG", "SLEEP", "1"}); });
  // Until the server is busy sleeping, lookups answer.
  const auto deadline = std::chrono::steady_clock::now() + kAwait;
  while (store->Lookup("k", "", Soon()).state != Probe::kUnavailable &&
         std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_FALSE(store->up());
  sleeper.join();
  EXPECT_TRUE(AwaitUp(*store, true));
}

// A Redis that answers PING but then not the calls in time (slow, not
// dead) goes down again soon after each reconnection: each time, the store
// waits longer before trying again (100 ms doubling), so that requests do
// not pay a call's timeout after every reconnection. Only lower bounds on
// the waits are checked: the store cannot come back before its backoff.
TEST_F(SharedStoreTest, AStoreThatGoesDownSoonAfterComingUpBacksOffLonger) {
  std::unique_ptr<SharedStore> store = Start();
  // Each cycle is well within the 5 s after coming up that keep the
  // backoff growing: 100, 200, 400, 800 ms.
  std::chrono::milliseconds backoff(100);
  for (int flap = 0; flap < 4; ++flap, backoff *= 2) {
    ASSERT_TRUE(AwaitUp(*store, true));
    // A sleep longer than a call's 50 ms timeout, shorter than the backoff
    // from the second flap on: then only the backoff keeps it down.
    std::thread sleeper([this] { redis_.Cli({"DEBUG", "SLEEP", "0.1"}); });
    const auto deadline = std::chrono::steady_clock::now() + kAwait;
    while (store->Lookup("k", "", Soon()).state != Probe::kUnavailable &&
           std::chrono::steady_clock::now() < deadline) {
    }
    const auto down = std::chrono::steady_clock::now();
    ASSERT_FALSE(store->up());
    ASSERT_TRUE(AwaitUp(*store, true));
    const auto was_down = std::chrono::steady_clock::now() - down;
    sleeper.join();
    // Half the backoff: the store marked itself down a moment before the
    // lookup returned. Without the growing backoff, the third and fourth
    // flaps would be back within about 100 ms.
    EXPECT_GE(was_down, backoff / 2)
        << "flap " << flap << ": back after "
        << std::chrono::duration_cast<std::chrono::milliseconds>(was_down)
               .count()
        << " ms";
  }
}

TEST_F(SharedStoreTest, ACallerDeadlineCutsACallWithoutMarkingTheStoreDown) {
  std::unique_ptr<SharedStore> store = Start();
  EXPECT_EQ(
      store
          ->Lookup("k", "", SharedStore::Clock::now() - std::chrono::seconds(1))
          .state,
      Probe::kUnavailable);
  EXPECT_TRUE(store->up());
}

// A CA, a server certificate for 127.0.0.1 signed by it, and a CA that
// signed nothing here, made with the openssl command.
class TestPki {
 public:
  TestPki() : dir_(::testing::TempDir() + "/shared_store_pki") {
    const std::string openssl = testutil::FindOnPath("openssl");
    if (openssl.empty() ||
        (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)) {
      error_ = "openssl is not on PATH, or no temporary directory";
      return;
    }
    auto run = [&](std::vector<std::string> args) {
      args.insert(args.begin(), openssl);
      testutil::CommandResult r = testutil::RunCommand(args);
      if (r.exit_status != 0) error_ += r.output;
      return r.exit_status == 0;
    };
    std::FILE* ext = std::fopen(Path("server.ext").c_str(), "w");
    if (ext == nullptr) return;
    std::fputs("subjectAltName=IP:127.0.0.1\n", ext);
    std::fclose(ext);
    for (const char* ca : {"ca", "rogue_ca"}) {
      if (!run({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", absl::StrCat("/CN=", ca), "-keyout",
                Path(absl::StrCat(ca, ".key")), "-out",
                Path(absl::StrCat(ca, ".crt"))})) {
        return;
      }
    }
    ok_ = run({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=redis",
               "-keyout", Path("server.key"), "-out", Path("server.csr")}) &&
          run({"x509", "-req", "-in", Path("server.csr"), "-CA", Path("ca.crt"),
               "-CAkey", Path("ca.key"), "-CAcreateserial", "-days", "2",
               "-extfile", Path("server.ext"), "-out", Path("server.crt")});
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  std::string error_;
  bool ok_ = false;
};

// What a RequestLog wrote to its temporary file so far.
std::string LogText(std::FILE* f) {
  std::fflush(f);
  std::string out;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fseek(f, 0, SEEK_END);
  return out;
}

TEST(SharedStoreTlsTest, SpeaksTlsToAServerItsAuthoritySigned) {
  TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  RedisProcess redis(
      {}, testutil::RedisTls{pki.Path("server.crt"), pki.Path("server.key"),
                             pki.Path("ca.crt")});
  ASSERT_TRUE(redis.available());
  ASSERT_TRUE(redis.Start()) << redis.error();
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl(redis.url());
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->tls);

  SharedStoreOptions o;
  o.endpoint = *e;
  o.endpoint.tls_ca_file = pki.Path("ca.crt");
  absl::StatusOr<std::unique_ptr<SharedStore>> store =
      SharedStore::Start(o, nullptr, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(AwaitUp(**store, true));
  (*store)->PutAsync("k", std::string(100'000, 'v'), std::chrono::seconds(60));
  ASSERT_TRUE((*store)->Flush(kAwait));
  Probe p = (*store)->Lookup("k", "", Soon());
  ASSERT_EQ(p.state, Probe::kValue);
  EXPECT_EQ(p.value, std::string(100'000, 'v'));

  // Another authority's server is never trusted: the store stays down and
  // says why.
  std::FILE* log_file = std::tmpfile();
  ASSERT_NE(log_file, nullptr);
  RequestLog log(log_file);
  o.endpoint.tls_ca_file = pki.Path("rogue_ca.crt");
  {
    absl::StatusOr<std::unique_ptr<SharedStore>> rogue =
        SharedStore::Start(o, nullptr, &log);
    ASSERT_TRUE(rogue.ok()) << rogue.status();
    const auto deadline = std::chrono::steady_clock::now() + kAwait;
    while (LogText(log_file).find("certificate") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_NE(LogText(log_file).find("TLS handshake failed"), std::string::npos)
        << LogText(log_file);
    EXPECT_FALSE((*rogue)->up());
    EXPECT_EQ((*rogue)->Lookup("k", "", Soon()).state, Probe::kUnavailable);
  }
  // Plain text to a TLS port gets nowhere either.
  o.endpoint.tls = false;
  o.endpoint.tls_ca_file.clear();
  absl::StatusOr<std::unique_ptr<SharedStore>> plain =
      SharedStore::Start(o, nullptr, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Lookup("k", "", Soon()).state, Probe::kUnavailable);
  std::fclose(log_file);
}

TEST(SharedStoreStartTest, AnUnreadableAuthorityFileIsRefused) {
  SharedStoreOptions o;
  o.endpoint.host = "127.0.0.1";
  o.endpoint.tls = true;
  o.endpoint.tls_ca_file = "/nonexistent/ca.pem";
  absl::StatusOr<std::unique_ptr<SharedStore>> store =
      SharedStore::Start(o, nullptr, nullptr);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("--shared_store_tls_ca_file"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace slackswap
