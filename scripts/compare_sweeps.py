#!/usr/bin/python3
"""One build's sweeps against another's, point by point.

  python3 scripts/compare_sweeps.py OLD_BUILD/cli/slackswap build/cli/slackswap

Runs `slackswap sweep --json` (default budgets, every default policy) with
both binaries on the cases tests/plan_fingerprint_test.cc fingerprints: the
three built-in workloads on every catalog GPU and the torchvision graphs of
tests/data/torchvision on a100-80gb-pcie4. Prints every point (case,
policy, budget fraction) whose throughput retained moved, each target and
minimum that changed, and a count; exits 1 if any point got worse (a point
that stops fitting counts as worse). A change meant to improve plans
(docs/PLANNERS.md) says what this printed.
"""
import json
import os
import subprocess
import sys

WORKLOADS = ["bert-large", "gpt2-xl", "llama-7b"]
TORCHVISION = ["convnext_tiny", "efficientnet_b0", "mobilenet_v3_large",
               "resnet50"]


def cases(cli):
    listed = subprocess.run([cli, "list", "hardware"], capture_output=True,
                            text=True, check=True).stdout
    gpus = [line.split()[0] for line in listed.splitlines() if line.strip()]
    for workload in WORKLOADS:
        for gpu in gpus:
            yield ["--workload", workload, "--hardware", gpu], \
                f"{workload} {gpu}"
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "tests", "data", "torchvision")
    for model in TORCHVISION:
        yield ["--graph", os.path.join(data, model + ".pb"), "--hardware",
               "a100-80gb-pcie4"], f"{model} a100-80gb-pcie4"


def sweep(cli, args):
    out = subprocess.run([cli, "sweep", *args, "--json"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def retained(point):
    return point.get("throughput_retained", 0) if point.get("feasible") else -1


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old_cli, new_cli = sys.argv[1], sys.argv[2]
    better = worse = same = 0
    for args, name in cases(new_cli):
        old, new = sweep(old_cli, args), sweep(new_cli, args)
        before = {(p["policy"], p["budget_fraction"]): p for p in old["points"]}
        after = {(p["policy"], p["budget_fraction"]): p for p in new["points"]}
        if before.keys() != after.keys():
            print(f"{name}: the sweeps plan different points")
            worse += 1
            continue
        for policy, fraction in sorted(before):
            a = retained(before[(policy, fraction)])
            b = retained(after[(policy, fraction)])
            if a == b:
                same += 1
                continue
            if b > a:
                better += 1
            else:
                worse += 1
            print(f"{'better' if b > a else 'WORSE'} {name} {policy} "
                  f"{fraction:.2f}: {100 * a:.4f}% -> {100 * b:.4f}% "
                  f"({100 * (b - a):+.4f} pp)")
        for key in ("targets", "minimums"):
            if json.dumps(old[key], sort_keys=True) != json.dumps(
                    new[key], sort_keys=True):
                print(f"changed {name} {key}: {json.dumps(old[key])} -> "
                      f"{json.dumps(new[key])}")
    print(f"points: {better} better, {worse} worse, {same} the same")
    sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()
