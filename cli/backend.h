// Where the CLI's requests go: the planning core in this process, or a
// slackswapd over gRPC (--server HOST:PORT). Both take and return the same
// slackswap.v1 messages, so local and remote answers are the same.
//
//   absl::StatusOr<std::unique_ptr<Backend>> b = BackendFromFlags(flags);
//   absl::StatusOr<v1::PlanResponse> r = (*b)->Plan(request);
#ifndef SLACKSWAP_CLI_BACKEND_H_
#define SLACKSWAP_CLI_BACKEND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "model/graph.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& req) = 0;
  // Calls `on_message` for each streamed message, in order.
  virtual absl::Status Sweep(
      const v1::SweepRequest& req,
      const std::function<void(const v1::SweepResponse&)>& on_message) = 0;
  virtual absl::StatusOr<v1::SimulateResponse> Simulate(
      const v1::SimulateRequest& req) = 0;
  virtual absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) = 0;
  virtual absl::StatusOr<v1::ServerInfoResponse> ServerInfo() = 0;
  virtual absl::StatusOr<v1::ListHardwareProfilesResponse>
  ListHardwareProfiles() = 0;
  virtual absl::StatusOr<v1::ListNodesResponse> ListNodes() = 0;
  virtual absl::StatusOr<v1::ListWorkloadsResponse> ListWorkloads() = 0;
  virtual absl::StatusOr<v1::FitResponse> Fit(const v1::FitRequest& req) = 0;
};

// Whether the flags choose the planning core in this process (no --server).
bool IsLocal(const Flags& flags);

// Graphs this process read from files for its own planning core. A request
// names one by the key HoldLocalGraph gave it, as StepSpec.graph_sha256 (a
// key, not a digest), and the local backend plans that graph: converted
// once, straight from the file, with no message of it held while it is
// planned (a 10^6-op graph's message takes about 800 MB). Holds one
// graph, the latest; requests to a server carry their graphs inline.
std::string HoldLocalGraph(Graph g);
// The graph held under `key`, or null.
std::shared_ptr<const Graph> LocalGraph(const std::string& key);

// Flags every subcommand accepts for choosing the backend: --server,
// --tls-ca, --tls-cert, --tls-key, --auth-token-file, --timeout.
const FlagSpecs& BackendFlags();

// Local unless --server is given.
absl::StatusOr<std::unique_ptr<Backend>> BackendFromFlags(const Flags& flags);

// grpc.health.v1 Check against --server: OK iff SERVING, else UNAVAILABLE
// saying what the server answered.
absl::Status CheckHealth(const Flags& flags);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_BACKEND_H_
