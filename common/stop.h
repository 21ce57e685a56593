// Cooperative cancellation for loops whose trip count the input controls:
// a deadline or a cancelled call sets a stop function, and every such loop
// asks it now and then, so a request ends soon after its deadline whatever
// the shape of its input.
//
//   StopPoller poller(stop);
//   for (const Op& op : ops) {
//     if (poller.Stop()) return absl::CancelledError("converting stopped");
//     ...
//   }
//
// The one way to ask: a loop through a StopPoller, its `every` sized to what
// an iteration costs; a step taken once (a stage, a whole plan judged, a
// solver's callback) through StopRequested.
//
//   if (StopRequested(ctx.should_stop)) return CancelledError("...");
#ifndef SLACKSWAP_COMMON_STOP_H_
#define SLACKSWAP_COMMON_STOP_H_

#include <cstdint>
#include <functional>

namespace slackswap {

// True asks the work to stop (with CANCELLED). Empty: never stop.
using StopFn = std::function<bool()>;

// Asks `stop` now: true when it says stop (never when it is empty).
inline bool StopRequested(const StopFn& stop) { return stop && stop(); }

class StopPoller {
 public:
  // Asks `stop` once every `every` calls of Stop(); `every` a power of two.
  // REQUIRES: stop outlives the poller.
  explicit StopPoller(const StopFn& stop, uint32_t every = 4096)
      : stop_(stop), mask_(every - 1) {}

  // True once `stop` has said so.
  bool Stop() {
    if (stopped_) return true;
    if ((++calls_ & mask_) != 0 || !stop_) return false;
    stopped_ = stop_();
    return stopped_;
  }

 private:
  const StopFn& stop_;
  const uint32_t mask_;
  uint32_t calls_ = 0;
  bool stopped_ = false;
};

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_STOP_H_
