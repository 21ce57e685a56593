// Margins for the few waits tests bound: how soon a stop function, a
// deadline or a cancel must be heard. Speed itself is measured in bench/,
// never asserted.
//
//   EXPECT_LT(steady_clock::now() - deadline, testutil::kStopMargin);
#ifndef SLACKSWAP_TESTING_TIMING_H_
#define SLACKSWAP_TESTING_TIMING_H_

#include <chrono>

namespace slackswap::testutil {

// How many times longer than in a plain build a bounded wait may take:
// the sanitizers slow both the server and the test several times over.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSlowdown = 5;
#else
inline constexpr int kSlowdown = 1;
#endif

// How soon after its deadline, its cancel or its stop function a request
// must have stopped. The core hears its stop function within 50 to 75 ms of
// work (docs/RELIABILITY.md); the rest is room for a loaded 2-core machine
// (ctest -j2 beside other builds) and the sanitizers, still far below the
// seconds the tests' requests would run without the stop.
inline constexpr std::chrono::milliseconds kStopMargin(2000 * kSlowdown);

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_TIMING_H_
