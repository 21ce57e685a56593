// Test-only: random training steps for properties that must hold on any
// graph (the bound above every plan, slackswap above every baseline), small
// enough to enumerate every plan when asked.
//
//   Graph g = RandomTrainingStep(/*seed=*/7, {.forward_ops = 8});
//   // forward f0..f7 (each reading the previous op's output, sometimes an
//   // earlier one too), then backward b7..b0, each reading what its
//   // forward op read and made: those are the saved activations.
#ifndef SLACKSWAP_TESTING_RANDOM_GRAPHS_H_
#define SLACKSWAP_TESTING_RANDOM_GRAPHS_H_

#include <cstdint>

#include "model/graph.h"

namespace slackswap::testutil {

struct RandomStepOptions {
  int32_t forward_ops = 12;
  // Tensor sizes and op times, log-uniform in [min, max].
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = 64 << 20;
  int64_t min_ns = 2'000;
  int64_t max_ns = 2'000'000;
  // Chances that a forward op also reads an earlier output (a skip
  // connection), makes a second output, and that an output has a cheaper
  // rebuild recipe from its op's inputs.
  double skip = 0.3;
  double second_output = 0.3;
  double recipe = 0.2;
};

// The same seed and options give the same graph.
Graph RandomTrainingStep(uint32_t seed, const RandomStepOptions& options = {});

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_RANDOM_GRAPHS_H_
