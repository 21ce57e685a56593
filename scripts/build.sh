#!/usr/bin/env bash
# Installs what the build needs (scripts/setup.sh), configures the CMake
# build directory if it is not configured yet, and builds.
#
#   bash scripts/build.sh                  # everything, into build/
#   BUILD_DIR=build-asan bash scripts/build.sh
#   bash scripts/build.sh --target slackswap   # extra args go to cmake --build
#   SLACKSWAP_TIER=build bash scripts/build.sh --target slackswapd slackswap
#       # the binaries only: installs the build tier alone and configures
#       # without tests (what scripts/run.sh and the container image do)
#
# CMAKE_ARGS adds configure options (CI: -DSLACKSWAP_WERROR=ON).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"
tier="${SLACKSWAP_TIER:-test}"

bash scripts/setup.sh "$tier"

tests=ON
[[ $tier == build ]] && tests=OFF
# shellcheck disable=SC2206  # CMAKE_ARGS is a list of words on purpose
extra=(${CMAKE_ARGS:-})
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLACKSWAP_BUILD_TESTS="$tests" "${extra[@]}"
elif [[ $tests == ON ]] &&
  grep -q '^SLACKSWAP_BUILD_TESTS:BOOL=OFF' "$build_dir/CMakeCache.txt"; then
  # First configured by scripts/run.sh: now the tests too.
  cmake -S . -B "$build_dir" -DSLACKSWAP_BUILD_TESTS=ON "${extra[@]}"
elif ((${#extra[@]} > 0)); then
  cmake -S . -B "$build_dir" "${extra[@]}"
fi
cmake --build "$build_dir" -j2 "$@"
