#!/usr/bin/env bash
# What a change to the device-budget search does to the answers: 54
# commands that search a device budget (`fit` on the GPU catalog at the
# default batch and 16 and on the node catalog at global batches 64 and
# 128; `plan --budget device` on every catalog GPU, and for data parallel
# and FSDP over 8 on every 8-GPU node; the three reference workloads), run
# with two builds' CLIs, then every answer whose budget, throughput or
# headroom moved (docs/PLANNERS.md, "The device budget").
#
#   git worktree add /tmp/old <commit> && (cd /tmp/old && bash scripts/build.sh --target slackswap)
#   bash bench/compare_device_answers.sh /tmp/old/build build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OLD=${1:?usage: compare_device_answers.sh OLD_BUILD_DIR NEW_BUILD_DIR}
NEW=${2:?usage: compare_device_answers.sh OLD_BUILD_DIR NEW_BUILD_DIR}
require_built compare_device_answers.sh "$OLD" "$OLD/cli/slackswap"
require_built compare_device_answers.sh "$NEW" "$NEW/cli/slackswap"

OUT=$(mktemp -d /tmp/slackswap-device-answers.XXXXXX)

# run BIN DIR: every command's --json answer (or its error: bert-large's
# post-norm layers refuse FSDP) into DIR.
run() {
  local bin=$1 dir=$2 w h n
  mkdir -p "$dir"
  for w in bert-large gpt2-xl llama-7b; do
    "$bin" fit --workload $w --global-batch 64 --json >"$dir/fitjob64-$w.json" 2>&1 || true
    "$bin" fit --workload $w --global-batch 128 --json >"$dir/fitjob128-$w.json" 2>&1 || true
    "$bin" fit --workload $w --json >"$dir/fit-$w.json" 2>&1 || true
    "$bin" fit --workload $w --batch 16 --json >"$dir/fit16-$w.json" 2>&1 || true
    for h in a100-40gb-pcie4 a100-80gb-pcie4 h100-pcie5 gh200-c2c; do
      "$bin" plan --workload $w --hardware $h --budget device \
        --policy slackswap,capuchin,swap_only --json >"$dir/plan-$w-$h.json" 2>&1 || true
      "$bin" plan --workload $w --hardware $h --batch 16 \
        --budget device:2GB --json >"$dir/plan16-$w-$h.json" 2>&1 || true
    done
    for n in dgx-a100-80gb hgx-h100-sxm a100-pcie-8x; do
      "$bin" plan --workload $w --dp 8 --node $n --budget device \
        --json >"$dir/plandp-$w-$n.json" 2>&1 || true
      "$bin" plan --workload $w --fsdp 8 --node $n --budget device \
        --json >"$dir/planfsdp-$w-$n.json" 2>&1 || true
    done
  done
}

run "$OLD/cli/slackswap" "$OUT/old" &
run "$NEW/cli/slackswap" "$OUT/new"
wait

python3 - "$OUT" <<'EOF'
import json, os, sys

out = sys.argv[1]


def answers(name, response):
    """(answer, budget bytes, retained, headroom bytes) of every answer."""
    if name.startswith("fit"):
        for r in response["results"]:
            where = " ".join(filter(None, (r.get("node_name"), r.get("layout_name"), r["hardware_name"])))
            yield (where, int(r.get("budget_bytes", 0)), r.get("throughput_retained", 0),
                   int(r.get("headroom_bytes", 0)))
        return
    for p in response["results"]:
        r = p["result"]
        d = r.get("device", {})
        yield (p["policy"], int(r.get("budget_bytes", 0)), r.get("throughput_retained", 0),
               int(d.get("capacity_bytes", 0)) - int(d.get("required_bytes", 0)))


files = sorted(os.listdir(os.path.join(out, "new")))
moved = []  # (output, answer, old, new)
refused = 0
for name in files:
    texts = [open(os.path.join(out, d, name)).read() for d in ("old", "new")]
    try:
        old, new = (json.loads(t) for t in texts)
    except json.JSONDecodeError:
        refused += 1
        if texts[0] != texts[1]:
            print(f"{name}: refused differently:\n  old: {texts[0].strip()}\n  new: {texts[1].strip()}")
        continue
    for o, n in zip(answers(name, old), answers(name, new)):
        if o[1:] != n[1:]:
            moved.append((name, o[0], o, n))
print(f"{len(files)} commands ({refused} refused); {len(moved)} answers moved, in {len(set(m[0] for m in moved))} outputs")
print(f"{'output':34} {'answer':34} {'budget new/old':>14} {'retained old':>13} {'new':>13} {'headroom GB old':>15} {'new':>8}")
for name, answer, o, n in moved:
    print(f"{name:34} {answer:34} {n[1] / o[1]:14.4f} {o[2]:13.10f} {n[2]:13.10f} {o[3] / 1e9:15.3f} {n[3] / 1e9:8.3f}")
print(f"answers slower than before: {sum(1 for m in moved if m[3][2] < m[2][2])}")
EOF
rm -rf "$OUT"
