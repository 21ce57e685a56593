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

// Into an ascending list of a few ids, and out of it: a loop, not
// vector::insert's and erase's calls to memmove, for a handful of elements.
void InsertSorted(std::vector<int32_t>* list, int32_t id) {
  std::vector<int32_t>& v = *list;
  v.push_back(id);
  size_t i = v.size() - 1;
  for (; i > 0 && v[i - 1] > id; --i) v[i] = v[i - 1];
  v[i] = id;
}

void EraseSorted(std::vector<int32_t>* list, int32_t id) {
  std::vector<int32_t>& v = *list;
  size_t i = 0;
  while (v[i] != id) ++i;
  for (; i + 1 < v.size(); ++i) v[i] = v[i + 1];
  v.pop_back();
}

// Ascending. A node's components are a few links and flows, mostly found
// in order already, where std::sort's setup costs more than the sorting.
void SortSmall(std::vector<int32_t>* out) {
  std::vector<int32_t>& v = *out;
  if (v.size() > 16) {
    std::sort(v.begin(), v.end());
    return;
  }
  for (size_t i = 1; i < v.size(); ++i) {
    const int32_t x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

}  // namespace

int32_t FlowNetwork::AddLink(const LinkCapacity& capacity) {
  const int32_t link = num_links();
  // Indexed by link-direction: D2H (0), then H2D (1).
  for (double c :
       {capacity.d2h, capacity.both_d2h, capacity.h2d, capacity.both_h2d}) {
    capacity_.push_back(c);
  }
  const size_t lds = 2 * static_cast<size_t>(link + 1);
  ld_flows_.resize(lds);
  ld_seen_.resize(lds, false);
  dir_flows_.resize(lds, 0);
  remaining_.resize(lds, 0);
  unfrozen_.resize(lds, 0);
  return link;
}

inline void FlowNetwork::SeedOtherDirection(int32_t ld) {
  const int32_t other = ld ^ 1;
  const bool slowed_by_other = capacity_[2 * other] != capacity_[2 * other + 1];
  if (slowed_by_other && dir_flows_[other] > 0) seed_.push_back(other);
}

int32_t FlowNetwork::StartFlow(absl::Span<const Hop> path) {
  // A linear scan for the smallest free id: a recompute costs more anyway.
  int32_t id = 0;
  const int32_t slots = static_cast<int32_t>(flows_.size());
  while (id < slots && flows_[id].active) ++id;
  if (id == slots) flows_.emplace_back();
  Flow& flow = flows_[id];
  flow.lds.clear();
  for (const Hop& hop : path) flow.lds.push_back(LinkDirIndex(hop));
  flow.rate = 0;
  flow.active = true;
  ++num_active_;
  seed_.clear();
  bool alone = true;  // the first flow on each of its link-directions
  for (int32_t ld : flow.lds) {
    InsertSorted(&ld_flows_[ld], id);
    seed_.push_back(ld);
    if (++dir_flows_[ld] == 1) {
      SeedOtherDirection(ld);
    } else {
      alone = false;
    }
  }
  // Alone, and no other direction's capacity changed: its component is
  // itself, at the least of its capacities (what the filling gives a flow
  // alone, c / 1 being exact).
  if (TouchesNoOther(alone, flow)) {
    double rate = kInfinity;
    for (int32_t ld : flow.lds) rate = std::min(rate, CurrentCapacity(ld));
    flow.rate = rate;
    touched_.clear();
    touched_.push_back(id);
    return id;
  }
  Recompute(id);
  return id;
}

void FlowNetwork::EndFlow(int32_t flow) {
  Flow& f = flows_[flow];
  f.active = false;
  f.rate = 0;
  --num_active_;
  seed_.clear();
  bool alone = true;  // the last flow on each of its link-directions
  for (int32_t ld : f.lds) {
    EraseSorted(&ld_flows_[ld], flow);
    seed_.push_back(ld);
    if (--dir_flows_[ld] == 0) {
      SeedOtherDirection(ld);
    } else {
      alone = false;
    }
  }
  // No flow left on its link-directions, and no other direction's capacity
  // changed: no rate changes.
  if (TouchesNoOther(alone, f)) {
    touched_.clear();
    return;
  }
  Recompute(-1);
}

int32_t FlowNetwork::num_links() const {
  return static_cast<int32_t>(capacity_.size() / 4);
}

int32_t FlowNetwork::num_active_flows() const { return num_active_; }

void FlowNetwork::Recompute(int32_t started) {
  if (recompute_everything_) {
    seed_.clear();
    for (int32_t ld = 0; ld < static_cast<int32_t>(ld_flows_.size()); ++ld) {
      if (dir_flows_[ld] > 0) seed_.push_back(ld);
    }
    FindComponent(started);
    FillRates();
    return;
  }
  // Most components are one flow (a copy on links no other copy crosses, or
  // the one left when the other ends) or two (the two GPUs behind a switch
  // over its uplink): most of the node benchmarks' starts and ends.
  if (fast_paths_ && RecomputeSmallComponent(started)) return;
  FindComponent(started);
  FillRates();
}

bool FlowNetwork::RecomputeSmallComponent(int32_t started) {
  // The component's flows, at most two, ascending: the one started, those
  // on the seed's link-directions, then those on theirs, until nothing new
  // turns up.
  int32_t members[2];
  int32_t count = 0;
  if (started >= 0) members[count++] = started;
  const auto take = [&](int32_t ld) {
    if (dir_flows_[ld] > 2) return false;
    for (int32_t id : ld_flows_[ld]) {
      if (count > 0 && members[0] == id) continue;
      if (count > 1 && members[1] == id) continue;
      if (count == 2) return false;
      members[count++] = id;
    }
    return true;
  };
  for (int32_t ld : seed_) {
    if (!take(ld)) return false;
  }
  for (int32_t k = 0; k < count; ++k) {  // count may grow while this runs
    for (int32_t ld : flows_[members[k]].lds) {
      if (!take(ld)) return false;
    }
  }
  if (count == 2 && members[0] > members[1]) {
    std::swap(members[0], members[1]);
  }
  // FillRates on this component, step for step. A flow alone on each of
  // its link-directions takes the smallest of their capacities; of two
  // flows, either both are alone (they share no link-direction) or neither.
  double rate[2] = {kInfinity, kInfinity};
  bool alone[2] = {true, true};
  for (int32_t k = 0; k < count; ++k) {
    for (int32_t ld : flows_[members[k]].lds) {
      if (dir_flows_[ld] != 1) {
        alone[k] = false;
        break;
      }
      rate[k] = std::min(rate[k], CurrentCapacity(ld));
    }
  }
  // A flow that shares a link-direction shares it with the other, so two
  // are both alone or neither, and one is alone; anything else is left to
  // the search.
  if (alone[0] != (count == 1 || alone[1])) return false;
  if (count == 2 && !alone[0]) {
    // The filling: the link-directions the two cross, ascending, each with
    // which of them cross it (bit k: members[k]) and its capacity left.
    struct Candidate {
      int32_t ld;
      int32_t crossers;
      double remaining;
    };
    constexpr size_t kMaxHops = 8;
    const std::vector<int32_t>& first = flows_[members[0]].lds;
    const std::vector<int32_t>& second = flows_[members[1]].lds;
    if (first.size() + second.size() > kMaxHops) return false;
    Candidate candidates[kMaxHops] = {};
    int32_t n = 0;
    for (int32_t k = 0; k < 2; ++k) {
      for (int32_t ld : k == 0 ? first : second) {
        int32_t at = 0;
        while (at < n && candidates[at].ld < ld) ++at;
        if (at < n && candidates[at].ld == ld) {
          candidates[at].crossers |= 1 << k;
          continue;
        }
        for (int32_t m = n; m > at; --m) candidates[m] = candidates[m - 1];
        candidates[at] = {ld, 1 << k, CurrentCapacity(ld)};
        ++n;
      }
    }
    // The first smallest share freezes the flows that cross it.
    int32_t best = 0;
    double best_share = 0;
    for (int32_t i = 0; i < n; ++i) {
      const Candidate& c = candidates[i];
      const double share =
          c.remaining / static_cast<double>(c.crossers == 3 ? 2 : 1);
      if (i == 0 || share < best_share) {
        best = i;
        best_share = share;
      }
    }
    const int32_t frozen = candidates[best].crossers;
    rate[0] = rate[1] = best_share;
    if (frozen != 3) {
      // One frozen: it takes its share from each link-direction it
      // crosses, and the other takes the least left on its own.
      const int32_t left = frozen ^ 3;
      double least = 0;
      bool any = false;
      for (int32_t i = 0; i < n; ++i) {
        Candidate& c = candidates[i];
        if ((c.crossers & frozen) != 0 && c.remaining != kInfinity) {
          c.remaining = std::max(0.0, c.remaining - best_share);
        }
        if ((c.crossers & left) == 0) continue;
        const double share = c.remaining / 1.0;
        if (!any || share < least) least = share;
        any = true;
      }
      rate[left == 1 ? 0 : 1] = least;
    }
  }
  touched_.clear();
  for (int32_t k = 0; k < count; ++k) {
    flows_[members[k]].rate = rate[k];
    touched_.push_back(members[k]);
  }
  return true;
}

void FlowNetwork::FindComponent(int32_t started) {
  // All false between calls: only what this search marks is reset.
  component_lds_.clear();
  touched_.clear();
  auto visit = [this](int32_t ld) {
    if (ld_seen_[ld]) return;
    ld_seen_[ld] = true;
    component_lds_.push_back(ld);
  };
  if (started >= 0) {
    flows_[started].seen = true;
    touched_.push_back(started);
  }
  for (int32_t ld : seed_) visit(ld);
  // Breadth-first over link-directions, component_lds_ doubling as the
  // queue: no recursion, whatever the network's shape.
  for (size_t i = 0; i < component_lds_.size(); ++i) {
    for (int32_t id : ld_flows_[component_lds_[i]]) {
      Flow& f = flows_[id];
      if (f.seen) continue;
      f.seen = true;
      touched_.push_back(id);
      for (int32_t ld : f.lds) visit(ld);
    }
  }
  for (int32_t ld : component_lds_) ld_seen_[ld] = false;
  for (int32_t id : touched_) flows_[id].seen = false;
  SortSmall(&component_lds_);
  SortSmall(&touched_);
}

void FlowNetwork::FillRates() {
  for (int32_t ld : component_lds_) unfrozen_[ld] = dir_flows_[ld];
  for (int32_t id : touched_) {
    Flow& f = flows_[id];
    // A flow alone on every link-direction it crosses (one that crosses no
    // link included) takes its rate without the filling: no other flow
    // takes from those link-directions, so the filling would freeze it at
    // the first of them it chooses, at its full capacity (c / 1 is exact),
    // which is the smallest of them; and freezing it takes from no other
    // flow's link-directions, so the others' rounds are the same without
    // it.
    bool alone = fast_paths_ || f.lds.empty();
    double rate = kInfinity;
    for (int32_t ld : f.lds) {
      if (!alone) break;
      if (dir_flows_[ld] != 1) {
        alone = false;
        break;
      }
      rate = std::min(rate, CurrentCapacity(ld));
    }
    f.frozen = alone;
    f.rate = alone ? rate : 0;
    if (!alone) continue;
    for (int32_t ld : f.lds) --unfrozen_[ld];
  }
  // Ascending link-directions: the first smallest share wins a tie.
  candidates_.clear();
  for (int32_t ld : component_lds_) {
    if (unfrozen_[ld] == 0) continue;
    remaining_[ld] = CurrentCapacity(ld);
    candidates_.push_back(ld);
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
    for (int32_t id : ld_flows_[candidates_[best]]) {
      Flow& f = flows_[id];
      if (f.frozen) continue;
      f.frozen = true;
      f.rate = best_share;
      for (int32_t other : f.lds) {
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
