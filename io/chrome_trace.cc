#include "io/chrome_trace.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/json_quote.h"
#include "io/link_load.h"

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

// One process: its name, a thread per stream (collectives only where it
// ran one), its events, and its memory counter tracks. Every entry but the
// trace's first starts with ",\n".
void AppendProcess(int pid, const std::string& name,
                   const v1::SimulationResult& r, std::string* out) {
  absl::StrAppend(out,
                  ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                  ",\"args\":{\"name\":", JsonQuote(name), "}}");
  for (auto [tid, thread] : {std::pair{1, "compute"}, std::pair{2, "D2H copy"},
                             std::pair{3, "H2D copy"}}) {
    absl::StrAppend(out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":", tid, ",\"args\":{\"name\":\"", thread, "\"}}");
  }
  for (const v1::StreamEvent& e : r.events()) {
    if (e.stream() != v1::STREAM_COMM) continue;
    absl::StrAppend(out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":4,\"args\":{\"name\":\"collectives\"}}");
    break;
  }
  for (const v1::StreamEvent& e : r.events()) {
    const std::string event = e.kind() == v1::EVENT_KIND_RECOMPUTE
                                  ? "recompute " + e.name()
                                  : e.name();
    absl::StrAppend(out, ",\n{\"name\":", JsonQuote(event), ",\"cat\":\"",
                    Category(e.kind()), "\",\"ph\":\"X\",\"pid\":", pid,
                    ",\"tid\":", Tid(e.stream()), ",\"ts\":", Us(e.start_ns()),
                    ",\"dur\":", Us(e.end_ns() - e.start_ns()), "}");
  }
  for (const v1::MemoryPoint& s : r.memory_timeline()) {
    absl::StrAppend(out, ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":", pid,
                    ",\"ts\":", Us(s.time_ns()),
                    ",\"args\":{\"activation_bytes\":", s.activation_bytes(),
                    ",\"transient_bytes\":", s.transient_bytes(), "}}");
    // The caching allocator's own track, where the device was modelled.
    if (r.has_device()) {
      absl::StrAppend(out,
                      ",\n{\"name\":\"allocator\",\"ph\":\"C\",\"pid\":", pid,
                      ",\"ts\":", Us(s.time_ns()),
                      ",\"args\":{\"allocated_bytes\":", s.allocated_bytes(),
                      ",\"reserved_bytes\":", s.reserved_bytes(), "}}");
    }
  }
}

void AppendLinkCounter(int pid, const v1::LinkUsage& link,
                       const v1::NodeSimulation& n, std::string* out) {
  for (const LinkLoadSample& s : LinkLoad(link, n)) {
    absl::StrAppend(out, ",\n{\"name\":", JsonQuote(link.name()),
                    ",\"ph\":\"C\",\"pid\":", pid, ",\"ts\":", Us(s.time_ns),
                    ",\"args\":{\"h2d_bytes_per_s\":", s.h2d_bytes_per_s,
                    ",\"d2h_bytes_per_s\":", s.d2h_bytes_per_s, "}}");
  }
}

// The whole trace around `entries` (each starting with ",\n").
std::string Trace(absl::string_view entries) {
  absl::ConsumePrefix(&entries, ",\n");
  return absl::StrCat("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n",
                      entries, "\n]}\n");
}

}  // namespace

std::string ChromeTraceJson(const v1::SimulationResult& r,
                            const std::string& title) {
  std::string entries;
  AppendProcess(1, "slackswap step: " + title, r, &entries);
  return Trace(entries);
}

std::string ChromeTraceNodeJson(const v1::NodeSimulation& n,
                                const std::string& title) {
  std::string entries;
  for (int i = 0; i < n.ranks_size(); ++i) {
    const v1::RankResult& rank = n.ranks(i);
    AppendProcess(
        i + 1,
        absl::StrCat("rank ", rank.rank(), " (GPU ", rank.gpu(), "): ", title),
        rank.result(), &entries);
  }
  const int links_pid = n.ranks_size() + 1;
  absl::StrAppend(
      &entries,
      ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", links_pid,
      ",\"args\":{\"name\":", JsonQuote(absl::StrCat("shared links: ", title)),
      "}}");
  for (const v1::LinkUsage& link : n.links()) {
    if (HasLinkLoad(link)) AppendLinkCounter(links_pid, link, n, &entries);
  }
  return Trace(entries);
}

}  // namespace slackswap
