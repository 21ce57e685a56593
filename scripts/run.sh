#!/usr/bin/env bash
# The main job, with embedded defaults and no arguments: builds, starts
# slackswapd on localhost (free ports), prints the reference comparison table
# through the CLI against it (`slackswap table --server`: every policy on the
# three reference workloads at half their activation peak, beside the seed's
# figures), and stops the server with SIGTERM.
#
#   bash scripts/run.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"

# The binaries only: a fresh machine installs just the build tier.
SLACKSWAP_TIER=build bash scripts/build.sh --target slackswap slackswapd >&2

log="$(mktemp)"
"$build_dir/server/slackswapd" --host=127.0.0.1 --port=0 \
  --metrics_host=127.0.0.1 --metrics_port=0 2>"$log" &
server=$!
cleanup() {
  if kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server"
    wait "$server" || true
  fi
  rm -f "$log"
}
trap cleanup EXIT

# The first log line names the bound port; wait for it (bounded).
port=""
for _ in $(seq 1 200); do
  port="$(sed -n 's/.*"msg":"serving","port":"\([0-9]*\)".*/\1/p' "$log")"
  [[ -n "$port" ]] && break
  if ! kill -0 "$server" 2>/dev/null; then
    cat "$log" >&2
    echo "slackswapd exited before serving" >&2
    exit 1
  fi
  sleep 0.05
done
if [[ -z "$port" ]]; then
  cat "$log" >&2
  echo "slackswapd did not start serving within 10 s" >&2
  exit 1
fi

"$build_dir/cli/slackswap" table --server "127.0.0.1:$port"

kill -TERM "$server"
wait "$server"
