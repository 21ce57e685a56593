#include "sim/link_load_recorder.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace slackswap {
namespace {

// Appends `p` unless the load is what the last point already says (0
// before the first).
void Push(const LinkLoadPoint& p, std::vector<LinkLoadPoint>* out) {
  const double h2d = out->empty() ? 0 : out->back().h2d_bytes_per_ns;
  const double d2h = out->empty() ? 0 : out->back().d2h_bytes_per_ns;
  if (p.h2d_bytes_per_ns == h2d && p.d2h_bytes_per_ns == d2h) return;
  out->push_back(p);
}

}  // namespace

void LinkLoadRecorder::SetRate(int64_t flow, absl::Span<const Hop> path,
                               int64_t from_ns, double rate) {
  for (const Hop& hop : path) {
    changes_[hop.link].push_back({from_ns, flow, hop.dir, rate});
  }
}

std::vector<LinkLoadPoint> LinkLoadRecorder::Series(int32_t link,
                                                    int32_t max_points) const {
  std::vector<Change> changes = changes_[link];
  // Stable: a flow's own changes keep their order (their times never
  // decrease), so the last rate set for an instant wins.
  std::stable_sort(
      changes.begin(), changes.end(),
      [](const Change& a, const Change& b) { return a.time_ns < b.time_ns; });
  struct Active {
    int64_t flow;
    LinkDir dir;
    double rate;
  };
  std::vector<Active> active;  // in start order
  std::vector<LinkLoadPoint> series;
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    auto it = std::find_if(active.begin(), active.end(),
                           [&](const Active& a) { return a.flow == c.flow; });
    if (c.rate == 0) {
      if (it != active.end()) active.erase(it);
    } else if (it != active.end()) {
      it->rate = c.rate;
    } else {
      active.push_back({c.flow, c.dir, c.rate});
    }
    // One point per instant, after every change at it.
    if (i + 1 < changes.size() && changes[i + 1].time_ns == c.time_ns) {
      continue;
    }
    LinkLoadPoint p{.time_ns = c.time_ns};
    for (const Active& a : active) {
      (a.dir == LinkDir::kH2D ? p.h2d_bytes_per_ns : p.d2h_bytes_per_ns) +=
          a.rate;
    }
    Push(p, &series);
  }
  if (max_points > 0 && series.size() > static_cast<size_t>(max_points)) {
    return AverageLinkLoad(series, max_points);
  }
  return series;
}

std::vector<LinkLoadPoint> AverageLinkLoad(
    const std::vector<LinkLoadPoint>& series, int32_t points) {
  if (series.empty() || series.back().time_ns <= 0) return series;
  const int64_t end = series.back().time_ns;
  const int64_t spans = std::max<int64_t>(1, points - 1);
  const int64_t width = (end + spans - 1) / spans;  // end < 2^62: no overflow
  // Bytes moved in each span, each way.
  std::vector<double> h2d(spans, 0);
  std::vector<double> d2h(spans, 0);
  for (size_t i = 0; i + 1 < series.size(); ++i) {
    int64_t from = series[i].time_ns;
    const int64_t to = series[i + 1].time_ns;
    while (from < to) {
      const int64_t k = from / width;
      const int64_t until = std::min(to, (k + 1) * width);
      const double ns = static_cast<double>(until - from);
      h2d[k] += series[i].h2d_bytes_per_ns * ns;
      d2h[k] += series[i].d2h_bytes_per_ns * ns;
      from = until;
    }
  }
  std::vector<LinkLoadPoint> out;
  for (int64_t k = 0; k < spans; ++k) {
    const double w = static_cast<double>(width);
    Push({.time_ns = k * width,
          .h2d_bytes_per_ns = h2d[k] / w,
          .d2h_bytes_per_ns = d2h[k] / w},
         &out);
  }
  Push({.time_ns = spans * width}, &out);
  return out;
}

}  // namespace slackswap
