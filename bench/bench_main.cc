#include "bench/bench_main.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "model/transformer.h"
#include "model/workloads.h"

namespace slackswap {
namespace {

template <typename T>
T OrDie(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

}  // namespace

Graph SyntheticTransformer(int64_t target_ops, int32_t batch) {
  // ops(L) = fixed + L * per_layer; solve for ~target_ops.
  TransformerConfig c = OrDie(FindWorkload("gpt2-xl"), "gpt2-xl");
  if (batch > 0) c.batch = batch;
  c.layers = 1;
  const int64_t one = OrDie(BuildTransformer(c), "gpt2-xl").ops.size();
  c.layers = 2;
  const int64_t two = OrDie(BuildTransformer(c), "gpt2-xl").ops.size();
  const int64_t per_layer = two - one;
  c.layers = static_cast<int32_t>((target_ops - (one - per_layer)) / per_layer);
  Graph g = OrDie(BuildTransformer(c), "synthetic gpt2-xl");
  g.name = absl::StrCat("gpt2-xl x", c.layers, " layers");
  return g;
}

}  // namespace slackswap

int main(int argc, char** argv) {
  slackswap::RegisterBenchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
