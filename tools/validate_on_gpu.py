#!/usr/bin/python3
"""Checks a plan applied on a CUDA GPU against the simulator's prediction.

On a machine with CUDA, for one model:

1. exports one fp32 training step as it runs on the GPU (slackswap.export;
   the graph's bytes are the GPU's, 4 per element);
2. plans it under --budget with --policy for the hardware profile nearest
   the GPU (--hardware to choose): the `slackswap` command line, or a
   running slackswapd with --server;
3. runs plain steps (no plan) and steps under the plan
   (slackswap.torch.apply), each after warm-up, timed with CUDA events, with
   torch.cuda.max_memory_allocated read per step;
4. prints, predicted against measured: the step time, the peak of saved
   activations, and the peak device memory (static bytes plus the highest
   activation + transient point of the simulated timeline against
   max_memory_allocated), and whether the gradients equal a plain step's.

It asserts nothing: it measures. Where the two may differ and why:
docs/launcher.md, "On a GPU".

  tools/validate_on_gpu.py --model resnet18 --batch 32 --budget 0.5
  tools/validate_on_gpu.py --model encoder --server localhost:50051 --json

Without CUDA it refuses at once, before any work: one line on stderr, exit
status 2. Runs under Debian's /usr/bin/python3 or any Python with a CUDA
build of PyTorch (1.13 or later), torchvision for resnet18, and grpcio and
protobuf for --server.
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
sys.path.insert(0, os.path.join(ROOT, "python"))

EXIT_NO_CUDA = 2
TAG = "validate_on_gpu"

# Catalog profiles by GPU name (slackswap list hardware): the nearest one
# is planned for, and named in the output.
_PROFILES = (("GH200", "gh200-c2c"), ("H100", "h100-pcie5"),
             ("H200", "h100-pcie5"), ("H800", "h100-pcie5"))


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="validate_on_gpu.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18",
                    choices=("resnet18", "encoder"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image", type=int, default=224,
                    help="resnet18: image side")
    ap.add_argument("--seq", type=int, default=512, help="encoder: tokens")
    ap.add_argument("--d-model", type=int, default=512,
                    help="encoder: width")
    ap.add_argument("--layers", type=int, default=4, help="encoder: layers")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--policy", default="slackswap")
    ap.add_argument("--hardware", default=None,
                    help="profile to plan for (default: the nearest to "
                         "this GPU)")
    ap.add_argument("--slackswap", default=None,
                    help="the slackswap CLI (default: build/cli/slackswap, "
                         "then PATH)")
    ap.add_argument("--server", default=None,
                    help="plan on this slackswapd (HOST:PORT) instead")
    ap.add_argument("--steps", type=int, default=5,
                    help="measured steps of each kind")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    return ap.parse_args(argv)


def refuse_without_cuda():
    """None when a CUDA device is usable, else why not (one line)."""
    try:
        import torch
    except ImportError as e:
        return "cannot import torch (%s)" % e
    if not torch.cuda.is_available():
        return ("no CUDA device (torch %s, built with CUDA %s): this check "
                "needs a GPU; the CPU tests are tests/torch/torch_apply_test"
                ".py" % (torch.__version__, torch.version.cuda or "none"))
    return None


def nearest_profile(torch, device):
    props = torch.cuda.get_device_properties(device)
    name = props.name.upper()
    for key, profile in _PROFILES:
        if key in name:
            return profile
    if "A100" in name:
        return ("a100-80gb-pcie4" if props.total_memory > 60 * 2 ** 30
                else "a100-40gb-pcie4")
    return "a100-80gb-pcie4"


def build(torch, args, device):
    """(model, input, loss function) on the device, seeded."""
    import torch.nn.functional as F
    torch.manual_seed(0)
    if args.model == "resnet18":
        import torchvision
        model = torchvision.models.resnet18()
        x = torch.randn(args.batch, 3, args.image, args.image)
    else:
        nn = torch.nn
        layer = nn.TransformerEncoderLayer(args.d_model, 8,
                                           4 * args.d_model, dropout=0.1,
                                           batch_first=True)
        model = nn.TransformerEncoder(layer, args.layers)
        x = torch.randn(args.batch, args.seq, args.d_model)
    model = model.to(device).train()
    x = x.to(device)

    def loss_fn(out, *inputs):
        return F.mse_loss(out, torch.zeros_like(out))

    return model, x, loss_fn


def plan(args, graph_path, hardware):
    """(PolicyResult dict, unconstrained peak) from the CLI or --server."""
    if args.server:
        from slackswap.client import Client
        with Client(args.server) as c:
            response = c.plan(graph_path, hardware=hardware,
                              budget_fraction=args.budget,
                              policies=[args.policy], timeline_points=4096)
            from slackswap.plans import to_dict
            report = to_dict(response.report)
    else:
        cli = args.slackswap or next(
            (p for p in (os.path.join(ROOT, "build", "cli", "slackswap"),)
             if os.access(p, os.X_OK)), None) or "slackswap"
        r = subprocess.run(
            [cli, "plan", "--graph", graph_path, "--hardware", hardware,
             "--budget", str(args.budget), "--policy", args.policy,
             "--json", "--timeline-points", "4096"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)
        if r.returncode != 0:
            raise RuntimeError("%s plan failed: %s" % (cli, r.stderr.strip()))
        report = json.loads(r.stdout)
    result = report["results"][0]
    return result, int(report.get("unconstrained_peak_bytes") or 0)


def timed_step(torch, model, x, loss_fn, device, step=None):
    """One step, plain or inside `step` (an apply() context, made before
    the clock starts): (seconds, max_memory_allocated, step)."""
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    if step is None:
        loss_fn(model(x), x).backward()
    else:
        with step:
            loss_fn(model(x), x).backward()
    end.record()
    torch.cuda.synchronize(device)
    return (start.elapsed_time(end) / 1e3,
            torch.cuda.max_memory_allocated(device), step)


def main(argv=None):
    args = parse_args(argv)
    why = refuse_without_cuda()
    if why:
        print("%s: %s" % (TAG, why), file=sys.stderr)
        return EXIT_NO_CUDA
    from slackswap.errors import ExportError, PlanError, one_line
    try:
        return check(args)
    except (ExportError, PlanError) as e:
        print("%s: %s" % (TAG, e), file=sys.stderr)
    except RuntimeError as e:  # the planner's, or torch's: one line
        print("%s: %s" % (TAG, one_line(e)), file=sys.stderr)
    return 1


def check(args):
    """The check itself, on a machine with CUDA; returns the exit status."""
    import torch
    import slackswap.torch

    device = torch.device("cuda", torch.cuda.current_device())
    # Gradients compared bit for bit need deterministic kernels.
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    hardware = args.hardware or nearest_profile(torch, device)
    model, x, loss_fn = build(torch, args, device)
    graph, graph_path = export_graph(args, model, x, loss_fn)
    result, unconstrained = plan(args, graph_path, hardware)
    predicted = result["result"]
    if not predicted.get("feasible"):
        print("%s: %s finds no feasible plan at %.2f: %s" % (
            TAG, args.policy, args.budget,
            predicted.get("infeasible_reason")), file=sys.stderr)
        return 1

    reference = copy.deepcopy(model)
    steps = run_steps(torch, args, device, (model, reference, x, loss_fn),
                      lambda: slackswap.torch.apply(result, graph))
    figures = gather_figures(torch, args, device, hardware,
                             (predicted, unconstrained), steps,
                             (model, reference))
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print_table(figures)
    return 0


def export_graph(args, model, x, loss_fn):
    """(graph, path of its JSON file): the step as it runs on this GPU,
    written where the slackswap CLI or slackswapd can read it."""
    from slackswap.export import export, write

    work = tempfile.mkdtemp(prefix="validate_on_gpu-")
    graph = export(model, (x,), loss_fn=loss_fn, dtype_bytes=4,
                   name=args.model)
    graph_path = os.path.join(work, "graph.json")
    write(graph, graph_path)
    return graph, graph_path


def run_steps(torch, args, device, workload, make_step):
    """(plain, applied): timed_step's results after warm-up, a plain step
    of the reference and a step of the model inside make_step() in turn,
    both from the same seed so that dropout draws the same masks; workload
    is (model, reference, input, loss function)."""
    model, reference, x, loss_fn = workload
    plain, applied = [], []
    for i in range(args.warmup + args.steps):
        torch.manual_seed(1)
        p = timed_step(torch, reference, x, loss_fn, device)
        torch.manual_seed(1)
        a = timed_step(torch, model, x, loss_fn, device, make_step())
        if i >= args.warmup:
            plain.append(p)
            applied.append(a)
    return plain, applied


def compare_gradients(torch, model, reference):
    """(bitwise equal, max |difference|) of the two models' gradients: a
    plan must not change what the step computes."""
    grads_equal = all(
        torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(),
                                                    reference.parameters()))
    max_diff = max(float((p.grad - q.grad).abs().max())
                   for p, q in zip(model.parameters(),
                                   reference.parameters()))
    return grads_equal, max_diff


def gather_figures(torch, args, device, hardware, planned, steps, models):
    """Every figure the check reports, predicted beside measured, in the
    order --json prints them; planned is (the simulator's result,
    unconstrained peak), steps run_steps' result, models (model,
    reference)."""
    import slackswap.torch

    predicted, unconstrained = planned
    plain, applied = steps
    last = applied[-1][2].measured
    grads_equal, max_diff = compare_gradients(torch, *models)
    total = slackswap.torch.predicted_total_bytes(predicted)
    return {
        "gpu": torch.cuda.get_device_name(device),
        "hardware_profile": hardware, "model": args.model,
        "policy": args.policy, "budget_fraction": args.budget,
        "unconstrained_peak_bytes": unconstrained,
        "predicted_step_seconds": int(predicted["step_ns"]) / 1e9,
        "predicted_ideal_step_seconds": int(predicted["ideal_step_ns"]) / 1e9,
        "measured_step_seconds": statistics.median(a[0] for a in applied),
        "plain_step_seconds": statistics.median(p[0] for p in plain),
        "predicted_peak_saved_bytes": int(predicted["peak_activation_bytes"]),
        "measured_peak_saved_bytes": last["peak_saved_bytes"],
        "predicted_peak_device_bytes": total,
        "measured_max_memory_allocated": max(a[1] for a in applied),
        "plain_max_memory_allocated": max(p[1] for p in plain),
        "gradients_bitwise_equal": grads_equal,
        "gradients_max_abs_difference": max_diff,
        "runtime": {k: v for k, v in last.items() if k != "timeline"},
    }


def print_table(figures):
    """The figures for a reader: predicted, measured and plain step side
    by side, then whether the gradients match."""
    print("%s on %s, planned for %s: %s at %.2f of %s bytes" % (
        figures["model"], figures["gpu"], figures["hardware_profile"],
        figures["policy"], figures["budget_fraction"],
        "{:,}".format(figures["unconstrained_peak_bytes"])))
    rows = (
        ("step time (s)", "predicted_step_seconds", "measured_step_seconds",
         "plain_step_seconds"),
        ("peak saved activations (B)", "predicted_peak_saved_bytes",
         "measured_peak_saved_bytes", None),
        ("peak device memory (B)", "predicted_peak_device_bytes",
         "measured_max_memory_allocated", "plain_max_memory_allocated"),
    )
    print("%-30s %16s %16s %16s" % ("", "predicted", "measured",
                                    "plain step"))
    for label, pk, mk, plain_key in rows:
        print("%-30s %16s %16s %16s" % (
            label, _num(figures[pk]), _num(figures[mk]),
            _num(figures[plain_key]) if plain_key else ""))
    print("gradients bitwise equal to a plain step: %s (max |difference| "
          "%g)" % ("yes" if figures["gradients_bitwise_equal"] else "no",
                   figures["gradients_max_abs_difference"]))


def _num(v):
    if isinstance(v, float):
        return "%.6f" % v
    return "{:,}".format(v)


if __name__ == "__main__":
    sys.exit(main())
