"""Shared helpers for the Python end-to-end tests of slackswapd.

- generate_protos(): Python message modules for the service's .proto files,
  made by the system protoc into a temporary directory and put on sys.path.
- Server: runs slackswapd on free loopback ports, learns them from its first
  log line ({"msg":"serving","port":...}) with a bounded wait, keeps draining
  its stderr, and stops it with SIGTERM.
- Command-line options shared by the test scripts (paths CMake passes in).

Runs under Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf).
"""

import argparse
import json
import os
import re
import queue
import signal
import subprocess
import sys
import tempfile
import threading

# Seconds to wait for slackswapd's "serving" line, and for it to exit after
# SIGTERM. Generous: both normally take well under a second.
STARTUP_TIMEOUT_S = 30
SHUTDOWN_TIMEOUT_S = 30
# Every RPC the tests make carries this deadline.
RPC_TIMEOUT_S = 60


def parse_args(argv):
    """Splits our options from unittest's; returns (options, unittest argv)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--slackswapd", required=True,
                        help="path to the slackswapd binary")
    parser.add_argument("--slackswap", help="path to the slackswap CLI")
    parser.add_argument("--protoc", default="/usr/bin/protoc",
                        help="protoc that generates the Python messages")
    parser.add_argument("--proto_root", required=True,
                        help="the repository's proto/ directory")
    parser.add_argument("--work_dir",
                        help="where generated code and logs go (default: a "
                        "fresh temporary directory)")
    options, rest = parser.parse_known_args(argv[1:])
    for name in ("slackswapd", "slackswap", "protoc"):
        path = getattr(options, name)
        if path is not None and not os.access(path, os.X_OK):
            sys.exit(f"FATAL: --{name}={path} is not an executable file "
                     f"(build it first, e.g. cmake --build BUILD --target "
                     f"{name})")
    return options, [argv[0]] + rest


def planner_methods(proto_root):
    """The rpc names of slackswap.v1.Planner, read from the .proto itself:
    what reflection must serve."""
    path = os.path.join(proto_root, "slackswap", "v1",
                        "planner_service.proto")
    with open(path) as f:
        return set(re.findall(r"^\s*rpc\s+(\w+)\s*\(", f.read(), re.M))


def _run_protoc(protoc, include, files, out_dir):
    cmd = [protoc, f"-I{include}", f"--python_out={out_dir}"] + files
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n"
                           f"{r.stdout}{r.stderr}")


def generate_protos(protoc, proto_root, out_dir, extra=()):
    """Generates *_pb2.py for the service's protos into out_dir.

    slackswap/v1/*.proto keep their import paths (slackswap.v1.*_pb2). The
    health and reflection protos are generated under their bare file names
    (health_pb2, reflection_pb2): as grpc.health.v1.* they would collide with
    the installed `grpc` package. Their proto package names (what goes on
    the wire) are unchanged.

    extra: (include_dir, file_name) pairs generated the same bare way.
    """
    os.makedirs(out_dir, exist_ok=True)
    v1 = os.path.join(proto_root, "slackswap", "v1")
    slackswap = sorted(os.path.join(v1, f) for f in os.listdir(v1)
                       if f.endswith(".proto"))
    if not slackswap:
        raise RuntimeError(f"no .proto files in {v1}")
    _run_protoc(protoc, proto_root, slackswap, out_dir)
    health_dir = os.path.join(proto_root, "grpc", "health", "v1")
    _run_protoc(protoc, health_dir, [os.path.join(health_dir, "health.proto")],
                out_dir)
    for include, name in extra:
        _run_protoc(protoc, include, [os.path.join(include, name)], out_dir)
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)


class Server:
    """One slackswapd process on 127.0.0.1 with OS-picked ports."""

    def __init__(self, binary, log_path, extra_flags=()):
        self.binary = binary
        self.log_path = log_path
        self.port = None
        self.metrics_port = None
        self.lines = []  # every stderr line so far
        self._lock = threading.Lock()
        self._first = queue.Queue()
        cmd = [binary, "--host=127.0.0.1", "--port=0",
               "--metrics_host=127.0.0.1", "--metrics_port=0",
               "--grace_s=10"] + list(extra_flags)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        # Drains stderr for the whole run, so the server never blocks on a
        # full pipe; hands the first line to start().
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        with open(self.log_path, "w", encoding="utf-8") as log:
            first = True
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                with self._lock:
                    self.lines.append(line)
                if first:
                    self._first.put(line)
                    first = False
        if first:
            self._first.put(None)  # exited without a word

    def log_text(self):
        with self._lock:
            return "\n".join(self.lines)

    def start(self):
        """Waits (bounded) for the serving line; returns self."""
        try:
            line = self._first.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"slackswapd printed nothing within "
                               f"{STARTUP_TIMEOUT_S}s")
        if line is None:
            code = self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            raise RuntimeError(f"slackswapd exited with {code} before "
                               f"serving:\n{self.log_text()}")
        try:
            event = json.loads(line)
        except ValueError as e:
            self.kill()
            raise RuntimeError(f"slackswapd's first line is not JSON ({e}): "
                               f"{line!r}")
        if event.get("msg") != "serving":
            self.kill()
            raise RuntimeError(f"slackswapd's first line is not the serving "
                               f"line: {line!r}\n{self.log_text()}")
        self.port = int(event["port"])
        self.metrics_port = int(event["metrics_port"])
        if self.port <= 0 or self.metrics_port <= 0:
            self.kill()
            raise RuntimeError(f"bad ports in serving line: {line!r}")
        return self

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def terminate(self):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if self.proc.poll() is not None:
            self._reader.join(timeout=5)
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(timeout=5)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        self._reader.join(timeout=5)


def make_work_dir(options, name):
    if options.work_dir:
        path = os.path.join(options.work_dir, name)
        os.makedirs(path, exist_ok=True)
        return path
    return tempfile.mkdtemp(prefix=f"slackswap-{name}-")

