#include "sim/flow_network.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"

namespace slackswap {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

int32_t DirIndex(LinkDir dir) { return dir == LinkDir::kH2D ? 1 : 0; }

int32_t LinkDirIndex(const Hop& hop) {
  return 2 * hop.link + DirIndex(hop.dir);
}

}  // namespace

int32_t FlowNetwork::AddLink(const LinkCapacity& capacity) {
  links_.push_back(capacity);
  link_flows_.emplace_back();
  dir_flows_.push_back(0);
  dir_flows_.push_back(0);
  return static_cast<int32_t>(links_.size()) - 1;
}

int32_t FlowNetwork::StartFlow(absl::Span<const Hop> path) {
  // A linear scan for the smallest free id: a recompute costs more anyway.
  int32_t id = 0;
  const int32_t slots = static_cast<int32_t>(flows_.size());
  while (id < slots && flows_[id].active) ++id;
  if (id == slots) flows_.emplace_back();
  Flow& flow = flows_[id];
  flow.path.assign(path.begin(), path.end());
  flow.rate = 0;
  flow.active = true;
  ++num_active_;
  for (const Hop& hop : flow.path) {
    std::vector<int32_t>& on = link_flows_[hop.link];
    on.insert(std::lower_bound(on.begin(), on.end(), id), id);
    ++dir_flows_[LinkDirIndex(hop)];
  }
  Recompute(id, flow.path);
  return id;
}

void FlowNetwork::EndFlow(int32_t flow) {
  Flow& f = flows_[flow];
  f.active = false;
  f.rate = 0;
  --num_active_;
  for (const Hop& hop : f.path) {
    std::vector<int32_t>& on = link_flows_[hop.link];
    on.erase(std::lower_bound(on.begin(), on.end(), flow));
    --dir_flows_[LinkDirIndex(hop)];
  }
  // The path stays in the slot (for its capacity), so it can seed the search
  // for the flows that shared its links.
  Recompute(-1, f.path);
}

double FlowNetwork::Rate(int32_t flow) const { return flows_[flow].rate; }

absl::Span<const int32_t> FlowNetwork::Touched() const { return touched_; }

int32_t FlowNetwork::num_links() const {
  return static_cast<int32_t>(links_.size());
}

int32_t FlowNetwork::num_active_flows() const { return num_active_; }

double FlowNetwork::Capacity(int32_t link, int32_t dir, bool both) const {
  const LinkCapacity& c = links_[link];
  if (dir == DirIndex(LinkDir::kH2D)) return both ? c.both_h2d : c.h2d;
  return both ? c.both_d2h : c.d2h;
}

void FlowNetwork::Recompute(int32_t started, absl::Span<const Hop> seed) {
  FindComponent(started, seed);
  FillRates();
}

void FlowNetwork::FindComponent(int32_t started, absl::Span<const Hop> seed) {
  // All false between calls: only what this search marks is reset.
  link_seen_.resize(links_.size(), false);
  flow_seen_.resize(flows_.size(), false);
  component_links_.clear();
  touched_.clear();
  auto visit_link = [this](int32_t link) {
    if (link_seen_[link]) return;
    link_seen_[link] = true;
    component_links_.push_back(link);
  };
  if (started >= 0) {
    flow_seen_[started] = true;
    touched_.push_back(started);
  }
  for (const Hop& hop : seed) visit_link(hop.link);
  // Breadth-first over links, component_links_ doubling as the queue: no
  // recursion, whatever the network's shape.
  for (size_t i = 0; i < component_links_.size(); ++i) {
    const int32_t link = component_links_[i];
    for (int32_t id : link_flows_[link]) {
      if (flow_seen_[id]) continue;
      flow_seen_[id] = true;
      touched_.push_back(id);
      for (const Hop& hop : flows_[id].path) visit_link(hop.link);
    }
  }
  for (int32_t link : component_links_) link_seen_[link] = false;
  for (int32_t id : touched_) flow_seen_[id] = false;
  std::sort(component_links_.begin(), component_links_.end());
  std::sort(touched_.begin(), touched_.end());
}

void FlowNetwork::FillRates() {
  frozen_.resize(flows_.size(), false);
  remaining_.resize(2 * links_.size(), 0);
  unfrozen_.resize(2 * links_.size(), 0);
  for (int32_t id : touched_) {
    // A flow that crosses no link is never limited.
    const bool no_links = flows_[id].path.empty();
    frozen_[id] = no_links;
    flows_[id].rate = no_links ? kInfinity : 0;
  }
  // Ascending link-directions: the first smallest share wins a tie.
  candidates_.clear();
  for (int32_t link : component_links_) {
    for (int32_t dir = 0; dir < 2; ++dir) {
      const int32_t ld = 2 * link + dir;
      unfrozen_[ld] = dir_flows_[ld];
      if (unfrozen_[ld] == 0) continue;
      const bool both = dir_flows_[2 * link + (1 - dir)] > 0;
      remaining_[ld] = Capacity(link, dir, both);
      candidates_.push_back(ld);
    }
  }
  while (!candidates_.empty()) {
    size_t best = 0;
    double best_share = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const int32_t ld = candidates_[i];
      // One unfrozen flow: remaining / 1 is exactly remaining.
      const double share = remaining_[ld] / static_cast<double>(unfrozen_[ld]);
      if (i == 0 || share < best_share) {
        best = i;
        best_share = share;
      }
    }
    const int32_t ld = candidates_[best];
    const int32_t link = ld / 2;
    for (int32_t id : link_flows_[link]) {
      if (frozen_[id]) continue;
      Flow& f = flows_[id];
      bool crosses = false;
      for (const Hop& hop : f.path) {
        if (hop.link == link && LinkDirIndex(hop) == ld) crosses = true;
      }
      if (!crosses) continue;
      frozen_[id] = true;
      f.rate = best_share;
      for (const Hop& hop : f.path) {
        const int32_t other = LinkDirIndex(hop);
        --unfrozen_[other];
        // An infinite remainder stays infinite (inf - inf would be NaN);
        // rounding must not take a remainder below zero.
        if (remaining_[other] != kInfinity) {
          remaining_[other] = std::max(0.0, remaining_[other] - best_share);
        }
      }
    }
    // The chosen link-direction has no unfrozen flow left, so each round
    // shrinks the list.
    candidates_.erase(
        std::remove_if(candidates_.begin(), candidates_.end(),
                       [this](int32_t c) { return unfrozen_[c] == 0; }),
        candidates_.end());
  }
}

}  // namespace slackswap
