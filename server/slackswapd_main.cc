// slackswapd: the SlackSwap planning service.
//
//   slackswapd --port=50051 --metrics_port=9090
//
// Serves slackswap.v1.Planner, grpc.health.v1 and server reflection; exports
// Prometheus metrics on its own port. SIGTERM or SIGINT: health turns
// NOT_SERVING, the server stops accepting calls, in-flight calls finish
// within --grace_s, and the process exits 0. Logs are one JSON object per
// line on stderr; the first, {"msg":"serving",...}, gives the bound ports
// (useful with --port=0).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/version.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "io/proto_file.h"
#include "server/metrics.h"
#include "server/planner_service.h"
#include "server/request_log.h"
#include "server/shared_entries.h"
#include "server/shared_metrics.h"
#include "server/shared_store.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to serve gRPC on.");
ABSL_FLAG(int32_t, port, 50051, "gRPC port; 0 picks a free one.");
ABSL_FLAG(std::string, metrics_host, "0.0.0.0",
          "Address to serve Prometheus metrics on.");
ABSL_FLAG(int32_t, metrics_port, 9090,
          "Prometheus metrics port; 0 picks a free one; -1 disables.");
ABSL_FLAG(int32_t, threads, 0,
          "Planning worker threads; 0 means one per core.");
ABSL_FLAG(int32_t, max_queue, 64,
          "Calls that may wait for a worker; beyond, RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, cache_mb, 64, "Plan cache size in MiB; 0 disables it.");
ABSL_FLAG(int32_t, max_message_mb, 16, "Largest request or response, MiB.");
ABSL_FLAG(int64_t, max_request_mb, 320,
          "Largest estimated memory one request may plan with, MiB; beyond, "
          "RESOURCE_EXHAUSTED with the estimate.");
ABSL_FLAG(int64_t, max_queued_mb, 192,
          "Estimated memory of the requests held (waiting or planning, about "
          "12 x their size) beyond which calls are refused with "
          "RESOURCE_EXHAUSTED, MiB.");
ABSL_FLAG(int64_t, graph_store_mb, 64,
          "Graphs stored with PutGraph, at most this many MiB (estimated); "
          "0 disables the store.");
ABSL_FLAG(double, graph_ttl_s, 3600,
          "A stored graph unused for this long expires.");
ABSL_FLAG(int64_t, workload_graphs_mb, 32,
          "Built-in workloads' graphs kept built for the next request that "
          "names the same workload, at most this many MiB (estimated; "
          "unused ones expire after --graph_ttl_s); 0: built every time.");
ABSL_FLAG(int32_t, log_cache_hits_every, 100,
          "Log one plan cache hit in this many (0: none); every other call "
          "is logged.");
ABSL_FLAG(int64_t, trim_after_mb, 64,
          "After a call that held at least this many MiB, return freed "
          "memory to the system (malloc_trim); 0: never.");
ABSL_FLAG(int64_t, max_graph_ops, 1'000'000, "Largest graph, in ops.");
ABSL_FLAG(int64_t, max_graph_tensors, 2'000'000, "Largest graph, in tensors.");
ABSL_FLAG(double, max_request_s, 120,
          "Longest a call may plan, whatever its deadline (0: no limit); "
          "beyond, DEADLINE_EXCEEDED.");
ABSL_FLAG(double, grace_s, 25,
          "On SIGTERM, how long in-flight calls may take to finish.");
ABSL_FLAG(int32_t, keepalive_time_s, 30, "HTTP/2 keepalive ping interval.");
ABSL_FLAG(int32_t, keepalive_timeout_s, 10, "Keepalive ping ack timeout.");
ABSL_FLAG(int32_t, max_connection_age_s, 300,
          "Connections are closed after this long, so load spreads as "
          "replicas come and go (0 disables).");
ABSL_FLAG(int32_t, max_connection_age_grace_s, 30,
          "Time for calls on an aged connection to finish.");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (enables TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM server private key.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it "
          "signed (mutual TLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token every call must carry.");
ABSL_FLAG(std::string, shared_store, "",
          "The fleet's shared tier on Redis: redis://[user[:password]@]host"
          "[:port][/db], or rediss://... for TLS; empty: none. Plans, fits "
          "and stored graphs are looked up there after this replica's own "
          "cache, and written there once computed.");
ABSL_FLAG(std::string, shared_store_password_file, "",
          "File holding the shared store's password (instead of one in the "
          "URL).");
ABSL_FLAG(std::string, shared_store_secret_file, "",
          "File holding the fleet's secret (at least 32 bytes; `openssl "
          "rand -hex 32`): plans and fits in the shared store are sealed "
          "with a MAC under it, so that a client of the Redis without it "
          "cannot choose answers. Every replica of a fleet needs the same "
          "one; empty: sealed by digests, which anyone can forge.");
ABSL_FLAG(std::string, shared_store_tls_ca_file, "",
          "PEM CA bundle the shared store's certificate must chain to "
          "(rediss://); empty: the system's.");
ABSL_FLAG(int32_t, shared_store_timeout_ms, 50,
          "Longest any one shared-store call may take; a call past it marks "
          "the store down until a reconnection answers.");
ABSL_FLAG(double, shared_store_ttl_s, 86400,
          "How long a shared plan or fit lives in Redis (graphs: "
          "--graph_ttl_s).");
ABSL_FLAG(int64_t, shared_store_max_entry_mb, 16,
          "Largest value written to or read from the shared store, MiB.");
ABSL_FLAG(double, shared_store_mark_s, 10,
          "How long a replica's mark on a request it plans lives unless "
          "renewed: the longest others wait on a replica that died.");

namespace slackswap {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  const std::string client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() && key.empty()) {
    if (!client_ca.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert");
    }
    return grpc::InsecureServerCredentials();
  }
  if (cert.empty() || key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  grpc::SslServerCredentialsOptions ssl(
      client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> c = ReadFile(cert);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string> k = ReadFile(key);
  if (!k.ok()) return k.status();
  pair.cert_chain = *c;
  pair.private_key = *k;
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(client_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  return grpc::SslServerCredentials(ssl);
}

// Every numeric flag within a range that works (a --max_message_mb of 4096
// would wrap to 0 in gRPC's int), named in the error.
absl::Status CheckFlagRanges() {
  struct Range {
    const char* flag;
    double value;
    double lo;
    double hi;
  };
  for (const Range& r : {
           Range{"port", static_cast<double>(absl::GetFlag(FLAGS_port)), 0,
                 65535},
           Range{"metrics_port",
                 static_cast<double>(absl::GetFlag(FLAGS_metrics_port)), -1,
                 65535},
           Range{"threads", static_cast<double>(absl::GetFlag(FLAGS_threads)),
                 0, 1024},
           Range{"max_queue",
                 static_cast<double>(absl::GetFlag(FLAGS_max_queue)), 1,
                 100'000},
           Range{"cache_mb", static_cast<double>(absl::GetFlag(FLAGS_cache_mb)),
                 0, 1 << 20},
           Range{"max_message_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_max_message_mb)), 1,
                 1024},
           Range{"max_request_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_max_request_mb)), 1,
                 1 << 20},
           Range{"max_queued_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_max_queued_mb)), 1,
                 1 << 20},
           Range{"graph_store_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_graph_store_mb)), 0,
                 1 << 20},
           Range{"graph_ttl_s", absl::GetFlag(FLAGS_graph_ttl_s), 1,
                 86'400 * 30},
           Range{"workload_graphs_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_workload_graphs_mb)),
                 0, 1 << 20},
           Range{"log_cache_hits_every",
                 static_cast<double>(absl::GetFlag(FLAGS_log_cache_hits_every)),
                 0, 1e9},
           Range{"trim_after_mb",
                 static_cast<double>(absl::GetFlag(FLAGS_trim_after_mb)), 0,
                 1 << 20},
           Range{"max_graph_ops",
                 static_cast<double>(absl::GetFlag(FLAGS_max_graph_ops)), 1,
                 1e8},
           Range{"max_graph_tensors",
                 static_cast<double>(absl::GetFlag(FLAGS_max_graph_tensors)), 1,
                 2e8},
           Range{"max_request_s", absl::GetFlag(FLAGS_max_request_s), 0,
                 86'400},
           Range{"grace_s", absl::GetFlag(FLAGS_grace_s), 0, 3600},
           Range{"shared_store_timeout_ms",
                 static_cast<double>(
                     absl::GetFlag(FLAGS_shared_store_timeout_ms)),
                 1, 60'000},
           Range{"shared_store_ttl_s", absl::GetFlag(FLAGS_shared_store_ttl_s),
                 1, 365 * 86400.0},
           Range{"shared_store_max_entry_mb",
                 static_cast<double>(
                     absl::GetFlag(FLAGS_shared_store_max_entry_mb)),
                 1, 512},
           Range{"shared_store_mark_s",
                 absl::GetFlag(FLAGS_shared_store_mark_s), 0.1, 3600},
           Range{"keepalive_time_s",
                 static_cast<double>(absl::GetFlag(FLAGS_keepalive_time_s)), 1,
                 86'400},
           Range{"keepalive_timeout_s",
                 static_cast<double>(absl::GetFlag(FLAGS_keepalive_timeout_s)),
                 1, 86'400},
           Range{"max_connection_age_s",
                 static_cast<double>(absl::GetFlag(FLAGS_max_connection_age_s)),
                 0, 86'400 * 30},
           Range{"max_connection_age_grace_s",
                 static_cast<double>(
                     absl::GetFlag(FLAGS_max_connection_age_grace_s)),
                 0, 86'400},
       }) {
    if (!(r.value >= r.lo && r.value <= r.hi)) {  // NaN fails too
      return absl::InvalidArgumentError(absl::StrCat(
          "--", r.flag, " must be in [", r.lo, ", ", r.hi, "], got ", r.value));
    }
  }
  return absl::OkStatus();
}

int Fail(RequestLog& log, const absl::Status& s) {
  log.Event("error", "startup failed",
            {{"code", absl::StatusCodeToString(s.code())},
             {"error", std::string(s.message())}});
  return 1;
}

// Everything the flags say, checked: the service's options and how the
// daemon serves it.
struct DaemonOptions {
  ServiceOptions service;
  // Set when --shared_store is.
  std::optional<SharedStoreOptions> shared_store;
  std::string address;
  std::string metrics_address;  // empty: no metrics endpoint
  std::shared_ptr<grpc::ServerCredentials> credentials;
  bool tls = false;
  int32_t max_message_bytes = 0;
  int32_t keepalive_time_ms = 0;
  int32_t keepalive_timeout_ms = 0;
  int32_t max_connection_age_ms = 0;  // 0: connections never age
  int32_t max_connection_age_grace_ms = 0;
  std::chrono::milliseconds grace{0};
};

// The bearer token in --auth_token_file, or "" when the flag is unset.
// The file a credential flag names; an unreadable one is an error naming
// the flag.
absl::StatusOr<std::string> ReadFlagFile(const char* flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", bytes.status().message()));
  }
  return bytes;
}

absl::StatusOr<std::string> AuthToken() {
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (token_file.empty()) return std::string();
  absl::StatusOr<std::string> token = ReadFile(token_file);
  if (!token.ok()) return token.status();
  std::string out(absl::StripAsciiWhitespace(*token));
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(token_file, " holds no token"));
  }
  return out;
}

// The service's options from the flags. REQUIRES: CheckFlagRanges passed.
absl::StatusOr<ServiceOptions> ServiceOptionsFromFlags() {
  ServiceOptions options;
  const int threads = absl::GetFlag(FLAGS_threads);
  options.threads =
      threads > 0
          ? threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.cache_bytes = absl::GetFlag(FLAGS_cache_mb) << 20;
  options.limits.max_graph_ops = absl::GetFlag(FLAGS_max_graph_ops);
  options.limits.max_graph_tensors = absl::GetFlag(FLAGS_max_graph_tensors);
  options.limits.max_request_bytes = absl::GetFlag(FLAGS_max_request_mb) << 20;
  options.max_request_s = absl::GetFlag(FLAGS_max_request_s);
  options.limits.max_request_seconds = options.max_request_s;
  options.max_queued_bytes = absl::GetFlag(FLAGS_max_queued_mb) << 20;
  options.max_message_bytes =
      static_cast<int64_t>(absl::GetFlag(FLAGS_max_message_mb)) << 20;
  options.graph_store_bytes = absl::GetFlag(FLAGS_graph_store_mb) << 20;
  options.graph_ttl_s = absl::GetFlag(FLAGS_graph_ttl_s);
  options.workload_graph_bytes = absl::GetFlag(FLAGS_workload_graphs_mb) << 20;
  options.log_cache_hits_every = absl::GetFlag(FLAGS_log_cache_hits_every);
  options.trim_after_bytes = absl::GetFlag(FLAGS_trim_after_mb) << 20;
  options.shared_result_ttl_s = absl::GetFlag(FLAGS_shared_store_ttl_s);
  options.shared_mark_s = absl::GetFlag(FLAGS_shared_store_mark_s);
  absl::StatusOr<std::string> token = AuthToken();
  if (!token.ok()) return token.status();
  options.auth_token = *std::move(token);
  return options;
}

// The shared store's options from the flags, or nullopt without one.
absl::StatusOr<std::optional<SharedStoreOptions>> SharedStoreFromFlags() {
  const std::string url = absl::GetFlag(FLAGS_shared_store);
  if (url.empty()) return std::optional<SharedStoreOptions>();
  absl::StatusOr<RedisEndpoint> endpoint = ParseRedisUrl(url);
  if (!endpoint.ok()) return endpoint.status();
  const std::string password_file =
      absl::GetFlag(FLAGS_shared_store_password_file);
  if (!password_file.empty()) {
    absl::StatusOr<std::string> password =
        ReadFlagFile("shared_store_password_file", password_file);
    if (!password.ok()) return password.status();
    endpoint->password = std::string(absl::StripAsciiWhitespace(*password));
    if (endpoint->password.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--shared_store_password_file: ", password_file,
                       " holds no password"));
    }
  }
  if (!endpoint->user.empty() && endpoint->password.empty()) {
    return absl::InvalidArgumentError(
        "--shared_store names a user without a password (in the URL or "
        "--shared_store_password_file)");
  }
  endpoint->tls_ca_file = absl::GetFlag(FLAGS_shared_store_tls_ca_file);
  if (!endpoint->tls_ca_file.empty() && !endpoint->tls) {
    return absl::InvalidArgumentError(
        "--shared_store_tls_ca_file needs a rediss:// --shared_store");
  }
  SharedStoreOptions o;
  o.endpoint = *std::move(endpoint);
  o.call_timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_shared_store_timeout_ms));
  o.max_entry_bytes = absl::GetFlag(FLAGS_shared_store_max_entry_mb) << 20;
  return std::optional<SharedStoreOptions>(std::move(o));
}

// The fleet secret from --shared_store_secret_file, or "" without one.
absl::StatusOr<std::string> FleetSecretFromFlags() {
  const std::string file = absl::GetFlag(FLAGS_shared_store_secret_file);
  if (file.empty()) return std::string();
  if (absl::GetFlag(FLAGS_shared_store).empty()) {
    return absl::InvalidArgumentError(
        "--shared_store_secret_file needs a --shared_store");
  }
  absl::StatusOr<std::string> secret =
      ReadFlagFile("shared_store_secret_file", file);
  if (!secret.ok()) return secret.status();
  // A trailing newline (echo, a text editor) is not part of it.
  std::string bytes(absl::StripTrailingAsciiWhitespace(*secret));
  if (bytes.size() < kMinFleetSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shared_store_secret_file: ", file, " holds ", bytes.size(),
        " bytes; a fleet secret needs at least ", kMinFleetSecretBytes,
        " (`openssl rand -hex 32` makes one)"));
  }
  return bytes;
}

absl::StatusOr<DaemonOptions> OptionsFromFlags() {
  if (absl::Status s = CheckFlagRanges(); !s.ok()) return s;
  DaemonOptions d;
  absl::StatusOr<std::optional<SharedStoreOptions>> shared =
      SharedStoreFromFlags();
  if (!shared.ok()) return shared.status();
  d.shared_store = *std::move(shared);
  absl::StatusOr<ServiceOptions> service = ServiceOptionsFromFlags();
  if (!service.ok()) return service.status();
  d.service = *std::move(service);
  absl::StatusOr<std::string> secret = FleetSecretFromFlags();
  if (!secret.ok()) return secret.status();
  d.service.shared_fleet_secret = *std::move(secret);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials();
  if (!credentials.ok()) return credentials.status();
  d.credentials = *std::move(credentials);
  d.tls = !absl::GetFlag(FLAGS_tls_cert).empty();
  d.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    d.metrics_address = absl::StrCat(absl::GetFlag(FLAGS_metrics_host), ":",
                                     absl::GetFlag(FLAGS_metrics_port));
  }
  d.max_message_bytes = absl::GetFlag(FLAGS_max_message_mb) << 20;
  d.keepalive_time_ms = absl::GetFlag(FLAGS_keepalive_time_s) * 1000;
  d.keepalive_timeout_ms = absl::GetFlag(FLAGS_keepalive_timeout_s) * 1000;
  d.max_connection_age_ms = absl::GetFlag(FLAGS_max_connection_age_s) * 1000;
  d.max_connection_age_grace_ms =
      absl::GetFlag(FLAGS_max_connection_age_grace_s) * 1000;
  d.grace = std::chrono::milliseconds(
      static_cast<int64_t>(absl::GetFlag(FLAGS_grace_s) * 1000));
  return d;
}

// The gRPC server for `service`, listening (its port in `port`), with
// health and reflection; null when it cannot listen.
std::unique_ptr<grpc::Server> BuildServer(const DaemonOptions& d,
                                          PlannerService* service, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  // gRPC's health service is not built from protobuf; linking the health
  // messages lets reflection describe it too.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(d.address, d.credentials, port);
  builder.SetMaxReceiveMessageSize(d.max_message_bytes);
  builder.SetMaxSendMessageSize(d.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, d.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             d.keepalive_timeout_ms);
  if (d.max_connection_age_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               d.max_connection_age_ms);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               d.max_connection_age_grace_ms);
  }
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (*port == 0) return nullptr;
  return server;
}

void SetServing(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  health->SetServingStatus(serving);
  health->SetServingStatus(v1::Planner::service_full_name(), serving);
}

// Serves until SIGTERM or SIGINT, then drains: health NOT_SERVING, calls in
// flight finish within the grace period, the pool stops.
int Serve(const DaemonOptions& d, const sigset_t& signals, RequestLog& log) {
  ServiceMetrics metrics(Version(), Commit());
  if (!d.metrics_address.empty()) {
    absl::Status s = metrics.StartExposer(d.metrics_address);
    if (!s.ok()) return Fail(log, s);
  }
  SharedMetrics shared_metrics(*metrics.registry());
  std::unique_ptr<SharedStore> shared_store;
  ServiceOptions service_options = d.service;
  if (d.shared_store.has_value()) {
    // Redis need not be up: the store connects in the background, and the
    // replica serves from its own caches meanwhile.
    absl::StatusOr<std::unique_ptr<SharedStore>> started =
        SharedStore::Start(*d.shared_store, &shared_metrics, &log);
    if (!started.ok()) return Fail(log, started.status());
    shared_store = *std::move(started);
    service_options.shared_store = shared_store.get();
    if (service_options.shared_fleet_secret.empty()) {
      log.Event("warning", "shared store entries sealed without a secret",
                {{"why",
                  "any client of the Redis can write answers the fleet "
                  "serves; set --shared_store_secret_file"}});
    }
  }
  PlannerService service(service_options, &metrics, &log);
  int port = 0;
  std::unique_ptr<grpc::Server> server = BuildServer(d, &service, &port);
  if (server == nullptr) {
    return Fail(log, absl::UnavailableError(
                         absl::StrCat("cannot listen on ", d.address)));
  }
  SetServing(*server, true);
  log.Event(
      "info", "serving",
      {{"port", std::to_string(port)},
       {"metrics_port", std::to_string(metrics.exposer_port())},
       {"threads", std::to_string(d.service.threads)},
       {"max_queue", std::to_string(d.service.max_queue)},
       {"cache_mb", std::to_string(d.service.cache_bytes >> 20)},
       {"tls", d.tls ? "on" : "off"},
       {"shared_store", d.shared_store.has_value()
                            ? d.shared_store->endpoint.Redacted()
                            : "none"},
       {"shared_store_seal", !d.shared_store.has_value()             ? "none"
                             : d.service.shared_fleet_secret.empty() ? "digests"
                                                                     : "mac"},
       {"version", Version()},
       {"commit", Commit()}});
  int signal = 0;
  sigwait(&signals, &signal);
  SetServing(*server, false);
  log.Event("info", "draining",
            {{"signal", signal == SIGTERM ? "SIGTERM" : "SIGINT"}});
  server->Shutdown(std::chrono::system_clock::now() + d.grace);
  service.Shutdown();
  log.Event("info", "stopped", {});
  return 0;
}

int Run() {
  RequestLog log(stderr);
  // Debian's Abseil keeps absl::Mutex lock-order tracking on (it is built
  // without NDEBUG): cost on every lock taken inside gRPC, and an abort on a
  // suspected cycle. A server wants neither; the tests run with it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Signals go to the thread that waits for them, not to gRPC's threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<DaemonOptions> options = OptionsFromFlags();
  if (!options.ok()) return Fail(log, options.status());
  return Serve(*options, signals, log);
}

}  // namespace
}  // namespace slackswap

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the SlackSwap planning service: slackswapd --port=P --metrics_port=M");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return slackswap::VersionLine("slackswapd"); };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  return slackswap::Run();
}
