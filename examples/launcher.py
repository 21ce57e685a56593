#!/usr/bin/python3
"""A training launcher that runs its steps under a SlackSwap plan.

It does what a launcher does before a job starts, then trains:

1. exports one training step of the model (slackswap.export);
2. asks a running slackswapd for the best plan under the memory budget
   (slackswap.client: the Plan RPC, every budgeted policy, the feasible
   one that retains the most throughput);
3. runs --steps optimizer steps, each under the plan
   (slackswap.torch.apply), and prints what the simulator predicted
   beside what the step measured.

  slackswapd --port=50051 &
  examples/launcher.py --server localhost:50051 --budget 0.5 --steps 3
  examples/launcher.py --server localhost:50051 --model encoder --json

Runs from the checkout under Debian's /usr/bin/python3 (python3-torch,
python3-torchvision, python3-grpcio, python3-protobuf), or with the
package installed. docs/launcher.md explains the output.
"""

import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "python"))

import torch  # noqa: E402 - after the path: the checkout's package first
import torch.nn.functional as F  # noqa: E402

from slackswap.client import DEFAULT_HARDWARE, Client  # noqa: E402
from slackswap.export import build_model, export, parse_shape  # noqa: E402
import slackswap.graph  # noqa: E402
import slackswap.torch  # noqa: E402

# Short names for the models the docs use; anything else is an exporter
# --model expression (torch, torchvision and nn imported).
MODELS = {
    "resnet18": ("torchvision.models.resnet18(num_classes=10)",
                 "2,3,64,64"),
    "encoder": ("nn.Sequential(nn.TransformerEncoder(nn.TransformerEncoder"
                "Layer(64, 4, 128, dropout=0.1, batch_first=True), 2), "
                "nn.Flatten(), nn.Linear(16 * 64, 10))", "2,16,64"),
}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True,
                    help="slackswapd address, HOST:PORT")
    ap.add_argument("--model", default="resnet18",
                    help="resnet18, encoder, or an exporter --model "
                         "expression")
    ap.add_argument("--input-shape", type=parse_shape,
                    help="the model's input (default: the named model's)")
    ap.add_argument("--classes", type=int, default=10,
                    help="cross-entropy labels in [0, N)")
    ap.add_argument("--budget", type=float, default=0.5,
                    help="activation budget, a fraction of the step's "
                         "unconstrained activation peak")
    ap.add_argument("--hardware", default=DEFAULT_HARDWARE,
                    help="the server's hardware profile to plan for")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default=None,
                    help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object (the plan applied "
                         "included) instead of text")
    ap.add_argument("--graph-out", metavar="FILE",
                    help="also write the exported graph to FILE (.json, "
                         ".pb or .txtpb), for `slackswap simulate` and "
                         "friends")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device or (
        "cuda" if torch.cuda.is_available() else "cpu"))
    expr, shape = MODELS.get(args.model, (args.model, None))
    shape = args.input_shape or (parse_shape(shape) if shape else None)
    if shape is None:
        sys.exit("launcher: --input-shape is needed for --model %r" %
                 args.model)
    import torchvision
    torch.manual_seed(args.seed)
    model = build_model(expr, torch, torchvision).to(device).train()
    x = torch.randn(*shape, device=device)
    labels = torch.randint(0, args.classes, (shape[0],), device=device)

    def loss_fn(out, *inputs):
        # One loss for the export and for every step: the runtime checks
        # that the step runs the ops the graph has, the loss's included.
        return F.cross_entropy(out.reshape(out.shape[0], -1), labels)

    # The graph describes the step as it runs on `device`, in the model's
    # own element size (4 bytes: an fp32 step).
    dtype_bytes = next(model.parameters()).element_size()
    with Client(args.server) as client:
        client.wait_ready(timeout=30)
        graph = export(model, (x,), loss_fn=loss_fn, dtype_bytes=dtype_bytes,
                       name=args.model.split("(")[0], seed=args.seed)
        best = client.best_plan(graph, hardware=args.hardware,
                                budget_fraction=args.budget)
    if args.graph_out:
        slackswap.graph.write(graph, args.graph_out)
    plan, predicted = best["plan"], best["result"]
    actions = {}
    for d in plan.get("decisions", []):
        a = d.get("action", "ACTION_KEEP")[len("ACTION_"):].lower()
        actions[a] = actions.get(a, 0) + 1

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = []
    for i in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        with slackswap.torch.apply(best, graph) as step:
            loss = loss_fn(model(x), x)
            loss.backward()
        optimizer.step()
        m = {k: v for k, v in step.measured.items() if k != "timeline"}
        steps.append(dict(m, step=i + 1, loss=float(loss)))
        if not args.json:
            print("step %d: loss %.4f" % (i + 1, float(loss)))
            print("  " + step.summary().replace("\n", "\n  "))

    report = {
        "model": args.model, "device": str(device),
        "budget_fraction": args.budget, "hardware": args.hardware,
        "policy": best["policy"], "decisions": actions, "plan": plan,
        "predicted": {k: v for k, v in predicted.items()
                      if k not in ("memory_timeline", "events")},
        "steps": steps,
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("plan: %s at %.2f of the activation peak on %s, %s; the "
              "simulator predicts %.4f of the ideal throughput" % (
                  best["policy"], args.budget, args.hardware,
                  ", ".join("%d %s" % (n, a)
                            for a, n in sorted(actions.items())),
                  predicted.get("throughput_retained", 0.0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
