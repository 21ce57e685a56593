// Test-only: a GraphSource that holds every workload graph and keep-all
// result offered to it, forever, and counts what was asked and offered.
// Header-only, on core/graph_source.h alone.
//
//   testutil::HeldGraphSource source;
//   PlanningCore core(CoreLimits{}, /*observer=*/nullptr, &source);
//   ... core.PlanStep(req, {}) ...
//   EXPECT_EQ(source.offers, 1);  // the workload built once
#ifndef SLACKSWAP_TESTING_HELD_GRAPH_SOURCE_H_
#define SLACKSWAP_TESTING_HELD_GRAPH_SOURCE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/graph_source.h"

namespace slackswap::testutil {

class HeldGraphSource : public GraphSource {
 public:
  std::shared_ptr<const Graph> Find(const std::string&) override {
    return nullptr;
  }
  std::shared_ptr<const Graph> FindWorkload(const std::string& key) override {
    ++finds;
    auto it = held.find(key);
    return it == held.end() ? nullptr : it->second;
  }
  void HoldWorkload(const std::string& key,
                    std::shared_ptr<const Graph> graph) override {
    ++offers;
    held[key] = std::move(graph);
  }
  std::shared_ptr<const SimResult> FindKeepAll(
      const std::shared_ptr<const Graph>& graph,
      const std::string& key) override {
    ++keep_all_finds;
    auto it = keep_all.find(std::make_pair(graph.get(), key));
    if (it == keep_all.end()) return nullptr;
    ++keep_all_found;
    return it->second;
  }
  void HoldKeepAll(const std::shared_ptr<const Graph>& graph,
                   const std::string& key,
                   std::shared_ptr<const SimResult> result) override {
    keep_all[std::make_pair(graph.get(), key)] = std::move(result);
  }

  absl::flat_hash_map<std::string, std::shared_ptr<const Graph>> held;
  int finds = 0;
  int offers = 0;
  absl::flat_hash_map<std::pair<const Graph*, std::string>,
                      std::shared_ptr<const SimResult>>
      keep_all;
  int keep_all_finds = 0;
  int keep_all_found = 0;
};

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_HELD_GRAPH_SOURCE_H_
