// Each shared link's load over a node's step, per direction: the bytes per
// ns its flows carry, a step function of time. The node simulator tells it
// every rate it gives a flow (and when the flow ends); rates hold between
// those instants, so the series is exact, and its integral over time is the
// bytes the flows moved over the link (within each flow's last partial
// nanosecond: a copy ends on the whole nanosecond after its last byte).
//
//   LinkLoadRecorder rec(num_links);
//   const int64_t f = rec.Open();
//   rec.SetRate(f, path, /*from_ns=*/100, 25.0);  // path: its links
//   rec.SetRate(f, path, /*from_ns=*/140, 0);     // ended
//   std::vector<LinkLoadPoint> s = rec.Series(link, /*max_points=*/0);
//
// Only a node simulation asked for it records (SimOptions::
// record_link_load): the recording costs one append per hop per rate
// change, which plan searches do not pay. Deterministic bit for bit: the
// sums are taken in the flows' start order at every instant, not kept as
// running totals (which would drift from exactly 0 when flows end).
#ifndef SLACKSWAP_SIM_LINK_LOAD_RECORDER_H_
#define SLACKSWAP_SIM_LINK_LOAD_RECORDER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "sim/flow_network.h"

namespace slackswap {

// From time_ns until the next point: the link's load each way, in bytes
// per ns (= GB/s). The last point of a series is 0 both ways.
struct LinkLoadPoint {
  int64_t time_ns = 0;
  double h2d_bytes_per_ns = 0;
  double d2h_bytes_per_ns = 0;

  bool operator==(const LinkLoadPoint& o) const {
    return time_ns == o.time_ns && h2d_bytes_per_ns == o.h2d_bytes_per_ns &&
           d2h_bytes_per_ns == o.d2h_bytes_per_ns;
  }
};

class LinkLoadRecorder {
 public:
  explicit LinkLoadRecorder(int32_t num_links) : changes_(num_links) {}

  // A new flow's id (ids are never reused, unlike the network's).
  int64_t Open() { return next_flow_++; }

  // From `from_ns` on, `flow` carries `rate` bytes per ns over each hop of
  // `path` (0: it has ended). REQUIRES: from_ns not before the flow's
  // previous SetRate; every hop's link < num_links.
  void SetRate(int64_t flow, absl::Span<const Hop> path, int64_t from_ns,
               double rate);

  // `link`'s series: a point at every instant its load changes (equal
  // consecutive points coalesced). With max_points > 0 and more points
  // than that, the average load over each of max_points - 1 equal spans of
  // time (which keeps the bytes moved, as a peak-keeping downsample would
  // not). Empty when no flow crossed it.
  std::vector<LinkLoadPoint> Series(int32_t link, int32_t max_points) const;

 private:
  struct Change {
    int64_t time_ns;
    int64_t flow;
    LinkDir dir;
    double rate;
  };
  std::vector<std::vector<Change>> changes_;  // per link, as recorded
  int64_t next_flow_ = 0;
};

// The average of `series` over max(1, points - 1) equal spans from 0 to its
// last point, coalesced. REQUIRES: points > 0; series in time order.
std::vector<LinkLoadPoint> AverageLinkLoad(
    const std::vector<LinkLoadPoint>& series, int32_t points);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_LINK_LOAD_RECORDER_H_
