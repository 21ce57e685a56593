#!/usr/bin/env bash
# Soak test of slackswapd on loopback, bounded in time and count:
#  1. SOAK_SECONDS (default 180) of gpt2-xl plans at concurrency 8, 200
#     distinct requests (so the 8 MiB plan cache keeps evicting) with every
#     7th request invalid; resident memory sampled every 10 s. Must show zero
#     failed valid requests and every invalid one answered INVALID_ARGUMENT.
#  2. SIGTERM in the middle of a load at concurrency 16: every call the
#     server accepted is answered (each OK the client saw has its log line,
#     and every logged call finished), and slackswapd exits 0.
# Prints a summary, writes the raw reports to OUT_DIR, exits non-zero on any
# failure.
#
#   bash bench/soak.sh [BUILD_DIR]
#   SOAK_SECONDS=600 bash bench/soak.sh
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
SLACKSWAPD=$BUILD/server/slackswapd
LOADGEN=$BUILD/bench/loadgen
SOAK_SECONDS=${SOAK_SECONDS:-180}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/slackswap-soak.XXXXXX)}
mkdir -p "$OUT_DIR"

SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

start_server() {
  local log=$1
  "$SLACKSWAPD" --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 \
    --metrics_port=0 --cache_mb=8 --threads=2 --max_queue=64 2>"$log" &
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*"msg":"serving","port":"\([0-9]*\)".*/\1/p' "$log")
    [[ -n $PORT ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "soak.sh: slackswapd did not start" >&2
  cat "$log" >&2
  exit 1
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER_PID/status"; }
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# --- 1. sustained load with invalid requests mixed in
start_server "$OUT_DIR/soak_server.log"
"$LOADGEN" --server="127.0.0.1:$PORT" --concurrency=8 --requests=2000 \
  --distinct=200 --json >"$OUT_DIR/warmup.json"
rss_start=$(rss_kb)
"$LOADGEN" --server="127.0.0.1:$PORT" --concurrency=8 \
  --duration_s="$SOAK_SECONDS" --distinct=200 --invalid_every=7 \
  --json >"$OUT_DIR/soak.json" &
LOAD_PID=$!
: >"$OUT_DIR/rss.txt"
while kill -0 "$LOAD_PID" 2>/dev/null; do
  echo "$(date +%s) $(rss_kb)" >>"$OUT_DIR/rss.txt"
  sleep 10 &
  wait $! || true
done
wait "$LOAD_PID" || true
rss_end=$(rss_kb)
rss_max=$(awk '{ if ($2 > m) m = $2 } END { print m }' "$OUT_DIR/rss.txt")
kill -TERM "$SERVER_PID"
soak_exit=0
wait "$SERVER_PID" || soak_exit=$?
SERVER_PID=""

failed=$(json_field "$OUT_DIR/soak.json" "sum(d['errors'].values())")
invalid_other=$(json_field "$OUT_DIR/soak.json" "sum(d['invalid_other'].values())")
echo "soak: $(json_field "$OUT_DIR/soak.json" "'%d valid OK, %d failed, %d invalid answered INVALID_ARGUMENT, %.0f req/s, p50 %.1f ms, p99 %.1f ms' % (d['ok'], sum(d['errors'].values()), d['invalid_rejected'], d['requests_per_s'], d['latency_ms']['p50'], d['latency_ms']['p99'])")"
echo "soak: RSS start ${rss_start} kB, end ${rss_end} kB, max ${rss_max} kB; slackswapd exit ${soak_exit}"

# --- 2. SIGTERM in the middle of a load
start_server "$OUT_DIR/drain_server.log"
"$LOADGEN" --server="127.0.0.1:$PORT" --concurrency=16 --duration_s=20 \
  --distinct=1000 --json >"$OUT_DIR/drain.json" &
LOAD_PID=$!
sleep 5
kill -TERM "$SERVER_PID"
drain_exit=0
wait "$SERVER_PID" || drain_exit=$?
SERVER_PID=""
wait "$LOAD_PID" || true
client_ok=$(json_field "$OUT_DIR/drain.json" "d['ok']")
logged_ok=$(grep -c '"method":"Plan","code":"OK"' "$OUT_DIR/drain_server.log" || true)
logged_other=$(grep '"msg":"request"' "$OUT_DIR/drain_server.log" | grep -vc '"code":"OK"' || true)
echo "drain: client saw ${client_ok} OK; server answered ${logged_ok} OK and ${logged_other} otherwise; errors seen by the client: $(json_field "$OUT_DIR/drain.json" "d['errors']"); slackswapd exit ${drain_exit}"

status=0
[[ $failed -eq 0 ]] || { echo "FAIL: valid requests failed during the soak"; status=1; }
[[ $invalid_other -eq 0 ]] || { echo "FAIL: invalid requests got other answers"; status=1; }
[[ $soak_exit -eq 0 && $drain_exit -eq 0 ]] || { echo "FAIL: slackswapd exit status"; status=1; }
[[ $client_ok -eq $logged_ok ]] || { echo "FAIL: accepted calls lost in the drain"; status=1; }
[[ $logged_other -eq 0 ]] || { echo "FAIL: calls the server accepted did not finish OK"; status=1; }
echo "reports in $OUT_DIR"
exit $status
