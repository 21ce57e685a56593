#!/usr/bin/env bash
# Load test of slackswapd on loopback: gpt2-xl Plan calls (slackswap at
# budget 0.5) at concurrency 1, 8 and 64, with the plan cache off
# (--cache_mb=0; a distinct budget per call, so every call plans) and on
# (--cache_mb=64; the requests are identical, so all but the first hit). Each run is bounded in time (LOAD_SECONDS) and count.
#
#   bash bench/run_load.sh [BUILD_DIR]          # default: build
#   LOAD_SECONDS=3 CONCURRENCY="1 8" bash bench/run_load.sh build-h6
#
# Environment: LOAD_SECONDS (default 10), CONCURRENCY (default "1 8 64"),
# WORKLOAD (gpt2-xl), POLICIES (slackswap), SERVER_THREADS (0: one per core),
# OUT_DIR (where the JSON reports and server logs go; default a fresh
# temporary directory). Prints one table row per run; exits non-zero if a
# valid call failed or slackswapd did not exit 0 on SIGTERM.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD=${1:-${BUILD_DIR:-build}}
SLACKSWAPD=$BUILD/server/slackswapd
LOADGEN=$BUILD/bench/loadgen
LOAD_SECONDS=${LOAD_SECONDS:-10}
CONCURRENCY=${CONCURRENCY:-"1 8 64"}
WORKLOAD=${WORKLOAD:-gpt2-xl}
POLICIES=${POLICIES:-slackswap}
SERVER_THREADS=${SERVER_THREADS:-0}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/slackswap-load.XXXXXX)}
mkdir -p "$OUT_DIR"

require_built run_load.sh "$BUILD" "$SLACKSWAPD" "$LOADGEN"

SERVER_PID=""
PORT=""
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# start_server CACHE_MB LOG: starts slackswapd on 127.0.0.1 with free ports
# and sets SERVER_PID and PORT from its first log line.
start_server() {
  local cache_mb=$1 log=$2
  if ! start_slackswapd "$SLACKSWAPD" "$log" --cache_mb="$cache_mb" \
    --threads="$SERVER_THREADS"; then
    echo "run_load.sh: slackswapd did not start; log:" >&2
    cat "$log" >&2
    exit 1
  fi
  local threads
  threads=$(sed -n 's/.*"threads":"\([0-9]*\)".*/\1/p' \
    <<<"$SERVER_FIRST_LINE")
  echo "# slackswapd pid $SERVER_PID on 127.0.0.1:$PORT, $threads worker" \
    "threads, cache ${cache_mb} MiB"
}

echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$LOAD_SECONDS s per run, $WORKLOAD / $POLICIES, reports in $OUT_DIR"
# srv_cpu / cli_cpu: CPU seconds of slackswapd / loadgen during the run,
# per second of wall time (2.0 = both cores busy).
printf '%-6s %5s %8s %8s %9s %9s %9s %9s %8s %6s %7s %7s\n' cache conc sent \
  ok req/s p50_ms p90_ms p99_ms max_ms hits srv_cpu cli_cpu
failed=0
for cache_mb in 0 64; do
  start_server "$cache_mb" "$OUT_DIR/slackswapd-cache$cache_mb.log"
  # Cache off: a distinct budget per call, so that identical calls in
  # flight do not share one planning; every call plans.
  distinct=$([[ $cache_mb == 0 ]] && echo 100000 || echo 1)
  for c in $CONCURRENCY; do
    json_file=$OUT_DIR/cache${cache_mb}-c$c.json
    rc=0
    cpu0=$(slackswapd_cpu_s)
    "$LOADGEN" --server="127.0.0.1:$PORT" --concurrency="$c" \
      --duration_s="$LOAD_SECONDS" --workload="$WORKLOAD" \
      --policies="$POLICIES" --distinct="$distinct" --json \
      >"$json_file" || rc=$?
    cpu1=$(slackswapd_cpu_s)
    json=$(cat "$json_file")
    if [[ $rc -ne 0 ]]; then
      echo "run_load.sh: loadgen exited $rc: $json" >&2
      failed=1
    fi
    lat=${json#*\"latency_ms\":}
    wall=$(json_number wall_s "$json")
    srv=nan
    if [[ $cpu0 != nan && $cpu1 != nan ]]; then
      srv=$(awk -v a="$cpu0" -v b="$cpu1" -v w="$wall" \
        'BEGIN { printf "%.2f", (w > 0 ? (b - a) / w : 0) }')
    fi
    cli=$(awk -v c="$(json_number client_cpu_s "$json")" -v w="$wall" \
      'BEGIN { printf "%.2f", (w > 0 ? c / w : 0) }')
    printf '%-6s %5s %8s %8s %9s %9s %9s %9s %8s %6s %7s %7s\n' \
      "$([[ $cache_mb == 0 ]] && echo off || echo on)" "$c" \
      "$(json_number sent "$json")" "$(json_number ok "$json")" \
      "$(json_number requests_per_s "$json")" "$(json_number p50 "$lat")" \
      "$(json_number p90 "$lat")" "$(json_number p99 "$lat")" "$(json_number max "$lat")" \
      "$(json_number cache_hits "$json")" "$srv" "$cli"
  done
  stop_slackswapd run_load.sh
  echo "# slackswapd exited 0 after SIGTERM"
done
exit "$failed"
