// One-line structured logs: each line a JSON object with a timestamp, a
// level and a message, written whole (lines from different threads never
// interleave).
//
//   RequestLog log(stderr);
//   log.Event("info", "serving", {{"port", "50051"}});
//   log.Request("Plan", "OK", 12.5, "ipv4:127.0.0.1:5555", "cache=miss");
#ifndef SLACKSWAP_SERVER_REQUEST_LOG_H_
#define SLACKSWAP_SERVER_REQUEST_LOG_H_

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "common/json_quote.h"
#include "common/mutex.h"

namespace slackswap {

class RequestLog {
 public:
  // REQUIRES: out stays open while the log is used.
  explicit RequestLog(std::FILE* out) : out_(out) {}

  // {"ts":..., "level":..., "msg":..., "<key>":"<value>", ...}
  void Event(
      absl::string_view level, absl::string_view msg,
      std::initializer_list<std::pair<absl::string_view, std::string>> fields);
  // One finished call.
  void Request(absl::string_view method, absl::string_view code, double ms,
               absl::string_view peer, absl::string_view detail);

 private:
  Mutex mu_;
  std::FILE* const out_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_REQUEST_LOG_H_
