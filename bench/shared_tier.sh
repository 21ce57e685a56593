#!/usr/bin/env bash
# The shared tier (--shared_store) on a fleet of three slackswapd replicas
# and one redis-server, all on loopback, each started and stopped here:
#
#   1. the hit ratio of a repeated workload (DISTINCT gpt2-xl plans, each
#      asked ROUNDS times) spread round-robin over the three replicas, with
#      and without the shared tier;
#   2. the latency of a shared hit (a plan another replica computed, read
#      from Redis) against a local one (the replica's own cache), each over
#      DISTINCT calls at concurrency 1, alone and with 8 misses in flight;
#   3. what the tier costs a miss: one replica, MISS_SECONDS (10) of
#      distinct gpt2-xl misses at concurrency 8, with and without it.
#
#   cmake --build build --target slackswapd loadgen
#   bash bench/shared_tier.sh [BUILD_DIR]       # DISTINCT=25 ROUNDS=6
#
# DISTINCT must not be a multiple of 3: else each request would always meet
# the same replica, round robin, and the fleet would look like one server.
#
# Needs redis-server and redis-cli (scripts/setup.sh test installs them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
build="${1:-build}"
slackswapd="$build/server/slackswapd"
loadgen="$build/bench/loadgen"
require_built shared_tier.sh "$build" "$slackswapd" "$loadgen"
distinct="${DISTINCT:-25}"
rounds="${ROUNDS:-6}"
if ((distinct % 3 == 0)); then
  echo "shared_tier.sh: DISTINCT=$distinct is a multiple of 3" >&2
  exit 2
fi
work="$(mktemp -d)"
pids=()
redis_pid=""
cleanup() {
  for p in "${pids[@]}" $redis_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
  --appendonly no --daemonize no --loglevel warning >"$work/redis.log" 2>&1 &
redis_pid=$!
shared_flag="--shared_store=redis://127.0.0.1:$redis_port/0"
for _ in $(seq 100); do
  [[ $(redis-cli -p "$redis_port" ping 2>/dev/null) == PONG ]] && break
  sleep 0.1
done

# start_fleet N FLAG...: N replicas; sets SERVERS (a,b,...) and METRICS.
start_fleet() {
  local n=$1
  shift
  SERVERS=""
  METRICS=()
  pids=()
  for i in $(seq "$n"); do
    start_slackswapd "$slackswapd" "$work/replica$i.log" --threads=2 "$@" || {
      echo "shared_tier.sh: replica $i did not start: $SERVER_FIRST_LINE" >&2
      exit 1
    }
    pids+=("$SERVER_PID")
    SERVERS+="${SERVERS:+,}127.0.0.1:$PORT"
    METRICS+=("$(sed -n 's/.*"metrics_port":"\([0-9]*\)".*/\1/p' \
      <<<"$SERVER_FIRST_LINE")")
  done
}

stop_fleet() {
  for p in "${pids[@]}"; do
    SERVER_PID=$p
    stop_slackswapd shared_tier.sh
  done
  pids=()
}

# plannings: slackswap plannings over the fleet (planner_seconds counts).
plannings() {
  local total=0 m n
  for m in "${METRICS[@]}"; do
    n=$(curl -s "http://127.0.0.1:$m/metrics" |
      sed -n 's/^slackswap_planner_seconds_count{policy="slackswap"} \([0-9.e+]*\)$/\1/p')
    total=$(awk -v a="$total" -v b="${n:-0}" 'BEGIN { print a + b }')
  done
  echo "$total"
}

# run_load SERVERS DISTINCT REQUESTS [FLAG...]: loadgen at concurrency 1.
run_load() {
  local servers=$1 n=$2 requests=$3
  shift 3
  "$loadgen" --server="$servers" --distinct="$n" --requests="$requests" \
    --concurrency=1 --workload=gpt2-xl --policies=slackswap --json "$@"
}

# await_keys N: until Redis holds N plans (writes are asynchronous).
await_keys() {
  for _ in $(seq 100); do
    keys=$(redis-cli -p "$redis_port" --scan --pattern 'slackswap:*:plan:*' |
      wc -l)
    [[ $keys -ge $1 ]] && return
    sleep 0.1
  done
}

echo "| fleet | calls | hits | hit ratio | plannings |"
echo "|---|---:|---:|---:|---:|"
for mode in local shared; do
  flags=()
  [[ $mode == shared ]] && flags=("$shared_flag")
  redis-cli -p "$redis_port" flushall >/dev/null
  start_fleet 3 "${flags[@]}"
  calls=$((distinct * rounds))
  out=$(run_load "$SERVERS" "$distinct" "$calls")
  ok=$(json_number ok "$out")
  hits=$(json_number cache_hits "$out")
  label="each replica's own cache"
  [[ $mode == shared ]] && label="own caches + the shared tier"
  echo "| $label | $ok | $hits |" \
    "$(awk -v h="$hits" -v c="$ok" 'BEGIN { printf "%.3f", h / c }') |" \
    "$(plannings) |"
  stop_fleet
done

# Latency: replica 1 computes DISTINCT plans (written to Redis); replica 2
# reads each from Redis (shared hits); replica 1 again (local hits). Then
# under load: replica 1 computes DISTINCT other plans (slackswap and
# capuchin), and replica 2, with 8 llama-7b misses in flight, answers its
# local hits (the first set) and shared hits (the second).
redis-cli -p "$redis_port" flushall >/dev/null
start_fleet 3 "$shared_flag"
first="${SERVERS%%,*}"
rest="${SERVERS#*,}"
second="${rest%%,*}"
run_load "$first" "$distinct" "$distinct" >/dev/null
await_keys "$distinct"
shared=$(run_load "$second" "$distinct" "$distinct")
local_hits=$(run_load "$first" "$distinct" "$distinct")
run_load "$first" "$distinct" "$distinct" --policies=slackswap,capuchin \
  >/dev/null
await_keys $((2 * distinct))
"$loadgen" --server="$second" --workload=llama-7b --distinct=100000 \
  --concurrency=8 --duration_s=60 --policies=slackswap --json \
  >"$work/misses.json" &
misses_pid=$!
sleep 2  # the misses fill the queue
loaded_local=$(run_load "$second" "$distinct" "$distinct")
loaded_shared=$(run_load "$second" "$distinct" "$distinct" \
  --policies=slackswap,capuchin)
kill -INT "$misses_pid" 2>/dev/null || true
wait "$misses_pid" 2>/dev/null || true
echo
echo "| hit | calls | hits | p50 ms | p90 ms | max ms |"
echo "|---|---:|---:|---:|---:|---:|"
for row in "local:$local_hits" "shared:$shared" \
  "local, 8 misses in flight:$loaded_local" \
  "shared, 8 misses in flight:$loaded_shared"; do
  name=${row%%:*}
  json=${row#*:}
  echo "| $name | $(json_number ok "$json") | $(json_number cache_hits "$json") |" \
    "$(json_number p50 "$json") | $(json_number p90 "$json") |" \
    "$(json_number max "$json") |"
done
stop_fleet

# What a miss pays for the tier: a lookup, a mark, a write and an unmark.
echo
echo "| one replica, misses at concurrency 8 | plans/s | p50 ms | p99 ms |"
echo "|---|---:|---:|---:|"
for mode in without with; do
  flags=()
  [[ $mode == with ]] && flags=("$shared_flag")
  redis-cli -p "$redis_port" flushall >/dev/null
  start_fleet 1 "${flags[@]}"
  out=$("$loadgen" --server="$SERVERS" --workload=gpt2-xl \
    --policies=slackswap --distinct=100000 --concurrency=8 \
    --duration_s="${MISS_SECONDS:-10}" --json)
  echo "| $mode the shared tier | $(json_number ok_per_s "$out") |" \
    "$(json_number p50 "$out") | $(json_number p99 "$out") |"
  stop_fleet
done
