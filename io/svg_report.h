// Draws a simulated step as one self-contained SVG a person reads at a
// glance: memory over the step (static, activation and transient bytes,
// the allocator's reserved bytes) against the activation budget and the
// device's capacity; a lane per stream (compute, D2H, H2D, and collectives
// where there are any) with ops, recomputes, swap-outs, prefetches and
// collectives in their own colours; the plan's decisions marked where their
// copies and recomputes start, with a legend that counts them. A node's
// step: one compact panel per rank on a shared time axis, and one panel
// per shared link its ranks' host copies cross, with the bytes in flight
// toward the GPUs above its axis and toward the host below
// (io/link_load.h).
//
// Plain SVG 1.1 elements only: no script, no links, no foreignObject, no
// external resources; text in a generic sans-serif font; every name from
// the input escaped and cut to a bounded length. Events and the timeline
// are merged into pixel columns, so the document stays under kMaxSvgBytes
// however many events the result has (at most kMaxSvgRankPanels ranks and
// kMaxSvgLinkPanels links are drawn; the picture says what it left out).
//
//   v1::SimulationResult r = ...;  // simulated with events and a timeline
//   std::string svg = SvgReport(r, "gpt2-xl on a100-80gb-pcie4: slackswap");
//   std::string node = SvgNodeReport(resp.node(), "gpt2-xl on dgx-a100-80gb");
#ifndef SLACKSWAP_IO_SVG_REPORT_H_
#define SLACKSWAP_IO_SVG_REPORT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// No document either function returns is larger.
inline constexpr size_t kMaxSvgBytes = 2'000'000;
// A node's ranks and links beyond these are not drawn (the busiest links
// are, and the slowest rank always is).
inline constexpr int kMaxSvgRankPanels = 16;
inline constexpr int kMaxSvgLinkPanels = 16;

// One GPU's step. Lanes come from r.events and memory from
// r.memory_timeline: a result simulated without them gets empty lanes and
// a flat memory chart. `title` is escaped.
std::string SvgReport(const v1::SimulationResult& r, absl::string_view title);

// A node's step: a panel per rank (n.ranks[i].result, as SvgReport draws
// one, on the node's time axis and one memory scale) and a panel per link
// that carries host copies (LinkUsage.ranks not empty).
std::string SvgNodeReport(const v1::NodeSimulation& n, absl::string_view title);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_SVG_REPORT_H_
