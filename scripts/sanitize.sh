#!/usr/bin/env bash
# Builds and tests under sanitizers, each in its own build directory.
#
#   bash scripts/sanitize.sh address   # AddressSanitizer + UBSan: every test
#   bash scripts/sanitize.sh thread    # ThreadSanitizer: the concurrency tests
#
# The thread mode builds and runs the unit tests of what runs on several
# threads: the worker pool (WorkQueue), the plan cache (PlanCache), the
# metrics (ServiceMetrics), the planning core called from many threads
# (PlanningCoreConcurrency), and the shared tier's store with its
# background thread (SharedStore, against a real redis-server); not the
# end-to-end service tests, which run
# under AddressSanitizer. Our locks (common/mutex.h)
# are visible to TSan; Debian's prebuilt Abseil and gRPC are not
# instrumented, so their internals are not checked.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="${1:-address}"

bash scripts/setup.sh test
case "$mode" in
  address)
    build_dir="${BUILD_DIR:-build-asan}"
    sanitizers="address,undefined"
    targets=(all)
    tests=""
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    ;;
  thread)
    build_dir="${BUILD_DIR:-build-tsan}"
    sanitizers="thread"
    targets=(work_queue_test plan_cache_test metrics_test
             planning_core_concurrency_test single_flight_test
             graph_store_test memory_trimmer_test shared_store_test)
    tests="^(WorkQueue|PlanCache|ServiceMetrics|PlanningCoreConcurrency|SingleFlight|GraphStore|MemoryTrimmer|SharedStore)"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
    ;;
  *)
    echo "usage: $0 address|thread" >&2
    exit 2
    ;;
esac

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  # shellcheck disable=SC2086  # CMAKE_ARGS is a list of words on purpose
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLACKSWAP_SANITIZE="$sanitizers" ${CMAKE_ARGS:-}
fi
cmake --build "$build_dir" -j2 --target "${targets[@]}"
if [[ -n "$tests" ]]; then
  ctest --test-dir "$build_dir" --output-on-failure -j2 -R "$tests"
else
  ctest --test-dir "$build_dir" --output-on-failure -j2
fi
