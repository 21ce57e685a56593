// Test-only: simulation results written by hand, one StreamEvent at a time,
// for the tests of what reads them (the Chrome trace, the SVG report).
// Header-only, on the generated messages alone.
//
//   v1::SimulationResult r;
//   AddStreamEvent(r, v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, "act",
//                  /*start_ns=*/1000, /*end_ns=*/2000, /*bytes=*/4096);
#ifndef SLACKSWAP_TESTING_STREAM_EVENTS_H_
#define SLACKSWAP_TESTING_STREAM_EVENTS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap::testutil {

// Appends an event to r.events and returns it.
inline v1::StreamEvent* AddStreamEvent(v1::SimulationResult& r,
                                       v1::Stream stream, v1::EventKind kind,
                                       absl::string_view name, int64_t start_ns,
                                       int64_t end_ns, int64_t bytes = 0) {
  v1::StreamEvent* e = r.add_events();
  e->set_stream(stream);
  e->set_kind(kind);
  e->set_name(name.data(), name.size());
  e->set_start_ns(start_ns);
  e->set_end_ns(end_ns);
  e->set_bytes(bytes);
  return e;
}

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_STREAM_EVENTS_H_
