// The main() the benchmarks share: each benchmark file defines
// RegisterBenchmarks() to register its cases (they are built at run time
// from the workloads and policies), and links bench_main.cc.
#ifndef SLACKSWAP_BENCH_BENCH_MAIN_H_
#define SLACKSWAP_BENCH_BENCH_MAIN_H_

namespace slackswap {

void RegisterBenchmarks();

}  // namespace slackswap

#endif  // SLACKSWAP_BENCH_BENCH_MAIN_H_
