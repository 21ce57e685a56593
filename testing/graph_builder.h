// Test-only: small graphs with measured op durations, and a simple link, so
// tests can work every figure out by hand.
//
//   GraphBuilder b;
//   int32_t x = b.Tensor("x", 1000);
//   b.Forward("f", 500, {}, {x});
//   b.Backward("f.bwd", 500, {x});
//   Graph g = b.Build();
#ifndef SLACKSWAP_TESTING_GRAPH_BUILDER_H_
#define SLACKSWAP_TESTING_GRAPH_BUILDER_H_

#include <string>
#include <vector>

#include "model/graph.h"
#include "model/hardware.h"

namespace slackswap::testutil {

class GraphBuilder {
 public:
  int32_t Tensor(const std::string& name, int64_t bytes,
                 TensorKind kind = TensorKind::kActivation);
  int32_t Forward(const std::string& name, int64_t ns, std::vector<int32_t> in,
                  std::vector<int32_t> out);
  int32_t Backward(const std::string& name, int64_t ns,
                   std::vector<int32_t> in);
  // Indexes the graph; aborts the test binary if it is invalid.
  Graph Build();

 private:
  int32_t Add(const std::string& name, Phase phase, int64_t ns,
              std::vector<int32_t> in, std::vector<int32_t> out);
  Graph g_;
};

// The indices of the graph's collective ops, in order.
std::vector<int32_t> CollectiveOps(const Graph& g);

// 1 byte/ns each way alone, 0.8 while both directions move, no latency,
// full duplex, plenty of pinned memory.
Hardware TestLink(Duplex duplex = Duplex::kFull);

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_GRAPH_BUILDER_H_
