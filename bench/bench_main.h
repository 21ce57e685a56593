// What the benchmarks share: the main(), for which each benchmark file
// defines RegisterBenchmarks() to register its cases (they are built at run
// time from the workloads and policies) and links bench_main.cc; and the
// synthetic steps of a given size.
#ifndef SLACKSWAP_BENCH_BENCH_MAIN_H_
#define SLACKSWAP_BENCH_BENCH_MAIN_H_

#include <cstdint>

#include "model/graph.h"

namespace slackswap {

void RegisterBenchmarks();

// gpt2-xl with its layer count set so the step has about `target_ops` ops
// (the ops per layer measured, not assumed), named "gpt2-xl xL layers";
// `batch` > 0 overrides the preset's. Exits on error.
Graph SyntheticTransformer(int64_t target_ops, int32_t batch = 0);

}  // namespace slackswap

#endif  // SLACKSWAP_BENCH_BENCH_MAIN_H_
