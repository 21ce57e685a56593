#!/usr/bin/env bash
# Installs the build dependencies (scripts/setup.sh), configures the CMake
# build directory if it is not configured yet, and builds.
#
#   bash scripts/build.sh                  # everything, into build/
#   BUILD_DIR=build-asan bash scripts/build.sh
#   bash scripts/build.sh --target slackswap   # extra args go to cmake --build
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"

bash scripts/setup.sh

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build_dir" -j2 "$@"
