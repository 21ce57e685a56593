"""Optional: a third-party reflection client (`buf curl`) against slackswapd.

client_test.py already proves server reflection with its own Python client;
this adds an independent one. buf comes from, in order: $SLACKSWAP_BUF, `buf`
on PATH, a cached npm install of @bufbuild/buf (pinned) under
${XDG_CACHE_HOME:-~/.cache}/slackswap-tests/, or a fresh npm install there
(bounded; disabled by SLACKSWAP_TEST_OFFLINE=1). Without any of them the
test exits 77, which ctest reports as Skipped, not Passed.

  /usr/bin/python3 tests/python/buf_curl_test.py \
      --slackswapd build/server/slackswapd --proto_root proto
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import slackswapd_fixture as fixture

BUF_VERSION = "1.75.0"
NPM_TIMEOUT_S = 120
SKIP = 77  # ctest SKIP_RETURN_CODE

OPTIONS = None
BUF = None


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "slackswap-tests", f"buf-{BUF_VERSION}")


def works(buf):
    try:
        r = subprocess.run([buf, "--version"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def find_buf():
    """Returns (path to buf or None, how it was found or why not)."""
    explicit = os.environ.get("SLACKSWAP_BUF")
    if explicit:
        return (explicit, "$SLACKSWAP_BUF") if works(explicit) else (
            None, f"$SLACKSWAP_BUF={explicit} does not run")
    on_path = shutil.which("buf")
    if on_path and works(on_path):
        return on_path, "PATH"
    cached = os.path.join(cache_dir(), "node_modules", ".bin", "buf")
    if os.path.exists(cached) and works(cached):
        return cached, "cache"
    if os.environ.get("SLACKSWAP_TEST_OFFLINE"):
        return None, "no buf and SLACKSWAP_TEST_OFFLINE is set"
    npm = shutil.which("npm")
    if npm is None:
        return None, "no buf and no npm to install @bufbuild/buf"
    parent = os.path.dirname(cache_dir())
    os.makedirs(parent, exist_ok=True)
    shutil.rmtree(cache_dir(), ignore_errors=True)  # a broken earlier install
    staging = tempfile.mkdtemp(prefix="buf-install-", dir=parent)
    cmd = [npm, "install", "--prefix", staging, "--no-audit", "--no-fund",
           "--no-save", "--loglevel=error", f"@bufbuild/buf@{BUF_VERSION}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=NPM_TIMEOUT_S)
        if r.returncode != 0:
            return None, (f"npm install @bufbuild/buf@{BUF_VERSION} failed "
                          f"({r.returncode}): {r.stderr.strip()[-500:]}")
    except subprocess.TimeoutExpired:
        return None, f"npm install took over {NPM_TIMEOUT_S}s"
    finally:
        staged = os.path.join(staging, "node_modules", ".bin", "buf")
        if os.path.exists(staged) and works(staged):
            try:
                os.rename(staging, cache_dir())  # atomic; loses to a racer
            except OSError:
                pass
        shutil.rmtree(staging, ignore_errors=True)
    if os.path.exists(cached) and works(cached):
        return cached, "npm install"
    return None, "npm install produced no working buf"


class BufCurlTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.work = fixture.make_work_dir(OPTIONS, "buf_curl_test")
        cls.server = fixture.Server(OPTIONS.slackswapd,
                                    os.path.join(cls.work, "slackswapd.log"),
                                    ["--threads=2"]).start()
        cls.url = f"http://{cls.server.target}"

    @classmethod
    def tearDownClass(cls):
        code = cls.server.terminate()
        if code != 0:
            raise AssertionError(f"slackswapd exited {code} after SIGTERM:\n"
                                 f"{cls.server.log_text()}")

    def buf_curl(self, *args):
        cmd = [BUF, "curl", "--protocol", "grpc", "--http2-prior-knowledge",
               "--reflect-protocol", "grpc-v1alpha"] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=fixture.RPC_TIMEOUT_S)
        self.assertEqual(r.returncode, 0,
                         f"{' '.join(cmd)}\nstdout: {r.stdout}\n"
                         f"stderr: {r.stderr}")
        return r.stdout

    def test_list_services(self):
        services = self.buf_curl("--list-services", self.url).split()
        self.assertIn("slackswap.v1.Planner", services)
        self.assertIn("grpc.health.v1.Health", services)

    def test_list_methods(self):
        methods = self.buf_curl("--list-methods", self.url).split()
        self.assertEqual(
            sorted(m for m in methods
                   if m.startswith("slackswap.v1.Planner/")),
            sorted(f"slackswap.v1.Planner/{m}" for m in
                   ("Plan", "Sweep", "Simulate", "ListHardwareProfiles",
                    "ListWorkloads", "GetWorkload")))

    def test_call_through_reflection(self):
        out = self.buf_curl("-d", "{}",
                            f"{self.url}/slackswap.v1.Planner/"
                            "ListHardwareProfiles")
        profiles = json.loads(out)["profiles"]
        self.assertEqual(len(profiles), 4, out)


if __name__ == "__main__":
    OPTIONS, argv = fixture.parse_args(sys.argv)
    BUF, how = find_buf()
    if BUF is None:
        print(f"SKIPPED: buf unavailable: {how}", flush=True)
        sys.exit(SKIP)
    print(f"buf {BUF_VERSION} from {how}: {BUF}", flush=True)
    unittest.main(argv=argv, verbosity=2)
