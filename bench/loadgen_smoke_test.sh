#!/usr/bin/env bash
# ctest loadgen_smoke: starts slackswapd on 127.0.0.1 with free ports, sends
# 100 Plan calls at concurrency 4 (3 distinct valid requests, every 10th
# call invalid), then SIGTERMs the server. Passes when loadgen exits 0
# (every valid call OK, every invalid one INVALID_ARGUMENT) and slackswapd
# exits 0.
#
#   bash bench/loadgen_smoke_test.sh SLACKSWAPD LOADGEN
set -euo pipefail
SLACKSWAPD=$1
LOADGEN=$2
dir=$(mktemp -d /tmp/loadgen-smoke.XXXXXX)
log=$dir/slackswapd.log
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
if ! start_slackswapd "$SLACKSWAPD" "$log" --cache_mb=16; then
  echo "loadgen_smoke: slackswapd did not start: $(cat "$log")"
  exit 1
fi
port=$PORT

# Refuses a non-loopback server before sending anything.
if "$LOADGEN" --server=192.0.2.1:"$port" --requests=1 >/dev/null 2>&1; then
  echo "loadgen_smoke: loadgen accepted a non-loopback server"
  exit 1
fi

rc=0
"$LOADGEN" --server="127.0.0.1:$port" --requests=100 --concurrency=4 \
  --duration_s=60 --distinct=3 --invalid_every=10 || rc=$?
kill -TERM "$SERVER_PID"
src=0
wait "$SERVER_PID" || src=$?
SERVER_PID=""
if [[ $rc -ne 0 ]]; then
  echo "loadgen_smoke: loadgen exited $rc"
  exit 1
fi
if [[ $src -ne 0 ]]; then
  echo "loadgen_smoke: slackswapd exited $src after SIGTERM"
  exit 1
fi
echo "loadgen_smoke: PASS"
