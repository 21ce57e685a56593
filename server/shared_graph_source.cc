#include "server/shared_graph_source.h"

#include <optional>
#include <utility>

#include "model/graph.h"

namespace slackswap {

SharedGraphSource::SharedGraphSource(GraphStore* local, SharedTier* shared,
                                     int64_t charge_per_byte, Prepare prepare,
                                     GraphStore* workloads)
    : local_(local),
      shared_(shared),
      charge_per_byte_(charge_per_byte),
      prepare_(std::move(prepare)),
      workloads_(workloads) {}

std::shared_ptr<const Graph> SharedGraphSource::Find(
    const std::string& sha256) {
  if (std::shared_ptr<const Graph> g = local_->Find(sha256)) return g;
  if (shared_ == nullptr) return nullptr;
  std::optional<std::string> bytes = shared_->FindGraph(sha256);
  if (!bytes.has_value()) return nullptr;
  v1::OperatorGraph pb;
  // The bytes hash to the digest, so they are what some client stored with
  // PutGraph; still, they are checked like any request's graph.
  if (!pb.ParseFromString(*bytes)) return nullptr;
  absl::StatusOr<Graph> graph = prepare_(pb);
  if (!graph.ok()) return nullptr;
  auto shared = std::make_shared<const Graph>(*std::move(graph));
  local_->Put(sha256, shared,
              charge_per_byte_ * static_cast<int64_t>(bytes->size()));
  return shared;
}

std::shared_ptr<const Graph> SharedGraphSource::FindWorkload(
    const std::string& key) {
  return workloads_ == nullptr ? nullptr : workloads_->Find(key);
}

void SharedGraphSource::HoldWorkload(const std::string& key,
                                     std::shared_ptr<const Graph> graph) {
  if (workloads_ == nullptr) return;
  const int64_t charge = ApproxHeldBytes(*graph);
  workloads_->Put(key, std::move(graph), charge);
}

std::shared_ptr<const SimResult> SharedGraphSource::FindKeepAll(
    const std::shared_ptr<const Graph>& graph, const std::string& key) {
  return keep_all_.Find(graph, key);
}

void SharedGraphSource::HoldKeepAll(const std::shared_ptr<const Graph>& graph,
                                    const std::string& key,
                                    std::shared_ptr<const SimResult> result) {
  keep_all_.Hold(graph, key, std::move(result));
}

}  // namespace slackswap
