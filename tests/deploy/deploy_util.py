"""Shared helpers for the tests of deploy/ (tests/deploy/*_test.py).

- Server: one slackswapd on 127.0.0.1 with OS-picked ports, learnt from its
  first log line ({"msg":"serving","port":...}), stopped with SIGTERM.
- drive_traffic(): Plan calls through the real CLI that make every metric
  family appear (policies, cache hits and misses, queue-full refusals).
- Prometheus text-format and PromQL helpers: the series names of a scrape,
  the metric names a PromQL expression reads.
- slackswapd's flags and their defaults, from `slackswapd --help`.

Runs under Debian's /usr/bin/python3 (python3-yaml for the YAML files).
Every wait is bounded; nothing listens beyond 127.0.0.1.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

STARTUP_TIMEOUT_S = 20
SHUTDOWN_TIMEOUT_S = 20
CLI_TIMEOUT_S = 30

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def fail(message):
    """Ends the test with a failure (exit 1) and one clear message."""
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8")


def load_yaml_docs(text):
    import yaml  # python3-yaml
    return [d for d in yaml.safe_load_all(text) if d is not None]


def load_yaml(path):
    import yaml  # python3-yaml
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


class Server:
    """slackswapd on 127.0.0.1, free ports; use as a context manager."""

    def __init__(self, binary, extra_flags=(), log_path=None):
        self.binary = binary
        self.cmd = [binary, "--host=127.0.0.1", "--port=0",
                    "--metrics_host=127.0.0.1", "--metrics_port=0",
                    "--grace_s=5"] + list(extra_flags)
        self.log_path = log_path
        self.lines = []
        self.serving = None
        self.port = None
        self.metrics_port = None
        self.proc = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.stop()

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(STARTUP_TIMEOUT_S) or self.serving is None:
            self.kill()
            fail(f"slackswapd did not log 'serving' within "
                 f"{STARTUP_TIMEOUT_S} s: {' '.join(self.cmd)}\n"
                 f"{self.log_text()}")
        self.port = int(self.serving["port"])
        self.metrics_port = int(self.serving.get("metrics_port", 0))
        return self

    def _read(self):
        log = open(self.log_path, "w", encoding="utf-8") if self.log_path \
            else None
        try:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._lock:
                    self.lines.append(line)
                if log:
                    log.write(line + "\n")
                    log.flush()
                if self.serving is None:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("msg") == "serving":
                        self.serving = event
                        self._ready.set()
        finally:
            if log:
                log.close()
            self._ready.set()  # exited before serving: wake start()

    def log_text(self):
        with self._lock:
            return "\n".join(self.lines[-50:])

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        """SIGTERM; returns the exit status (fails the test on a hang)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            fail(f"slackswapd did not exit within {SHUTDOWN_TIMEOUT_S} s of "
                 f"SIGTERM\n{self.log_text()}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def scrape(self):
        return http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")


def run_cli(slackswap, args, timeout=CLI_TIMEOUT_S):
    """Runs the slackswap CLI; returns the CompletedProcess."""
    return subprocess.run([slackswap] + list(args), capture_output=True,
                          text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def drive_traffic(slackswap, target, bursts=6):
    """Plan calls against `target` that exercise every metric family.

    The server should run with --threads=1 --max_queue=1, so that a burst of
    concurrent calls overflows the queue. Returns (calls, refused): how many
    Plan calls were made, and how many were refused with RESOURCE_EXHAUSTED.
    """
    calls = 0
    # Every policy (planner/simulator/retained histograms by policy), on two
    # workloads; the second identical call is a cache hit.
    for workload in ("bert-large", "gpt2-xl", "bert-large"):
        r = run_cli(slackswap, ["plan", "--workload", workload, "--budget",
                                "0.5", "--policy", "all", "--server", target])
        calls += 1
        check(r.returncode == 0,
              f"slackswap plan --workload {workload} failed: {r.stderr}")
    r = run_cli(slackswap, ["simulate", "--workload", "bert-large",
                            "--server", target])
    calls += 1
    check(r.returncode == 0, f"slackswap simulate failed: {r.stderr}")
    # Bursts of distinct (uncached) heavy calls until one is refused.
    refused = 0
    budget = 0.30
    for _ in range(bursts):
        procs = []
        for _ in range(8):
            budget += 0.005
            procs.append(subprocess.Popen(
                [slackswap, "plan", "--workload", "llama-7b", "--budget",
                 f"{budget:.3f}", "--policy", "all", "--server", target],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL, text=True))
        for p in procs:
            try:
                _, err = p.communicate(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                fail("a slackswap plan call of the burst hung")
            calls += 1
            if p.returncode != 0:
                check("RESOURCE_EXHAUSTED" in err,
                      f"a burst call failed other than queue-full: {err}")
                refused += 1
        if refused:
            break
    return calls, refused


# --- Prometheus text format and PromQL --------------------------------------

def scrape_series_names(text):
    """Series names in a Prometheus text-format scrape (with _bucket etc.)."""
    names = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if m:
            names.add(m.group(0))
    return names


def scrape_families(text):
    """{family name: type} from the # TYPE lines of a scrape."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
             "bool", "offset", "and", "or", "unless", "inf", "nan", "atan2",
             "start", "end"}


def promql_metric_names(expr):
    """The metric names an expression selects (not functions or labels).

    Handles what our dashboards and rules use: label matchers, ranges,
    grouping clauses, strings, numbers, Grafana $variables, and
    label_values(metric, label) template queries.
    """
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    lv = re.match(r"\s*label_values\((.*)\)\s*$", e, re.S)
    if lv:  # Grafana: label_values(selector, label) or label_values(label)
        args = lv.group(1)
        if "," not in args:
            return set()
        e = args.rsplit(",", 1)[0]
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*"
               r"\([^)]*\)", " ", e)
    e = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", " ", e)
    e = re.sub(r"\b(\d+(ms|s|m|h|d|w|y))+\b", " ", e)  # offset durations
    e = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?\b", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or an aggregation
        if word in _KEYWORDS:
            continue
        names.add(word)
    return names


# --- slackswapd's flags ------------------------------------------------------

def slackswapd_flags(slackswapd):
    """{flag: default string} of slackswapd's own flags, from --help."""
    r = subprocess.run([slackswapd, "--help"], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    text = " ".join((r.stdout + r.stderr).split())
    flags = {}
    for m in re.finditer(r"--([a-z_0-9]+) \((.*?)\); default: "
                         r"(\"[^\"]*\"|[^;\s]+);", text):
        flags[m.group(1)] = m.group(3).strip('"')
    if not flags:
        fail(f"found no flags in `{slackswapd} --help`:\n{r.stdout}{r.stderr}")
    return flags


def parse_flagfile(text):
    """[(name, value)] of an absl flag file (one --flag=value a line)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"--([a-z_0-9]+)(?:=(.*))?", line)
        check(m is not None, f"flag file line is not --name=value: {line!r}")
        out.append((m.group(1), m.group(2) if m.group(2) is not None
                    else "true"))
    return out


def wait_until(what, predicate, timeout_s, interval_s=0.25, detail=None):
    """Polls predicate() until it returns a truthy value; fails on timeout.

    detail, if given, is called on timeout; what it returns ends the message.
    """
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as e:  # a transient error while polling
            value, last = None, e
        if value:
            return value
        time.sleep(interval_s)
    fail(f"timed out after {timeout_s} s waiting for {what}"
         + (f" (last error: {last})" if last else "")
         + (f": {detail()}" if detail else ""))
