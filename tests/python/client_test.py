"""End-to-end test of slackswapd with a real grpcio client (Python).

Starts one slackswapd on free loopback ports and checks, in order:
health, hardware profiles, Plan (and the same plan through the slackswap
CLI), a streamed Sweep, an invalid request, server reflection, the
Prometheus scrape (through promtool), and a clean SIGTERM exit.

Run by ctest (tests/python/CMakeLists.txt), or by hand:

  /usr/bin/python3 tests/python/client_test.py \
      --slackswapd build/server/slackswapd --slackswap build/cli/slackswap \
      --proto_root proto [-v] [ClientTest.test_30_plan]

Messages come from the system protoc (--protoc, default /usr/bin/protoc);
calls use grpcio's generic API (no generated stubs).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool

import slackswapd_fixture as fixture

OPTIONS = None  # set in main

PLANNER = "/slackswap.v1.Planner/"
REFLECTION = ("/grpc.reflection.v1alpha.ServerReflection/"
              "ServerReflectionInfo")
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def unary(channel, method, response_class):
    return channel.unary_unary(
        method, request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response_class.FromString)


def parse_scrape(text):
    """Prometheus text format -> ({name: type}, [(name, labels, value)])."""
    types = {}
    samples = []
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
    label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
        elif line and not line.startswith("#"):
            m = sample.match(line)
            if m:
                labels = dict(label.findall(m.group(2) or ""))
                samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


class ClientTest(unittest.TestCase):
    """One server for the whole class; tests run in name order."""

    @classmethod
    def setUpClass(cls):
        cls.work = fixture.make_work_dir(OPTIONS, "client_test")
        here = os.path.dirname(os.path.abspath(__file__))
        fixture.generate_protos(OPTIONS.protoc, OPTIONS.proto_root,
                                os.path.join(cls.work, "gen"),
                                extra=[(here, "reflection.proto")])
        # Imported only now: generated above.
        global pb, health_pb2, reflection_pb2
        from slackswap.v1 import planner_service_pb2 as pb
        import health_pb2
        import reflection_pb2
        # No plan cache: the CLI's Plan below must be computed again, not
        # copied from the cache, for the comparison to mean something.
        cls.server = fixture.Server(OPTIONS.slackswapd,
                                    os.path.join(cls.work, "slackswapd.log"),
                                    ["--threads=2", "--cache_mb=0"]).start()
        cls.channel = grpc.insecure_channel(cls.server.target)
        try:
            grpc.channel_ready_future(cls.channel).result(
                timeout=fixture.STARTUP_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            cls.server.kill()  # tearDownClass does not run after this
            raise RuntimeError(f"no gRPC connection to {cls.server.target} "
                               f"within {fixture.STARTUP_TIMEOUT_S}s:\n"
                               f"{cls.server.log_text()}")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        if cls.server.proc.poll() is None:  # test_99 did not run or failed
            cls.server.terminate()
        sys.stderr.write(f"\nslackswapd log: {cls.server.log_path}\n")

    def call(self, method, request, response_class):
        return unary(self.channel, PLANNER + method, response_class)(
            request, timeout=fixture.RPC_TIMEOUT_S)

    def gpt2_plan_request(self):
        req = pb.PlanRequest(budget_fraction=0.5,
                             policies=["slackswap", "recompute_only"])
        req.step.workload.name = "gpt2-xl"
        req.step.hardware_name = "a100-80gb-pcie4"  # the CLI's default
        return req

    def test_00_health_is_serving(self):
        check = unary(self.channel, HEALTH_CHECK,
                      health_pb2.HealthCheckResponse)
        for service in ("", "slackswap.v1.Planner"):
            resp = check(health_pb2.HealthCheckRequest(service=service),
                         timeout=fixture.RPC_TIMEOUT_S)
            self.assertEqual(resp.status,
                             health_pb2.HealthCheckResponse.SERVING,
                             f"health of {service!r}")

    def test_10_list_hardware_profiles(self):
        resp = self.call("ListHardwareProfiles",
                         pb.ListHardwareProfilesRequest(),
                         pb.ListHardwareProfilesResponse)
        names = [p.name for p in resp.profiles]
        self.assertEqual(len(names), 4, names)
        self.assertEqual(set(names), {"a100-80gb-pcie4", "a100-40gb-pcie4",
                                      "h100-pcie5", "gh200-c2c"})

    def test_20_plan_gpt2_xl_at_half_budget(self):
        resp = self.call("Plan", self.gpt2_plan_request(), pb.PlanResponse)
        report = resp.report
        self.assertEqual(report.graph_name, "gpt2-xl")
        self.assertGreater(report.budget_bytes, 0)
        self.assertAlmostEqual(report.budget_bytes,
                               report.unconstrained_peak_bytes / 2, delta=1)
        # Registry order, whatever the request's.
        self.assertEqual([r.policy for r in report.results],
                         ["recompute_only", "slackswap"])
        self.assertTrue(resp.planner_version)
        for r in report.results:
            with self.subTest(policy=r.policy):
                res = r.result
                self.assertTrue(res.feasible, res.infeasible_reason)
                self.assertGreater(res.throughput_retained, 0.9)
                self.assertLessEqual(res.throughput_retained, 1.0)
                self.assertLessEqual(res.peak_activation_bytes,
                                     report.budget_bytes)
                self.assertGreater(res.step_ns, 0)
        type(self).python_plan = report

    def test_30_cli_plan_matches_python_client(self):
        if OPTIONS.slackswap is None:
            self.fail("--slackswap (path to the slackswap CLI) not given")
        report = getattr(type(self), "python_plan", None)
        if report is None:  # run alone
            report = self.call("Plan", self.gpt2_plan_request(),
                               pb.PlanResponse).report
        cmd = [OPTIONS.slackswap, "plan", "--workload", "gpt2-xl",
               "--budget", "0.5", "--policy", "slackswap,recompute_only",
               "--json", "--server", self.server.target]
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=fixture.RPC_TIMEOUT_S)
        self.assertEqual(r.returncode, 0,
                         f"{' '.join(cmd)}\nstderr: {r.stderr}")
        cli = json.loads(r.stdout)
        self.assertEqual(int(cli["budget_bytes"]), report.budget_bytes)
        by_policy = {x["policy"]: x["result"] for x in cli["results"]}
        self.assertEqual(set(by_policy), {"slackswap", "recompute_only"})
        for want in report.results:
            with self.subTest(policy=want.policy):
                got = by_policy[want.policy]
                self.assertTrue(got["feasible"])
                self.assertEqual(int(got["step_ns"]), want.result.step_ns)
                # The JSON printer writes doubles round-trip exact.
                self.assertEqual(float(got["throughput_retained"]),
                                 want.result.throughput_retained)

    def test_35_python_client_draws_the_cli_picture(self):
        # slackswap.client (python/), in a process of its own: its package
        # is not the bare generated one this test imports. Its stubs come
        # from $SLACKSWAP_PROTO_PYTHON (ctest sets it), else are generated
        # into the work directory.
        python_dir = os.path.normpath(
            os.path.join(OPTIONS.proto_root, os.pardir, "python"))
        plan_svg = os.path.join(self.work, "client_plan.svg")
        node_svg = os.path.join(self.work, "client_node.svg")
        script = (
            "import sys\n"
            "from slackswap.client import Client\n"
            "target, plan_svg, node_svg = sys.argv[1:]\n"
            "with Client(target) as c:\n"
            "    r = c.plan(workload='gpt2-xl', budget_fraction=0.5,\n"
            "               policies=['slackswap'], svg_path=plan_svg)\n"
            "    assert r.svg and not r.report.results[0].result.events\n"
            "    c.simulate(workload='gpt2-xl', node='dgx-a100-80gb',\n"
            "               ranks=2, svg_path=node_svg)\n")
        env = dict(os.environ, PYTHONPATH=python_dir,
                   SLACKSWAP_CACHE_DIR=os.path.join(self.work, "cache"))
        r = subprocess.run([sys.executable, "-c", script, self.server.target,
                            plan_svg, node_svg], capture_output=True,
                           text=True, env=env, timeout=fixture.RPC_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(plan_svg, encoding="utf-8") as f:
            picture = f.read()
        root = ET.fromstring(picture.encode("utf-8"))
        self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
        self.assertIn("gpt2-xl", root.find(
            "{http://www.w3.org/2000/svg}title").text)
        self.assertNotIn("<script", picture)
        # The CLI asks the server for the same picture.
        cli_svg = os.path.join(self.work, "cli_plan.svg")
        cmd = [OPTIONS.slackswap, "plan", "--workload", "gpt2-xl",
               "--budget", "0.5", "--policy", "slackswap", "--svg", cli_svg,
               "--server", self.server.target]
        c = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=fixture.RPC_TIMEOUT_S)
        self.assertEqual(c.returncode, 0, c.stderr)
        with open(cli_svg, encoding="utf-8") as f:
            self.assertEqual(f.read(), picture)
        # The node's: a panel per rank and per link carrying host copies.
        ids = {e.get("id") for e in ET.parse(node_svg).getroot().iter()}
        self.assertLessEqual({"r0-memory", "r1-memory"}, ids)
        self.assertNotIn("r2-memory", ids)

    def test_40_sweep_streams_every_point(self):
        req = pb.SweepRequest(policies=["slackswap", "recompute_only"],
                              step_fraction=0.1, target=0.9)
        req.step.workload.name = "gpt2-xl"
        req.step.hardware_name = "a100-80gb-pcie4"
        setattr(req, "from", 0.3)  # `from` is a Python keyword
        req.to = 0.6
        stream = self.channel.unary_stream(
            PLANNER + "Sweep",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.SweepResponse.FromString)
        call = stream(req, timeout=fixture.RPC_TIMEOUT_S)
        items = list(call)  # raises grpc.RpcError unless it ends OK
        self.assertEqual(call.code(), grpc.StatusCode.OK, call.details())
        kinds = [m.WhichOneof("item") for m in items]
        points = [m.point for m in items if m.HasField("point")]
        # 4 budgets (0.3, 0.4, 0.5, 0.6) x 2 policies, budget-major, each
        # budget's policies in registry order.
        self.assertEqual(len(points), 8, kinds)
        self.assertEqual(
            [(round(p.budget_fraction, 9), p.policy) for p in points],
            [(f, pol) for f in (0.3, 0.4, 0.5, 0.6)
             for pol in ("recompute_only", "slackswap")])
        # Points first, then the two target answers.
        self.assertEqual(kinds[:8], ["point"] * 8, kinds)
        targets = [m.target for m in items if m.HasField("target")]
        self.assertEqual(sorted(t.policy for t in targets),
                         ["recompute_only", "slackswap"], kinds)
        for p in points:
            if p.feasible:
                self.assertLessEqual(p.peak_activation_bytes, p.budget_bytes)

    def test_50_unknown_policy_is_invalid_argument(self):
        req = self.gpt2_plan_request()
        req.policies[:] = ["slackswap", "no-such-policy"]
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("Plan", req, pb.PlanResponse)
        err = caught.exception
        self.assertEqual(err.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         err.details())
        self.assertIn("policies[", err.details())
        self.assertIn("no-such-policy", err.details())

    def reflect(self, requests):
        stream = self.channel.stream_stream(
            REFLECTION, request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=reflection_pb2.ServerReflectionResponse
            .FromString)
        responses = list(stream(iter(requests),
                                timeout=fixture.RPC_TIMEOUT_S))
        self.assertEqual(len(responses), len(requests), responses)
        for resp in responses:
            self.assertFalse(resp.HasField("error_response"),
                             resp.error_response)
        return responses

    def test_60_reflection_lists_services(self):
        (resp,) = self.reflect(
            [reflection_pb2.ServerReflectionRequest(list_services="")])
        self.assertEqual(resp.WhichOneof("message_response"),
                         "list_services_response", resp)
        names = {s.name for s in resp.list_services_response.service}
        for want in ("slackswap.v1.Planner", "grpc.health.v1.Health"):
            self.assertIn(want, names)

    def test_61_reflection_describes_planner(self):
        (resp,) = self.reflect([reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="slackswap.v1.Planner")])
        self.assertEqual(resp.WhichOneof("message_response"),
                         "file_descriptor_response", resp)
        files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in
                 resp.file_descriptor_response.file_descriptor_proto]
        by_name = {f.name: f for f in files}
        services = [(f, s) for f in files for s in f.service
                    if f.package == "slackswap.v1" and s.name == "Planner"]
        self.assertEqual(len(services), 1, sorted(by_name))
        file, service = services[0]
        methods = {m.name: m for m in service.method}
        self.assertEqual(set(methods),
                         fixture.planner_methods(OPTIONS.proto_root))
        self.assertEqual(methods["Plan"].input_type, ".slackswap.v1.PlanRequest")
        self.assertTrue(methods["Sweep"].server_streaming)
        self.assertFalse(methods["Plan"].server_streaming)
        # The answer is self-contained: with its dependencies it builds a
        # descriptor pool in which the service resolves.
        missing = [d for d in file.dependency if d not in by_name]
        self.assertEqual(missing, [], "dependencies not sent")
        pool = descriptor_pool.DescriptorPool()
        added = set()
        while len(added) < len(files):
            ready = [f for f in files if f.name not in added
                     and all(d in added for d in f.dependency)]
            self.assertTrue(ready, "dependency cycle or missing file")
            for f in ready:
                pool.Add(f)
                added.add(f.name)
        desc = pool.FindServiceByName("slackswap.v1.Planner")
        self.assertEqual(desc.FindMethodByName("Sweep").output_type.full_name,
                         "slackswap.v1.SweepResponse")

    # gRPC's health service is not built from protobuf: slackswapd links the
    # health messages so reflection can describe it too.
    def test_62_reflection_describes_health(self):
        (resp,) = self.reflect([reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="grpc.health.v1.Health")])
        self.assertEqual(resp.WhichOneof("message_response"),
                         "file_descriptor_response", resp)
        files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in
                 resp.file_descriptor_response.file_descriptor_proto]
        methods = {m.name for f in files for s in f.service
                   if f.package == "grpc.health.v1" and s.name == "Health"
                   for m in s.method}
        self.assertEqual(methods, {"Check", "Watch"})

    def scrape(self, path):
        url = f"http://127.0.0.1:{self.server.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status, r.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def test_70_metrics_pass_promtool(self):
        # Traffic of its own, so the test also holds when run alone.
        self.call("Plan", self.gpt2_plan_request(), pb.PlanResponse)
        status, text = self.scrape("/metrics")
        self.assertEqual(status, 200)
        promtool = shutil.which("promtool")
        if promtool is None:
            self.fail("promtool not found on PATH (Debian package "
                      "`prometheus`, listed in scripts/setup.sh)")
        r = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""),
                         "promtool check metrics on the live scrape")
        types, samples = parse_scrape(text)
        self.assertEqual(types.get("slackswap_requests_total"), "counter")
        plan_ok = [v for n, l, v in samples
                   if n == "slackswap_requests_total"
                   and l.get("method") == "Plan" and l.get("code") == "OK"]
        self.assertEqual(len(plan_ok), 1, "slackswap_requests_total"
                         '{method="Plan",code="OK"} missing')
        self.assertGreaterEqual(plan_ok[0], 1)
        self.assertEqual(types.get("slackswap_request_duration_seconds"),
                         "histogram")
        count = [v for n, l, v in samples
                 if n == "slackswap_request_duration_seconds_count"
                 and l.get("method") == "Plan"]
        inf = [v for n, l, v in samples
               if n == "slackswap_request_duration_seconds_bucket"
               and l.get("method") == "Plan" and l.get("le") == "+Inf"]
        self.assertEqual(len(count), 1, "no Plan duration histogram")
        self.assertEqual(inf, count)
        self.assertGreaterEqual(count[0], plan_ok[0])

    def test_71_metrics_port_serves_only_metrics(self):
        for path in ("/anything-else", "/"):
            status, _ = self.scrape(path)
            self.assertNotEqual(status, 200, path)

    def test_99_sigterm_exits_zero(self):
        code = self.server.terminate()
        self.assertEqual(code, 0, "slackswapd after SIGTERM (None: it did "
                         f"not exit in time)\n{self.server.log_text()}")
        events = [json.loads(l).get("msg") for l in self.server.lines]
        self.assertIn("draining", events)
        self.assertEqual(events[-1], "stopped")


if __name__ == "__main__":
    OPTIONS, argv = fixture.parse_args(sys.argv)
    unittest.main(argv=argv, verbosity=2)
