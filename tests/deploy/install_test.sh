#!/usr/bin/env bash
# scripts/install.sh, as the Dockerfile's build stage runs it: installs the
# built binaries into temporary prefixes (plain and --strip, the image's
# form), then runs the installed binaries: both --help, and a short
# serve / health / plan / metrics / SIGTERM cycle of the stripped slackswapd
# with the stripped CLI, using the Dockerfile's HEALTHCHECK command. Every
# wait is bounded; everything it starts is on 127.0.0.1 and is stopped.
#
#   bash tests/deploy/install_test.sh BUILD_DIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/slackswap-install-test.XXXXXX")"
server=""
cleanup() {
  if [[ -n $server ]] && kill -0 "$server" 2>/dev/null; then
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  if [[ -f $work/slackswapd.log ]]; then
    echo "--- slackswapd log" >&2
    tail -n 30 "$work/slackswapd.log" >&2
  fi
  exit 1
}

# --- install ----------------------------------------------------------------
rc=0
bash "$repo/scripts/install.sh" >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "install.sh without a prefix exited $rc, want 2 (usage)"
rc=0
BUILD_DIR="$work/no-such-build" bash "$repo/scripts/install.sh" "$work/x" \
  2>"$work/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "is not built" "$work/err"; then
  fail "install.sh from a missing build exited $rc: $(cat "$work/err")"
fi

for kind in plain stripped; do
  flags=()
  [[ $kind == stripped ]] && flags=(--strip)
  BUILD_DIR="$build_dir" bash "$repo/scripts/install.sh" "${flags[@]}" \
    "$work/$kind" || fail "install.sh ${flags[*]} exited $?"
  for b in slackswapd slackswap; do
    [[ -x $work/$kind/bin/$b ]] || fail "$kind: bin/$b not installed"
    if ldd "$work/$kind/bin/$b" | grep -q "not found"; then
      fail "$kind: bin/$b has unresolved libraries: $(ldd "$work/$kind/bin/$b")"
    fi
  done
  if [[ -f $repo/docs/operations.md ]]; then
    cmp -s "$repo/docs/operations.md" \
      "$work/$kind/share/doc/slackswap/operations.md" ||
      fail "$kind: docs/operations.md not installed"
  fi
done
for b in slackswapd slackswap; do
  if readelf -S "$work/stripped/bin/$b" | grep -q '\.debug_info'; then
    fail "--strip left debug information in $b"
  fi
done
echo "ok: install.sh installed both binaries, plain and --strip"

# --- the installed binaries -------------------------------------------------
bin="$work/stripped/bin"
for kind in plain stripped; do
  out="$("$work/$kind/bin/slackswap" --help)" || fail "slackswap --help failed"
  grep -q "usage: slackswap" <<<"$out" || fail "slackswap --help: $out"
  rc=0
  out="$("$work/$kind/bin/slackswapd" --help 2>&1)" || rc=$?
  # absl's --help exits 1 after printing the flags.
  [[ $rc == 0 || $rc == 1 ]] || fail "slackswapd --help exited $rc"
  for f in --port --metrics_port --grace_s --threads; do
    grep -q -- "$f " <<<"$out" || fail "slackswapd --help lacks $f: $out"
  done
done
echo "ok: slackswapd --help and slackswap --help"

"$bin/slackswapd" --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 \
  --metrics_port=0 --threads=1 --grace_s=5 2>"$work/slackswapd.log" &
server=$!
port="" metrics_port=""
for _ in $(seq 1 200); do  # 20 s at most
  line="$(grep -m1 '"msg":"serving"' "$work/slackswapd.log" || true)"
  if [[ -n $line ]]; then
    port="$(sed -n 's/.*"port":"\([0-9]*\)".*/\1/p' <<<"$line")"
    metrics_port="$(sed -n 's/.*"metrics_port":"\([0-9]*\)".*/\1/p' <<<"$line")"
    break
  fi
  kill -0 "$server" 2>/dev/null || fail "slackswapd exited before serving"
  sleep 0.1
done
[[ -n $port && -n $metrics_port ]] || fail "slackswapd did not serve in 20 s"

# The Dockerfile's HEALTHCHECK, pointed at this port.
out="$("$bin/slackswap" health --server "127.0.0.1:$port" --timeout 3)" ||
  fail "slackswap health exited $?: $out"
"$bin/slackswap" plan --workload bert-large --budget 0.5 \
  --server "127.0.0.1:$port" >"$work/plan.txt" ||
  fail "slackswap plan --server failed"
grep -q "slackswap" "$work/plan.txt" || fail "plan output: $(cat "$work/plan.txt")"
# The server counts a call when it is done with it, which may be just after
# the client has its answer: scrape until the count shows, 10 s at most.
counted=""
for _ in $(seq 1 100); do
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  metrics="$(timeout 10 cat <&3)" || fail "reading /metrics failed"
  exec 3<&-
  if grep -q '^slackswap_requests_total{code="OK",method="Plan"} 1$' \
    <<<"$metrics"; then
    counted=yes
    break
  fi
  sleep 0.1
done
[[ -n $counted ]] || fail "/metrics does not count the Plan call: $metrics"
echo "ok: installed slackswapd serves; health SERVING, Plan and /metrics work"

kill -TERM "$server"
for _ in $(seq 1 200); do  # 20 s at most
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server" 2>/dev/null && fail "slackswapd still running 20 s after SIGTERM"
rc=0
wait "$server" || rc=$?
server=""
[[ $rc == 0 ]] || fail "slackswapd exited $rc after SIGTERM"
grep -q '"msg":"stopped"' "$work/slackswapd.log" || fail "no 'stopped' log line"
rc=0
"$bin/slackswap" health --server "127.0.0.1:$port" --timeout 2 \
  >/dev/null 2>&1 || rc=$?
[[ $rc != 0 ]] || fail "health still passes after slackswapd stopped"
echo "ok: SIGTERM: slackswapd drained and exited 0; health now fails"
echo "PASS"
