#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and fuzzes each for FUZZ_SECONDS (default
# 60), starting from the seed corpus in tests/fuzz/corpus (copied: the repo
# is not modified), with inputs up to 4 MiB (FUZZ_MAX_LEN). A crash, leak,
# timeout or sanitizer report fails the run and leaves the input in
# $FUZZ_OUT (default build-fuzz/findings). FUZZ_CORPUS_OUT, when set, keeps
# each target's grown corpus there (a longer campaign's result).
#
#   bash scripts/fuzz.sh
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh     # a longer campaign
#   FUZZ_TARGETS=fuzz_shapes bash scripts/fuzz.sh   # one target
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
read -r -a targets <<< "${FUZZ_TARGETS:-fuzz_files fuzz_requests fuzz_shapes fuzz_shared_entries}"
max_len="${FUZZ_MAX_LEN:-4194304}"
cmake --build "$build_dir" -j2 --target "${targets[@]}"

mkdir -p "$out"
status=0
for target in "${targets[@]}"; do
  corpus="$(mktemp -d)"
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  echo "== $target: ${seconds}s"
  if ! "$build_dir/tests/fuzz/$target" "$corpus" \
      -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
      -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix="$out/$target-" 2>&1 | tail -n 25; then
    status=1
  fi
  if [[ -n ${FUZZ_CORPUS_OUT:-} ]]; then
    mkdir -p "$FUZZ_CORPUS_OUT/$target"
    cp "$corpus"/* "$FUZZ_CORPUS_OUT/$target"/
  fi
  rm -rf "$corpus"
done
exit "$status"
