#include "io/svg_report.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/stream_events.h"

namespace slackswap {
namespace {

using ::slackswap::testutil::AddStreamEvent;
using ::testing::HasSubstr;
using ::testing::Not;

// What a small XML well-formedness check finds in a document.
struct XmlOutline {
  std::string error;  // empty when well-formed
  std::string root;
  std::map<std::string, int> elements;  // name -> count
  std::vector<std::string> ids;
  std::string text;  // character data, entities decoded
};

bool ValidEntity(absl::string_view rest) {
  for (absl::string_view e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
    if (absl::StartsWith(rest, e)) return true;
  }
  return false;
}

// Tags balance, attribute values are quoted and hold no '<', every '&'
// starts one of XML's five entities, and there is one root element.
XmlOutline Outline(absl::string_view xml) {
  XmlOutline out;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](absl::string_view why) {
    out.error = absl::StrCat(why, " at byte ", i);
    return out;
  };
  if (absl::StartsWith(xml, "<?xml")) {
    i = xml.find("?>");
    if (i == absl::string_view::npos) return fail("unclosed declaration");
    i += 2;
  }
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        if (!ValidEntity(xml.substr(i))) return fail("bare &");
        const size_t semi = xml.find(';', i);
        const absl::string_view e = xml.substr(i, semi - i + 1);
        out.text += e == "&amp;"    ? "&"
                    : e == "&lt;"   ? "<"
                    : e == "&gt;"   ? ">"
                    : e == "&quot;" ? "\""
                                    : "'";
        i = semi + 1;
        continue;
      }
      if (open.empty() && xml[i] != '\n') return fail("text outside root");
      out.text += xml[i++];
      continue;
    }
    const bool closing = i + 1 < xml.size() && xml[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    size_t name_end = j;
    while (name_end < xml.size() && xml[name_end] != ' ' &&
           xml[name_end] != '>' && xml[name_end] != '/' &&
           xml[name_end] != '\n') {
      ++name_end;
    }
    const std::string name(xml.substr(j, name_end - j));
    if (name.empty()) return fail("empty tag name");
    j = name_end;
    // Attributes: name="value" pairs.
    while (j < xml.size() && xml[j] != '>' && xml[j] != '/') {
      if (xml[j] == ' ' || xml[j] == '\n') {
        ++j;
        continue;
      }
      const size_t eq = xml.find('=', j);
      if (eq == absl::string_view::npos || eq + 1 >= xml.size() ||
          xml[eq + 1] != '"') {
        return fail("unquoted attribute");
      }
      const size_t close = xml.find('"', eq + 2);
      if (close == absl::string_view::npos) return fail("unclosed attribute");
      const absl::string_view value = xml.substr(eq + 2, close - eq - 2);
      if (absl::StrContains(value, "<")) return fail("< in attribute");
      for (size_t k = 0; k < value.size(); ++k) {
        if (value[k] == '&' && !ValidEntity(value.substr(k))) {
          return fail("bare & in attribute");
        }
      }
      if (xml.substr(j, eq - j) == "id") out.ids.emplace_back(value);
      j = close + 1;
    }
    if (j >= xml.size()) return fail("unclosed tag");
    const bool empty = xml[j] == '/';
    if (empty && (j + 1 >= xml.size() || xml[j + 1] != '>')) {
      return fail("bad empty tag");
    }
    if (closing) {
      if (open.empty() || open.back() != name) return fail("unbalanced");
      open.pop_back();
    } else {
      if (open.empty()) {
        if (!out.root.empty()) return fail("second root");
        out.root = name;
      }
      ++out.elements[name];
      if (!empty) open.push_back(name);
    }
    i = j + (empty ? 2 : 1);
  }
  if (!open.empty()) return fail(absl::StrCat("unclosed <", open.back()));
  return out;
}

bool HasId(const XmlOutline& o, absl::string_view id) {
  for (const std::string& i : o.ids) {
    if (i == id) return true;
  }
  return false;
}

// A 10 ms step: forward, a swap-out and its prefetch, a recompute, with a
// budget and a modelled device.
v1::SimulationResult SmallStep() {
  v1::SimulationResult r;
  r.set_feasible(true);
  r.set_step_ns(10'000'000);
  r.set_ideal_step_ns(9'000'000);
  r.set_throughput_retained(0.9);
  r.set_static_bytes(2'000'000'000);
  r.set_budget_bytes(3'000'000'000);
  r.set_peak_activation_bytes(3'000'000'000);
  r.set_swapped_tensors(1);
  r.set_recomputed_tensors(1);
  r.set_d2h_bytes(500'000'000);
  r.set_h2d_bytes(500'000'000);
  r.mutable_device()->set_capacity_bytes(10'000'000'000);
  r.mutable_device()->set_framework_reserve_bytes(1'000'000'000);
  r.mutable_device()->set_fits_device(true);
  AddStreamEvent(r, v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "fwd", 0, 4'000'000);
  AddStreamEvent(r, v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, "act", 1'000'000,
                 2'000'000, 500'000'000);
  AddStreamEvent(r, v1::STREAM_COMPUTE, v1::EVENT_KIND_RECOMPUTE, "gelu",
                 4'000'000, 5'000'000);
  AddStreamEvent(r, v1::STREAM_H2D, v1::EVENT_KIND_PREFETCH, "act", 5'000'000,
                 6'000'000, 500'000'000);
  AddStreamEvent(r, v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "bwd", 5'000'000,
                 10'000'000);
  for (int i = 0; i <= 10; ++i) {
    v1::MemoryPoint* p = r.add_memory_timeline();
    p->set_time_ns(i * 1'000'000);
    p->set_activation_bytes(int64_t{i < 5 ? i : 10 - i} * 600'000'000);
    p->set_transient_bytes(100'000'000);
    p->set_reserved_bytes(2'000'000'000 + p->activation_bytes() + 200'000'000);
  }
  return r;
}

TEST(SvgReportTest, OneGpuHasMemoryBudgetDeviceAndLanes) {
  const std::string svg = SvgReport(SmallStep(), "gpt2-xl on a100");
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  EXPECT_EQ(o.root, "svg");
  for (absl::string_view id :
       {"r0-memory", "r0-memory-activation", "r0-memory-transient",
        "r0-memory-static", "r0-memory-reserved", "r0-memory-budget",
        "r0-memory-device", "r0-memory-usable", "r0-lane-compute",
        "r0-lane-d2h", "r0-lane-h2d"}) {
    EXPECT_TRUE(HasId(o, id)) << id;
  }
  // No collectives ran: no lane for them.
  EXPECT_FALSE(HasId(o, "r0-lane-comm"));
  // Each decision's kind has its colour and its markers.
  EXPECT_THAT(svg, HasSubstr("<g fill=\"#b07aa1\">"));  // recompute
  EXPECT_THAT(svg, HasSubstr("<g fill=\"#76b7b2\">"));  // swap-out
  EXPECT_THAT(svg, HasSubstr("<g fill=\"#edc948\">"));  // prefetch
  EXPECT_TRUE(HasId(o, "r0-compute-markers-2"));
  EXPECT_TRUE(HasId(o, "r0-d2h-markers-3"));
  EXPECT_TRUE(HasId(o, "r0-h2d-markers-4"));
  EXPECT_THAT(o.text, HasSubstr("swapped 1 tensors (D2H 500 MB"));
  EXPECT_THAT(o.text, HasSubstr("recomputed 1 tensors"));
  EXPECT_THAT(o.text, HasSubstr("largest swaps: act (500 MB)"));
  EXPECT_THAT(o.text, HasSubstr("time (ms)"));
  EXPECT_THAT(o.text, HasSubstr("10 GB"));
  EXPECT_THAT(o.text, HasSubstr("gpt2-xl on a100"));
}

TEST(SvgReportTest, ADeviceFarAboveTheMemoryIsNamedNotDrawn) {
  v1::SimulationResult r = SmallStep();
  r.mutable_device()->set_capacity_bytes(80'000'000'000);
  r.mutable_device()->set_required_bytes(7'000'000'000);
  const std::string svg = SvgReport(r, "t");
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  EXPECT_FALSE(HasId(o, "r0-memory-device"));
  EXPECT_TRUE(HasId(o, "r0-memory-budget"));
  EXPECT_THAT(o.text,
              HasSubstr("device 80 GB, above the scale: fits (needs 7 GB)"));
  // The scale is the memory's: no tick near 80 GB.
  EXPECT_THAT(o.text, Not(HasSubstr("80 GB<")));
  EXPECT_THAT(o.text, Not(HasSubstr("60 GB")));
}

TEST(SvgReportTest, IsPlainSvgWithNothingExternal) {
  const std::string svg = SvgReport(SmallStep(), "t");
  EXPECT_EQ(Outline(svg).error, "");
  for (absl::string_view banned : {"<script", "href", "foreignObject", "url(",
                                   "@import", "https://", "<image", "on"}) {
    if (banned == "on") {
      // No event handler attributes (onload=...).
      EXPECT_FALSE(absl::StrContains(svg, " onload") ||
                   absl::StrContains(svg, " onclick"));
      continue;
    }
    EXPECT_THAT(svg, Not(HasSubstr(banned))) << banned;
  }
  EXPECT_THAT(svg, HasSubstr("font-family=\"sans-serif\""));
  // The one URL is the SVG namespace's name, which nothing fetches.
  EXPECT_EQ(svg.find("http://"), svg.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(svg.find("http://", svg.find("http://") + 1), std::string::npos);
}

TEST(SvgReportTest, EscapesHostileNames) {
  const std::string hostile =
      "</text></svg><script>alert(1)</script>&amp;\"'\x01\xff\xfe\xC0\xAF"
      "\xED\xA0\x80 <foreignObject>";
  v1::SimulationResult r = SmallStep();
  AddStreamEvent(r, v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, hostile, 7'000'000,
                 8'000'000, 900'000'000);
  const std::string svg = SvgReport(r, hostile);
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  EXPECT_EQ(o.elements.count("script"), 0);
  EXPECT_EQ(o.elements.count("foreignObject"), 0);
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
  // The name reads as written, as text.
  EXPECT_THAT(o.text, HasSubstr("</text></svg><script>alert(1)</script>"
                                "&amp;\"'?"));
  // Malformed UTF-8 became replacement characters: the document is valid
  // UTF-8 throughout.
  EXPECT_THAT(o.text, HasSubstr("\xEF\xBF\xBD"));
  EXPECT_THAT(svg, Not(HasSubstr("\xff")));
  EXPECT_THAT(svg, Not(HasSubstr("\x01")));
  // A very long name is cut.
  const std::string svg_long = SvgReport(r, std::string(100'000, 'x'));
  EXPECT_LT(svg_long.size(), SvgReport(r, "x").size() + 1'000);
}

TEST(SvgReportTest, AHugeResultStaysUnderTheBound) {
  v1::SimulationResult r = SmallStep();
  r.clear_events();
  r.clear_memory_timeline();
  // 10^5 events of every kind on every stream, each a different width,
  // and 10^5 timeline points that change every time.
  constexpr int kEvents = 100'000;
  const std::vector<v1::Stream> streams = {v1::STREAM_COMPUTE, v1::STREAM_D2H,
                                           v1::STREAM_H2D, v1::STREAM_COMM};
  for (int i = 0; i < kEvents; ++i) {
    const int64_t start = int64_t{i} * 100;
    AddStreamEvent(r, streams[i % 4], static_cast<v1::EventKind>(1 + i % 5),
                   absl::StrCat("op", i), start, start + 30 + i % 70, i);
    v1::MemoryPoint* p = r.add_memory_timeline();
    p->set_time_ns(start);
    p->set_activation_bytes((int64_t{i} * 7919) % 5'000'000'000);
    p->set_transient_bytes((int64_t{i} * 104729) % 1'000'000'000);
    p->set_reserved_bytes(9'000'000'000 - (i % 1000) * 1'000'000);
  }
  r.set_step_ns(int64_t{kEvents} * 100);
  const std::string svg = SvgReport(r, "huge");
  EXPECT_LE(svg.size(), kMaxSvgBytes);
  const XmlOutline o = Outline(svg);
  EXPECT_EQ(o.error, "");
  EXPECT_TRUE(HasId(o, "r0-lane-comm"));
}

v1::NodeSimulation SmallNode(int ranks, int events_per_rank) {
  v1::NodeSimulation n;
  n.set_node_name("dgx <test>");
  n.set_feasible(true);
  n.set_step_ns(10'000'000);
  n.set_ideal_step_ns(9'000'000);
  n.set_throughput_retained(0.9);
  for (int i = 0; i < ranks; ++i) {
    v1::RankResult* rank = n.add_ranks();
    rank->set_rank(i);
    rank->set_gpu(i);
    v1::SimulationResult& r = *rank->mutable_result();
    r = SmallStep();
    for (int k = 0; k < events_per_rank; ++k) {
      const int64_t start = int64_t{k} * 10'000'000 / events_per_rank;
      AddStreamEvent(
          r, k % 2 == 0 ? v1::STREAM_D2H : v1::STREAM_H2D,
          k % 2 == 0 ? v1::EVENT_KIND_SWAP_OUT : v1::EVENT_KIND_PREFETCH, "t",
          start, start + 5'000'000 / events_per_rank + k % 3, 1'000'000 + k);
    }
  }
  return n;
}

TEST(SvgReportTest, NodeHasAPanelPerRankAndPerLinkCarryingCopies) {
  v1::NodeSimulation n = SmallNode(2, 0);
  v1::LinkUsage* gpu0 = n.add_links();
  gpu0->set_name("GPU 0 link");
  gpu0->add_ranks(0);
  gpu0->set_h2d_bytes(500'000'000);
  v1::LinkUsage* uplink = n.add_links();
  uplink->set_name("switch <sw0> uplink & more");
  uplink->add_ranks(0);
  uplink->add_ranks(1);
  // No host copies and no load recorded (an older server's result): not
  // drawn.
  v1::LinkUsage* nvlink = n.add_links();
  nvlink->set_name("NVLink");
  const std::string svg = SvgNodeReport(n, "gpt2-xl on dgx");
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  for (absl::string_view id :
       {"r0-memory", "r1-memory", "r0-lane-compute", "r1-lane-h2d",
        "r1-memory-budget", "link0", "link0-h2d", "link0-d2h", "link1"}) {
    EXPECT_TRUE(HasId(o, id)) << id;
  }
  EXPECT_FALSE(HasId(o, "r2-memory"));
  EXPECT_FALSE(HasId(o, "link2"));
  // Names as written; the uplink carries both ranks' swap-outs at once,
  // each 500 MB in 1 ms (no series recorded: their average rates).
  for (absl::string_view words :
       {"switch <sw0> uplink & more", "dgx <test>: 2 ranks", "rank 1 (GPU 1)",
        "scale: 1 TB/s each way"}) {
    EXPECT_THAT(o.text, HasSubstr(words));
  }
}

// A link only collectives cross (no rank's host copies) is drawn when the
// simulator recorded its load, on the scale all links share; one that
// carried nothing is not.
TEST(SvgReportTest, ALinkOnlyCollectivesCrossGetsAPanelWhenLoaded) {
  v1::NodeSimulation n = SmallNode(2, 0);
  v1::LinkUsage* gpu0 = n.add_links();
  gpu0->set_name("GPU 0 link");
  gpu0->add_ranks(0);
  v1::LinkUsage* nvlink = n.add_links();
  nvlink->set_name("GPU 0 NVLink");
  nvlink->set_d2h_bytes(300'000'000);
  nvlink->set_h2d_bytes(300'000'000);
  // 300 MB each way at 150 GB/s from 1 ms to 3 ms.
  v1::LinkLoadPoint* p = nvlink->add_load();
  p->set_time_ns(1'000'000);
  p->set_h2d_bytes_per_ns(150);
  p->set_d2h_bytes_per_ns(150);
  nvlink->add_load()->set_time_ns(3'000'000);
  n.add_links()->set_name("GPU 1 NVLink");  // recorded, carried nothing
  const XmlOutline o = Outline(SvgNodeReport(n, "ddp"));
  ASSERT_EQ(o.error, "");
  for (absl::string_view id : {"link0", "link1", "link1-h2d", "link1-d2h"}) {
    EXPECT_TRUE(HasId(o, id)) << id;
  }
  EXPECT_FALSE(HasId(o, "link2"));
  // The GPU link's copies (500 GB/s) set the scale; the port's panel says
  // what it moved.
  EXPECT_THAT(o.text, HasSubstr("scale: 500 GB/s each way"));
  EXPECT_THAT(o.text, HasSubstr("GPU 0 NVLink: toward the GPUs 300 MB"));
  EXPECT_THAT(o.text, Not(HasSubstr("drawn:")));
}

TEST(SvgReportTest, AHugeNodeStaysUnderTheBoundAndSaysWhatItLeftOut) {
  constexpr int kRanks = 64;
  v1::NodeSimulation n = SmallNode(kRanks, 2'000);
  n.set_slowest_rank(40);
  for (int i = 0; i < 3 * kRanks; ++i) {
    v1::LinkUsage* link = n.add_links();
    link->set_name(absl::StrCat("link ", i, std::string(500, '&')));
    link->add_ranks(i % kRanks);
    link->set_h2d_bytes(i);
  }
  const std::string svg = SvgNodeReport(n, "big");
  EXPECT_LE(svg.size(), kMaxSvgBytes);
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "");
  EXPECT_THAT(o.text, HasSubstr("drawn: 16 of 64 ranks and 16 links"));
  // The slowest rank is drawn; the busiest links are.
  EXPECT_TRUE(HasId(o, "r40-memory"));
  EXPECT_FALSE(HasId(o, "r15-memory"));
  EXPECT_TRUE(HasId(o, absl::StrCat("link", 3 * kRanks - 1)));
  EXPECT_FALSE(HasId(o, "link0"));
}

TEST(SvgReportTest, AResultWithoutEventsOrTimelineStillDraws) {
  v1::SimulationResult r;
  r.set_feasible(false);
  r.set_infeasible_reason("stuck at op 3 (<b>)");
  const std::string svg = SvgReport(r, "empty");
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  EXPECT_THAT(o.text, HasSubstr("infeasible: stuck at op 3 (<b>)"));
  EXPECT_FALSE(HasId(o, "r0-memory-budget"));
  EXPECT_FALSE(HasId(o, "r0-memory-device"));
  EXPECT_THAT(svg, Not(HasSubstr("<g fill=\"#59a14f\">")));
}

// Sizes and times at the int64 limits (a GPU claiming exabytes, a step that
// saturated) draw a well-formed chart: every sum on the scale saturates.
TEST(SvgReportTest, SizesAndTimesAtTheLimitsStillDraw) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  v1::SimulationResult r = SmallStep();
  r.set_budget_bytes(kMax - 127);
  r.set_step_ns(kMax);
  r.mutable_device()->set_capacity_bytes(kMax);
  r.mutable_device()->set_framework_reserve_bytes(
      std::numeric_limits<int64_t>::min());
  r.mutable_device()->set_headroom_bytes(kMax);
  r.mutable_memory_timeline(3)->set_activation_bytes(kMax);
  r.mutable_memory_timeline(3)->set_transient_bytes(kMax);
  AddStreamEvent(r, v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "long", 0, kMax);
  AddStreamEvent(r, v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "long2", 0, kMax);
  const std::string svg = SvgReport(r, "limits");
  const XmlOutline o = Outline(svg);
  ASSERT_EQ(o.error, "") << svg;
  EXPECT_TRUE(HasId(o, "r0-memory-budget"));
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
}

}  // namespace
}  // namespace slackswap
