"""slackswapd observed by a real Prometheus server, with the shipped config.

1. Starts a redis-server (no persistence, no password) and slackswapd on
   free loopback ports (one planning thread, a queue of one, so a burst of
   calls overflows it), with that Redis as its shared store, so that the
   shared tier's panels have data.
2. Writes a prometheus.yml made from deploy/prometheus/prometheus.yml with
   only the targets replaced: the slackswapd job's discovery becomes a
   static target, slackswapd's metrics port; alertmanager targets are
   emptied; scrape and evaluation intervals become 1 s; rule_files point at
   the shipped deploy/prometheus/alerts.yml. Everything else (metrics path,
   relabelling, metric_relabel_configs) is what ships.
3. Starts Prometheus (Debian's /usr/bin/prometheus) on a free loopback port
   with a temporary TSDB, and waits until it is ready.
4. Sends Plan calls through the real CLI (every policy, cache hits, a burst
   that is partly refused).
5. Polls Prometheus's HTTP API (bounded) until the request counter equals
   what slackswapd itself reports and a p99 from the latency histogram is a
   finite number; checks the target's labels and health, that exposer_*
   series were dropped, that the shipped alert rules are loaded and
   evaluate without error, and that every query of the Grafana dashboard
   runs and the panels that the operations guide promises have data.
6. Stops Prometheus, slackswapd (SIGTERM; slackswapd must exit 0) and
   Redis.

  /usr/bin/python3 tests/deploy/observability_test.py \
      --slackswapd build/server/slackswapd --slackswap build/cli/slackswap

redis-server (Debian's, the test tier of scripts/setup.sh) is taken from
PATH unless --redis-server names it.
"""

import argparse
import copy
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

PROM_READY_TIMEOUT_S = 30
PROM_DATA_TIMEOUT_S = 30
PROM_STOP_TIMEOUT_S = 15

# Dashboard panels that must show data after the traffic (by title).
PANELS_WITH_DATA = [
    "Request rate by method and code",
    "Latency quantiles (all methods)",
    "p99 latency by method",
    "Queue depth",
    "In-flight requests",
    "Refused requests by method and reason",
    "Queue wait by method (p50, p99)",
    "Coalesced requests/s",
    "Plan cache hit ratio",
    "Planner time by policy (p50, p99)",
    "Simulator time by policy (p50, p99)",
    "Throughput retained by policy (median)",
    "Throughput retained distribution",
    "Graph size (ops)",
    "Plans by scope",
    "Builds",
    "Replicas up",
    "Shared hit ratio by kind",
    "Shared lookups by kind and result",
    "Shared store call latency by op (p50, p99)",
    "Shared store errors by op",
    "Shared store up, by replica",
    "Shared writes dropped by reason",
    "Shared waits by outcome",
]


def make_config(shipped_path, metrics_target, out_dir):
    """The shipped config with its targets replaced (see the docstring)."""
    config = copy.deepcopy(du.load_yaml(shipped_path))
    shipped_dir = os.path.dirname(shipped_path)
    config.setdefault("global", {})
    config["global"]["scrape_interval"] = "1s"
    config["global"]["scrape_timeout"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    rule_files = config.get("rule_files", [])
    du.check(rule_files, "deploy/prometheus/prometheus.yml loads no rules")
    config["rule_files"] = [os.path.join(shipped_dir, r) for r in rule_files]
    for am in config.get("alerting", {}).get("alertmanagers", []):
        for key in [k for k in am if k.endswith("_sd_configs")]:
            del am[key]
        am["static_configs"] = [{"targets": []}]
    jobs = [j for j in config["scrape_configs"]
            if j["job_name"] == "slackswapd"]
    du.check(len(jobs) == 1, "deploy/prometheus/prometheus.yml needs exactly "
             "one scrape job named slackswapd")
    job = jobs[0]
    sd = [k for k in job if k.endswith("_sd_configs") or k == "static_configs"]
    du.check(sd, "the slackswapd job has no targets to replace")
    for key in sd:
        del job[key]
    job["static_configs"] = [{"targets": [metrics_target]}]
    config["scrape_configs"] = [job]
    import yaml  # python3-yaml
    path = os.path.join(out_dir, "prometheus.yml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return path, job


class Prometheus:
    def __init__(self, binary, config, data_dir, log_path):
        self.port = du.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "w", encoding="utf-8")
        self.cmd = [binary, f"--config.file={config}",
                    f"--storage.tsdb.path={data_dir}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn"]
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def wait_ready(self):
        def ready():
            if self.proc.poll() is not None:
                du.fail(f"prometheus exited {self.proc.returncode}:\n"
                        f"{self.log_text()}")
            return "Ready" in du.http_get(self.base + "/-/ready", timeout=2)
        du.wait_until("prometheus /-/ready", ready, PROM_READY_TIMEOUT_S)

    def api(self, path, **params):
        url = self.base + "/api/v1/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        body = json.loads(du.http_get(url, timeout=10))
        du.check(body.get("status") == "success",
                 f"prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("query", **params)["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(PROM_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self.log.closed:
            self.log.close()


def scalar(result):
    return float(result[0]["value"][1]) if result else None


def dashboard_queries(path):
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)

    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))
    for p in walk(dash["panels"]):
        for t in p.get("targets", []):
            yield p["title"], t["expr"]


def grafana_to_promql(expr):
    """Grafana's variables, as the dashboard would resolve them here."""
    return (expr.replace("$__rate_interval", "1m")
            .replace("$job", "slackswapd").replace("$instance", ".*"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    parser.add_argument("--slackswap", required=True)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    parser.add_argument("--redis-server",
                        default=shutil.which("redis-server") or
                        "/usr/bin/redis-server")
    args = parser.parse_args()
    du.check(os.access(args.prometheus, os.X_OK),
             f"{args.prometheus} not found: install the Debian package "
             f"prometheus (scripts/setup.sh)")
    du.check(os.access(args.redis_server, os.X_OK),
             f"{args.redis_server} not found: install the Debian package "
             f"redis-server (scripts/setup.sh)")

    work = tempfile.mkdtemp(prefix="slackswap-observability-")
    ok = False
    srv = prom = redis = None
    try:
        redis_port = du.free_port()
        redis_log = os.path.join(work, "redis.log")
        with open(redis_log, "w", encoding="utf-8") as log:
            redis = subprocess.Popen(
                [args.redis_server, "--port", str(redis_port), "--bind",
                 "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
                cwd=work, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        srv = du.Server(args.slackswapd, [
            "--threads=1", "--max_queue=1",
            f"--shared_store=redis://127.0.0.1:{redis_port}/0"],
            log_path=os.path.join(work, "slackswapd.log")).start()
        # Redis may answer a moment after slackswapd serves: slackswapd
        # connects by itself, retrying.
        du.wait_until(
            "slackswapd to connect to Redis (slackswap_shared_store_up 1)",
            lambda: "\nslackswap_shared_store_up 1" in srv.scrape(),
            PROM_READY_TIMEOUT_S, detail=srv.log_text)
        target = f"127.0.0.1:{srv.metrics_port}"
        config, job = make_config(
            os.path.join(du.REPO, "deploy", "prometheus", "prometheus.yml"),
            target, work)
        prom = Prometheus(args.prometheus, config,
                          os.path.join(work, "tsdb"),
                          os.path.join(work, "prometheus.log"))
        prom.wait_ready()
        print(f"prometheus ready on {prom.base}, scraping {target}")

        calls, refused = du.drive_traffic(args.slackswap, srv.target)
        du.check(refused > 0, "no call was refused with a queue of one")
        print(f"sent {calls} Plan/Simulate calls ({refused} refused)")

        # Quantiles and rates need two scrapes of a series within their
        # window: keep a trickle of calls going (a new plan with every
        # policy, and a cache hit) until the p99 and every promised
        # dashboard panel show data.
        p99_expr = ('histogram_quantile(0.99, sum by (le) (rate('
                    'slackswap_request_duration_seconds_bucket'
                    '{job="slackswapd"}[1m])))')
        dash = os.path.join(du.REPO, "deploy", "grafana", "dashboards",
                            "slackswapd.json")
        queries = list(dashboard_queries(dash))
        budget = [0.40]
        state = {}

        def observed():
            nonlocal calls
            at = time.time()
            v = scalar(prom.query(p99_expr, at=at))
            with_data = set()
            for title, expr in queries:
                result = prom.query(grafana_to_promql(expr), at=at)
                if any(math.isfinite(float(r["value"][1])) for r in result):
                    with_data.add(title)
            state["with_data"] = with_data
            state["missing"] = [t for t in PANELS_WITH_DATA
                                if t not in with_data]
            if (v is not None and math.isfinite(v) and v > 0
                    and not state["missing"]):
                return v
            budget[0] += 0.01
            for b in (f"{budget[0]:.2f}", "0.5"):
                r = du.run_cli(args.slackswap, [
                    "plan", "--workload", "bert-large", "--budget", b,
                    "--policy", "all", "--server", srv.target])
                calls += 1
                du.check(r.returncode == 0,
                         f"slackswap plan failed: {r.stderr}")
            return None
        p99 = du.wait_until(
            "p99 to be a number and every promised dashboard panel to have "
            "data", observed, PROM_DATA_TIMEOUT_S, interval_s=0.5,
            detail=lambda: f"panels without data: {state.get('missing')}")
        print(f"ok: all {len(queries)} dashboard queries run; "
              f"{len(state['with_data'])} panels have data, among them "
              f"all {len(PANELS_WITH_DATA)} promised ones")

        # The dashboard's template variables (Grafana's label_values) find
        # the job and the instance.
        with open(dash, encoding="utf-8") as f:
            variables = json.load(f)["templating"]["list"]
        for var in variables:
            if var.get("type") != "query":
                continue
            q = var["query"]["query"] if isinstance(var["query"], dict) \
                else var["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q.strip())
            du.check(m is not None, f"variable {var['name']}: {q!r} is not "
                     f"label_values(selector, label)")
            values = prom.api(f"label/{m.group(2)}/values",
                              **{"match[]": grafana_to_promql(m.group(1))})
            du.check(values, f"variable {var['name']} ({q}) finds no value")
            print(f"ok: dashboard variable ${var['name']} = {values}")

        # What slackswapd itself counts: Prometheus must catch up to it.
        # The server counts a call when it is done with it, which can be
        # just after the client has its answer: poll (bounded) until it has
        # counted them all.
        def counted():
            return sum(
                float(line.rsplit(" ", 1)[1])
                for line in srv.scrape().splitlines()
                if line.startswith("slackswap_requests_total{"))
        def all_counted():
            n = counted()
            return n if n == calls else None
        direct = du.wait_until(
            f"slackswapd to count the {calls} calls the test made",
            all_counted, PROM_DATA_TIMEOUT_S,
            detail=lambda: f"it counts {counted()}")

        def counter_caught_up():
            v = scalar(prom.query(
                'sum(slackswap_requests_total{job="slackswapd"})'))
            return v is not None and v == direct
        du.wait_until(f"Prometheus to see all {calls} calls in "
                      f"slackswap_requests_total", counter_caught_up,
                      PROM_DATA_TIMEOUT_S)
        print(f"ok: Prometheus counts all {direct:.0f} calls; p99 latency "
              f"{p99 * 1000:.1f} ms")
        refused_seen = scalar(prom.query(
            'sum(slackswap_rejected_requests_total{job="slackswapd"})'))
        du.check(refused_seen == refused, f"Prometheus counts "
                 f"{refused_seen} refused calls, the test saw {refused}")
        by_code = {r["metric"]["code"]: float(r["value"][1]) for r in
                   prom.query('sum by (code) (slackswap_requests_total'
                              '{job="slackswapd"})')}
        du.check(by_code.get("RESOURCE_EXHAUSTED") == refused and
                 by_code.get("OK") == calls - refused,
                 f"requests by code: {by_code}")

        # The target, as the shipped relabelling labels it.
        targets = prom.api("targets")["activeTargets"]
        du.check(len(targets) == 1, f"expected one target: {targets}")
        t = targets[0]
        du.check(t["health"] == "up", f"target not up: {t}")
        expected_labels = {"job": "slackswapd"}
        for rule in job.get("relabel_configs", []):
            if not rule.get("source_labels") and rule.get("target_label"):
                expected_labels[rule["target_label"]] = rule["replacement"]
        for k, v in expected_labels.items():
            du.check(t["labels"].get(k) == v,
                     f"target label {k}={t['labels'].get(k)!r}, the shipped "
                     f"relabel_configs set {v!r}")
        du.check(not prom.query('count({__name__=~"exposer_.*"})'),
                 "exposer_* series were not dropped by metric_relabel_configs")
        du.check(scalar(prom.query('up{job="slackswapd"}')) == 1,
                 "up{job=\"slackswapd\"} is not 1")
        print(f"ok: target up with labels {expected_labels}")

        # The shipped alert rules: loaded, evaluated, no errors; none fires.
        shipped = du.load_yaml(os.path.join(du.REPO, "deploy", "prometheus",
                                            "alerts.yml"))
        want = {r["alert"] for g in shipped["groups"] for r in g["rules"]}

        def rules_evaluated():
            groups = prom.api("rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            if {r["name"] for r in rules} != want:
                return None
            if any(r.get("lastEvaluation", "").startswith("0001") or
                   not r.get("lastEvaluation") for r in rules):
                return None
            return rules
        rules = du.wait_until("the alert rules to be evaluated",
                              rules_evaluated, PROM_DATA_TIMEOUT_S)
        for r in rules:
            du.check(r["health"] == "ok",
                     f"rule {r['name']}: health {r['health']}: "
                     f"{r.get('lastError')}")
        firing = [r["name"] for r in rules if r.get("state") == "firing"]
        du.check(not firing, f"alerts firing on a healthy service: {firing}")
        print(f"ok: {len(rules)} alert rules loaded and evaluated, none firing")

        # The shared tier, as Prometheus sees it: connected, and the plans
        # this replica made were looked up there (misses) first.
        du.check(scalar(prom.query(
            'max(slackswap_shared_store_up{job="slackswapd"})')) == 1,
            "Prometheus does not see slackswap_shared_store_up 1")
        lookups = scalar(prom.query(
            'sum(slackswap_shared_lookups_total{job="slackswapd",'
            'kind="plan"})'))
        du.check(lookups and lookups > 0, f"no plan lookup of the shared "
                 f"tier counted ({lookups})")
        print(f"ok: shared store up; {lookups:.0f} plan lookups of the "
              f"shared tier")

        prom.stop()
        code = srv.stop()
        du.check(code == 0, f"slackswapd exited {code} after SIGTERM\n"
                 f"{srv.log_text()}")
        redis.terminate()
        du.check(redis.wait(PROM_STOP_TIMEOUT_S) == 0, "redis-server did not "
                 "exit cleanly on SIGTERM")
        ok = True
        print("PASS")
    finally:
        # Whatever happened, nothing we started outlives the test.
        if srv is not None and srv.proc is not None and \
                srv.proc.poll() is None:
            srv.kill()
        if prom is not None:
            try:
                prom.stop()
            except Exception as e:  # still try the rest
                print(f"stopping prometheus: {e}", file=sys.stderr)
                prom.proc.kill()
        if redis is not None and redis.poll() is None:
            redis.kill()
            redis.wait(10)
        if not ok:
            if prom is not None:
                print(f"--- prometheus log\n{prom.log_text()}",
                      file=sys.stderr)
            if srv is not None:
                print(f"--- slackswapd log\n{srv.log_text()}",
                      file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
