// Shared links and the flows that cross them: each active flow gets its
// max-min fair rate (progressive filling), recomputed whenever a flow starts
// or ends. A link has a capacity per direction, which drops to its
// both-directions figure while a flow crosses it the other way.
//
//   FlowNetwork net;
//   int32_t uplink = net.AddLink({.h2d = 25, .d2h = 25, .both_h2d = 20,
//                                 .both_d2h = 20});
//   int32_t a = net.StartFlow({{uplink, LinkDir::kH2D}});
//   int32_t b = net.StartFlow({{uplink, LinkDir::kH2D}});
//   net.Rate(a);  // 12.5 bytes per ns: half each
//   net.EndFlow(b);
//   net.Rate(a);  // 25
//
// Progressive filling (water-filling): among the link-directions some
// unfrozen flow crosses, take the one whose remaining capacity divided by
// its unfrozen flows is smallest (the lowest link-direction index on a tie;
// index = 2 x link + dir), freeze those flows at that share, subtract it from
// every link-direction they cross, and repeat until every flow is frozen.
// Each round freezes at least one flow, so it ends. A flow alone on a
// link-direction of capacity c gets exactly c (c / 1 is exact), so one copy
// per direction moves exactly as the single-GPU simulator's copies do.
//
// Infinite capacity (std::numeric_limits<double>::infinity()) is a link that
// never limits: a flow that crosses only such links (or none) gets rate
// infinity, and the subtraction leaves an infinite remainder infinite (never
// inf - inf = NaN). A caller that moves bytes at the rate must not create
// such a flow.
//
// Rates are recomputed eagerly on StartFlow and EndFlow, for the flows
// whose rates can change only: the connected component(s), over
// link-directions, of the flow started or ended. Two flows are tied when
// they cross one link-direction; a link's two directions are tied only
// through the other direction's capacity, which changes when a direction
// gains its first flow or loses its last (and only on a link whose
// both-directions figures differ from its one-way ones). So a start or end
// refills the components of the link-directions its path crosses, and of
// the other directions of those whose flows it took from zero or to zero.
// Every other component's flows keep their rates: its filling would give
// the same bits (a component's rounds read and write only its own
// link-directions), so they are not recomputed. docs/SIMULATOR.md
// ("Shared links: max-min fairness") has a worked example.
//
// Shortcuts give the filling's bits without running it: a flow alone on
// every link-direction it crosses gets the smallest of their capacities
// (what the filling would freeze it at, c / 1 being exact, and it takes
// nothing from the others' link-directions), so a start onto link-directions
// no other flow crosses, or an end that leaves them empty, changing no other
// direction's capacity, touches nothing else and searches nothing; and a
// component of one or two flows (the one left when the other ends, two
// GPUs' copies over a switch's uplink) is found and filled without the
// search and its lists.
//
// Deterministic bit for bit: fixed iteration orders, no hashing, no
// threads. Networks are small (a node: ~100 links, a few hundred flows); a
// recompute costs O(hops + links x flows of the component) and allocates
// nothing once the member vectors have grown.
#ifndef SLACKSWAP_SIM_FLOW_NETWORK_H_
#define SLACKSWAP_SIM_FLOW_NETWORK_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace slackswap {

enum class LinkDir : uint8_t { kD2H, kH2D };

// Bytes per nanosecond (= GB/s). A link whose directions do not slow each
// other has both_* equal to the one-way rates.
struct LinkCapacity {
  double h2d = 0;
  double d2h = 0;
  double both_h2d = 0;
  double both_d2h = 0;
};

struct Hop {
  int32_t link;
  LinkDir dir;
};

class FlowNetwork {
 public:
  // REQUIRES: every rate > 0 (std::numeric_limits<double>::infinity() is a
  // link that never limits).
  int32_t AddLink(const LinkCapacity& capacity);

  // Starts a flow over `path` (one hop per link at most) and returns its id:
  // the smallest id no active flow holds (ids of ended flows are reused). An
  // empty path never limits: its rate is infinity. REQUIRES: every hop's
  // link exists.
  int32_t StartFlow(absl::Span<const Hop> path);
  // REQUIRES: `flow` is active.
  void EndFlow(int32_t flow);

  // The flow's max-min fair rate among the active flows, in bytes per ns.
  // REQUIRES: `flow` is active.
  double Rate(int32_t flow) const { return flows_[flow].rate; }

  // The active flows whose rate may have changed with the last StartFlow or
  // EndFlow: the components (top of this file) of the link-directions the
  // flow started or ended crosses, and of the other directions whose
  // capacity it changed; the started flow itself included, the ended one
  // not. Ascending ids. A caller re-reads only these rates. Valid until the
  // next StartFlow or EndFlow.
  absl::Span<const int32_t> Touched() const { return touched_; }

  int32_t num_links() const;
  int32_t num_active_flows() const;

  // Every flow's rate from the progressive filling, none from the shortcut
  // for a flow alone on its link-directions: the same rates, bit for bit,
  // which tests check by running both.
  void DisableFastPathsForTesting() { fast_paths_ = false; }
  // Every StartFlow and EndFlow refills every active flow that crosses a
  // link (all of them in Touched()): the same rates, bit for bit, which
  // tests check by running both.
  void RecomputeEverythingForTesting() { recompute_everything_ = true; }

 private:
  struct Flow {
    // Its path's link-directions (2 x link + dir), in the path's order; the
    // capacity is kept when the id is reused.
    std::vector<int32_t> lds;
    double rate = 0;
    bool active = false;
    // Scratch of FindComponent and FillRates: seen is false between calls.
    bool seen = false;
    bool frozen = false;
  };

  // After `ld` gained its first flow or lost its last: the other
  // direction's flows, if its capacity changed, seed the recompute.
  void SeedOtherDirection(int32_t ld);
  // After StartFlow or EndFlow of `flow` seeded its link-directions: true
  // when it was `alone` (the first or last flow on each of them) and seeded
  // no other direction, so no other flow's rate changes and no search is
  // needed.
  bool TouchesNoOther(bool alone, const Flow& flow) const {
    return alone && seed_.size() == flow.lds.size() && fast_paths_ &&
           !recompute_everything_;
  }
  // Finds the component(s) reachable from `started` (a flow id, or -1) and
  // the link-directions in seed_ (into touched_), and refills their rates.
  void Recompute(int32_t started);
  // When the component(s) Recompute would search hold at most two flows:
  // their rates, FillRates' bits, and touched_, without the search; says
  // true. Else false, and nothing changes.
  bool RecomputeSmallComponent(int32_t started);
  void FindComponent(int32_t started);
  void FillRates();
  // The capacity of link-direction `ld` now: its both-directions figure
  // while a flow crosses the link the other way.
  double CurrentCapacity(int32_t ld) const {
    return capacity_[2 * ld + (dir_flows_[ld ^ 1] > 0 ? 1 : 0)];
  }

  // Per link-direction, its one-way then its both-directions capacity
  // (index 2 x ld + both): read by every filling, without branching on the
  // direction. The other direction being busy lowers a link-direction's
  // capacity where the two differ.
  std::vector<double> capacity_;
  std::vector<Flow> flows_;  // by id; inactive slots are free ids
  int32_t num_active_ = 0;

  // Per link-direction, its active flows, ascending ids, and how many: kept
  // as flows start and end. The count is ld_flows_[ld].size(), kept apart
  // as one int because the filling's loops read it for every hop.
  std::vector<std::vector<int32_t>> ld_flows_;
  std::vector<int32_t> dir_flows_;
  // Scratch, sized as links are added and kept for its capacity; the seen
  // flags are all false between calls.
  std::vector<int32_t> seed_;  // link-directions a recompute starts from
  std::vector<char> ld_seen_;
  std::vector<int32_t> component_lds_;  // ascending after FindComponent
  std::vector<int32_t> touched_;        // ascending
  // Progressive filling's state per link-direction of the component.
  std::vector<double> remaining_;
  std::vector<int32_t> unfrozen_;
  std::vector<int32_t> candidates_;  // link-directions with unfrozen flows
  bool fast_paths_ = true;
  bool recompute_everything_ = false;
};

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_FLOW_NETWORK_H_
