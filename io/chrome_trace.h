// Writes a simulated step as Chrome trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one thread per stream
// (compute, D2H, H2D), a counter track for activation and transient
// memory and, where the device was modelled, one for the caching
// allocator's allocated and reserved bytes.
//
//   v1::SimulationResult r = ...;  // simulated with events recorded
//   std::string json = ChromeTraceJson(r, "gpt2-xl");
#ifndef SLACKSWAP_IO_CHROME_TRACE_H_
#define SLACKSWAP_IO_CHROME_TRACE_H_

#include <string>

#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

// Events come from r.events (empty unless the simulation recorded them),
// memory from r.memory_timeline.
std::string ChromeTraceJson(const slackswap::v1::SimulationResult& r,
                            const std::string& title);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_CHROME_TRACE_H_
