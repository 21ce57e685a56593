"""SlackSwap's Python package: PyTorch steps into operator graphs, plans
from slackswapd, and plans applied to PyTorch steps.

Usable straight from the checkout: put python/ on sys.path
(PYTHONPATH=python) or run tools/torch_export.py; or install it
(python/pyproject.toml, docs/launcher.md).

  slackswap.export   export(model, example_inputs, ...) and write(graph,
                     path): one real training step of a PyTorch model as
                     a slackswap.v1.OperatorGraph; `python3 -m
                     slackswap.export` is the command line
                     (docs/workloads.md).
  slackswap.graph    OperatorGraph values: the proto3 JSON mapping as a
                     dict, or the generated message class when
                     slackswap/v1/graph_pb2.py is importable.
  slackswap.client   Client(target): Plan, Simulate, Sweep... on
                     slackswapd; best_plan() for a launcher.
  slackswap.torch    apply(plan, graph, rank=None): one training step
                     under a plan (a node's: the given rank's), measured
                     beside the simulator's prediction (docs/launcher.md).
  slackswap.plans    plans, reports and graphs in any form, as dicts;
                     rank_plan() for a node's plan.
  slackswap.errors   ExportError, ExportWarning, PlanError, PlanMismatch,
                     PlanRankError, PlanLayoutError.

Importing the package imports neither torch nor grpc: exporting and
slackswap.torch need torch, slackswap.client grpc.
"""

import pkgutil

# Generated protobuf modules (protoc --python_out=DIR for proto/, giving
# DIR/slackswap/v1/*_pb2.py) are never checked in; a DIR on sys.path when
# this package is imported joins it here as slackswap.v1 (and
# slackswap._protos adds the ones it generates later).
__path__ = pkgutil.extend_path(__path__, __name__)
