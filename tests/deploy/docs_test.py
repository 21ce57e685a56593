"""docs/operations.md covers what it promises.

- every flag of `slackswapd --help` has a row in its flags table, with the
  default slackswapd reports;
- it has the sections the issue asks for (running locally, in a container,
  on Kubernetes, flags, metrics, capacity, scaling out, alerts);
- every repository path it names in backticks (deploy/..., scripts/...,
  tests/deploy/..., Dockerfile) exists;
- every version it, the Dockerfile's label and the Kubernetes image tag
  give is the VERSION file's, the one slackswapd --version prints.

The metrics reference is checked against a real scrape by
metrics_names_test.py.

  /usr/bin/python3 tests/deploy/docs_test.py --slackswapd build/server/slackswapd
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

SECTIONS = ["Running locally", "In a container", "On Kubernetes", "Flags",
            "Metrics", "Alerts", "Grafana", "Capacity", "Scaling out"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    args = parser.parse_args()
    path = os.path.join(du.REPO, "docs", "operations.md")
    du.check(os.path.exists(path), "docs/operations.md is missing")
    with open(path, encoding="utf-8") as f:
        text = f.read()

    headings = re.findall(r"^#+\s+(.*)$", text, re.M)
    for s in SECTIONS:
        du.check(any(h.lower().startswith(s.lower()) for h in headings),
                 f"docs/operations.md has no section starting {s!r} "
                 f"(headings: {headings})")

    flags = du.slackswapd_flags(args.slackswapd)
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`--([a-z_0-9]+)`\s*\|\s*([^|]*)\|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip().strip("`").strip('"')
    missing = sorted(set(flags) - set(rows))
    du.check(not missing, f"flags without a row in docs/operations.md's "
             f"table: {missing}")
    unknown = sorted(set(rows) - set(flags))
    du.check(not unknown, f"docs/operations.md documents flags slackswapd "
             f"does not have: {unknown}")
    wrong = [f"--{n}: docs {rows[n]!r}, slackswapd {flags[n]!r}"
             for n in flags if rows[n] != flags[n] and
             not (flags[n] == "" and rows[n] in ("", "(none)", "none"))]
    du.check(not wrong, "defaults differ:\n  " + "\n  ".join(wrong))
    print(f"ok: all {len(flags)} flags documented with their defaults")

    paths = set(re.findall(r"`((?:deploy|scripts|tests/deploy|docs|bench)/"
                           r"[A-Za-z0-9_./-]+|Dockerfile|\.dockerignore)`",
                           text))
    absent = sorted(p for p in paths
                    if not os.path.exists(os.path.join(du.REPO, p)))
    du.check(not absent, f"docs/operations.md names paths that do not "
             f"exist: {absent}")
    print(f"ok: {len(paths)} repository paths named, all exist")

    with open(os.path.join(du.REPO, "VERSION"), encoding="utf-8") as f:
        version = f.read().strip()
    out = du.run_cli(args.slackswapd, ["--version"]).stdout
    du.check(out.startswith(f"slackswapd {version} (commit "),
             f"slackswapd --version says {out!r}, VERSION says {version}")
    named = {"docs/operations.md": re.findall(r"slackswapd:([0-9.]+)", text)}
    with open(os.path.join(du.REPO, "Dockerfile"), encoding="utf-8") as f:
        docker = f.read()
    named["Dockerfile"] = (
        re.findall(r'image\.version="([^"]+)"', docker) +
        re.findall(r"slackswapd:([0-9.]+)", docker))
    with open(os.path.join(du.REPO, "deploy", "kubernetes",
                           "kustomization.yaml"), encoding="utf-8") as f:
        named["kustomization.yaml"] = re.findall(r'newTag:\s*"([^"]+)"',
                                                 f.read())
    for where, versions in named.items():
        du.check(versions, f"{where} names no version")
        stale = sorted(set(v for v in versions if v != version))
        du.check(not stale, f"{where} names version(s) {stale}, VERSION "
                 f"says {version}")
    print(f"ok: every version named is {version}")
    print("PASS")


if __name__ == "__main__":
    main()
