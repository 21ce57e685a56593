#include "io/link_load.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace slackswap {

std::vector<LinkLoadSample> LinkBytesInFlight(const v1::LinkUsage& link,
                                              const v1::NodeSimulation& n) {
  // Each copy is +bytes at its start and -bytes at its end.
  std::vector<LinkLoadSample> changes;
  for (int32_t rank : link.ranks()) {
    if (rank < 0 || rank >= n.ranks_size()) continue;
    for (const v1::StreamEvent& e : n.ranks(rank).result().events()) {
      const bool h2d = e.stream() == v1::STREAM_H2D;
      if (!h2d && e.stream() != v1::STREAM_D2H) continue;
      const int64_t b = e.bytes();
      changes.push_back({e.start_ns(), h2d ? b : 0, h2d ? 0 : b});
      changes.push_back({e.end_ns(), h2d ? -b : 0, h2d ? 0 : -b});
    }
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const LinkLoadSample& a, const LinkLoadSample& b) {
                     return a.time_ns < b.time_ns;
                   });
  std::vector<LinkLoadSample> load;
  int64_t h2d = 0;
  int64_t d2h = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    h2d += changes[i].h2d_bytes;
    d2h += changes[i].d2h_bytes;
    // One sample per instant, after every change at it.
    if (i + 1 < changes.size() &&
        changes[i + 1].time_ns == changes[i].time_ns) {
      continue;
    }
    load.push_back({changes[i].time_ns, h2d, d2h});
  }
  return load;
}

}  // namespace slackswap
