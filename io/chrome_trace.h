// Writes a simulated step as Chrome trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one thread per stream
// (compute, D2H, H2D, and collectives where there are any), a counter track
// for activation and transient memory and, where the device was modelled,
// one for the caching allocator's allocated and reserved bytes. A node's
// step: one process per rank, so laid out, and a "shared links" process
// with a counter track per link the host copies cross: the bytes of the
// copies in flight over it, per direction.
//
//   v1::SimulationResult r = ...;  // simulated with events recorded
//   std::string json = ChromeTraceJson(r, "gpt2-xl");
//   std::string node = ChromeTraceNodeJson(resp.node(), "gpt2-xl");
#ifndef SLACKSWAP_IO_CHROME_TRACE_H_
#define SLACKSWAP_IO_CHROME_TRACE_H_

#include <string>

#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Events come from r.events (empty unless the simulation recorded them),
// memory from r.memory_timeline.
std::string ChromeTraceJson(const slackswap::v1::SimulationResult& r,
                            const std::string& title);

// Process i + 1 is rank i (as ChromeTraceJson's one process); process
// ranks + 1 holds the links' counters, one track per link that carried
// anything: h2d_bytes_per_s and d2h_bytes_per_s at each instant its load
// changes (io/link_load.h: the simulator's series, collectives included,
// when the result has one).
std::string ChromeTraceNodeJson(const slackswap::v1::NodeSimulation& n,
                                const std::string& title);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_CHROME_TRACE_H_
