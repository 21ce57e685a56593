# Shell helpers the bench scripts share; source it from bash:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# require_built SCRIPT BUILD BIN...: exits 2, naming the targets to build,
# unless every BIN is an executable.
require_built() {
  local script=$1 build=$2
  shift 2
  local bin targets=""
  for bin in "$@"; do targets+=" $(basename "$bin")"; done
  for bin in "$@"; do
    if [[ ! -x $bin ]]; then
      echo "$script: $bin not built (cmake --build $build --target$targets)" >&2
      exit 2
    fi
  done
}

# start_slackswapd SLACKSWAPD LOG [FLAG...]: starts SLACKSWAPD in the
# background on 127.0.0.1 with free ports (--port=0 --metrics_port=0) and the
# extra FLAGs, its stderr to LOG, and waits up to 10 s for its "serving" log
# line (a shared store's "connected" line may come first). Sets SERVER_PID,
# SERVER_FIRST_LINE (that line, or the first line of the log when there is
# none) and PORT (the gRPC port it names). Returns 1 without a "serving"
# line (the server failed or was too slow); the caller reports it and stops
# the server if it runs.
start_slackswapd() {
  local bin=$1 log=$2
  shift 2
  "$bin" --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 \
    --metrics_port=0 "$@" 2>"$log" &
  SERVER_PID=$!
  SERVER_FIRST_LINE=""
  PORT=""
  for _ in $(seq 100); do
    if [[ -f $log ]] && grep -q '"msg":"serving"' "$log"; then
      SERVER_FIRST_LINE=$(grep -m 1 '"msg":"serving"' "$log")
      break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $SERVER_FIRST_LINE && -f $log ]]; then
    SERVER_FIRST_LINE=$(head -n 1 "$log")
  fi
  if [[ $SERVER_FIRST_LINE != *'"msg":"serving"'* ]]; then
    return 1
  fi
  PORT=$(sed -n 's/.*"port":"\([0-9]*\)".*/\1/p' <<<"$SERVER_FIRST_LINE")
}

# stop_slackswapd NAME: SIGTERM to SERVER_PID, then its exit status must be
# 0; otherwise says so (NAME: the calling script) and exits 1. Clears
# SERVER_PID.
stop_slackswapd() {
  local name=$1 rc=0
  if ! kill -TERM "$SERVER_PID" 2>/dev/null; then
    wait "$SERVER_PID" || rc=$?
    echo "$name: slackswapd (pid $SERVER_PID) was gone before the SIGTERM" \
      "(exit status $rc)" >&2
    SERVER_PID=""
    exit 1
  fi
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=""
  if [[ $rc -ne 0 ]]; then
    echo "$name: slackswapd exited $rc after SIGTERM" >&2
    exit 1
  fi
}

# slackswapd_cpu_s: SERVER_PID's user + system CPU seconds so far (nan once
# it is gone).
slackswapd_cpu_s() {
  local stat
  if ! stat=$(cat "/proc/$SERVER_PID/stat" 2>/dev/null); then
    echo nan
    return
  fi
  stat=${stat##*) }  # the fields after "(comm) "
  awk -v tck="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / tck }' \
    <<<"$stat"
}

# slackswapd_mb FIELD: SERVER_PID's VmRSS or VmHWM in MB.
slackswapd_mb() {
  awk -v f="$1:" '$1 == f { printf "%.0f", $2 / 1024 }' \
    "/proc/$SERVER_PID/status"
}

# json_number NAME JSON: a number from loadgen's one-line JSON report.
json_number() {
  sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" <<<"$2"
}
