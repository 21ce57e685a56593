#!/usr/bin/env bash
# The main job, with the embedded defaults and no arguments: builds, then
# prints the comparison table (`slackswap table`). Until that subcommand
# exists it simulates the three reference workloads on the reference
# hardware with no budget and prints their summaries.
#
#   bash scripts/run.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"

bash scripts/build.sh --target slackswap
slackswap="$build_dir/cli/slackswap"

help="$("$slackswap" --help)"
if grep -Eq '^[[:space:]]+table([[:space:]]|$)' <<<"$help"; then
  exec "$slackswap" table
fi

for workload in bert-large gpt2-xl llama-7b; do
  "$slackswap" simulate --workload "$workload" --hardware a100-80gb-pcie4
done
