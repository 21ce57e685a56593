"""Optional: a third-party reflection client (`buf curl`) against slackswapd.

client_test.py already proves server reflection with its own Python client;
this adds an independent one. buf comes from, in order: $SLACKSWAP_BUF, `buf`
on PATH, or scripts/setup.sh's npm install of @bufbuild/buf (pinned) under
${SLACKSWAP_TOOLS_DIR:-${XDG_CACHE_HOME:-~/.cache}/slackswap-tools}/. The test
only looks buf up, it never installs it (tests reach loopback only). Without
buf it exits 77, which ctest reports as Skipped, not Passed.

  /usr/bin/python3 tests/python/buf_curl_test.py \
      --slackswapd build/server/slackswapd --proto_root proto
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import slackswapd_fixture as fixture

BUF_VERSION = "1.75.0"
SKIP = 77  # ctest SKIP_RETURN_CODE

OPTIONS = None
BUF = None


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
    tools = os.environ.get("SLACKSWAP_TOOLS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or
        os.path.join(os.path.expanduser("~"), ".cache"), "slackswap-tools")
    cached = os.path.join(tools, f"buf-{BUF_VERSION}", "node_modules", ".bin",
                          "buf")
    if works(cached):
        return cached, "scripts/setup.sh's cache"
    return None, (f"no buf: not in $SLACKSWAP_BUF, on PATH or at {cached} "
                  f"(bash scripts/setup.sh installs @bufbuild/buf@"
                  f"{BUF_VERSION} there)")


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
                   fixture.planner_methods(OPTIONS.proto_root)))

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
