// Test-only: graphs shaped the way a hostile client would shape them, as
// wire messages, for the tests, fuzz seeds and measurements of
// docs/RELIABILITY.md.
//
//   v1::OperatorGraph g = ChainGraph(500'000);   // 1,000,000 ops
//   v1::Plan plan = RecomputeEverything(g);
#ifndef SLACKSWAP_TESTING_HOSTILE_GRAPHS_H_
#define SLACKSWAP_TESTING_HOSTILE_GRAPHS_H_

#include <cstdint>

#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/plan.pb.h"

namespace slackswap::testutil {

// `links` forward ops, each reading the previous one's output, and a
// backward op per link (in reverse) reading it: 2 x links ops, every
// activation saved, so a plan that recomputes them all rebuilds the whole
// chain at once.
v1::OperatorGraph ChainGraph(int64_t links);

// `ops` forward ops in a chain whose outputs nobody saves, and one backward
// op reading the last: rebuilding it walks back through the whole chain.
v1::OperatorGraph ForwardChainGraph(int64_t ops);

// One forward op listing the same input `copies` times, and its backward.
v1::OperatorGraph DuplicateInputGraph(int64_t copies);

// One tensor read by `width` forward ops, each making a saved tensor.
v1::OperatorGraph FanOutGraph(int64_t width);

// A plan recomputing every saved activation of `g`.
v1::Plan RecomputeEverything(const v1::OperatorGraph& g);

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_HOSTILE_GRAPHS_H_
