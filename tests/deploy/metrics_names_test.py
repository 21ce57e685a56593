"""Every metric that deploy/ and the docs name is one slackswapd exports.

Starts a real slackswapd (one planning thread, a queue of one), drives Plan
calls through the real CLI until every metric family has series (every
policy, cache hits and misses, queue-full refusals), scrapes /metrics, and
checks against that scrape:

- the Grafana dashboard (deploy/grafana/dashboards/*.json): its structure
  (unique panel ids, the data source variable on every query, the panels
  the operations guide promises) and that every query and template
  variable names only series in the scrape (or Prometheus's own `up`);
- the alert rules (deploy/prometheus/alerts.yml): the same for every expr;
- docs/operations.md: its metrics reference names every slackswap_* family
  of the scrape, and no slackswap_* name that is not in it.

  /usr/bin/python3 tests/deploy/metrics_names_test.py \
      --slackswapd build/server/slackswapd --slackswap build/cli/slackswap
"""

import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

# Series that Prometheus makes itself, not slackswapd.
PROMETHEUS_SERIES = {"up"}

# Panels the operations guide (and the issue) promise, by what they query.
REQUIRED_PANELS = {
    "request rate by method and code":
        r"sum by \(method, code\) \(rate\(slackswap_requests_total\{",
    "latency quantiles from the histogram":
        r"histogram_quantile\(0\.99, sum by \([^)]*le\) \(rate\("
        r"slackswap_request_duration_seconds_bucket",
    "queue depth": r"slackswap_queue_depth\{",
    "in-flight requests": r"slackswap_inflight_requests\{",
    "cache hit ratio": r"slackswap_cache_hits_total.*/.*"
                       r"slackswap_cache_misses_total",
    "planner time by policy": r"sum by \(policy, le\) \(rate\("
                              r"slackswap_planner_seconds_bucket",
    "throughput-retained distribution":
        r"slackswap_throughput_retained_bucket",
    "fit answers by node and verdict":
        r"sum by \(node, verdict\) \(rate\(slackswap_fit_nodes_total\{",
    "plans by scope": r"sum by \(scope\) \(rate\(slackswap_plans_total\{",
    "node simulation time":
        r"histogram_quantile\(0\.99, sum by \(le\) \(rate\("
        r"slackswap_node_simulation_seconds_bucket",
    "shared tier hit ratio by kind":
        r"sum by \(kind\) \(rate\(slackswap_shared_lookups_total\{"
        r"[^}]*result=\"hit\".*/.*slackswap_shared_lookups_total",
    "shared store up": r"slackswap_shared_store_up\{",
    "shared store call latency by op":
        r"histogram_quantile\(0\.99, sum by \(op, le\) \(rate\("
        r"slackswap_shared_store_call_seconds_bucket",
    "shared store errors by op":
        r"sum by \(op\) \(rate\(slackswap_shared_store_calls_total\{"
        r"[^}]*result=\"error\"",
    "shared writes dropped by reason":
        r"sum by \(reason\) \(rate\(slackswap_shared_writes_dropped_total\{",
    "shared waits by outcome":
        r"sum by \(outcome\) \(rate\(slackswap_shared_waits_total\{",
}


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def check_dashboard(path, series):
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    rel = os.path.relpath(path, du.REPO)
    du.check(dash.get("uid") and dash.get("title"), f"{rel}: no uid or title")
    variables = {v["name"]: v for v in dash.get("templating", {})
                 .get("list", [])}
    du.check(variables.get("datasource", {}).get("type") == "datasource" and
             variables["datasource"].get("query") == "prometheus",
             f"{rel}: needs a 'datasource' variable of type prometheus")
    exprs = []  # (where, expr)
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        du.check(q, f"{rel}: variable {name} has no query")
        exprs.append((f"variable ${name}", q))
    ids = set()
    panels = list(walk_panels(dash.get("panels", [])))
    du.check(panels, f"{rel}: no panels")
    for p in panels:
        du.check(p.get("id") not in ids, f"{rel}: panel id {p.get('id')} "
                 f"used twice")
        ids.add(p.get("id"))
        du.check("gridPos" in p, f"{rel}: panel {p.get('title')!r} has no "
                 f"gridPos")
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        du.check(targets, f"{rel}: panel {p.get('title')!r} has no query")
        for t in targets:
            du.check(t.get("datasource", {}).get("uid") == "${datasource}",
                     f"{rel}: a query of {p.get('title')!r} does not use "
                     f"the ${{datasource}} variable")
            du.check(t.get("expr"), f"{rel}: a query of {p.get('title')!r} "
                     f"has no expr")
            exprs.append((f"panel {p['title']!r}", t["expr"]))
    for what, pattern in REQUIRED_PANELS.items():
        du.check(any(re.search(pattern, e) for _, e in exprs),
                 f"{rel}: no panel shows {what} (/{pattern}/)")
    bad = []
    named = set()
    for where, expr in exprs:
        names = du.promql_metric_names(expr)
        du.check(names, f"{rel}: {where}: found no metric in {expr!r}")
        named |= names
        for n in sorted(names - series - PROMETHEUS_SERIES):
            bad.append(f"{where}: {n} (in {expr})")
    du.check(not bad, f"{rel} names metrics slackswapd does not export:\n  "
             + "\n  ".join(bad))
    print(f"ok: {rel}: {len(panels)} panels, {len(exprs)} queries, all "
          f"{len(named)} metric names exported: {', '.join(sorted(named))}")
    return named


def check_rules(path, series):
    rel = os.path.relpath(path, du.REPO)
    rules = du.load_yaml(path)
    bad = []
    count = 0
    for group in rules["groups"]:
        for rule in group["rules"]:
            count += 1
            names = du.promql_metric_names(rule["expr"])
            du.check(names, f"{rel}: {rule.get('alert')}: no metric named")
            for n in sorted(names - series - PROMETHEUS_SERIES):
                bad.append(f"{rule.get('alert') or rule.get('record')}: {n}")
    du.check(not bad, f"{rel} names metrics slackswapd does not export:\n  "
             + "\n  ".join(bad))
    print(f"ok: {rel}: {count} rules, every metric exported")


def check_docs(path, families):
    rel = os.path.relpath(path, du.REPO)
    du.check(os.path.exists(path), f"{rel} is missing")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ours = {f for f in families if f.startswith("slackswap_")}
    missing = sorted(f for f in ours
                     if not re.search(rf"`{re.escape(f)}`", text))
    du.check(not missing, f"{rel}'s metrics reference lacks: {missing}")
    suffixes = ("_bucket", "_sum", "_count")
    named = set(re.findall(r"slackswap_[a-z_]+", text))
    unknown = sorted(n for n in named if n not in ours and not any(
        n.endswith(s) and n[:-len(s)] in ours for s in suffixes))
    du.check(not unknown, f"{rel} names metrics slackswapd does not export: "
             f"{unknown}")
    print(f"ok: {rel} documents all {len(ours)} slackswap_* families")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    parser.add_argument("--slackswap", required=True)
    args = parser.parse_args()

    with du.Server(args.slackswapd, ["--threads=1", "--max_queue=1"]) as srv:
        calls, refused = du.drive_traffic(args.slackswap, srv.target)
        du.check(refused > 0, "no call was refused with a queue of one; the "
                 "rejection counter has no series to check against")
        text = srv.scrape()
        code = srv.stop()
        du.check(code == 0, f"slackswapd exited {code} after SIGTERM\n"
                 f"{srv.log_text()}")
    series = du.scrape_series_names(text)
    families = du.scrape_families(text)
    print(f"scraped {len(series)} series names ({len(families)} families) "
          f"after {calls} calls, {refused} refused")
    expected = ["slackswap_requests_total", "slackswap_rejected_requests_total",
                "slackswap_request_duration_seconds",
                "slackswap_throughput_retained", "slackswap_planner_seconds"]
    for family in expected:
        du.check(family in families, f"the scrape lacks {family}:\n{text}")

    dashboards = sorted(glob.glob(os.path.join(
        du.REPO, "deploy", "grafana", "dashboards", "*.json")))
    du.check(dashboards, "no dashboard in deploy/grafana/dashboards/")
    for d in dashboards:
        check_dashboard(d, series)
    check_rules(os.path.join(du.REPO, "deploy", "prometheus", "alerts.yml"),
                series)
    check_docs(os.path.join(du.REPO, "docs", "operations.md"), families)

    # The dashboard provisioning points at where the docs mount dashboards.
    prov = du.load_yaml(os.path.join(du.REPO, "deploy", "grafana",
                                     "provisioning", "dashboards",
                                     "slackswap.yaml"))
    path = prov["providers"][0]["options"]["path"]
    with open(os.path.join(du.REPO, "docs", "operations.md"),
              encoding="utf-8") as f:
        du.check(path in f.read(), f"docs/operations.md never mentions the "
                 f"dashboard provisioning path {path}")
    print("PASS")


if __name__ == "__main__":
    main()
