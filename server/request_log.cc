#include "server/request_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace slackswap {

void RequestLog::Event(
    absl::string_view level, absl::string_view msg,
    std::initializer_list<std::pair<absl::string_view, std::string>> fields) {
  std::string line = absl::StrCat(
      "{\"ts\":",
      JsonQuote(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                 absl::UTCTimeZone())),
      ",\"level\":", JsonQuote(level), ",\"msg\":", JsonQuote(msg));
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&line, ",", JsonQuote(key), ":", JsonQuote(value));
  }
  line += "}\n";
  MutexLock lock(&mu_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void RequestLog::Request(absl::string_view method, absl::string_view code,
                         double ms, absl::string_view peer,
                         absl::string_view detail) {
  Event(code == "OK" ? "info" : "warn", "request",
        {{"method", std::string(method)},
         {"code", std::string(code)},
         {"ms", absl::StrFormat("%.3f", ms)},
         {"peer", std::string(peer)},
         {"detail", std::string(detail)}});
}

}  // namespace slackswap
