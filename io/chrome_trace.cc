#include "io/chrome_trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace slackswap {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Trace timestamps are microseconds; keep nanosecond precision.
std::string Us(int64_t ns) { return absl::StrFormat("%.3f", ns / 1e3); }

int Tid(StreamId s) {
  switch (s) {
    case StreamId::kCompute:
      return 1;
    case StreamId::kD2H:
      return 2;
    case StreamId::kH2D:
      return 3;
  }
  return 0;
}

const char* Category(EventType t) {
  switch (t) {
    case EventType::kOp:
      return "op";
    case EventType::kRecompute:
      return "recompute";
    case EventType::kSwapOut:
      return "swap_out";
    case EventType::kPrefetch:
      return "prefetch";
  }
  return "other";
}

}  // namespace

std::string ChromeTraceJson(const SimResult& r, const Graph& g) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  absl::StrAppend(&out,
                  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,"
                  "\"args\":{\"name\":",
                  Quote("slackswap step: " + g.name), "}}");
  for (auto [tid, name] : {std::pair{1, "compute"}, std::pair{2, "D2H copy"},
                           std::pair{3, "H2D copy"}}) {
    absl::StrAppend(&out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                    "\"tid\":",
                    tid, ",\"args\":{\"name\":\"", name, "\"}}");
  }
  for (const SimEvent& e : r.events) {
    const bool compute = e.stream == StreamId::kCompute;
    std::string name = compute ? g.ops[e.index].name : g.tensors[e.index].name;
    if (e.type == EventType::kRecompute) name = "recompute " + name;
    absl::StrAppend(&out, ",\n{\"name\":", Quote(name), ",\"cat\":\"",
                    Category(e.type),
                    "\",\"ph\":\"X\",\"pid\":1,\"tid\":", Tid(e.stream),
                    ",\"ts\":", Us(e.start_ns),
                    ",\"dur\":", Us(e.end_ns - e.start_ns), "}");
  }
  for (const MemorySample& s : r.timeline) {
    absl::StrAppend(
        &out,
        ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":1,\"ts\":", Us(s.time_ns),
        ",\"args\":{\"activation_bytes\":", s.activation_bytes,
        ",\"transient_bytes\":", s.transient_bytes, "}}");
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace slackswap
