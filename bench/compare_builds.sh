#!/usr/bin/env bash
# One build against another, in one run: the planner's and the simulator's
# benchmarks of both, interleaved round by round on one core, and each
# case's new/old ratio of CPU time (docs/PERFORMANCE.md, "Judging plans").
# Absolute figures move with the machine's hour; the ratio is the result.
#
#   git worktree add /tmp/old <commit> && bash scripts/build.sh ... in it
#   bash bench/compare_builds.sh /tmp/old/build build
#   ROUNDS=3 FILTER='BM_PlanAndSimulate/gpt2-xl/.*' bash bench/compare_builds.sh OLD NEW
#
# FILTER (a --benchmark_filter regex) picks the cases; by default slackswap
# and ideal on gpt2-xl and llama-7b in planner_bench. BENCH=simulator_bench
# compares that binary instead. Each case's CPU time is the median of the
# rounds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OLD=${1:?usage: compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR}
NEW=${2:?usage: compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR}
BENCH=${BENCH:-planner_bench}
FILTER=${FILTER:-'BM_PlanAndSimulate/(gpt2-xl|llama-7b)/(ideal|slackswap)$'}
ROUNDS=${ROUNDS:-3}
require_built compare_builds.sh "$OLD" "$OLD/bench/$BENCH"
require_built compare_builds.sh "$NEW" "$NEW/bench/$BENCH"

OUT=$(mktemp -d /tmp/slackswap-compare.XXXXXX)
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS rounds, $BENCH, filter $FILTER"
for round in $(seq "$ROUNDS"); do
  for which in old new; do
    dir=$OLD
    [[ $which == new ]] && dir=$NEW
    taskset -c 1 "$dir/bench/$BENCH" --benchmark_filter="$FILTER" \
      --benchmark_format=csv 2>/dev/null |
      grep '^"BM_' >"$OUT/$which.$round.csv"
  done
done
# name,iterations,real_time,cpu_time,time_unit,...: the median CPU time per
# case and build, then the ratio.
python3 - "$OUT" "$ROUNDS" <<'EOF'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times = {}
for which in ("old", "new"):
    for r in range(1, rounds + 1):
        with open(f"{out}/{which}.{r}.csv") as f:
            for row in csv.reader(f):
                times.setdefault((row[0], which), []).append(
                    (float(row[3]), row[4]))
names = list(dict.fromkeys(name for name, _ in times))  # as first run
print(f"{'case':58} {'old':>12} {'new':>12} {'new/old':>8}")
for name in names:
    old = statistics.median(t for t, _ in times[(name, "old")])
    new = statistics.median(t for t, _ in times[(name, "new")])
    unit = times[(name, "old")][0][1]
    print(f"{name:58} {old:9.3f} {unit:2} {new:9.3f} {unit:2} {new / old:8.2f}")
EOF
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
