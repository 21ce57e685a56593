# Shell helpers the bench scripts share; source it from bash:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# start_slackswapd SLACKSWAPD LOG [FLAG...]: starts SLACKSWAPD in the
# background on 127.0.0.1 with free ports (--port=0 --metrics_port=0) and the
# extra FLAGs, its stderr to LOG, and waits up to 10 s for its first log line.
# Sets SERVER_PID, SERVER_FIRST_LINE and PORT (the gRPC port that line
# names). Returns 1 if that line is not the "serving" one (the server failed
# or was too slow); the caller reports it and stops the server if it runs.
start_slackswapd() {
  local bin=$1 log=$2
  shift 2
  "$bin" --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 \
    --metrics_port=0 "$@" 2>"$log" &
  SERVER_PID=$!
  SERVER_FIRST_LINE=""
  PORT=""
  for _ in $(seq 100); do
    if [[ -f $log && $(wc -l <"$log") -ge 1 ]]; then
      SERVER_FIRST_LINE=$(head -n 1 "$log")
      break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [[ $SERVER_FIRST_LINE != *'"msg":"serving"'* ]]; then
    return 1
  fi
  PORT=$(sed -n 's/.*"port":"\([0-9]*\)".*/\1/p' <<<"$SERVER_FIRST_LINE")
}
