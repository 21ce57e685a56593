"""End-to-end tests of tools/torch_export.py on small real PyTorch models.

Each model case exports one real training step (Debian's PyTorch on the
CPU) and checks, with the real `slackswap` binary:
  - the graph validates and simulates at 100% with no budget, its
    unconstrained peak being the graph's own saved bytes (tensors produced
    by a forward op and read by a backward op, summed from the JSON);
  - those saved bytes equal an independent measurement of the same step
    with torch.autograd.graph.saved_tensors_hooks (done here, not by the
    tool): every storage autograd packs, once, minus parameters, buffers,
    the input and wrapped Python scalars, floating storages at --dtype-bytes
    per element and the others at their own element size;
  - `slackswap plan --budget B --policy all --json` returns a result for
    every policy, and slackswap retains at least the throughput of every
    other feasible non-ideal policy.
TraceDurationsTest profiles a real CPU step with torch.profiler and feeds
its Chrome trace to --trace-durations; GpuTraceTest feeds a synthetic
Kineto GPU trace to the same code.

Run by ctest (tests/torch/CMakeLists.txt), or by hand under Debian's
python3 (python3-torch, python3-torchvision):

  /usr/bin/python3 tests/torch/torch_export_test.py \\
      --slackswap build/cli/slackswap --tool tools/torch_export.py \\
      --work_dir /tmp/tt [-v] [ResNetTest]
"""

import argparse
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import torch
import torchvision

OPTIONS = None  # set in main
POLICIES = ["ideal", "recompute_only", "swap_only", "capuchin", "slackswap"]


def run(args, timeout=300):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def export(model, shape, out, *extra):
    return run([sys.executable, OPTIONS.tool, "--model", model,
                "--input-shape", ",".join(str(d) for d in shape),
                "--out", out] + list(extra))


def graph_saved(graph):
    """Saved activations of the graph: {tensor id: bytes}."""
    phase = {}
    for op in graph["ops"]:
        for t in op["output_ids"]:
            phase[t] = op["phase"]
    size = {t["id"]: int(t["size_bytes"]) for t in graph["tensors"]}
    saved = {}
    for op in graph["ops"]:
        if op["phase"] != "PHASE_BACKWARD":
            continue
        for t in op["input_ids"]:
            if phase.get(t) == "PHASE_FORWARD":
                saved[t] = size[t]
    return saved


@functools.lru_cache(maxsize=None)
def load_tool():
    """tools/torch_export.py (OPTIONS.tool) as a module."""
    spec = importlib.util.spec_from_file_location("torch_export", OPTIONS.tool)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def build_model(expr):
    obj = eval(expr, {"torch": torch, "torchvision": torchvision})
    if not isinstance(obj, torch.nn.Module):
        obj = obj()
    return obj


def measure_saved_with_hooks(expr, shape, dtype_bytes, native_dropout):
    """Bytes autograd saves for backward in one step, by storage."""
    torch.manual_seed(0)
    model = build_model(expr)
    model.train()
    torch.manual_seed(0)
    x = torch.randn(*shape)
    torch.manual_seed(0)

    def key(t):
        return t.storage()._cdata

    static = {key(t) for t in list(model.parameters()) +
              list(model.buffers()) + [x]}
    packed = {}

    def pack(t):
        packed.setdefault(key(t), t)
        return t

    # What the tool does for --dropout native.
    with load_tool().native_dropout(torch, native_dropout):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x)
            loss = out.sum()
    total = 0
    for k, t in packed.items():
        if k in static:
            continue
        # A Python scalar operand (x / 2.0) is wrapped as a 0-dim double or
        # long tensor that no op produced: a constant, not an activation.
        if (t.dim() == 0 and not t.requires_grad and t.grad_fn is None and
                t.dtype in (torch.float64, torch.int64, torch.bool)):
            continue
        elem = dtype_bytes if t.is_floating_point() else t.element_size()
        total += t.storage().size() * elem
    del loss
    return total


class ModelCase:
    """One exported model; subclasses set the class attributes."""
    MODEL = None
    SHAPE = None
    NAME = None
    BUDGET = "0.5"
    EXTRA = []
    DTYPE_BYTES = 2
    NATIVE_DROPOUT = True

    @classmethod
    def setUpClass(cls):
        os.makedirs(OPTIONS.work_dir, exist_ok=True)
        cls.path = os.path.join(OPTIONS.work_dir, cls.NAME + ".json")
        cls.export_out = export(cls.MODEL, cls.SHAPE, cls.path, *cls.EXTRA)
        with open(cls.path) as f:
            cls.graph = json.load(f)
        cls.saved = graph_saved(cls.graph)
        cls.sim = json.loads(run([OPTIONS.slackswap, "simulate", "--graph",
                                  cls.path, "--json",
                                  "--timeline-points", "2"]).stdout)
        cls.plan = json.loads(run([
            OPTIONS.slackswap, "plan", "--graph", cls.path, "--hardware",
            "a100-80gb-pcie4", "--budget", cls.BUDGET, "--policy", "all",
            "--json", "--timeline-points", "2"]).stdout)

    def tensor(self, tid):
        return next(t for t in self.graph["tensors"] if t["id"] == tid)

    def test_graph_validates_and_runs_at_full_throughput(self):
        self.assertTrue(self.sim["feasible"], self.sim["infeasible_reason"])
        self.assertEqual(self.sim["throughput_retained"], 1)
        self.assertEqual(self.sim["step_ns"], self.sim["ideal_step_ns"])
        self.assertGreater(len(self.saved), 0)
        self.assertEqual(int(self.sim["unconstrained_peak_bytes"]),
                         sum(self.saved.values()))
        self.assertEqual(int(self.sim["peak_activation_bytes"]),
                         sum(self.saved.values()))
        # Forward ops first, then backward; parameters static.
        phases = [op["phase"] for op in self.graph["ops"]]
        first_bwd = phases.index("PHASE_BACKWARD")
        self.assertNotIn("PHASE_BACKWARD", phases[:first_bwd])
        self.assertNotIn("PHASE_FORWARD", phases[first_bwd:])
        for tid in self.saved:
            self.assertEqual(self.tensor(tid)["kind"],
                             "TENSOR_KIND_ACTIVATION")

    def test_saved_bytes_match_saved_tensors_hooks(self):
        measured = measure_saved_with_hooks(self.MODEL, self.SHAPE,
                                            self.DTYPE_BYTES,
                                            self.NATIVE_DROPOUT)
        self.assertEqual(sum(self.saved.values()), measured)
        self.assertNotIn("warning", self.export_out.stderr)

    def test_every_policy_plans_within_the_budget(self):
        results = {r["policy"]: r["result"] for r in self.plan["results"]}
        self.assertEqual(sorted(results), sorted(POLICIES))
        ss = results["slackswap"]
        self.assertTrue(ss["feasible"], ss["infeasible_reason"])
        budget = int(self.plan["budget_bytes"])
        for policy, r in results.items():
            if not r["feasible"]:
                continue
            # Judged by the simulator: never faster than ideal, and within
            # the budget (ideal runs with no limit).
            self.assertGreaterEqual(int(r["step_ns"]), int(r["ideal_step_ns"]))
            if policy != "ideal":
                self.assertLessEqual(int(r["peak_activation_bytes"]), budget,
                                     policy)
        print("%s retained: %s" % (self.NAME, ", ".join(
            "%s %.4f" % (p, r["throughput_retained"])
            for p, r in sorted(results.items()))))
        # Every plan is judged by the same simulator, so "at least as good"
        # is exact (up to the JSON's double rounding).
        for policy, r in results.items():
            if r["feasible"] and policy != "ideal":
                self.assertGreaterEqual(ss["throughput_retained"],
                                        r["throughput_retained"] - 1e-12,
                                        policy)


class ResNetTest(ModelCase, unittest.TestCase):
    MODEL = "torchvision.models.resnet18"
    SHAPE = (2, 3, 64, 64)
    NAME = "resnet18"

    def test_structure_and_costs(self):
        ops = {op["name"]: op for op in self.graph["ops"]}
        # 8 BasicBlocks (layer1.0 ... layer4.1): layers 0..7.
        layers = {op["layer"] for op in self.graph["ops"]}
        self.assertEqual(layers, set(range(-1, 8)))
        # conv1: 7x7, 3 -> 64 channels, stride 2: 32x32 outputs per image.
        conv = ops["conv1.convolution"]
        self.assertEqual(conv["cost"]["kind"], "OP_KIND_MATMUL")
        self.assertEqual(conv["cost"]["flops"], 2.0 * 2 * 64 * 32 * 32 * 3 * 49)
        bwd = ops["conv1.ConvolutionBackward0"]  # weight grad only
        self.assertEqual(bwd["cost"]["flops"], conv["cost"]["flops"])
        bwd2 = ops["layer1.0.conv1.ConvolutionBackward0"]  # dgrad + wgrad
        fwd2 = ops["layer1.0.conv1.convolution"]
        self.assertEqual(bwd2["cost"]["flops"], 2 * fwd2["cost"]["flops"])
        # batch norm and the in-place ReLU after it are one op.
        self.assertIn("bn1.native_batch_norm+relu_", ops)
        # max-pool indices keep their int64 elements.
        idx = [t for t in self.graph["tensors"]
               if t["name"].startswith("maxpool.") and t["dtype"] == "int64"]
        self.assertEqual(len(idx), 1)
        self.assertEqual(int(idx[0]["size_bytes"]), 2 * 64 * 16 * 16 * 8)
        self.assertIn(idx[0]["id"], self.saved)
        # Parameters and buffers are static.
        kinds = {t["name"]: t["kind"] for t in self.graph["tensors"]}
        self.assertEqual(kinds["conv1.weight"], "TENSOR_KIND_PARAMETER")
        self.assertEqual(kinds["bn1.running_mean"], "TENSOR_KIND_PARAMETER")
        self.assertEqual(kinds["input"], "TENSOR_KIND_INPUT")


class ViTTest(ModelCase, unittest.TestCase):
    MODEL = ("torchvision.models.VisionTransformer(image_size=32, "
             "patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, "
             "mlp_dim=128)")
    SHAPE = (2, 3, 32, 32)
    NAME = "vit"

    def test_structure_and_costs(self):
        layers = {op["layer"] for op in self.graph["ops"]}
        self.assertEqual(layers, {-1, 0, 1})
        bmm = [op for op in self.graph["ops"]
               if op["cost"]["kind"] == "OP_KIND_BATCHED_MATMUL"]
        # QK^T and PV per layer, forward and backward.
        self.assertEqual(len(bmm), 2 * 2 * 2)
        # 17 tokens (16 patches + class), 2 heads of 32: QK^T per layer.
        fwd = [op for op in bmm if op["phase"] == "PHASE_FORWARD"]
        self.assertEqual(fwd[0]["cost"]["flops"], 2.0 * 2 * 2 * 17 * 17 * 32)


class EncoderLayerTest(ModelCase, unittest.TestCase):
    MODEL = ("torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, "
             "dim_feedforward=256, batch_first=True)")
    SHAPE = (2, 16, 64)
    NAME = "encoder_layer"
    # One layer alone cannot reach 0.5: its FFN dropout must hold its input,
    # output and mask at once (see docs/workloads.md).
    BUDGET = "0.6"

    def test_deterministic(self):
        again = os.path.join(OPTIONS.work_dir, self.NAME + "_again.json")
        export(self.MODEL, self.SHAPE, again)
        with open(self.path, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_dropout_keeps_a_bool_mask(self):
        masks = [t for t in self.graph["tensors"]
                 if "native_dropout" in t["name"] and t["dtype"] == "bool"]
        self.assertEqual(len(masks), 4)  # attention, dropout1/2, FFN
        for m in masks:
            self.assertIn(m["id"], self.saved)


class EncoderStackTest(ModelCase, unittest.TestCase):
    MODEL = ("torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer("
             "d_model=64, nhead=4, dim_feedforward=256, activation='gelu', "
             "batch_first=True), num_layers=2)")
    SHAPE = (2, 16, 64)
    NAME = "encoder_stack"


class EncoderEagerDropoutTest(ModelCase, unittest.TestCase):
    MODEL = EncoderLayerTest.MODEL
    SHAPE = EncoderLayerTest.SHAPE
    NAME = "encoder_layer_eager"
    EXTRA = ["--dropout", "eager", "--dtype-bytes", "4"]
    DTYPE_BYTES = 4
    NATIVE_DROPOUT = False
    BUDGET = "0.7"

    def test_eager_dropout_is_one_op_with_a_float_mask(self):
        names = [op["name"] for op in self.graph["ops"]]
        folded = [n for n in names if n.endswith("empty_like+bernoulli_+div_")]
        self.assertEqual(len(folded), 4)
        masks = [t for t in self.graph["tensors"]
                 if t["name"].endswith("empty_like") and t["dtype"] == "fp32"]
        self.assertEqual(len(masks), 4)


class TraceDurationsTest(unittest.TestCase):
    MODEL = EncoderLayerTest.MODEL
    SHAPE = EncoderLayerTest.SHAPE

    def test_cpu_profiler_trace(self):
        os.makedirs(OPTIONS.work_dir, exist_ok=True)
        trace = os.path.join(OPTIONS.work_dir, "cpu_trace.json")
        # Profile the same step the way the tool runs it.
        torch.manual_seed(0)
        model = build_model(self.MODEL)
        model.train()
        torch.manual_seed(0)
        x = torch.randn(*self.SHAPE)
        torch.manual_seed(0)
        with load_tool().native_dropout(torch, True):
            with torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                model(x).sum().backward()
        prof.export_chrome_trace(trace)

        out = os.path.join(OPTIONS.work_dir, "traced.json")
        p = export(self.MODEL, self.SHAPE, out, "--trace-durations", trace)
        m = re.search(r"matched (\d+) of (\d+) ops", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        matched, total = int(m.group(1)), int(m.group(2))
        with open(out) as f:
            graph = json.load(f)
        self.assertEqual(total, len(graph["ops"]))
        with_duration = [op for op in graph["ops"]
                         if "duration_ns" in op["cost"]]
        self.assertEqual(matched, len(with_duration))
        self.assertGreaterEqual(matched, 0.9 * total)

        with open(trace) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        first = {}
        for e in sorted(events, key=lambda e: e["ts"]):
            first.setdefault(e["name"], e)
        ops = {op["name"]: op for op in graph["ops"]}
        # native_layer_norm runs inside aten::layer_norm (not an op of the
        # graph), so its first event is the first norm's.
        self.assertEqual(
            int(ops["norm1.native_layer_norm"]["cost"]["duration_ns"]),
            round(first["aten::native_layer_norm"]["dur"] * 1000))
        # The engine's first AddmmBackward0 is linear2's.
        self.assertEqual(
            int(ops["linear2.AddmmBackward0"]["cost"]["duration_ns"]),
            round(first["autograd::engine::evaluate_function: "
                        "AddmmBackward0"]["dur"] * 1000))
        sim = json.loads(run([OPTIONS.slackswap, "simulate", "--graph", out,
                              "--json", "--timeline-points", "2"]).stdout)
        self.assertTrue(sim["feasible"])
        self.assertGreaterEqual(
            int(sim["step_ns"]),
            sum(int(op["cost"]["duration_ns"]) for op in with_duration))


class GpuTraceTest(unittest.TestCase):
    """A Kineto GPU trace: an op lasts as long as the kernels it launched."""

    def test_kernel_durations(self):
        tool = load_tool()
        ops = [{"aten": ["mm"], "cost": {}},
               {"aten": ["native_layer_norm", "relu_"], "cost": {}},
               {"node": "MmBackward0", "ordinal": 0, "cost": {}},
               {"node": "grad_accumulate", "cost": {}}]

        def cpu(name, ts, dur):
            return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts,
                    "dur": dur, "pid": 1, "tid": 1}

        def launch(ts, corr):
            return {"ph": "X", "cat": "cuda_runtime", "name":
                    "cudaLaunchKernel", "ts": ts, "dur": 1, "pid": 1,
                    "tid": 1, "args": {"correlation": corr}}

        def kernel(ts, dur, corr):
            return {"ph": "X", "cat": "kernel", "name": "k", "ts": ts,
                    "dur": dur, "pid": 0, "tid": 7,
                    "args": {"correlation": corr}}

        trace = {"traceEvents": [
            cpu("aten::matmul", 0, 100), cpu("aten::mm", 10, 50),
            launch(20, 1), kernel(200, 30.5, 1),
            cpu("aten::layer_norm", 110, 40),
            cpu("aten::native_layer_norm", 111, 30),
            cpu("aten::empty", 112, 1),  # inside an op: not an op
            launch(120, 2), kernel(300, 4, 2),
            cpu("aten::relu_", 160, 10), launch(161, 3), kernel(310, 2, 3),
            cpu("autograd::engine::evaluate_function: MmBackward0", 500, 100),
            cpu("MmBackward0", 501, 90), cpu("aten::mm", 502, 40),
            launch(503, 4), kernel(600, 12, 4),
            cpu("aten::mm", 550, 40), launch(551, 5), kernel(620, 13, 5),
        ]}
        path = os.path.join(OPTIONS.work_dir, "gpu_trace.json")
        os.makedirs(OPTIONS.work_dir, exist_ok=True)
        with open(path, "w") as f:
            json.dump(trace, f)
        matched, total = tool.apply_trace_durations(ops, 2, path)
        self.assertEqual((matched, total), (3, 4))
        self.assertEqual(ops[0]["cost"]["duration_ns"], 30500)
        self.assertEqual(ops[1]["cost"]["duration_ns"], 6000)
        self.assertEqual(ops[2]["cost"]["duration_ns"], 25000)
        self.assertNotIn("duration_ns", ops[3]["cost"])


def main():
    global OPTIONS
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswap", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work_dir", required=True)
    OPTIONS, rest = parser.parse_known_args()
    OPTIONS.slackswap = os.path.abspath(OPTIONS.slackswap)
    OPTIONS.tool = os.path.abspath(OPTIONS.tool)
    OPTIONS.work_dir = os.path.abspath(OPTIONS.work_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
