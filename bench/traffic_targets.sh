#!/usr/bin/env bash
# The service's traffic targets, one measured row each, against real
# slackswapd processes on loopback (docs/PERFORMANCE.md, "Under traffic"):
#   misses     gpt2-xl slackswap plans that all miss the cache (a distinct
#              budget per call), at concurrency 1 and 8: plans/s, latency,
#              and the server's CPU per plan (getrusage of the process, via
#              /proc, over the run); default settings otherwise.
#   hits       an inline llama-7b request that hits the cache, at
#              concurrency 1, while 16 concurrent misses keep the workers
#              busy: the hits' latency.
#   coalesce   64 identical requests at once, cache off: plannings run
#              (slackswap_planner_seconds_count) and calls coalesced.
#   rss        RSS at start, after planning a ~100k-op inline graph, and a
#              few seconds later: glibc with --trim_after_mb=0 (no trim),
#              glibc with the default --trim_after_mb=64 (malloc_trim),
#              and tcmalloc (LD_PRELOAD libtcmalloc_minimal.so.4) without
#              trim.
#   profile    (only when named in ROWS; needs perf) where the server's CPU
#              goes on misses at concurrency 8: perf record -g on the
#              process, the top symbols by self time.
#
#   bash bench/traffic_targets.sh [BUILD_DIR]     # default: build
#   LOAD_SECONDS=5 ROWS="misses coalesce" bash bench/traffic_targets.sh
#
# Every call is bounded (loadgen --duration_s / --requests, deadlines);
# each row starts and stops its own server and prints the load average.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD=${1:-${BUILD_DIR:-build}}
SLACKSWAPD=$BUILD/server/slackswapd
LOADGEN=$BUILD/bench/loadgen
SLACKSWAP=$BUILD/cli/slackswap
LOAD_SECONDS=${LOAD_SECONDS:-10}
ROWS=${ROWS:-"misses hits coalesce rss"}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/slackswap-targets.XXXXXX)}
TCMALLOC=${TCMALLOC:-/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4}
mkdir -p "$OUT_DIR"

require_built traffic_targets.sh "$BUILD" "$SLACKSWAPD" "$LOADGEN" "$SLACKSWAP"

SERVER_PID=""
PORT=""
METRICS_PORT=""
BG_PID=""
cleanup() {
  if [[ -n $BG_PID ]]; then kill "$BG_PID" 2>/dev/null || true; fi
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# start NAME [FLAG...]: a server with the flags; its log in $OUT_DIR.
start() {
  local name=$1
  shift
  if ! start_slackswapd "$SLACKSWAPD" "$OUT_DIR/$name.log" "$@"; then
    echo "traffic_targets.sh: slackswapd did not start; log:" >&2
    cat "$OUT_DIR/$name.log" >&2
    exit 1
  fi
  METRICS_PORT=$(sed -n 's/.*"metrics_port":"\([0-9]*\)".*/\1/p' \
    <<<"$SERVER_FIRST_LINE")
}

# metric NAME [LABELS]: one sample's value from the server's /metrics.
metric() {
  curl -sf --max-time 5 "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk -v n="$1" -v l="${2:-}" '
      $1 == n || index($1, n "{" l) == 1 { print $2; exit }'
}

load() { echo "load $(cut -d' ' -f1-3 /proc/loadavg)"; }

loadgen() {
  "$LOADGEN" --server="127.0.0.1:$PORT" --json "$@"
}

echo "# $(nproc) cores, $(load), $LOAD_SECONDS s per run, reports in $OUT_DIR"

row_misses() {
  for c in 1 8; do
    # A fresh server each time: the budgets cycle from the same start.
    start "misses-c$c"
    local before after json ok
    before=$(slackswapd_cpu_s)
    json=$(loadgen --concurrency="$c" --duration_s="$LOAD_SECONDS" \
      --workload=gpt2-xl --policies=slackswap --distinct=100000)
    after=$(slackswapd_cpu_s)
    ok=$(json_number ok "$json")
    local lat=${json#*\"latency_ms\":}
    printf 'misses c=%-2s plans/s %7.1f  p50 %6.2f ms  p99 %6.2f ms  server CPU/plan %5.2f ms  hits %s  (%s)\n' \
      "$c" "$(json_number ok_per_s "$json")" "$(json_number p50 "$lat")" \
      "$(json_number p99 "$lat")" \
      "$(awk -v a="$before" -v b="$after" -v n="$ok" \
        'BEGIN { printf "%.3f", (n > 0 ? (b - a) * 1000 / n : 0) }')" \
      "$(json_number cache_hits "$json")" "$(load)"
    stop_slackswapd traffic_targets.sh
  done
}

row_hits() {
  local graph=$OUT_DIR/llama-7b.pb
  "$SLACKSWAP" workload --workload llama-7b --out "$graph" >/dev/null
  start hits
  # The first call plans and fills the cache.
  loadgen --requests=1 --graph_file="$graph" --workload=llama-7b \
    --policies=slackswap --hardware=a100-80gb-pcie4 >/dev/null
  loadgen --concurrency=16 --duration_s="$((LOAD_SECONDS + 4))" \
    --workload=gpt2-xl --policies=slackswap --distinct=100000 \
    >"$OUT_DIR/hits-misses.json" &
  BG_PID=$!
  sleep 2  # the misses fill the queue before the hits are timed
  local json
  json=$(loadgen --concurrency=1 --duration_s="$LOAD_SECONDS" \
    --graph_file="$graph" --policies=slackswap --hardware=a100-80gb-pcie4)
  wait "$BG_PID"
  BG_PID=""
  local lat=${json#*\"latency_ms\":}
  local misses
  misses=$(cat "$OUT_DIR/hits-misses.json")
  printf 'inline llama-7b hits under 16 misses: %s calls, hits %s, p50 %.3f ms, p99 %.3f ms; misses %s plans/s, p50 %.1f ms (%s)\n' \
    "$(json_number ok "$json")" "$(json_number cache_hits "$json")" \
    "$(json_number p50 "$lat")" "$(json_number p99 "$lat")" \
    "$(json_number ok_per_s "$misses")" "$(json_number p50 "${misses#*\"latency_ms\":}")" \
    "$(load)"
  stop_slackswapd traffic_targets.sh
}

row_coalesce() {
  start coalesce --cache_mb=0
  local json
  json=$(loadgen --concurrency=64 --requests=64 --workload=gpt2-xl \
    --policies=slackswap)
  printf 'coalescing: 64 identical calls, %s OK; plannings %s, coalesced %s (%s)\n' \
    "$(json_number ok "$json")" \
    "$(metric slackswap_planner_seconds_count 'policy="slackswap"')" \
    "$(metric slackswap_coalesced_requests_total)" "$(load)"
  stop_slackswapd traffic_targets.sh
}

row_rss() {
  local graph=$OUT_DIR/big.pb
  # gpt2-xl with enough layers for about 100,000 ops (24 ops a layer), on
  # servers that admit it (--max_request_mb: it needs about 450 MB).
  "$SLACKSWAP" workload --workload gpt2-xl --layers 4170 --out "$graph" \
    >"$OUT_DIR/big.txt"
  echo "# rss graph: $(cat "$OUT_DIR/big.txt")"
  local name big="--cache_mb=0 --max_request_mb=2048"
  for name in glibc-no-trim glibc-trim tcmalloc; do
    case $name in
      glibc-no-trim) start "rss-$name" --trim_after_mb=0 $big ;;
      glibc-trim) start "rss-$name" $big ;;
      tcmalloc) LD_PRELOAD=$TCMALLOC start "rss-$name" --trim_after_mb=0 $big ;;
    esac
    local start_mb peak_mb after_mb later_mb
    start_mb=$(slackswapd_mb VmRSS)
    loadgen --requests=1 --graph_file="$graph" --policies=capuchin \
      --budget=0.5 --deadline_s=120 >"$OUT_DIR/rss-$name.json"
    after_mb=$(slackswapd_mb VmRSS)
    peak_mb=$(slackswapd_mb VmHWM)
    sleep 1  # the trim runs 100 ms after the call
    later_mb=$(slackswapd_mb VmRSS)
    printf 'rss %-13s start %4s MB, peak %4s MB, after the call %4s MB, 1 s later %4s MB (%s)\n' \
      "$name" "$start_mb" "$peak_mb" "$after_mb" "$later_mb" "$(load)"
    stop_slackswapd traffic_targets.sh
  done
}

row_profile() {
  start profile
  loadgen --concurrency=8 --duration_s="$((LOAD_SECONDS + 2))" \
    --workload=gpt2-xl --policies=slackswap --distinct=100000 \
    >"$OUT_DIR/profile-load.json" &
  BG_PID=$!
  sleep 1
  perf record -F 499 -g -o "$OUT_DIR/perf.data" -p "$SERVER_PID" \
    -- sleep "$LOAD_SECONDS" 2>"$OUT_DIR/perf-record.log"
  wait "$BG_PID"
  BG_PID=""
  echo "profile: self time by symbol, misses at concurrency 8 ($(load))"
  perf report -i "$OUT_DIR/perf.data" --no-children --stdio \
    --sort dso,symbol --percent-limit 1.5 -g none 2>/dev/null |
    grep -E '^ +[0-9]' | head -30
  stop_slackswapd traffic_targets.sh
}

for row in $ROWS; do
  "row_$row"
done
