// Writes a simulated step as Chrome trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one thread per stream
// (compute, D2H, H2D) and a counter track for activation and transient
// memory.
//
//   SimOptions opts;
//   opts.record_events = true;
//   SimResult r = *Simulate(g, hw, plan, opts);
//   std::string json = ChromeTraceJson(r, g);
#ifndef SLACKSWAP_IO_CHROME_TRACE_H_
#define SLACKSWAP_IO_CHROME_TRACE_H_

#include <string>

#include "planner/graph.h"
#include "sim/simulator.h"

namespace slackswap {

// REQUIRES: r recorded with record_events (else only memory is shown).
std::string ChromeTraceJson(const SimResult& r, const Graph& g);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_CHROME_TRACE_H_
