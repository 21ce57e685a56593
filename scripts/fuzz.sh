#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and fuzzes each for FUZZ_SECONDS (default
# 60), starting from the seed corpus in tests/fuzz/corpus (copied: the repo
# is not modified). A crash, leak, timeout or sanitizer report fails the run
# and leaves the input in $FUZZ_OUT (default build-fuzz/findings).
#
#   bash scripts/fuzz.sh
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh     # a longer campaign
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"
out="${FUZZ_OUT:-$build_dir/findings}"

bash scripts/setup.sh extras
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  # shellcheck disable=SC2086  # CMAKE_ARGS is a list of words on purpose
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLACKSWAP_FUZZ=ON \
    -DSLACKSWAP_SANITIZE=address,undefined ${CMAKE_ARGS:-}
fi
cmake --build "$build_dir" -j2 --target fuzz_files fuzz_requests

mkdir -p "$out"
status=0
for target in fuzz_files fuzz_requests; do
  corpus="$(mktemp -d)"
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  echo "== $target: ${seconds}s"
  if ! "$build_dir/tests/fuzz/$target" "$corpus" \
      -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/$target-" \
      2>&1 | tail -n 25; then
    status=1
  fi
  rm -rf "$corpus"
done
exit "$status"
