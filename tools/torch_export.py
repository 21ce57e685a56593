#!/usr/bin/python3
"""Exports one real PyTorch training step as a SlackSwap OperatorGraph.

The exporter lives in the slackswap Python package
(python/slackswap/export.py); this script runs its command line from the
checkout, so that

  tools/torch_export.py --model torchvision.models.resnet18 \\
      --input-shape 8,3,224,224 --out resnet18.json

is `PYTHONPATH=python python3 -m slackswap.export ...`. Flags, the Python
API and what the graph holds: docs/workloads.md.
"""

import os
import sys

# Keep the checkout free of __pycache__: the package is small.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "python"))

from slackswap.export import main  # noqa: E402 - needs the path above

if __name__ == "__main__":
    sys.exit(main(prog="torch_export.py", tag="torch_export"))
