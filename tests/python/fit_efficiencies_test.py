#!/usr/bin/python3
"""tools/fit_efficiencies.py against a synthetic measured step.

The graph's GEMMs and fused attention have durations made by the cost model
(model/cost_model.h) from KNOWN efficiency tables, compute bound; the tool
must fit those tables back (within 1e-6), skip the memory-bound and
launch-bound ops, clamp what exceeds 1, keep the base profile's curves the
step has no data for, and refuse graphs it cannot fit from with exit status
1 and one line. Needs neither the slackswap binary nor a GPU: the catalog
lookup runs a stand-in script.

  fit_efficiencies_test.py [--tool tools/fit_efficiencies.py] [unittest args]

With $SLACKSWAP_PROTO_PYTHON naming the generated modules (ctest sets it),
a .pb graph and a .txtpb profile are checked too.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(_HERE, os.pardir, os.pardir, "tools",
                    "fit_efficiencies.py")

PEAK = 312.0            # TFLOP/s
HBM, HBM_EFF = 2039.0, 0.85
LAUNCH_US = 4.0
LAUNCH_NS = 4000

BASE = {
    "name": "test-gpu",
    "gpu": "a test GPU",
    "memory_gb": 80,
    "peak_tflops_bf16": PEAK,
    "peak_tflops_tf32": 156,
    "peak_tflops_fp32": 19.5,
    "hbm_gbps": HBM,
    "hbm_efficiency": HBM_EFF,
    "matmul_efficiency": 0.75,
    "attn_efficiency_fwd": 0.6,
    "attn_efficiency_bwd": 0.5,
    "link": "PCIe 4.0 x16",
    "link_theoretical_gbps_per_dir": 31.5,
    "h2d_gbps": 25,
    "d2h_gbps": 25.5,
    "duplex": "DUPLEX_FULL",
    "bidir_h2d_gbps": 13,
    "bidir_d2h_gbps": 24,
    "copy_engines": 3,
    "transfer_latency_us": 10,
    "kernel_launch_us": LAUNCH_US,
    "pinned_host_memory_bytes": "256000000000",
    "attention_efficiency": [
        # Replaced by the fitted curve, but its bwd at 512 (0.4, half way
        # in log2) fills the point the step measured forward only.
        {"causal": False, "head_dim": 64, "seq_len": ["256", "1024"],
         "fwd": [0.2, 0.3], "bwd": [0.3, 0.5]},
        # The step has no data for it: kept.
        {"causal": True, "head_dim": 256, "seq_len": ["1024", "4096"],
         "fwd": [0.61, 0.71], "bwd": [0.51, 0.62]},
    ],
    "gemm_efficiency": {"size": ["2048", "8192"],
                        "efficiency": [0.5, 0.6]},
    "framework_reserve_bytes": "1000000000",
}

# The KNOWN tables the durations are made from.
GEMM_EFF = {256: 0.40, 1024: 0.70}
BIG_A, BIG_B = 0.80, 0.60  # two GEMMs of one bin (4096^3, 4096x4096x8192)
ATTN = {(True, 128): {1024: (0.45, 0.40), 2048: (0.55, 0.50)},
        (False, 64): {512: (0.50, None)}}  # bwd not measured


def compute_ns_for(i):
    """Whole compute nanoseconds, different per op: flops are made from
    them, so that the model's rounding up is exact."""
    return 200000 + 1000 * i


class StepBuilder(object):
    def __init__(self):
        self.ops = []

    def op(self, name, phase, kind, flops, duration_ns, shape=None,
           kernels=1, nbytes=1000000):
        cost = {"flops": flops, "bytes_accessed": str(nbytes),
                "kernels": kernels, "kind": kind}
        if duration_ns is not None:
            cost["duration_ns"] = str(int(duration_ns))
        if shape is not None:
            cost["shape"] = {k: (str(v) if k != "causal" else v)
                             for k, v in shape.items()}
        self.ops.append({"id": str(len(self.ops)), "name": name,
                         "phase": phase, "cost": cost})

    def compute_op(self, name, phase, kind, shape, eff, kernels=1, longer=1):
        """An op the model gives exactly duration_ns at efficiency eff."""
        c = compute_ns_for(len(self.ops)) * longer
        scale = 0.8 if kind == "OP_KIND_BATCHED_MATMUL" else 1.0
        flops = eff * scale * PEAK * 1e3 * c
        self.op(name, phase, kind, flops, c + kernels * LAUNCH_NS, shape,
                kernels)

    def graph(self):
        return {"name": "synthetic", "tensors": [], "ops": self.ops}


def gemm(m, n, k):
    return {"m": m, "n": n, "k": k}


def attn(seq, head_dim, causal):
    return {"m": seq, "n": seq, "k": head_dim, "causal": causal}


def measured_step():
    b = StepBuilder()
    fwd, bwd = "PHASE_FORWARD", "PHASE_BACKWARD"
    mm, bmm = "OP_KIND_MATMUL", "OP_KIND_BATCHED_MATMUL"
    fa = "OP_KIND_FLASH_ATTENTION"
    b.compute_op("mm256", fwd, mm, gemm(256, 256, 256), GEMM_EFF[256])
    # size 1024: a square GEMM, a backward of two GEMMs of volume 2^30 and
    # a batched one (x0.8 in its duration)
    b.compute_op("mm1024", fwd, mm, gemm(1024, 1024, 1024), GEMM_EFF[1024])
    b.compute_op("mm1024_bwd", bwd, mm, gemm(2048, 1024, 512),
                 GEMM_EFF[1024], kernels=2)
    b.compute_op("bmm1024", fwd, bmm, gemm(1024, 1024, 1024), GEMM_EFF[1024])
    # one bin, two sizes (4096 and 4096 x 2^(1/3)) and two efficiencies
    b.compute_op("mm4096", fwd, mm, gemm(4096, 4096, 4096), BIG_A)
    b.compute_op("mm4096x8192", fwd, mm, gemm(4096, 4096, 8192), BIG_B,
                 longer=3)
    # would imply 1.25: clamped to 1
    b.compute_op("mm16384", fwd, mm, gemm(16384, 16384, 16384), 1.25)
    # memory bound: its bytes take longer than its FLOPs would (size 645)
    nbytes = 3 * 10**9
    b.op("mm_memory_bound", fwd, mm, 2.0 * 65536 * 64 * 64,
         math.ceil(nbytes / (HBM * HBM_EFF)) + LAUNCH_NS,
         gemm(65536, 64, 64), nbytes=nbytes)
    # no longer than its launch (size 128)
    b.op("mm_launch_bound", fwd, mm, 2.0 * 128 ** 3, LAUNCH_NS - 1000,
         gemm(128, 128, 128))
    for (causal, head_dim), points in sorted(ATTN.items()):
        for seq, (f, g) in sorted(points.items()):
            shape = attn(seq, head_dim, causal)
            b.compute_op("fa_fwd", fwd, fa, shape, f)
            b.compute_op("fa_fwd", fwd, fa, shape, f)
            if g is not None:
                b.compute_op("fa_bwd", bwd, fa, shape, g)
    # Ignored: measured but memory bound by kind, measured without a shape,
    # not measured.
    b.op("gelu", fwd, "OP_KIND_MEMORY_BOUND", 1e6, 5000)
    b.op("mm_unshaped", fwd, mm, 1e12, 10**7)
    b.op("mm_unmeasured", fwd, mm, 1e12, None, gemm(512, 512, 512))
    return b.graph()


def harmonic(pairs):
    """sum(f) / sum(f / e) over (flops, eff)."""
    return sum(f for f, _ in pairs) / sum(f / e for f, e in pairs)


class FitEfficienciesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fit_eff_")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)

    def fit(self, graph=None, base=None, *extra):
        g = self.write("step.json", graph or measured_step())
        h = self.write("base.json", base or BASE)
        out = os.path.join(self.dir, "calibrated.json")
        r = self.run_tool("--graph", g, "--hardware", h, "--out", out,
                          *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            return json.load(f), r.stderr

    def curve(self, profile, causal, head_dim):
        found = [c for c in profile["attention_efficiency"]
                 if c.get("causal", False) == causal and
                 c["head_dim"] == head_dim]
        self.assertEqual(len(found), 1, (causal, head_dim))
        return found[0]

    def assertValues(self, got, want):
        self.assertEqual(len(got), len(want), (got, want))
        for g, w in zip(got, want):
            self.assertAlmostEqual(g, w, delta=1e-6, msg=(got, want))

    def test_gemm_curve_is_the_known_table(self):
        step = measured_step()
        out, _ = self.fit(step)
        g = out["gemm_efficiency"]
        big = 4096 * 2 ** (1 / 6)  # geometric mean of 4096 and 4096*2^(1/3)
        self.assertEqual(g["size"], ["256", "1024", str(round(big)),
                                     "16384"])
        # the efficiency at which the bin's two GEMMs take their total time
        flops = {op["name"]: op["cost"]["flops"] for op in step["ops"]}
        want_big = harmonic([(flops["mm4096"], BIG_A),
                             (flops["mm4096x8192"], BIG_B)])
        # not the mean, nor the FLOP-weighted arithmetic mean
        self.assertNotAlmostEqual(want_big, (BIG_A + BIG_B) / 2, delta=1e-3)
        arithmetic = (flops["mm4096"] * BIG_A + flops["mm4096x8192"] *
                      BIG_B) / (flops["mm4096"] + flops["mm4096x8192"])
        self.assertNotAlmostEqual(want_big, arithmetic, delta=1e-3)
        self.assertValues(g["efficiency"],
                          [GEMM_EFF[256], GEMM_EFF[1024], want_big, 1.0])

    def test_attention_curves_are_the_known_tables(self):
        out, report = self.fit()
        c = self.curve(out, True, 128)
        self.assertEqual(c["seq_len"], ["1024", "2048"])
        self.assertValues(c["fwd"], [0.45, 0.55])
        self.assertValues(c["bwd"], [0.40, 0.50])
        # forward measured only: bwd from the base's curve at 512
        c = self.curve(out, False, 64)
        self.assertEqual(c["seq_len"], ["512"])
        self.assertValues(c["fwd"], [0.50])
        self.assertValues(c["bwd"], [0.40])
        self.assertIn("bwd 0.400000 (not measured: from the base profile's "
                      "table)", report)
        # no data: the base's curve, unchanged
        self.assertEqual(self.curve(out, True, 256),
                         BASE["attention_efficiency"][1])
        self.assertEqual(len(out["attention_efficiency"]), 3)

    def test_rest_of_profile_kept_and_named(self):
        out, report = self.fit()
        self.assertEqual(out["name"], "test-gpu-calibrated")
        for field, value in BASE.items():
            if field not in ("name", "attention_efficiency",
                             "gemm_efficiency"):
                self.assertEqual(out[field], value, field)
        self.assertIn('wrote %s: hardware "test-gpu-calibrated"' %
                      os.path.join(self.dir, "calibrated.json"), report)
        out, _ = self.fit(None, None, "--name", "my-gpu")
        self.assertEqual(out["name"], "my-gpu")

    def test_report_counts_skipped_and_clamped(self):
        _, report = self.fit()
        # 9 GEMMs and 8 attention ops with a shape and a duration; the
        # memory-bound and the launch-bound GEMM skipped
        self.assertIn("17 GEMM or attention with a shape: 15 used, 2 "
                      "skipped (1 memory bound, 1 no longer than their "
                      "launches", report)
        self.assertIn("1 clamped to efficiency 1", report)
        self.assertIn("1 GEMM or attention without a shape", report)
        self.assertIn("gemm_efficiency: 7 ops, 4 points", report)
        self.assertIn("size 1024: 0.700000 (3 ops)", report)
        self.assertIn("attention_efficiency causal head_dim 128: 4 fwd ops, "
                      "2 bwd ops, 2 points", report)
        self.assertIn("attention_efficiency causal head_dim 256: not "
                      "measured; the base profile's kept", report)

    def test_memory_bound_op_alone_is_skipped(self):
        step = measured_step()
        step["ops"] = [op for op in step["ops"]
                       if op["name"] in ("mm_memory_bound", "mm256")]
        out, report = self.fit(step)
        self.assertEqual(out["gemm_efficiency"]["size"], ["256"])
        self.assertIn("1 used, 1 skipped (1 memory bound", report)
        # no attention measured: the base's tables kept as they were
        self.assertEqual(out["attention_efficiency"],
                         BASE["attention_efficiency"])

    def test_base_without_tables_keeps_its_constants_for_the_other_mask(
            self):
        base = dict(BASE)
        del base["attention_efficiency"], base["gemm_efficiency"]
        step = measured_step()
        step["ops"] = [op for op in step["ops"]
                       if op["cost"].get("shape", {}).get("causal")]
        out, _ = self.fit(step, base)
        self.assertNotIn("gemm_efficiency", out)
        self.assertEqual(len(out["attention_efficiency"]), 2)
        c = self.curve(out, False, 128)  # the constants, one point
        self.assertEqual(c["seq_len"], ["1024"])
        self.assertValues(c["fwd"], [0.6])
        self.assertValues(c["bwd"], [0.5])
        self.assertValues(self.curve(out, True, 128)["fwd"], [0.45, 0.55])

    def test_catalog_name(self):
        fake = os.path.join(self.dir, "slackswap")
        with open(fake, "w") as f:
            f.write("#!%s\nimport json, sys\nassert sys.argv[1:] == "
                    "['list', 'hardware', '--json'], sys.argv\n"
                    "print(json.dumps({'profiles': [{'name': 'other'}, "
                    "%r]}))\n" % (sys.executable, BASE))
        os.chmod(fake, 0o755)
        g = self.write("step.json", measured_step())
        out = os.path.join(self.dir, "cal.json")
        r = self.run_tool("--graph", g, "--hardware", "test-gpu", "--out",
                          out, "--slackswap", fake)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(json.load(f)["gemm_efficiency"]["size"][0],
                             "256")
        r = self.run_tool("--graph", g, "--hardware", "no-such-gpu", "--out",
                          out, "--slackswap", fake)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no-such-gpu: no such catalog profile (the catalog "
                      "has other, test-gpu", r.stderr)

    def assertFails(self, graph, want, hardware=None):
        g = graph if isinstance(graph, str) else self.write("bad.json", graph)
        h = hardware or self.write("base.json", BASE)
        out = os.path.join(self.dir, "never.json")
        r = self.run_tool("--graph", g, "--hardware", h, "--out", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(want, r.stderr)
        self.assertTrue(r.stderr.startswith("fit_efficiencies: "), r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_graph_without_durations_fails(self):
        step = measured_step()
        for op in step["ops"]:
            op["cost"].pop("duration_ns", None)
        self.assertFails(step, "no op has a measured duration "
                               "(cost.duration_ns); export with "
                               "--trace-durations")

    def test_graph_without_shapes_fails(self):
        step = measured_step()
        for op in step["ops"]:
            op["cost"].pop("shape", None)
        self.assertFails(step, "export with --trace-durations and a version "
                               "of the exporter that writes cost.shape")

    def test_unreadable_files_fail(self):
        self.assertFails(os.path.join(self.dir, "missing.json"),
                         "missing.json: cannot read")
        bad = os.path.join(self.dir, "garbage.json")
        with open(bad, "w") as f:
            f.write("{not json")
        self.assertFails(bad, "garbage.json: not JSON")
        self.assertFails(measured_step(), "nohw.json: cannot read",
                         hardware=os.path.join(self.dir, "nohw.json"))

    @unittest.skipUnless(os.environ.get("SLACKSWAP_PROTO_PYTHON"),
                         "no $SLACKSWAP_PROTO_PYTHON")
    def test_pb_graph_and_txtpb_profile(self):
        sys.path.insert(0, os.environ["SLACKSWAP_PROTO_PYTHON"])
        try:
            from google.protobuf import json_format, text_format
            from slackswap.v1 import graph_pb2, hardware_pb2
        except ImportError as e:
            self.skipTest("generated modules not importable: %s" % e)
        finally:
            sys.path.pop(0)
        msg = json_format.ParseDict(measured_step(),
                                    graph_pb2.OperatorGraph())
        g = os.path.join(self.dir, "step.pb")
        with open(g, "wb") as f:
            f.write(msg.SerializeToString())
        h = self.write("base.json", BASE)
        out = os.path.join(self.dir, "cal.txtpb")
        r = self.run_tool("--graph", g, "--hardware", h, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            profile = text_format.Parse(f.read(),
                                        hardware_pb2.HardwareProfile())
        self.assertEqual(profile.name, "test-gpu-calibrated")
        self.assertEqual(list(profile.gemm_efficiency.size)[:2], [256, 1024])
        self.assertAlmostEqual(profile.gemm_efficiency.efficiency[0],
                               GEMM_EFF[256], delta=1e-6)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--tool", default=TOOL)
    known, rest = ap.parse_known_args()
    TOOL = os.path.abspath(known.tool)
    unittest.main(argv=[sys.argv[0]] + rest)
