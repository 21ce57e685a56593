// The load on a node's shared links over the step, per direction: what the
// Chrome trace's link counters and the SVG report's link panels draw.
//
//   for (const v1::LinkUsage& link : node.links()) {
//     std::vector<LinkLoadSample> load = LinkLoad(link, node);
//     // load[i].h2d_bytes_per_s move toward the GPUs from load[i].time_ns
//     // until load[i + 1].time_ns.
//   }
//
// The simulator's own series (LinkUsage.load) when the result has one: host
// copies and collectives' transfers (NVLink, and without it the PCIe
// uplinks and the inter-socket link) at the rates the simulator gave them.
// A result without one (recorded by an older server) gets an estimate from
// the ranks' host copies alone.
#ifndef SLACKSWAP_IO_LINK_LOAD_H_
#define SLACKSWAP_IO_LINK_LOAD_H_

#include <cstdint>
#include <vector>

#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

struct LinkLoadSample {
  int64_t time_ns = 0;
  // Bytes per second moving over the link from time_ns on (rounded to the
  // nearest; whole bytes per second are far below what a trace or a
  // picture shows).
  int64_t h2d_bytes_per_s = 0;
  int64_t d2h_bytes_per_s = 0;

  bool operator==(const LinkLoadSample& o) const {
    return time_ns == o.time_ns && h2d_bytes_per_s == o.h2d_bytes_per_s &&
           d2h_bytes_per_s == o.d2h_bytes_per_s;
  }
};

// One sample per instant the link's load changes, in time order, the last
// 0 both ways. From link.load when it has points; else from the copies on
// the D2H and H2D streams of the ranks the link carries (LinkUsage.ranks;
// ranks outside the node are ignored), each at its average rate (its
// StreamEvent.bytes over its duration, latency included) from its start to
// its end, which moves its bytes but not at the instants the simulator
// did. Empty when nothing is known to have crossed it.
std::vector<LinkLoadSample> LinkLoad(const v1::LinkUsage& link,
                                     const v1::NodeSimulation& n);

// Whether LinkLoad has anything for the link: a series, or ranks whose
// copies it carries.
bool HasLinkLoad(const v1::LinkUsage& link);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_LINK_LOAD_H_
