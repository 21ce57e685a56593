"""Builds the slackswap package; pyproject.toml holds the metadata.

At build time the messages and gRPC stubs of ../proto/slackswap/v1 are
generated into the build (slackswap/v1/*_pb2.py, *_pb2_grpc.py) with
protoc and Debian's grpc_python_plugin, or python3-grpc-tools: nothing
generated is checked in. $SLACKSWAP_PROTO_ROOT points elsewhere for a
source tree without ../proto. The version is the repository's VERSION.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # importing slackswap below: no __pycache__
sys.path.insert(0, HERE)

from slackswap import _protos  # noqa: E402 - needs the path above


def _version():
    path = os.path.join(HERE, os.pardir, "VERSION")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return "0.0.0"


class BuildPyWithProtos(build_py):
    """build_py, then the generated modules beside the package's own."""

    def run(self):
        super().run()
        root = _protos.proto_root()
        if root is None:
            raise SystemExit("slackswap: no proto/ at %s (set "
                             "SLACKSWAP_PROTO_ROOT)" % os.path.join(
                                 HERE, os.pardir, "proto"))
        _protos.generate(root, self.build_lib)


setup(version=_version(), cmdclass={"build_py": BuildPyWithProtos})
