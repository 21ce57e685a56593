#include "io/svg_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/format.h"
#include "common/saturating.h"
#include "io/link_load.h"

namespace slackswap {
namespace {

// The page: every panel shares one horizontal plot area, so times line up
// from panel to panel.
constexpr double kWidth = 1200;
constexpr double kPlotLeft = 80;
constexpr double kPlotWidth = 1100;

// Pixel columns events and samples are merged into: a lane draws at most
// one rectangle per column, a chart two points. Fewer on a node, whose
// panels are many; halved again while the document is too large.
constexpr int kStepColumns = 550;
constexpr int kNodeColumns = 300;
constexpr int kMinColumns = 16;

// Characters of an input name shown (the title gets more).
constexpr size_t kMaxNameChars = 80;
constexpr size_t kMaxTitleChars = 160;

// Colours (Tableau 10): distinct enough to tell apart at a glance, and
// exact (crisp edges) so that a test can find them in a rendering.
constexpr char kStaticColor[] = "#bab0ac";
constexpr char kActivationColor[] = "#4e79a7";
constexpr char kTransientColor[] = "#f28e2b";
constexpr char kReservedColor[] = "#333333";
constexpr char kBudgetColor[] = "#e15759";
constexpr char kDeviceColor[] = "#7b2cbf";
constexpr char kGridColor[] = "#e8e8e8";
constexpr char kLaneColor[] = "#f4f4f4";

// Per EventKind (op for any kind this file does not know).
constexpr int kKinds = 6;
constexpr std::array<const char*, kKinds> kEventColors = {
    "#59a14f",  // unspecified: as an op
    "#59a14f",  // op
    "#b07aa1",  // recompute
    "#76b7b2",  // swap-out
    "#edc948",  // prefetch
    "#9c755f",  // collective
};
// The decision markers: a darker shade of their event's colour.
constexpr std::array<const char*, kKinds> kMarkerColors = {
    "", "", "#7a4f72", "#3d7c78", "#b8961a", ""};

int KindIndex(v1::EventKind k) {
  const int i = static_cast<int>(k);
  return i >= 1 && i < kKinds ? i : v1::EVENT_KIND_OP;
}

// `s` as XML character data or attribute value: valid UTF-8 (a malformed
// sequence becomes U+FFFD), no control characters XML forbids (each
// becomes '?'), markup characters escaped, cut to `max_chars` characters
// with an ellipsis. Names come from user graphs: nothing in them may end
// an element or a document early.
std::string XmlText(absl::string_view s, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (chars == max_chars) {
      absl::StrAppend(&out, "\xE2\x80\xA6");  // …
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    ++chars;
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          out += (c < 0x20 || c == 0x7F) ? '?' : static_cast<char>(c);
      }
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then the
    // continuation bytes, rejecting overlong forms, surrogates, code
    // points past U+10FFFF and the noncharacters XML excludes.
    int length = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      cp = c & 0x07;
    }
    bool valid = length > 0 && i + length <= s.size();
    for (int k = 1; valid && k < length; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      valid = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (valid) {
      valid = !(length == 3 && cp < 0x800) && !(length == 4 && cp < 0x10000) &&
              cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) &&
              cp != 0xFFFE && cp != 0xFFFF;
    }
    if (valid) {
      out.append(s.data() + i, length);
      i += length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

// Coordinates to a tenth of a pixel: finer is invisible, and longer.
std::string Px(double v) { return absl::StrFormat("%.1f", v); }

// The time axis: [0, end_ns) over the plot area, cut into `columns`.
struct TimeScale {
  int64_t end_ns = 1;
  int columns = kStepColumns;

  double X(int64_t ns) const {
    return kPlotLeft +
           kPlotWidth * static_cast<double>(ns) / static_cast<double>(end_ns);
  }
  double ColumnX(int c) const { return kPlotLeft + kPlotWidth * c / columns; }
  int64_t ColumnStart(int c) const {
    return SaturatingTrunc(static_cast<double>(end_ns) * c / columns);
  }
  int Column(int64_t ns) const {
    const double c = static_cast<double>(ns) * columns / end_ns;
    return static_cast<int>(std::clamp(c, 0.0, columns - 1.0));
  }
};

// A value that holds from `time_ns` until the next point's time.
struct StepPoint {
  int64_t time_ns;
  int64_t value;
};

// The largest value a step function (0 before its first point) takes in
// each column.
std::vector<int64_t> ColumnMaxima(std::vector<StepPoint> points,
                                  const TimeScale& t) {
  std::stable_sort(points.begin(), points.end(),
                   [](const StepPoint& a, const StepPoint& b) {
                     return a.time_ns < b.time_ns;
                   });
  std::vector<int64_t> maxima(t.columns, 0);
  int64_t current = 0;
  size_t next = 0;
  for (int c = 0; c < t.columns; ++c) {
    const int64_t end = c + 1 == t.columns ? std::numeric_limits<int64_t>::max()
                                           : t.ColumnStart(c + 1);
    int64_t most = current;
    while (next < points.size() && points[next].time_ns < end) {
      current = points[next++].value;
      most = std::max(most, current);
    }
    maxima[c] = most;
  }
  return maxima;
}

// A value scale: [0, max] upward from `bottom` over `height` pixels.
struct ValueScale {
  double bottom = 0;
  double height = 1;
  int64_t max = 1;

  double Y(int64_t v) const { return Y(static_cast<double>(v)); }
  double Y(double v) const {
    return bottom - height * v / static_cast<double>(max);
  }
};

// A polygon's points: the columns' values as a step outline from the
// baseline `base_y`, two points where the value changes.
std::string StepOutline(const std::vector<int64_t>& values, const TimeScale& t,
                        const ValueScale& s, double base_y, bool downward) {
  // Downward: mirrored below the scale's bottom (a link's d2h side).
  auto y = [&](int64_t v) { return downward ? 2 * s.bottom - s.Y(v) : s.Y(v); };
  std::string points = absl::StrCat(Px(t.ColumnX(0)), ",", Px(base_y));
  for (int c = 0; c < t.columns; ++c) {
    if (c > 0 && values[c] == values[c - 1]) continue;
    absl::StrAppend(&points, " ", Px(t.ColumnX(c)), ",", Px(y(values[c])));
    // The value holds until the next change.
    int end = c + 1;
    while (end < t.columns && values[end] == values[c]) ++end;
    absl::StrAppend(&points, " ", Px(t.ColumnX(end)), ",", Px(y(values[c])));
  }
  absl::StrAppend(&points, " ", Px(t.ColumnX(t.columns)), ",", Px(base_y));
  return points;
}

// "0.5", "20", "1.25": as many decimals as the tick step needs.
std::string TickLabel(double v, double step) {
  const int decimals =
      std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return absl::StrFormat("%.*f", decimals, v);
}

// A round step (1, 2 or 5 times a power of ten) giving about `target` ticks
// over `range`.
double NiceStep(double range, int target) {
  if (range <= 0) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

void Text(double x, double y, absl::string_view escaped, std::string* out,
          absl::string_view attributes = "") {
  absl::StrAppend(out, "<text x=\"", Px(x), "\" y=\"", Px(y), "\"",
                  attributes.empty() ? "" : " ", attributes, ">", escaped,
                  "</text>\n");
}

void Rect(double x, double y, double w, double h, absl::string_view fill,
          std::string* out, absl::string_view id = "") {
  absl::StrAppend(out, "<rect", id.empty() ? "" : " id=\"", id,
                  id.empty() ? "" : "\"", " x=\"", Px(x), "\" y=\"", Px(y),
                  "\" width=\"", Px(w), "\" height=\"", Px(h), "\" fill=\"",
                  fill, "\"/>\n");
}

void HorizontalLine(double y, absl::string_view color, absl::string_view dash,
                    absl::string_view id, std::string* out) {
  absl::StrAppend(out, "<line id=\"", id, "\" x1=\"", Px(kPlotLeft), "\" y1=\"",
                  Px(y), "\" x2=\"", Px(kPlotLeft + kPlotWidth), "\" y2=\"",
                  Px(y), "\" stroke=\"", color, "\" stroke-width=\"2\"",
                  dash.empty() ? "" : " stroke-dasharray=\"", dash,
                  dash.empty() ? "" : "\"", "/>\n");
}

// Vertical grid lines from `top` to `bottom` and their labels in ms below.
void TimeAxis(const TimeScale& t, double top, double bottom, bool label_unit,
              std::string* out) {
  const double end_ms = t.end_ns / 1e6;
  const double step = NiceStep(end_ms, 10);
  std::string grid;
  std::string labels;
  for (int i = 0; i * step <= end_ms + 1e-9; ++i) {
    const double x =
        kPlotLeft + kPlotWidth * (i * step) / std::max(end_ms, 1e-12);
    absl::StrAppend(&grid, "M", Px(x), " ", Px(top), "V", Px(bottom));
    Text(x, bottom + 12, TickLabel(i * step, step), &labels,
         "text-anchor=\"middle\"");
  }
  absl::StrAppend(out, "<path d=\"", grid, "\" stroke=\"", kGridColor,
                  "\" stroke-width=\"1\"/>\n",
                  "<g font-size=\"10\" fill=\"#555555\">\n", labels);
  if (label_unit) {
    Text(kPlotLeft + kPlotWidth, bottom + 24, "time (ms)", out,
         "text-anchor=\"end\"");
  }
  absl::StrAppend(out, "</g>\n");
}

// Horizontal grid lines and their labels in GB at the left.
void MemoryAxis(const ValueScale& s, std::string* out) {
  const double max_gb = s.max / 1e9;
  const double step = NiceStep(max_gb, s.height > 150 ? 6 : 3);
  std::string grid;
  std::string labels;
  for (int i = 0; i * step <= max_gb + 1e-12; ++i) {
    const double y = s.Y(i * step * 1e9);
    absl::StrAppend(&grid, "M", Px(kPlotLeft), " ", Px(y), "H",
                    Px(kPlotLeft + kPlotWidth));
    Text(kPlotLeft - 6, y + 3, absl::StrCat(TickLabel(i * step, step), " GB"),
         &labels, "text-anchor=\"end\"");
  }
  absl::StrAppend(out, "<path d=\"", grid, "\" stroke=\"", kGridColor,
                  "\" stroke-width=\"1\"/>\n",
                  "<g font-size=\"10\" fill=\"#555555\">\n", labels, "</g>\n");
}

// The most bytes a result's memory reaches: static, activation and
// transient bytes together, the allocator's reserve, the budget.
int64_t MemoryExtent(const v1::SimulationResult& r) {
  int64_t most = SaturatingAdd(
      r.static_bytes(),
      SaturatingAdd(r.peak_activation_bytes(), r.peak_transient_bytes()));
  for (const v1::MemoryPoint& p : r.memory_timeline()) {
    most = std::max(most, SaturatingAdd(r.static_bytes(),
                                        SaturatingAdd(p.activation_bytes(),
                                                      p.transient_bytes())));
    most = std::max(most, p.reserved_bytes());
  }
  if (r.budget_bytes() > 0) {
    most = std::max(most, SaturatingAdd(r.static_bytes(), r.budget_bytes()));
  }
  if (r.has_device()) most = std::max(most, r.device().peak_reserved_bytes());
  return std::max<int64_t>(most, 1);
}

// A device this many times larger than the memory used would flatten the
// chart to a line: it is named above the chart instead of drawn.
constexpr int64_t kDeviceOnScale = 3;

// The top of a result's memory scale: its memory with a margin, and the
// device's capacity when that is on the scale.
int64_t ChartTop(const v1::SimulationResult& r) {
  const int64_t used = MemoryExtent(r);
  int64_t top = SaturatingAdd(used, used / 10);
  if (r.has_device() &&
      r.device().capacity_bytes() <= SaturatingMul(kDeviceOnScale, used)) {
    top = std::max(top, SaturatingAdd(r.device().capacity_bytes(),
                                      r.device().capacity_bytes() / 20));
  }
  return top;
}

// The end of everything a result drew: its step, its events, its timeline.
int64_t TimeExtent(const v1::SimulationResult& r) {
  int64_t end = r.step_ns();
  for (const v1::StreamEvent& e : r.events()) end = std::max(end, e.end_ns());
  for (const v1::MemoryPoint& p : r.memory_timeline()) {
    end = std::max(end, p.time_ns());
  }
  return std::max<int64_t>(end, 1);
}

// ": fits (needs 4.13 GB)".
std::string DeviceVerdict(const v1::DeviceMemory& d) {
  return absl::StrCat(d.fits_device() ? ": fits" : ": does not fit", " (needs ",
                      FormatBytes(d.required_bytes()), ")");
}

// "; device 80 GB, above the scale: fits (needs 4.13 GB)" for a device too
// large for the chart to show (kDeviceOnScale); empty otherwise.
std::string DeviceAboveScale(const v1::SimulationResult& r, int64_t scale_max) {
  if (!r.has_device() || r.device().capacity_bytes() <= scale_max) return "";
  return absl::StrCat("; device ", FormatBytes(r.device().capacity_bytes()),
                      ", above the scale", DeviceVerdict(r.device()));
}

// The memory chart: stacked static, activation and transient bytes, the
// allocator's reserved bytes as a line, the budget and the device.
void MemoryChart(const v1::SimulationResult& r, const TimeScale& t,
                 const ValueScale& s, absl::string_view id, std::string* out) {
  const double top = s.bottom - s.height;
  absl::StrAppend(out, "<g id=\"", id, "\" data-top=\"", Px(top),
                  "\" data-bottom=\"", Px(s.bottom), "\" data-max-bytes=\"",
                  s.max, "\">\n");
  MemoryAxis(s, out);
  std::vector<StepPoint> activation;
  std::vector<StepPoint> total;
  std::vector<StepPoint> reserved;
  const int64_t fixed = r.static_bytes();
  activation.push_back({0, fixed});
  total.push_back({0, fixed});
  for (const v1::MemoryPoint& p : r.memory_timeline()) {
    const int64_t live = SaturatingAdd(fixed, p.activation_bytes());
    activation.push_back({p.time_ns(), live});
    total.push_back({p.time_ns(), SaturatingAdd(live, p.transient_bytes())});
    reserved.push_back({p.time_ns(), p.reserved_bytes()});
  }
  // Painted back to front: each layer's outline includes those below it.
  const std::vector<int64_t> totals = ColumnMaxima(std::move(total), t);
  absl::StrAppend(out, "<polygon id=\"", id, "-transient\" fill=\"",
                  kTransientColor, "\" points=\"",
                  StepOutline(totals, t, s, s.bottom, false), "\"/>\n");
  const std::vector<int64_t> activations =
      ColumnMaxima(std::move(activation), t);
  absl::StrAppend(out, "<polygon id=\"", id, "-activation\" fill=\"",
                  kActivationColor, "\" points=\"",
                  StepOutline(activations, t, s, s.bottom, false), "\"/>\n");
  if (fixed > 0) {
    Rect(kPlotLeft, s.Y(fixed), kPlotWidth, s.bottom - s.Y(fixed), kStaticColor,
         out, absl::StrCat(id, "-static"));
  }
  if (r.has_device() && !reserved.empty()) {
    const std::vector<int64_t> reserves = ColumnMaxima(std::move(reserved), t);
    std::string points = StepOutline(reserves, t, s, s.bottom, false);
    absl::StrAppend(out, "<polyline id=\"", id,
                    "-reserved\" fill=\"none\" stroke=\"", kReservedColor,
                    "\" stroke-width=\"1.5\" points=\"", points, "\"/>\n");
  }
  std::string labels;
  if (r.budget_bytes() > 0) {
    const double y = std::round(s.Y(SaturatingAdd(fixed, r.budget_bytes())));
    HorizontalLine(y, kBudgetColor, "8,4", absl::StrCat(id, "-budget"), out);
    Text(kPlotLeft + 4, y - 4,
         absl::StrCat("budget ", FormatBytes(r.budget_bytes()),
                      fixed > 0 ? " (above static)" : ""),
         &labels, absl::StrCat("fill=\"", kBudgetColor, "\""));
  }
  // A device above the scale is named in the panel's header instead
  // (DeviceAboveScale).
  if (r.has_device() && r.device().capacity_bytes() > 0 &&
      r.device().capacity_bytes() <= s.max) {
    const v1::DeviceMemory& d = r.device();
    const double y = std::round(s.Y(d.capacity_bytes()));
    HorizontalLine(y, kDeviceColor, "", absl::StrCat(id, "-device"), out);
    // Above the line: the dotted one below is the usable memory.
    Text(kPlotLeft + kPlotWidth - 4, y - 4,
         absl::StrCat("device ", FormatBytes(d.capacity_bytes()),
                      DeviceVerdict(d)),
         &labels,
         absl::StrCat("text-anchor=\"end\" fill=\"", kDeviceColor, "\""));
    const int64_t usable = SaturatingSub(
        SaturatingSub(d.capacity_bytes(), d.framework_reserve_bytes()),
        d.headroom_bytes());
    if (usable > 0 && usable < d.capacity_bytes()) {
      HorizontalLine(std::round(s.Y(usable)), kDeviceColor, "2,3",
                     absl::StrCat(id, "-usable"), out);
    }
  }
  absl::StrAppend(out, "<g font-size=\"11\">\n", labels, "</g>\n</g>\n");
}

struct Lane {
  v1::Stream stream;
  const char* label;
  const char* id;
};

// Compute, D2H and H2D always (an empty copy lane says "no swaps"), and
// collectives where the result ran any.
std::vector<Lane> LanesOf(const v1::SimulationResult& r) {
  std::vector<Lane> lanes = {{v1::STREAM_COMPUTE, "compute", "compute"},
                             {v1::STREAM_D2H, "D2H", "d2h"},
                             {v1::STREAM_H2D, "H2D", "h2d"}};
  for (const v1::StreamEvent& e : r.events()) {
    if (e.stream() == v1::STREAM_COMM) {
      lanes.push_back({v1::STREAM_COMM, "collectives", "comm"});
      break;
    }
  }
  return lanes;
}

bool OnLane(const v1::StreamEvent& e, v1::Stream lane) {
  // An event without a stream is drawn with the compute stream's.
  const v1::Stream s =
      e.stream() == v1::STREAM_UNSPECIFIED ? v1::STREAM_COMPUTE : e.stream();
  return s == lane;
}

// The lanes below a chart, from `top`: each a strip of decision markers
// above a band where every column shows the kind of event that kept the
// stream busiest in it. Returns the bottom of the last lane.
double Lanes(const v1::SimulationResult& r, const TimeScale& t, double top,
             double lane_height, double marker_height, absl::string_view id,
             std::string* out) {
  double y = top;
  std::string labels;
  for (const Lane& lane : LanesOf(r)) {
    const double band = y + marker_height;
    Rect(kPlotLeft, band, kPlotWidth, lane_height, kLaneColor, out,
         absl::StrCat(id, "-lane-", lane.id));
    Text(kPlotLeft - 6, band + lane_height / 2 + 3, lane.label, &labels,
         "text-anchor=\"end\"");
    // Busy time per column and kind; markers where a decision's event
    // starts.
    std::vector<std::array<int64_t, kKinds>> busy(t.columns);
    std::vector<std::array<bool, kKinds>> marked(t.columns);
    for (const v1::StreamEvent& e : r.events()) {
      if (!OnLane(e, lane.stream)) continue;
      const int kind = KindIndex(e.kind());
      const int64_t start = std::clamp<int64_t>(e.start_ns(), 0, t.end_ns);
      const int64_t end = std::clamp<int64_t>(e.end_ns(), start, t.end_ns);
      const int first = t.Column(start);
      if (kMarkerColors[kind][0] != '\0') marked[first][kind] = true;
      if (end == start) {
        busy[first][kind] = SaturatingAdd(busy[first][kind], 1);  // seen
        continue;
      }
      const int last = t.Column(end - 1);
      for (int c = first; c <= last; ++c) {
        const int64_t from = std::max(start, t.ColumnStart(c));
        const int64_t to =
            c + 1 == t.columns ? end : std::min(end, t.ColumnStart(c + 1));
        busy[c][kind] =
            SaturatingAdd(busy[c][kind], std::max<int64_t>(to - from, 1));
      }
    }
    // Runs of columns with the same busiest kind, one rectangle each.
    std::array<std::string, kKinds> rects;
    int c = 0;
    while (c < t.columns) {
      const auto& b = busy[c];
      const int kind =
          static_cast<int>(std::max_element(b.begin(), b.end()) - b.begin());
      if (b[kind] == 0) {
        ++c;
        continue;
      }
      int end = c + 1;
      while (end < t.columns) {
        const auto& n = busy[end];
        const int next =
            static_cast<int>(std::max_element(n.begin(), n.end()) - n.begin());
        if (n[next] == 0 || next != kind) break;
        ++end;
      }
      absl::StrAppend(&rects[kind], "<rect x=\"", Px(t.ColumnX(c)), "\" y=\"",
                      Px(band), "\" width=\"",
                      Px(t.ColumnX(end) - t.ColumnX(c)), "\" height=\"",
                      Px(lane_height), "\"/>");
      c = end;
    }
    for (int k = 0; k < kKinds; ++k) {
      if (rects[k].empty()) continue;
      absl::StrAppend(out, "<g fill=\"", kEventColors[k], "\">", rects[k],
                      "</g>\n");
    }
    for (int k = 0; k < kKinds; ++k) {
      if (kMarkerColors[k][0] == '\0') continue;
      std::string path;
      for (int col = 0; col < t.columns; ++col) {
        if (!marked[col][k]) continue;
        // A triangle pointing down at the event's first column.
        const double x = (t.ColumnX(col) + t.ColumnX(col + 1)) / 2;
        absl::StrAppend(&path, "M", Px(x - 3), " ", Px(y), "h6l-3 ",
                        Px(marker_height - 1), "z");
      }
      if (path.empty()) continue;
      absl::StrAppend(out, "<path id=\"", id, "-", lane.id, "-markers-", k,
                      "\" fill=\"", kMarkerColors[k], "\" d=\"", path,
                      "\"/>\n");
    }
    y = band + lane_height + 4;
  }
  absl::StrAppend(out, "<g font-size=\"10\" fill=\"#333333\">\n", labels,
                  "</g>\n");
  return y - 4;
}

// "step 412.3 ms (ideal 399.9 ms), 97.0% retained": or why it failed.
std::string Summary(const v1::SimulationResult& r) {
  std::string s =
      r.feasible()
          ? absl::StrFormat("step %s (ideal %s), %.1f%% of ideal throughput",
                            FormatMs(r.step_ns()), FormatMs(r.ideal_step_ns()),
                            100 * r.throughput_retained())
          : absl::StrCat("infeasible: ", XmlText(r.infeasible_reason(), 160));
  absl::StrAppend(&s, "; peak activation ",
                  FormatBytes(r.peak_activation_bytes()), ", static ",
                  FormatBytes(r.static_bytes()));
  return s;
}

// The plan's decisions in numbers; and the largest swapped and the longest
// recomputed tensors by name (escaped), a line of their own.
std::pair<std::string, std::string> Decisions(const v1::SimulationResult& r) {
  std::string s = absl::StrCat(
      "swapped ", r.swapped_tensors(), " tensors (D2H ",
      FormatBytes(r.d2h_bytes()), ", H2D ", FormatBytes(r.h2d_bytes()),
      "); recomputed ", r.recomputed_tensors(), " tensors (",
      FormatMs(r.recompute_ns()), " of compute)");
  std::vector<const v1::StreamEvent*> swaps;
  std::vector<const v1::StreamEvent*> rebuilds;
  for (const v1::StreamEvent& e : r.events()) {
    if (e.kind() == v1::EVENT_KIND_SWAP_OUT) swaps.push_back(&e);
    if (e.kind() == v1::EVENT_KIND_RECOMPUTE) rebuilds.push_back(&e);
  }
  auto largest = [](std::vector<const v1::StreamEvent*>& events, auto size) {
    std::stable_sort(events.begin(), events.end(),
                     [&](const v1::StreamEvent* a, const v1::StreamEvent* b) {
                       return size(*a) > size(*b);
                     });
    events.resize(std::min<size_t>(events.size(), 3));
  };
  largest(swaps, [](const v1::StreamEvent& e) { return e.bytes(); });
  largest(rebuilds,
          [](const v1::StreamEvent& e) { return e.end_ns() - e.start_ns(); });
  std::string names;
  for (const v1::StreamEvent* e : swaps) {
    absl::StrAppend(&names, names.empty() ? "largest swaps: " : ", ",
                    XmlText(e->name(), 40), " (", FormatBytes(e->bytes()), ")");
  }
  std::string rebuilt;
  for (const v1::StreamEvent* e : rebuilds) {
    absl::StrAppend(&rebuilt, rebuilt.empty() ? "longest recomputes: " : ", ",
                    XmlText(e->name(), 40));
  }
  return {s, absl::StrCat(names, !names.empty() && !rebuilt.empty() ? "; " : "",
                          rebuilt)};
}

// A row of legend entries (a swatch and its words) from (x, y).
struct LegendEntry {
  const char* color;
  std::string words;
  bool line = false;
};

void Legend(double y, const std::vector<LegendEntry>& entries,
            std::string* out) {
  double x = kPlotLeft;
  absl::StrAppend(out, "<g font-size=\"11\" fill=\"#333333\">\n");
  for (const LegendEntry& e : entries) {
    if (e.line) {
      Rect(x, y - 5, 14, 2, e.color, out);
    } else {
      Rect(x, y - 9, 12, 12, e.color, out);
    }
    Text(x + 18, y + 1, e.words, out);
    // Words at about 6 px a character in an 11 px sans-serif font.
    x += 18 + 6.2 * e.words.size() + 16;
  }
  absl::StrAppend(out, "</g>\n");
}

void Legends(double y, std::string* out) {
  Legend(y,
         {{kStaticColor, "static"},
          {kActivationColor, "activations"},
          {kTransientColor, "transient"},
          {kReservedColor, "allocator reserved", true},
          {kBudgetColor, "activation budget", true},
          {kDeviceColor, "device capacity (dotted: less reserve)", true}},
         out);
  Legend(y + 18,
         {{kEventColors[v1::EVENT_KIND_OP], "op"},
          {kEventColors[v1::EVENT_KIND_RECOMPUTE], "recompute"},
          {kEventColors[v1::EVENT_KIND_SWAP_OUT], "swap-out"},
          {kEventColors[v1::EVENT_KIND_PREFETCH], "prefetch"},
          {kEventColors[v1::EVENT_KIND_COLLECTIVE], "collective"},
          {kMarkerColors[v1::EVENT_KIND_SWAP_OUT],
           "\xE2\x96\xBC a decision's copy or recompute starts"}},
         out);
}

// The page's title, escaped, drawn at its top; returns it for the
// document's <title>.
std::string DrawTitle(absl::string_view title, std::string* body) {
  std::string escaped = XmlText(title, kMaxTitleChars);
  Text(kPlotLeft - 70, 24, escaped, body,
       "font-size=\"16\" font-weight=\"bold\"");
  return escaped;
}

// The document around `body`, on a white page (a viewer's background
// could be any colour).
std::string Document(absl::string_view title, double height,
                     absl::string_view body) {
  const std::string h = Px(height);
  return absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"",
      Px(kWidth), "\" height=\"", h, "\" viewBox=\"0 0 ", Px(kWidth), " ", h,
      "\" font-family=\"sans-serif\" shape-rendering=\"crispEdges\">\n<title>",
      title, "</title>\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", body,
      "</svg>\n");
}

// A panel's sizes in pixels: roomy for one GPU, compact per rank.
struct PanelStyle {
  double chart_height;
  double lane_height;
  double marker_height;
};

// One result's panel from `top`: a header line (`header`, escaped), the
// decisions, the memory chart on a scale up to `memory_max`, the lanes and
// the time axis. Returns its bottom.
double Panel(const v1::SimulationResult& r, absl::string_view header,
             const TimeScale& t, int64_t memory_max, const PanelStyle& style,
             double top, absl::string_view id, std::string* out) {
  Text(kPlotLeft - 70, top + 12, header, out,
       "font-size=\"12\" font-weight=\"bold\"");
  const auto [counts, names] = Decisions(r);
  Text(kPlotLeft - 70, top + 26,
       absl::StrCat(counts, DeviceAboveScale(r, memory_max)), out,
       "font-size=\"11\" fill=\"#333333\"");
  Text(kPlotLeft - 70, top + 39, names, out,
       "font-size=\"11\" fill=\"#333333\"");
  const double chart_top = top + 50;
  const ValueScale s{chart_top + style.chart_height, style.chart_height,
                     memory_max};
  std::string lanes;
  const double bottom = Lanes(r, t, s.bottom + 6, style.lane_height,
                              style.marker_height, id, &lanes);
  TimeAxis(t, chart_top, bottom, true, out);
  MemoryChart(r, t, s, absl::StrCat(id, "-memory"), out);
  absl::StrAppend(out, lanes);
  return bottom + 28;
}

std::string RenderStep(const v1::SimulationResult& r, absl::string_view title,
                       int columns) {
  std::string body;
  const std::string escaped = DrawTitle(title, &body);
  Legends(50, &body);
  const TimeScale t{TimeExtent(r), columns};
  const double bottom =
      Panel(r, Summary(r), t, ChartTop(r),
            {.chart_height = 240, .lane_height = 18, .marker_height = 8}, 80,
            "r0", &body);
  return Document(escaped, bottom, body);
}

// The ranks drawn: the first ones, and the slowest in the last place when
// it would not be among them.
std::vector<int> RanksDrawn(const v1::NodeSimulation& n) {
  std::vector<int> ranks;
  for (int i = 0; i < n.ranks_size() && i < kMaxSvgRankPanels; ++i) {
    ranks.push_back(i);
  }
  if (n.slowest_rank() >= kMaxSvgRankPanels &&
      n.slowest_rank() < n.ranks_size()) {
    ranks.back() = n.slowest_rank();
  }
  return ranks;
}

// The links drawn: those with a load (the simulator's series: host copies
// and collectives; else the ranks' host copies), the busiest when there
// are too many, in the node's order.
std::vector<int> LinksDrawn(const v1::NodeSimulation& n) {
  std::vector<int> links;
  for (int i = 0; i < n.links_size(); ++i) {
    if (HasLinkLoad(n.links(i))) links.push_back(i);
  }
  if (links.size() > static_cast<size_t>(kMaxSvgLinkPanels)) {
    auto bytes = [&](int i) {
      return SaturatingAdd(n.links(i).h2d_bytes(), n.links(i).d2h_bytes());
    };
    std::stable_sort(links.begin(), links.end(),
                     [&](int a, int b) { return bytes(a) > bytes(b); });
    links.resize(kMaxSvgLinkPanels);
    std::sort(links.begin(), links.end());
  }
  return links;
}

// A link's panel: bytes per second toward the GPUs above its axis, toward
// the host below, on the scale all links share. Returns its bottom.
double LinkPanel(const v1::LinkUsage& link,
                 const std::vector<LinkLoadSample>& load, const TimeScale& t,
                 int64_t load_max, double top, absl::string_view id,
                 std::string* out) {
  Text(kPlotLeft - 70, top + 12,
       absl::StrFormat(
           "%s: toward the GPUs %s (%.1f%% of the link), toward "
           "the host %s (%.1f%%)",
           XmlText(link.name(), kMaxNameChars), FormatBytes(link.h2d_bytes()),
           100 * link.h2d_utilization(), FormatBytes(link.d2h_bytes()),
           100 * link.d2h_utilization()),
       out, "font-size=\"12\" font-weight=\"bold\"");
  constexpr double kHalf = 30;
  const double axis = top + 22 + kHalf;
  const ValueScale up{axis, kHalf, load_max};
  std::vector<StepPoint> h2d;
  std::vector<StepPoint> d2h;
  for (const LinkLoadSample& s : load) {
    h2d.push_back({s.time_ns, s.h2d_bytes_per_s});
    d2h.push_back({s.time_ns, s.d2h_bytes_per_s});
  }
  TimeAxis(t, axis - kHalf, axis + kHalf, false, out);
  absl::StrAppend(out, "<g id=\"", id, "\" data-axis=\"", Px(axis),
                  "\" data-max-bytes-per-s=\"", load_max, "\">\n");
  absl::StrAppend(
      out, "<polygon id=\"", id, "-h2d\" fill=\"",
      kEventColors[v1::EVENT_KIND_PREFETCH], "\" points=\"",
      StepOutline(ColumnMaxima(std::move(h2d), t), t, up, axis, false),
      "\"/>\n");
  absl::StrAppend(
      out, "<polygon id=\"", id, "-d2h\" fill=\"",
      kEventColors[v1::EVENT_KIND_SWAP_OUT], "\" points=\"",
      StepOutline(ColumnMaxima(std::move(d2h), t), t, up, axis, true),
      "\"/>\n");
  absl::StrAppend(out, "<path d=\"M", Px(kPlotLeft), " ", Px(axis), "H",
                  Px(kPlotLeft + kPlotWidth), "\" stroke=\"#888888\"/>\n");
  absl::StrAppend(out, "<g font-size=\"10\" fill=\"#333333\">\n");
  Text(kPlotLeft - 6, axis - kHalf + 9, "to GPUs", out, "text-anchor=\"end\"");
  Text(kPlotLeft - 6, axis + kHalf - 2, "to host", out, "text-anchor=\"end\"");
  Text(kPlotLeft + 4, axis - kHalf + 10,
       absl::StrCat("scale: ", FormatBytes(load_max), "/s each way"), out);
  absl::StrAppend(out, "</g>\n</g>\n");
  return axis + kHalf + 28;
}

std::string RenderNode(const v1::NodeSimulation& n, absl::string_view title,
                       int columns) {
  std::string body;
  const std::string escaped = DrawTitle(title, &body);
  Text(
      kPlotLeft - 70, 42,
      n.feasible()
          ? absl::StrFormat("%s: %d ranks, step %s (ideal %s), %.1f%% of "
                            "ideal throughput; slowest rank %d",
                            XmlText(n.node_name(), kMaxNameChars),
                            n.ranks_size(), FormatMs(n.step_ns()),
                            FormatMs(n.ideal_step_ns()),
                            100 * n.throughput_retained(), n.slowest_rank())
          : absl::StrCat(XmlText(n.node_name(), kMaxNameChars),
                         ": infeasible: ", XmlText(n.infeasible_reason(), 160)),
      &body, "font-size=\"12\"");
  Legends(64, &body);
  const std::vector<int> ranks = RanksDrawn(n);
  const std::vector<int> links = LinksDrawn(n);
  int64_t end = std::max<int64_t>(n.step_ns(), 1);
  int64_t memory_max = 1;
  for (const v1::RankResult& rank : n.ranks()) {
    end = std::max(end, TimeExtent(rank.result()));
    memory_max = std::max(memory_max, ChartTop(rank.result()));
  }
  const TimeScale t{end, columns};
  double y = 94;
  if (ranks.size() < static_cast<size_t>(n.ranks_size()) ||
      links.size() <
          static_cast<size_t>(std::count_if(
              n.links().begin(), n.links().end(),
              [](const v1::LinkUsage& l) { return HasLinkLoad(l); }))) {
    Text(kPlotLeft - 70, y,
         absl::StrCat("drawn: ", ranks.size(), " of ", n.ranks_size(),
                      " ranks and ", links.size(),
                      " links (the busiest); the rest are in the JSON"),
         &body, "font-size=\"11\" fill=\"#b00000\"");
    y += 14;
  }
  for (int i : ranks) {
    const v1::RankResult& rank = n.ranks(i);
    y = Panel(rank.result(),
              absl::StrCat("rank ", rank.rank(), " (GPU ", rank.gpu(),
                           "): ", Summary(rank.result())),
              t, memory_max,
              {.chart_height = 90, .lane_height = 10, .marker_height = 6}, y,
              absl::StrCat("r", i), &body);
  }
  if (!links.empty()) {
    Text(kPlotLeft - 70, y + 4, "shared links: bytes per second", &body,
         "font-size=\"14\" font-weight=\"bold\"");
    y += 12;
  }
  std::vector<std::vector<LinkLoadSample>> loads;
  int64_t load_max = 1;
  for (int i : links) {
    loads.push_back(LinkLoad(n.links(i), n));
    for (const LinkLoadSample& s : loads.back()) {
      load_max = std::max({load_max, s.h2d_bytes_per_s, s.d2h_bytes_per_s});
    }
  }
  for (size_t k = 0; k < links.size(); ++k) {
    y = LinkPanel(n.links(links[k]), loads[k], t, load_max, y,
                  absl::StrCat("link", links[k]), &body);
  }
  return Document(escaped, y, body);
}

}  // namespace

std::string SvgReport(const v1::SimulationResult& r, absl::string_view title) {
  for (int columns = kStepColumns;; columns /= 2) {
    std::string svg = RenderStep(r, title, columns);
    if (svg.size() <= kMaxSvgBytes || columns / 2 < kMinColumns) return svg;
  }
}

std::string SvgNodeReport(const v1::NodeSimulation& n,
                          absl::string_view title) {
  for (int columns = kNodeColumns;; columns /= 2) {
    std::string svg = RenderNode(n, title, columns);
    if (svg.size() <= kMaxSvgBytes || columns / 2 < kMinColumns) return svg;
  }
}

}  // namespace slackswap
