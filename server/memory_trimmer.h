// Gives freed heap memory back to the system (glibc's malloc_trim) a short
// while after a large call, from a thread of its own. Not at the call's
// end: gRPC frees the call's request and response buffers, and a worker its
// copy of the parsed request, only after the call's OnDone has run, so a
// trim there finds most of the call's memory still in use
// (docs/PERFORMANCE.md, "Memory after a large call").
//
//   MemoryTrimmer trimmer(std::chrono::milliseconds(100));
//   trimmer.Request();  // trims once, 100 ms from now
//
// Requests during the wait are covered by one more trim after it, so a
// trim always follows the last request by at least the delay.
#ifndef SLACKSWAP_SERVER_MEMORY_TRIMMER_H_
#define SLACKSWAP_SERVER_MEMORY_TRIMMER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace slackswap {

class MemoryTrimmer {
 public:
  // `trim` runs on the trimmer's thread (tests count it); by default
  // malloc_trim(0).
  explicit MemoryTrimmer(std::chrono::nanoseconds delay,
                         std::function<void()> trim = nullptr);
  // Stops the thread; a trim still waiting for its delay is dropped.
  ~MemoryTrimmer();

  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Asks for a trim `delay` from now. Never blocks.
  void Request();
  // Trims run so far.
  int64_t trims() const;

 private:
  void Loop();

  // Immutable after construction.
  const std::chrono::nanoseconds delay_;
  const std::function<void()> trim_;

  mutable Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t trims_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace slackswap

#endif  // SLACKSWAP_SERVER_MEMORY_TRIMMER_H_
