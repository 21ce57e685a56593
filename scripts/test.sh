#!/usr/bin/env bash
# Builds everything (scripts/build.sh) and runs every test under ctest. The
# last line printed is ctest's summary; the exit status is ctest's.
#
#   bash scripts/test.sh
#   BUILD_DIR=build-asan bash scripts/test.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"

bash scripts/build.sh
exec ctest --test-dir "$build_dir" --output-on-failure -j2
