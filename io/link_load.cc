#include "io/link_load.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace slackswap {
namespace {

// Bytes per ns as whole bytes per second, saturating (a rate is finite and
// at most a few thousand bytes per ns on any real link).
int64_t PerSecond(double bytes_per_ns) {
  const double v = std::round(bytes_per_ns * 1e9);
  if (!(v < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return v > 0 ? static_cast<int64_t>(v) : 0;
}

int64_t ClampedRate(__int128 sum) {
  return static_cast<int64_t>(
      std::clamp<__int128>(sum, 0, std::numeric_limits<int64_t>::max()));
}

std::vector<LinkLoadSample> FromSeries(const v1::LinkUsage& link) {
  std::vector<LinkLoadSample> load;
  load.reserve(link.load_size());
  for (const v1::LinkLoadPoint& p : link.load()) {
    load.push_back({p.time_ns(), PerSecond(p.h2d_bytes_per_ns()),
                    PerSecond(p.d2h_bytes_per_ns())});
  }
  return load;
}

// Each copy's average rate from its start to its end: +rate, then -rate
// (whole numbers, so the sum returns to exactly 0).
std::vector<LinkLoadSample> FromCopies(const v1::LinkUsage& link,
                                       const v1::NodeSimulation& n) {
  std::vector<LinkLoadSample> changes;
  for (int32_t rank : link.ranks()) {
    if (rank < 0 || rank >= n.ranks_size()) continue;
    for (const v1::StreamEvent& e : n.ranks(rank).result().events()) {
      const bool h2d = e.stream() == v1::STREAM_H2D;
      if (!h2d && e.stream() != v1::STREAM_D2H) continue;
      if (e.end_ns() <= e.start_ns()) continue;  // moved nothing over time
      // In double: a hostile file's times may span more than int64.
      const int64_t r = PerSecond(static_cast<double>(e.bytes()) /
                                  (static_cast<double>(e.end_ns()) -
                                   static_cast<double>(e.start_ns())));
      changes.push_back({e.start_ns(), h2d ? r : 0, h2d ? 0 : r});
      changes.push_back({e.end_ns(), h2d ? -r : 0, h2d ? 0 : -r});
    }
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const LinkLoadSample& a, const LinkLoadSample& b) {
                     return a.time_ns < b.time_ns;
                   });
  std::vector<LinkLoadSample> load;
  // Wider than the rates: a file's copies may each claim int64's largest
  // rate, and the sums must still return to exactly 0.
  __int128 h2d = 0;
  __int128 d2h = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    h2d += changes[i].h2d_bytes_per_s;
    d2h += changes[i].d2h_bytes_per_s;
    // One sample per instant, after every change at it.
    if (i + 1 < changes.size() &&
        changes[i + 1].time_ns == changes[i].time_ns) {
      continue;
    }
    load.push_back({changes[i].time_ns, ClampedRate(h2d), ClampedRate(d2h)});
  }
  return load;
}

}  // namespace

std::vector<LinkLoadSample> LinkLoad(const v1::LinkUsage& link,
                                     const v1::NodeSimulation& n) {
  return link.load().empty() ? FromCopies(link, n) : FromSeries(link);
}

bool HasLinkLoad(const v1::LinkUsage& link) {
  return !link.load().empty() || !link.ranks().empty();
}

}  // namespace slackswap
