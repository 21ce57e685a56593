"""End-to-end tests of slackswap.torch.apply (a training step under a plan).

Each model case (resnet18, a two-layer transformer encoder with dropout
traced both ways, a ViT, a causal LM, an LSTM) exports one real training
step (Debian's PyTorch on the CPU, fp32, the graph at 4 bytes per element
so that its bytes are the step's), plans it with the real `slackswap`
binary (`plan --policy slackswap` at budgets 0.3, 0.5 and 0.7; and a plan
recomputing every saved tensor) and runs the same model under each plan,
beside a plain step of an identical copy with the same seed:

  - every parameter's gradient, every buffer (batch-norm statistics), the
    loss and the RNG state after the step are bitwise equal to the plain
    step's;
  - the measured peak of resident saved activations is within 1% of the
    simulator's peak_activation_bytes for that plan, and within the plan's
    budget, except at the budgets a case lists (OFF_BY_MORE_THAN_1_PERCENT,
    asserted to differ); and at every budget the peak of what the plan's
    schedule had resident equals the simulator's peak for the same plan
    with copies that take no time, as the CPU's do;
  - the runtime did what the plan says (swaps, prefetches, recomputes) and
    nothing off the schedule;
  - with no decisions, the measured peak equals what autograd saves in a
    plain step, measured here apart (every storage a saved_tensors_hooks
    pack hook sees, once, parameters and inputs left out), which is the
    simulator's unconstrained peak: the meter is checked against an
    independent instrument.

MismatchTest runs a plan for one model on another, on other input shapes,
in eval mode, and a plan for another graph: each is refused with a clear
message before backward. NodePlanTest plans for a node through the
client against a real slackswapd (tests/python/slackswapd_fixture.py)
and applies the plan per rank (rank=), with each refusal: no rank, a rank
outside the node's, a rank for a single-GPU plan, graphs of another rank
or layout. LauncherTest runs examples/launcher.py against a real
slackswapd, with the client's
stubs generated at test time; PackageTest builds the wheel from a copy of
the checkout and imports it; GpuToolTest checks that
tools/validate_on_gpu.py refuses cleanly without CUDA.

Run by ctest (tests/torch/CMakeLists.txt), or by hand under Debian's
python3 (python3-torch, python3-torchvision, python3-grpcio):

  /usr/bin/python3 tests/torch/torch_apply_test.py \\
      --slackswap build/cli/slackswap --slackswapd build/server/slackswapd \\
      --python_dir python --work_dir /tmp/ta [-v] [ResNetApplyTest]
"""

import argparse
import copy
import glob
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
import zipfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import torch  # noqa: E402
import torchvision  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))
sys.path.insert(0, HERE)
import models  # noqa: E402 - tests/torch/models.py
OPTIONS = None  # set in main
SX = None       # slackswap modules, imported in main
BUDGETS = ("0.3", "0.5", "0.7")
PEAK_TOLERANCE = 0.01  # the target: within 1% of the simulator


def run(args, timeout=120, env=None, cwd=None, check=True):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout, env=env,
                       cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def _seeded(model, make_input):
    """(model in training mode, its input), each made after manual_seed(0),
    as the exporter's command line makes them."""
    torch.manual_seed(0)
    model = model().train()
    torch.manual_seed(0)
    return model, make_input()


def resnet18():
    return _seeded(torchvision.models.resnet18,
                   lambda: torch.randn(2, 3, 64, 64))


def encoder():
    def build():
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1,
                                                 batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2)
    return _seeded(build, lambda: torch.randn(2, 16, 64))


def vit():
    return _seeded(lambda: torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2,
        hidden_dim=64, mlp_dim=128), lambda: torch.randn(2, 3, 32, 32))


def causal_lm():
    return _seeded(models.TinyCausalLM,
                   lambda: torch.randint(0, 100, (2, 16)))


def lstm():
    return _seeded(models.SparseLSTM, lambda: torch.randint(0, 200, (4, 12)))


def sum_loss(out, x):
    return out.sum()


def graph_saved(graph):
    """Ids of the graph's saved activations: made by a forward op, read by
    a backward op (from the JSON, as tests/torch/torch_export_test.py)."""
    phase = {t: op["phase"] for op in graph["ops"]
             for t in op.get("output_ids", [])}
    return sorted({t for op in graph["ops"] if op["phase"] ==
                   "PHASE_BACKWARD" for t in op.get("input_ids", [])
                   if phase.get(t) == "PHASE_FORWARD"}, key=int)


def saved_bytes_by_pack_hook(model, x, loss_fn, dropout_native):
    """Bytes autograd saves in a plain step, as a saved_tensors_hooks pack
    hook sees them: each storage once, real element sizes, leaving out
    parameters, buffers and the input (static memory), and Python scalars
    torch wrapped as 0-dim tensors (constants)."""
    static = {t.storage()._cdata for t in
              list(model.parameters()) + list(model.buffers()) + [x]}
    packed = {}

    def pack(t):
        packed.setdefault(t.storage()._cdata, t)
        return t

    with SX.recorder.native_dropout(dropout_native), \
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.manual_seed(1)
        loss = loss_fn(model(x), x)
    total = 0
    for key, t in packed.items():
        if key in static:
            continue
        if (t.dim() == 0 and not t.requires_grad and t.grad_fn is None and
                t.dtype in (torch.float64, torch.int64, torch.bool)):
            continue
        total += t.storage().nbytes()
    del loss
    return total


class ApplyCase:
    """One model: exported once, planned at each budget; subclasses set
    BUILD (a factory: (model, input)), LOSS (loss(output, input)) and
    DROPOUT."""
    BUILD = None
    LOSS = staticmethod(sum_loss)
    DROPOUT = "eager"
    # Budgets at which this step, run on the CPU, is known to be more than
    # 1% off the prediction timed for the GPU, each for a cause the class
    # names (docs/launcher.md, "Where the runtime and the simulator
    # differ"). Asserted to differ, so that the list stays true. At every
    # budget the plan's schedule, as measured, is asserted equal to the
    # same plan simulated with synchronous copies.
    OFF_BY_MORE_THAN_1_PERCENT = ()
    # Budgets whose plan fits only at the link's speed: simulated with
    # instant copies (the CPU's) it does not fit, and the CPU run peaks
    # over the budget at the op the simulator names (asserted, so that the
    # list stays true).
    NEEDS_THE_LINK_SPEED = ()

    @classmethod
    def setUpClass(cls):
        cls.work = os.path.join(OPTIONS.work_dir, cls.__name__)
        os.makedirs(cls.work, exist_ok=True)
        cls.model, cls.x = cls.BUILD()
        t0 = time.time()
        graph = SX.export.export(cls.model, (cls.x,), loss_fn=cls.LOSS,
                                 dtype_bytes=4, dropout=cls.DROPOUT)
        cls.graph_path = os.path.join(cls.work, "graph.json")
        SX.export.write(graph, cls.graph_path)
        with open(cls.graph_path) as f:
            cls.graph = json.load(f)
        cls.plans = {}
        for b in BUDGETS:
            report = json.loads(run([
                OPTIONS.slackswap, "plan", "--graph", cls.graph_path,
                "--budget", b, "--policy", "slackswap", "--json"]).stdout)
            cls.plans[b] = report["results"][0]
        cls.unconstrained = cls.simulate(None)
        print("%s: exported and planned in %.1f s" % (cls.__name__,
                                                      time.time() - t0))

    @classmethod
    def simulate(cls, plan, hardware=None):
        """The simulator's result for plan (a Plan dict; None keeps all)
        on the graph, with the plan's own budget."""
        args = [OPTIONS.slackswap, "simulate", "--graph", cls.graph_path,
                "--json"]
        if plan is not None:
            path = os.path.join(cls.work, "plan.json")
            with open(path, "w") as f:
                json.dump(plan, f)
            args += ["--plan", path]
        if hardware is not None:
            args += ["--hardware", hardware]
        return json.loads(run(args).stdout)

    @classmethod
    def synchronous_copies_profile(cls, name):
        """The hardware profile `name` with copies that take no time (the
        links at the simulator's largest rate, no latency): what the CPU
        runtime does, which copies in op order."""
        path = os.path.join(cls.work, name + "-synchronous-copies.json")
        if not os.path.exists(path):
            listed = json.loads(run([OPTIONS.slackswap, "list", "hardware",
                                     "--json"]).stdout)
            hw = next(p for p in listed["profiles"] if p["name"] == name)
            hw["name"] = name + "-synchronous-copies"
            for k in ("h2d_gbps", "d2h_gbps", "bidir_h2d_gbps",
                      "bidir_d2h_gbps", "link_theoretical_gbps_per_dir"):
                hw[k] = 1e5
            hw["transfer_latency_us"] = 0
            with open(path, "w") as f:
                json.dump(hw, f)
        return path

    def plain_and_applied(self, plan):
        """A plain step of a copy and a step under plan of another copy,
        same seed: (step, plain model, applied model, plain loss, loss,
        RNG state after each)."""
        plain = copy.deepcopy(self.model)
        applied = copy.deepcopy(self.model)
        with SX.recorder.native_dropout(self.DROPOUT == "native"):
            torch.manual_seed(1)
            plain_loss = self.LOSS(plain(self.x), self.x)
            plain_loss.backward()
        plain_rng = torch.get_rng_state()
        torch.manual_seed(1)
        t0 = time.time()
        with SX.torch.apply(plan, self.graph_path) as step:
            loss = self.LOSS(applied(self.x), self.x)
            loss.backward()
        self.elapsed = time.time() - t0
        return (step, plain, applied, plain_loss, loss, plain_rng,
                torch.get_rng_state())

    def assert_same_step(self, plain, applied, plain_loss, loss, plain_rng,
                         rng):
        self.assertTrue(torch.equal(plain_loss, loss))
        params = list(zip(plain.named_parameters(), applied.parameters()))
        for (name, p), q in params:
            self.assertIsNotNone(q.grad, name)
            a, b = p.grad, q.grad
            if a.is_sparse:  # an nn.Embedding(sparse=True)'s
                a, b = a.coalesce(), b.coalesce()
                self.assertTrue(torch.equal(a.indices(), b.indices()), name)
                a, b = a.values(), b.values()
            self.assertTrue(torch.equal(a, b), "%s: gradient differs" % name)
        for (name, a), b in zip(plain.named_buffers(), applied.buffers()):
            self.assertTrue(torch.equal(a, b), "%s differs" % name)
        self.assertTrue(torch.equal(plain_rng, rng))
        return len(params)

    def check_budget(self, budget):
        policy_result = self.plans[budget]
        predicted = policy_result["result"]
        self.assertTrue(predicted["feasible"], predicted.get(
            "infeasible_reason"))
        (step, plain, applied, plain_loss, loss, plain_rng,
         rng) = self.plain_and_applied(policy_result)
        n = self.assert_same_step(plain, applied, plain_loss, loss,
                                  plain_rng, rng)
        m = step.measured
        want = int(predicted["peak_activation_bytes"])
        got = m["peak_saved_bytes"]
        instant = self.simulate(
            policy_result["plan"], self.synchronous_copies_profile(
                policy_result["plan"]["hardware_name"]))
        synchronous = int(instant["peak_activation_bytes"])
        actions = [d["action"] for d in policy_result["plan"]["decisions"]]
        swaps = actions.count("ACTION_SWAP")
        recomputes = actions.count("ACTION_RECOMPUTE")
        on_schedule = m["peak_saved_bytes_on_schedule"]
        print("%s budget %s: %d swap, %d recompute; peak saved activations "
              "measured %d B (%d B held past the plan's frees), predicted "
              "%d B (%+.3f%%); the schedule's peak %d B, with synchronous "
              "copies %d B; budget %s B; %d gradients bitwise equal; step "
              "%.3f s" % (
                  type(self).__name__, budget, swaps, recomputes, got,
                  m["overdue_bytes_at_peak"], want,
                  100.0 * (got - want) / want, on_schedule, synchronous,
                  policy_result["plan"]["budget_bytes"], n, self.elapsed))
        self.assertGreater(swaps + recomputes, 0, "the plan moves nothing")
        if not instant["feasible"]:
            # The plan fits at the link's speed, not with the CPU's instant
            # copies: prefetches land as soon as they fit and the op the
            # simulator names then needs more than the budget leaves. The
            # CPU runtime cannot wait for it: it peaks there, over budget.
            print("  with instant copies the plan does not fit: %s" %
                  instant["infeasible_reason"])
            op = re.search(r"op \d+ \([^)]*\)", instant["infeasible_reason"])
            self.assertIsNotNone(op, instant["infeasible_reason"])
            self.assertIn(op.group(0), m["peak_at"])
            self.assertGreater(got, int(policy_result["plan"]["budget_bytes"]))
            self.assertIn(budget, self.NEEDS_THE_LINK_SPEED)
            return
        self.assertNotIn(budget, self.NEEDS_THE_LINK_SPEED,
                         "fits with instant copies now: update "
                         "NEEDS_THE_LINK_SPEED")
        self.assertEqual(on_schedule, synchronous)
        if m["overdue_bytes_at_peak"] == 0:
            self.assertEqual(got, synchronous)
        if budget in self.OFF_BY_MORE_THAN_1_PERCENT:
            self.assertGreater(
                abs(got - want), PEAK_TOLERANCE * want,
                "now within 1%: update OFF_BY_MORE_THAN_1_PERCENT")
        else:
            self.assertLessEqual(abs(got - want), PEAK_TOLERANCE * want,
                                 "measured %d, predicted %d" % (got, want))
            self.assertLessEqual(
                got, int(policy_result["plan"]["budget_bytes"]))
        # fp32 traced at 4 bytes per element: graph bytes are real bytes.
        self.assertEqual(m["peak_saved_real_bytes"], got)
        self.assertEqual(m.get("swapped_out", 0), swaps)
        self.assertEqual(m.get("prefetched", 0), swaps)
        self.assertGreaterEqual(m.get("recomputed", 0), recomputes)
        self.assertEqual(m.get("late_rebuilds", 0), 0)
        self.assertEqual(m["held_after_step"], 0)
        self.assertEqual(m["h2d_queued_after_step"], 0)

    def test_budget_0_3(self):
        self.check_budget("0.3")

    def test_budget_0_5(self):
        self.check_budget("0.5")

    def test_budget_0_7(self):
        self.check_budget("0.7")

    def test_recompute_everything(self):
        # Every saved activation rebuilt: chains back to the inputs,
        # temporaries, sibling outputs, RNG replay of every dropout. No
        # copies, so the prediction holds whatever the hardware's timing.
        saved = graph_saved(self.graph)
        plan = {"graph_name": self.graph["name"], "decisions": [
            {"tensor_id": t, "action": "ACTION_RECOMPUTE"} for t in saved]}
        predicted = self.simulate(plan)
        (step, plain, applied, plain_loss, loss, plain_rng,
         rng) = self.plain_and_applied(plan)
        n = self.assert_same_step(plain, applied, plain_loss, loss,
                                  plain_rng, rng)
        m = step.measured
        want = int(predicted["peak_activation_bytes"])
        print("%s recomputing all %d saved tensors: %d recompute tasks; peak "
              "saved activations measured %d B, predicted %d B; %d "
              "gradients bitwise equal" % (
                  type(self).__name__, len(saved), m["recompute_tasks"],
                  m["peak_saved_bytes"], want, n))
        self.assertEqual(m["peak_saved_bytes"], want)
        self.assertGreaterEqual(m["recomputed"], len(saved))
        self.assertEqual(m.get("late_rebuilds", 0), 0)

    def test_no_decisions_measures_what_autograd_saves(self):
        plan = {"graph_name": self.graph["name"], "decisions": []}
        (step, plain, applied, plain_loss, loss, plain_rng,
         rng) = self.plain_and_applied(plan)
        self.assert_same_step(plain, applied, plain_loss, loss, plain_rng,
                              rng)
        independent = saved_bytes_by_pack_hook(
            copy.deepcopy(self.model), self.x, self.LOSS,
            self.DROPOUT == "native")
        self.assertEqual(step.measured["peak_saved_bytes"], independent)
        self.assertEqual(independent,
                         int(self.unconstrained["peak_activation_bytes"]))
        self.assertEqual(step.measured.get("swapped_out", 0), 0)


class ResNetApplyTest(ApplyCase, unittest.TestCase):
    BUILD = staticmethod(resnet18)


class EncoderApplyTest(ApplyCase, unittest.TestCase):
    """Two encoder layers with dropout, traced as torch 1.13 runs dropout
    on the CPU (eager: a float mask), so the plain step is torch's own. At
    0.3 the plan fits at the link's speed only."""
    BUILD = staticmethod(encoder)
    DROPOUT = "eager"
    NEEDS_THE_LINK_SPEED = ("0.3",)


class EncoderNativeDropoutTest(ApplyCase, unittest.TestCase):
    """The same encoder traced with dropout as on CUDA (native_dropout, a
    bool mask, the exporter's default): apply runs it so, and the plain
    step it is compared with does too."""
    BUILD = staticmethod(encoder)
    DROPOUT = "native"


class ViTApplyTest(ApplyCase, unittest.TestCase):
    """torchvision's VisionTransformer, two layers: its Python code keeps
    tensors the plan frees after their last forward reader (the encoder's
    input, a block's input) until the function holding them returns: the
    peak is above the prediction at every budget."""
    BUILD = staticmethod(vit)
    OFF_BY_MORE_THAN_1_PERCENT = BUDGETS


class CausalLMApplyTest(ApplyCase, unittest.TestCase):
    """A two-layer causal LM with token inputs, a shifted cross-entropy and
    native dropout: tensors held by the model's code push the peak up
    (above the prediction at 0.3), synchronous copies pull it down (below
    it at 0.5)."""
    BUILD = staticmethod(causal_lm)
    LOSS = staticmethod(models.shifted_lm_loss)
    DROPOUT = "native"
    OFF_BY_MORE_THAN_1_PERCENT = ("0.3", "0.5")


class LSTMApplyTest(ApplyCase, unittest.TestCase):
    """A sparse embedding and a two-layer LSTM (dropout between the
    layers). The cell writes its four gates in place into one storage
    (unsafe_chunk): a swapped gate's host copy is taken again when a later
    gate is written (without that, gradients differ). aten::lstm holds its
    initial states, each layer's last hidden state and the previous
    step's cell state past their last forward reader: above the
    prediction at 0.3, where they are held at the peak."""
    BUILD = staticmethod(lstm)
    OFF_BY_MORE_THAN_1_PERCENT = ("0.3",)


class MismatchTest(unittest.TestCase):
    """Plans applied to what they were not made for."""

    @classmethod
    def setUpClass(cls):
        cls.work = os.path.join(OPTIONS.work_dir, cls.__name__)
        os.makedirs(cls.work, exist_ok=True)
        cls.cases = {}
        for name, build in (("resnet18", resnet18), ("encoder", encoder)):
            model, x = build()
            path = os.path.join(cls.work, name + ".json")
            SX.export.write(SX.export.export(model, (x,), dtype_bytes=4,
                                             dropout="eager"), path)
            plan = json.loads(run([
                OPTIONS.slackswap, "plan", "--graph", path, "--budget",
                "0.5", "--policy", "slackswap", "--json"]).stdout)
            cls.cases[name] = (model, x, path, plan["results"][0])

    def assert_refused_cleanly(self, model, x, plan, graph, pattern):
        globals_before = len(torch.nn.modules.module._global_forward_pre_hooks)
        backward = torch.autograd.backward
        with self.assertRaisesRegex(SX.errors.PlanMismatch, pattern) as cm:
            with SX.torch.apply(plan, graph):
                model(x).sum().backward()
        print("%s: %s" % (self.id().split(".")[-1], cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        # Refused before backward: no gradient anywhere, nothing left on.
        self.assertTrue(all(p.grad is None for p in model.parameters()))
        self.assertIs(torch.autograd.backward, backward)
        self.assertEqual(
            len(torch.nn.modules.module._global_forward_pre_hooks),
            globals_before)
        # The same model then runs plainly.
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)

    def test_plan_for_another_model(self):
        _, _, path, plan = self.cases["resnet18"]
        model, x, _, _ = self.cases["encoder"]
        self.assert_refused_cleanly(
            model, x, plan, path,
            r"^the model is not the one graph 'ResNet' was exported from: "
            r"its parameter layers\.0\.self_attn\.in_proj_weight \[192,64\] "
            r"fp32 is parameter conv1\.weight \[64,3,7,7\] fp32 in the graph$")

    def test_other_input_shape(self):
        model, x, path, plan = self.cases["encoder"]
        self.assert_refused_cleanly(
            model, torch.randn(3, 16, 64), plan, path,
            r"its input input \[3,16,64\] fp32 is input input \[2,16,64\]")

    def test_other_ops(self):
        # Same parameters and shapes, but eval mode: no dropout ops.
        model, x, path, plan = self.cases["encoder"]
        model.eval()
        try:
            self.assert_refused_cleanly(
                model, x, plan, path,
                r"^forward op \d+: the graph 'TransformerEncoder' has "
                r"layers\.0\.self_attn\.empty_like\+bernoulli_\+div_, the "
                r"model ran layers\.0\.self_attn\.[\w#]+$")
        finally:
            model.train()

    def test_one_step_per_context(self):
        model, x, path, plan = self.cases["encoder"]
        step = SX.torch.apply(plan, path)
        with self.assertRaisesRegex(SX.errors.PlanError,
                                    r"backward\(\) was not called"):
            with step:
                model(x)
        with self.assertRaisesRegex(SX.errors.PlanError,
                                    r"runs one step: make another"):
            with step:
                pass
        self.assertTrue(all(p.grad is None for p in model.parameters()))

    def test_plan_for_another_graph(self):
        _, _, _, plan = self.cases["resnet18"]
        _, _, path, _ = self.cases["encoder"]
        with self.assertRaisesRegex(
                SX.errors.PlanError,
                r"^the plan is for graph 'ResNet', not 'TransformerEncoder'$"):
            SX.torch.apply(plan, path)
        # Renamed, it still does not fit: the first decision's size.
        renamed = copy.deepcopy(plan)
        renamed["plan"]["graph_name"] = "TransformerEncoder"
        with self.assertRaisesRegex(SX.errors.PlanError,
                                    r"^decision for tensor \d+ \(.*\): "):
            SX.torch.apply(renamed, path)

    def test_plan_the_simulator_refuses(self):
        model, x, path, plan = self.cases["encoder"]
        bad = copy.deepcopy(plan)
        swap = next(d for d in bad["plan"]["decisions"]
                    if d["action"] == "ACTION_SWAP")
        swap["prefetch_after_op_id"] = "0"
        with self.assertRaisesRegex(SX.errors.PlanError,
                                    "must come after the tensor's last "
                                    "forward use"):
            SX.torch.apply(bad, path)
        # The simulator says the same of it.
        bad_path = os.path.join(self.work, "bad_plan.json")
        with open(bad_path, "w") as f:
            json.dump(bad["plan"], f)
        p = run([OPTIONS.slackswap, "simulate", "--graph", path, "--plan",
                 bad_path, "--json"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("must come after the tensor's last forward use",
                      p.stderr)


class NodePlanTest(unittest.TestCase):
    """A plan for a node from a real slackswapd (Client.plan and best_plan
    with node= and ranks=), applied per rank: each rank runs the step
    under it with its own predicted result; and every refusal of
    apply(rank=): no rank, a rank outside the node's, a rank for a
    single-GPU plan or a bare Plan, and graphs of another rank or layout
    (built-in workloads: tensor parallel with data parallel, whose ranks'
    collectives' groups differ)."""
    NODE = "dgx-a100-80gb"
    # A small layout: tensor parallel 2 inside data parallel 2, 4 ranks.
    LAYOUT = {"name": "bert-large", "layers": 1, "tensor_parallel": 2,
              "data_parallel": 2}

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(REPO, "tests", "python"))
        fixture = importlib.import_module("slackswapd_fixture")
        cls.client = importlib.import_module("slackswap.client")
        cls.work = os.path.join(OPTIONS.work_dir, cls.__name__)
        os.makedirs(cls.work, exist_ok=True)
        os.environ.setdefault("SLACKSWAP_CACHE_DIR",
                              os.path.join(cls.work, "cache"))
        cls.server = fixture.Server(OPTIONS.slackswapd, os.path.join(
            cls.work, "slackswapd.log")).start()
        cls.model, cls.x = encoder()
        cls.graph_path = os.path.join(cls.work, "encoder.json")
        SX.export.write(SX.export.export(cls.model, (cls.x,), dtype_bytes=4,
                                         dropout="eager"), cls.graph_path)
        with cls.client.Client(cls.server.target) as c:
            cls.response = c.plan(cls.graph_path, budget_fraction=0.5,
                                  policies=["slackswap"], node=cls.NODE,
                                  ranks=2)
            cls.best = c.best_plan(cls.graph_path, budget_fraction=0.5,
                                   node=cls.NODE, ranks=2)
            cls.single = c.best_plan(cls.graph_path, budget_fraction=0.5)
            cls.layout = SX.plans.to_dict(c.plan(
                workload=cls.LAYOUT, budget_fraction=0.5,
                policies=["slackswap"], node=cls.NODE, ranks=4))

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def workload_graph(self, rank, tp=2, dp=2):
        """Rank `rank`'s graph of bert-large's first layer in a layout of
        tp x dp ranks, from `slackswap workload` (a dict)."""
        path = os.path.join(self.work, "gpt2-tp%d-dp%d-rank%d.json" % (
            tp, dp, rank))
        run([OPTIONS.slackswap, "workload", "--workload", "bert-large",
             "--layers", "1", "--tp", str(tp), "--dp", str(dp), "--rank",
             str(rank), "--out", path])
        with open(path) as f:
            return json.load(f)

    def refused(self, error, pattern, plan, graph, **kwargs):
        with self.assertRaisesRegex(error, pattern) as cm:
            SX.torch.apply(plan, graph, **kwargs)
        print("%s: %s" % (self.id().split(".")[-1], cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIsInstance(cm.exception, SX.errors.PlanError)

    def test_plan_on_a_node(self):
        report = self.response.report
        self.assertEqual(report.node_name, self.NODE)
        self.assertEqual(report.ranks, 2)
        self.assertGreater(report.planned_h2d_gbps, 0)
        self.assertGreater(report.planned_d2h_gbps, 0)
        self.assertEqual([r.policy for r in report.results], ["slackswap"])
        node = report.results[0].node
        self.assertEqual(node.node_name, self.NODE)
        self.assertEqual([(r.rank, r.gpu) for r in node.ranks],
                         [(0, 0), (1, 1)])
        self.assertEqual(report.results[0].plan.graph_name,
                         "TransformerEncoder")
        # best_plan on the node: a PolicyResult with the node's verdict.
        self.assertTrue(self.best["result"]["feasible"])
        self.assertEqual(len(self.best["node"]["ranks"]), 2)
        # Each of the layout's ranks built its own graph, judged together.
        layout = self.layout["report"]
        self.assertEqual((layout["node_name"], layout["ranks"]),
                         (self.NODE, 4))
        self.assertEqual(len(layout["results"][0]["node"]["ranks"]), 4)

    def test_apply_on_each_rank(self):
        self.assertTrue(any(d["action"] != "ACTION_KEEP"
                            for d in self.best["plan"]["decisions"]),
                        "the node's plan moves nothing")
        plans = [(self.best, {}),
                 (self.response, {"policy": "slackswap"})]
        for plan, kwargs in plans:
            for rank in (0, 1):
                plain = copy.deepcopy(self.model)
                applied = copy.deepcopy(self.model)
                torch.manual_seed(1)
                plain_loss = plain(self.x).sum()
                plain_loss.backward()
                torch.manual_seed(1)
                with SX.torch.apply(plan, self.graph_path, rank=rank,
                                    **kwargs) as step:
                    loss = applied(self.x).sum()
                    loss.backward()
                self.assertEqual(step.rank, rank)
                result = SX.plans.to_dict(plan)
                if "report" in result:
                    result = result["report"]["results"][0]
                # The rank's own prediction, not the slowest rank's.
                self.assertEqual(step.predicted,
                                 result["node"]["ranks"][rank]["result"])
                self.assertTrue(torch.equal(plain_loss, loss))
                for (name, p), q in zip(plain.named_parameters(),
                                        applied.parameters()):
                    self.assertTrue(torch.equal(p.grad, q.grad), name)
                self.assertGreater(step.measured["peak_saved_bytes"], 0)
                print("rank %d: peak saved %d B, predicted %s B" % (
                    rank, step.measured["peak_saved_bytes"],
                    step.predicted["peak_activation_bytes"]))

    def test_node_plan_without_rank(self):
        self.refused(
            SX.errors.PlanRankError,
            r"^a plan for 2 ranks of node dgx-a100-80gb: name the rank "
            r"that runs it with rank= \(one of 0 to 1\)$",
            self.best, self.graph_path)
        self.refused(SX.errors.PlanRankError, r"^a plan for 2 ranks",
                     self.response, self.graph_path, policy="slackswap")

    def test_rank_outside_the_node_plan(self):
        for rank in (2, -1):
            self.refused(
                SX.errors.PlanRankError,
                r"^rank %d is outside the plan's ranks \[0, 2\): it is for "
                r"2 ranks of node dgx-a100-80gb$" % rank,
                self.best, self.graph_path, rank=rank)
        self.refused(SX.errors.PlanRankError,
                     r"^rank must be an int, not '1'", self.best,
                     self.graph_path, rank="1")

    def test_rank_for_a_single_gpu_plan(self):
        self.assertNotIn("node", self.single)
        self.refused(
            SX.errors.PlanRankError,
            r"^rank=0 given for a single-GPU plan \(graph "
            r"'TransformerEncoder' on a100-80gb-pcie4\): leave rank out",
            self.single, self.graph_path, rank=0)
        self.refused(
            SX.errors.PlanRankError,
            r"^rank=1 given for a bare Plan, which does not say whether it "
            r"is a node's", self.best["plan"], self.graph_path, rank=1)

    def test_graph_of_another_rank(self):
        # Rank 1's graph, applied as rank 2: its tensor-parallel group is
        # {0, 1}; rank 2's is {2, 3}.
        self.refused(
            SX.errors.PlanLayoutError,
            r"^graph 'bert-large' is not rank 2's: its op \d+ \([^)]*\) has "
            r"collective\.group \{0, 1\}, without rank 2 ",
            self.layout, self.workload_graph(1), rank=2)

    def test_graph_of_a_layout_with_more_ranks(self):
        # Data parallel over 4: rank 2's data-parallel group is {0, 2, 4,
        # 6}, beyond the plan's 4 ranks.
        self.refused(
            SX.errors.PlanLayoutError,
            r"^graph 'bert-large' was built for another layout: its op \d+ "
            r"\([^)]*\) has collective\.group \{0, 2, 4, 6\}, naming rank "
            r"4, but the plan is for 4 ranks of node dgx-a100-80gb$",
            self.layout, self.workload_graph(2, dp=4), rank=2)

    def test_graph_of_another_split(self):
        # Data parallel over 4 without tensor parallelism: every group is
        # {0, 1, 2, 3}, but each rank holds the whole layer.
        self.refused(
            SX.errors.PlanLayoutError,
            r"^graph 'bert-large' is not the one rank 2's plan was simulated "
            r"with: static_bytes \(tensors no op makes: parameters, "
            r"inputs\) is \d+ in the graph, \d+ in the plan's "
            r"node\.ranks\[2\]\.result$",
            self.layout, self.workload_graph(2, tp=1, dp=4), rank=2)

    def test_the_rank_graph_passes(self):
        # What the refusals above are measured against: each rank's own
        # graph passes the layout check.
        for rank in range(4):
            chosen = SX.plans.rank_plan(self.layout, rank)
            self.assertTrue(chosen.rank_result)
            SX.plans.check_rank_graph(self.workload_graph(rank), chosen)


class LauncherTest(unittest.TestCase):
    """examples/launcher.py against a real slackswapd."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(REPO, "tests", "python"))
        fixture = importlib.import_module("slackswapd_fixture")
        cls.work = os.path.join(OPTIONS.work_dir, cls.__name__)
        os.makedirs(cls.work, exist_ok=True)
        cls.cache = os.path.join(cls.work, "cache")
        shutil.rmtree(cls.cache, ignore_errors=True)
        cls.server = fixture.Server(OPTIONS.slackswapd, os.path.join(
            cls.work, "slackswapd.log")).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def launch(self, *args):
        p = run([sys.executable, os.path.join(REPO, "examples",
                                              "launcher.py"),
                 "--server", self.server.target, "--json", "--steps", "2"] +
                list(args), timeout=120, env={
                    "SLACKSWAP_CACHE_DIR": self.cache,
                    # The checkout's path: generated at first use.
                    "SLACKSWAP_PROTO_PYTHON": ""})
        return json.loads(p.stdout)

    def check(self, report, graph):
        predicted = int(report["predicted"]["peak_activation_bytes"])
        self.assertEqual(len(report["steps"]), 2)
        # As ApplyCase: a plan that fits only at the link's speed peaks
        # over the budget on the CPU, whose copies are instant.
        path = os.path.join(self.work, "plan.json")
        with open(path, "w") as f:
            json.dump(report["plan"], f)
        instant = json.loads(run([
            OPTIONS.slackswap, "simulate", "--graph", graph, "--plan", path,
            "--hardware", ApplyCase.synchronous_copies_profile.__func__(
                type(self), report["hardware"]), "--json"]).stdout)
        for s in report["steps"]:
            got = s["peak_saved_bytes"]
            print("launcher %s at %s: %s, step %d: measured %d B (%d B "
                  "held past the plan's frees; the schedule's %d B, with "
                  "instant copies %s B), predicted %d B, loss %.4f" % (
                      report["model"], report["budget_fraction"],
                      report["policy"], s["step"], got,
                      s["overdue_bytes_at_peak"],
                      s["peak_saved_bytes_on_schedule"],
                      instant["peak_activation_bytes"], predicted,
                      s["loss"]))
            if instant["feasible"]:
                # The runtime keeps to the plan's schedule ...
                self.assertEqual(s["peak_saved_bytes_on_schedule"],
                                 int(instant["peak_activation_bytes"]))
                if s["overdue_bytes_at_peak"] == 0:
                    self.assertLessEqual(abs(got - predicted),
                                         PEAK_TOLERANCE * predicted)
                else:
                    # ... and tensors the model's code holds past their
                    # last forward reader come on top (docs/launcher.md).
                    self.assertGreater(got, predicted)
                    self.assertLessEqual(
                        got, predicted + s["overdue_bytes_at_peak"])
            else:
                print("  with instant copies the plan does not fit: %s" %
                      instant["infeasible_reason"])
                op = re.search(r"op \d+ \([^)]*\)",
                               instant["infeasible_reason"])
                self.assertIn(op.group(0), s["peak_at"])
                self.assertGreater(got, int(report["plan"]["budget_bytes"]))
        # It trains: the loss of the second step is lower.
        self.assertLess(report["steps"][1]["loss"],
                        report["steps"][0]["loss"])

    def test_resnet18(self):
        graph = os.path.join(self.work, "resnet18.json")
        self.check(self.launch("--model", "resnet18", "--budget", "0.5",
                               "--graph-out", graph), graph)

    def test_encoder(self):
        graph = os.path.join(self.work, "encoder.json")
        self.check(self.launch("--model", "encoder", "--budget", "0.3",
                               "--graph-out", graph), graph)

    def test_stubs_are_generated_outside_the_checkout(self):
        self.launch("--model", "encoder", "--budget", "0.7")
        made = glob.glob(os.path.join(self.cache, "protos-*", "slackswap",
                                      "v1", "planner_service_pb2_grpc.py"))
        self.assertEqual(len(made), 1)
        self.assertEqual(glob.glob(os.path.join(REPO, "python", "slackswap",
                                                "v1")), [])

    def test_best_plan_is_the_most_throughput(self):
        # What the launcher picks, through the client, against every
        # policy's result from the command line (planned locally).
        os.environ["SLACKSWAP_CACHE_DIR"] = self.cache
        client = importlib.import_module("slackswap.client")
        model, x = encoder()
        path = os.path.join(self.work, "encoder.json")
        SX.export.write(SX.export.export(model, (x,), dtype_bytes=4), path)
        with client.Client(self.server.target) as c:
            best = c.best_plan(path, budget_fraction=0.3)
        report = json.loads(run([
            OPTIONS.slackswap, "plan", "--graph", path, "--budget", "0.3",
            "--json"]).stdout)
        feasible = [r for r in report["results"]
                    if r["policy"] != "ideal" and r["result"]["feasible"]]
        top = max(r["result"]["throughput_retained"] for r in feasible)
        self.assertEqual(best["result"]["throughput_retained"], top)
        self.assertEqual(best["policy"], next(
            r["policy"] for r in feasible
            if r["result"]["throughput_retained"] == top))


class PackageTest(unittest.TestCase):
    """pip builds a wheel of python/ with the stubs generated from proto/,
    from a copy of the checkout; the installed copy imports them."""

    def test_wheel_has_generated_stubs_and_imports(self):
        work = os.path.join(OPTIONS.work_dir, type(self).__name__)
        shutil.rmtree(work, ignore_errors=True)
        src = os.path.join(work, "src")
        os.makedirs(src)
        for name in ("python", "proto"):
            shutil.copytree(os.path.join(REPO, name),
                            os.path.join(src, name),
                            ignore=shutil.ignore_patterns(
                                "__pycache__", "build", "*.egg-info"))
        shutil.copy(os.path.join(REPO, "VERSION"), src)
        wheels = os.path.join(work, "wheels")
        run([sys.executable, "-m", "pip", "wheel", "--no-deps",
             "--no-build-isolation", "--no-index", "-q", "-w", wheels,
             os.path.join(src, "python")], timeout=180)
        (wheel,) = glob.glob(os.path.join(wheels, "slackswap-*.whl"))
        with open(os.path.join(REPO, "VERSION")) as f:
            self.assertIn("-%s-" % f.read().strip(), wheel)
        names = set(zipfile.ZipFile(wheel).namelist())
        protos = [os.path.basename(p)[:-len(".proto")] for p in glob.glob(
            os.path.join(REPO, "proto", "slackswap", "v1", "*.proto"))]
        for p in protos:
            self.assertIn("slackswap/v1/%s_pb2.py" % p, names)
        self.assertIn("slackswap/v1/planner_service_pb2_grpc.py", names)
        for module in ("torch", "client", "export", "_runtime",
                       "_lowering"):
            self.assertIn("slackswap/%s.py" % module, names)
        target = os.path.join(work, "site")
        run([sys.executable, "-m", "pip", "install", "--no-deps",
             "--no-index", "-q", "--target", target, wheel], timeout=180)
        cache = os.path.join(work, "cache")
        out = run([sys.executable, "-c",
                   "import slackswap.client, slackswap.torch, "
                   "slackswap._protos as p\n"
                   "m = p.load()\n"
                   "print(slackswap.client.__file__)\n"
                   "print(m.planner_service_pb2_grpc.__file__)\n"
                   "print(hasattr(m.planner_service_pb2_grpc, "
                   "'PlannerStub'))"],
                  cwd=work, env={"PYTHONPATH": target,
                                 "SLACKSWAP_CACHE_DIR": cache}).stdout
        client_file, stub_file, has_stub = out.split()
        self.assertTrue(client_file.startswith(target), client_file)
        self.assertTrue(stub_file.startswith(target), stub_file)
        self.assertEqual(has_stub, "True")
        self.assertFalse(os.path.exists(cache), "generated at first use "
                         "although the package has its stubs")


class GpuToolTest(unittest.TestCase):
    """tools/validate_on_gpu.py refuses cleanly where there is no CUDA."""

    def test_refuses_without_cuda(self):
        t0 = time.time()
        p = run([sys.executable, os.path.join(REPO, "tools",
                                              "validate_on_gpu.py"),
                 "--slackswap", OPTIONS.slackswap],
                env={"CUDA_VISIBLE_DEVICES": ""}, check=False, timeout=60)
        print("validate_on_gpu.py without CUDA: exit %d in %.1f s: %s" % (
            p.returncode, time.time() - t0, p.stderr.strip()))
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")
        self.assertRegex(p.stderr, r"^validate_on_gpu: no CUDA device "
                                   r"\(torch [^)]*\): this check needs a "
                                   r"GPU; [^\n]*\n$")


def main():
    global OPTIONS, SX
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswap", required=True)
    parser.add_argument("--slackswapd", required=True)
    parser.add_argument("--python_dir", required=True,
                        help="the checkout's python/ (the slackswap package)")
    parser.add_argument("--work_dir", required=True)
    OPTIONS, rest = parser.parse_known_args()
    for name in ("slackswap", "slackswapd", "python_dir", "work_dir"):
        setattr(OPTIONS, name, os.path.abspath(getattr(OPTIONS, name)))
    for name in ("slackswap", "slackswapd"):
        if not os.access(getattr(OPTIONS, name), os.X_OK):
            sys.exit("FATAL: --%s=%s is not an executable file (build it "
                     "first)" % (name, getattr(OPTIONS, name)))
    sys.path.insert(0, OPTIONS.python_dir)
    SX = argparse.Namespace(
        export=importlib.import_module("slackswap.export"),
        errors=importlib.import_module("slackswap.errors"),
        plans=importlib.import_module("slackswap.plans"),
        recorder=importlib.import_module("slackswap._recorder"),
        torch=importlib.import_module("slackswap.torch"))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
