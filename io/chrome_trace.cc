#include "io/chrome_trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_quote.h"

namespace slackswap {
namespace {

// Trace timestamps are microseconds; keep nanosecond precision.
std::string Us(int64_t ns) { return absl::StrFormat("%.3f", ns / 1e3); }

int Tid(v1::Stream s) {
  switch (s) {
    case v1::STREAM_D2H:
      return 2;
    case v1::STREAM_H2D:
      return 3;
    case v1::STREAM_COMM:
      return 4;
    default:
      return 1;
  }
}

const char* Category(v1::EventKind k) {
  switch (k) {
    case v1::EVENT_KIND_RECOMPUTE:
      return "recompute";
    case v1::EVENT_KIND_SWAP_OUT:
      return "swap_out";
    case v1::EVENT_KIND_PREFETCH:
      return "prefetch";
    case v1::EVENT_KIND_COLLECTIVE:
      return "collective";
    default:
      return "op";
  }
}

}  // namespace

std::string ChromeTraceJson(const v1::SimulationResult& r,
                            const std::string& title) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  absl::StrAppend(&out,
                  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,"
                  "\"args\":{\"name\":",
                  JsonQuote("slackswap step: " + title), "}}");
  for (auto [tid, name] : {std::pair{1, "compute"}, std::pair{2, "D2H copy"},
                           std::pair{3, "H2D copy"}}) {
    absl::StrAppend(&out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                    "\"tid\":",
                    tid, ",\"args\":{\"name\":\"", name, "\"}}");
  }
  for (const v1::StreamEvent& e : r.events()) {
    if (e.stream() != v1::STREAM_COMM) continue;
    absl::StrAppend(&out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                    "\"tid\":4,\"args\":{\"name\":\"collectives\"}}");
    break;
  }
  for (const v1::StreamEvent& e : r.events()) {
    const std::string name = e.kind() == v1::EVENT_KIND_RECOMPUTE
                                 ? "recompute " + e.name()
                                 : e.name();
    absl::StrAppend(&out, ",\n{\"name\":", JsonQuote(name), ",\"cat\":\"",
                    Category(e.kind()),
                    "\",\"ph\":\"X\",\"pid\":1,\"tid\":", Tid(e.stream()),
                    ",\"ts\":", Us(e.start_ns()),
                    ",\"dur\":", Us(e.end_ns() - e.start_ns()), "}");
  }
  for (const v1::MemoryPoint& s : r.memory_timeline()) {
    absl::StrAppend(&out,
                    ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":1,\"ts\":",
                    Us(s.time_ns()),
                    ",\"args\":{\"activation_bytes\":", s.activation_bytes(),
                    ",\"transient_bytes\":", s.transient_bytes(), "}}");
    // The caching allocator's own track, where the device was modelled.
    if (r.has_device()) {
      absl::StrAppend(
          &out, ",\n{\"name\":\"allocator\",\"ph\":\"C\",\"pid\":1,\"ts\":",
          Us(s.time_ns()),
          ",\"args\":{\"allocated_bytes\":", s.allocated_bytes(),
          ",\"reserved_bytes\":", s.reserved_bytes(), "}}");
    }
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace slackswap
