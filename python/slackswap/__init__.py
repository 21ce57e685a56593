"""SlackSwap's Python package: PyTorch models into operator graphs.

Usable straight from the checkout: put python/ on sys.path
(PYTHONPATH=python) or run tools/torch_export.py.

  slackswap.export   export(model, example_inputs, ...) and write(graph,
                     path): one real training step of a PyTorch model as
                     a slackswap.v1.OperatorGraph; `python3 -m
                     slackswap.export` is the command line
                     (docs/workloads.md).
  slackswap.graph    OperatorGraph values: the proto3 JSON mapping as a
                     dict, or the generated message class when
                     slackswap/v1/graph_pb2.py is importable.
  slackswap.errors   ExportError, ExportWarning.

Importing the package does not import torch: only exporting needs it.
"""

import pkgutil

# Generated protobuf modules (protoc --python_out=DIR for proto/, giving
# DIR/slackswap/v1/*_pb2.py) are never checked in; a DIR on sys.path when
# this package is imported joins it here as slackswap.v1.
__path__ = pkgutil.extend_path(__path__, __name__)
