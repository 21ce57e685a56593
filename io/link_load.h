// The load on a node's shared links over the step, per direction, derived
// from the ranks' host copies: what the Chrome trace's link counters and
// the SVG report's link panels draw.
//
//   for (const v1::LinkUsage& link : node.links()) {
//     std::vector<LinkLoadSample> load = LinkBytesInFlight(link, node);
//     // load[i].h2d_bytes are in flight toward the GPUs from
//     // load[i].time_ns until load[i + 1].time_ns.
//   }
//
// The simulator reports each link's totals (LinkUsage), not its load over
// time; this is the one place that rebuilds it, so a per-link series in the
// message can replace the derivation here for every caller.
#ifndef SLACKSWAP_IO_LINK_LOAD_H_
#define SLACKSWAP_IO_LINK_LOAD_H_

#include <cstdint>
#include <vector>

#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

struct LinkLoadSample {
  int64_t time_ns = 0;
  // Bytes of host copies in flight over the link from time_ns on.
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
};

// One sample per instant a copy over `link` starts or ends (after every
// change at that instant), in time order: the copies on the D2H and H2D
// streams of the ranks the link carries (LinkUsage.ranks; ranks outside
// the node are ignored), each in flight from its start to its end with its
// StreamEvent.bytes. Collectives' transfers are not counted. Empty when
// the ranks recorded no copies (or no events at all).
std::vector<LinkLoadSample> LinkBytesInFlight(const v1::LinkUsage& link,
                                              const v1::NodeSimulation& n);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_LINK_LOAD_H_
