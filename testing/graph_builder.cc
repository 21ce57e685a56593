#include "testing/graph_builder.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace slackswap::testutil {

int32_t GraphBuilder::Tensor(const std::string& name, int64_t bytes,
                             TensorKind kind) {
  return g_.AddTensor({.name = name, .bytes = bytes, .kind = kind});
}

int32_t GraphBuilder::Forward(const std::string& name, int64_t ns,
                              std::vector<int32_t> in,
                              std::vector<int32_t> out) {
  return Add(name, Phase::kForward, ns, std::move(in), std::move(out));
}

int32_t GraphBuilder::Backward(const std::string& name, int64_t ns,
                               std::vector<int32_t> in) {
  return Add(name, Phase::kBackward, ns, std::move(in), {});
}

int32_t GraphBuilder::Add(const std::string& name, Phase phase, int64_t ns,
                          std::vector<int32_t> in, std::vector<int32_t> out) {
  Op op;
  op.name = name;
  op.phase = phase;
  op.inputs.assign(in.begin(), in.end());
  op.outputs.assign(out.begin(), out.end());
  op.cost.duration_ns = ns;
  return g_.AddOp(std::move(op));
}

Graph GraphBuilder::Build() {
  Graph g = std::move(g_);
  absl::Status s = IndexGraph(g);
  if (!s.ok()) {
    std::fprintf(stderr, "test graph is invalid: %s\n", s.ToString().c_str());
    std::abort();
  }
  return g;
}

Hardware TestLink(Duplex duplex) {
  Hardware hw;
  hw.name = "test-link";
  hw.peak_tflops_bf16 = 1;
  hw.hbm_gbps = 1;
  hw.h2d_gbps = 1;
  hw.d2h_gbps = 1;
  hw.bidir_h2d_gbps = 0.8;
  hw.bidir_d2h_gbps = 0.8;
  hw.duplex = duplex;
  hw.copy_engines = 2;
  hw.pinned_host_memory_bytes = 1'000'000'000;
  return hw;
}

std::vector<int32_t> CollectiveOps(const Graph& g) {
  std::vector<int32_t> ops;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (g.ops[o].collective.has_value()) ops.push_back(static_cast<int32_t>(o));
  }
  return ops;
}

}  // namespace slackswap::testutil
