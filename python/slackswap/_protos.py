"""The generated protobuf and gRPC modules of proto/slackswap/v1.

Generated code is never checked in. It comes from, in order:

1. an installed package: `pip install ./python` generates
   slackswap/v1/*_pb2.py and *_pb2_grpc.py at build time (setup.py);
2. $SLACKSWAP_PROTO_PYTHON: a directory holding slackswap/v1/*_pb2*.py
   that a build made (for example a CMake build directory);
3. from the checkout, on first use: protoc with Debian's
   grpc_python_plugin (or python3-grpc-tools when that is installed)
   writes them into a cache directory ($SLACKSWAP_CACHE_DIR, else
   $XDG_CACHE_HOME/slackswap, else ~/.cache/slackswap), one per content
   of proto/, so that an RPC added to the .proto files is picked up.

Whichever it is joins the package as slackswap.v1 (see slackswap/__init__).
"""

import glob
import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import slackswap

_HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("graph_pb2", "plan_pb2", "simulation_pb2", "report_pb2",
           "hardware_pb2", "planner_service_pb2", "planner_service_pb2_grpc")


def proto_root():
    """proto/ of the checkout this package sits in, or $SLACKSWAP_PROTO_ROOT;
    None when neither exists."""
    root = os.environ.get("SLACKSWAP_PROTO_ROOT") or os.path.join(
        _HERE, os.pardir, os.pardir, "proto")
    root = os.path.abspath(root)
    return root if os.path.isdir(os.path.join(root, "slackswap", "v1")) \
        else None


def proto_files(root):
    return sorted(glob.glob(os.path.join(root, "slackswap", "v1",
                                         "*.proto")))


def generate(root, out_dir, protoc=None, plugin=None):
    """Writes the Python messages and gRPC stubs of root's slackswap/v1
    protos under out_dir (out_dir/slackswap/v1/...). protoc and the gRPC
    plugin: the arguments, $SLACKSWAP_PROTOC and
    $SLACKSWAP_GRPC_PYTHON_PLUGIN, then what is on PATH; without a plugin,
    grpc_tools.protoc (python3-grpc-tools)."""
    files = proto_files(root)
    if not files:
        raise RuntimeError("no .proto files under %s/slackswap/v1" % root)
    protoc = protoc or os.environ.get("SLACKSWAP_PROTOC") or \
        shutil.which("protoc")
    plugin = plugin or os.environ.get("SLACKSWAP_GRPC_PYTHON_PLUGIN") or \
        shutil.which("grpc_python_plugin")
    os.makedirs(out_dir, exist_ok=True)
    flags = ["-I" + root, "--python_out=" + out_dir,
             "--grpc_python_out=" + out_dir]
    if protoc and plugin:
        cmd = [protoc, "--plugin=protoc-gen-grpc_python=" + plugin] + flags
    elif importlib.util.find_spec("grpc_tools") is not None:
        cmd = [sys.executable, "-m", "grpc_tools.protoc"] + flags
    else:
        raise RuntimeError(
            "generating the gRPC stubs needs protoc and grpc_python_plugin "
            "(Debian: protobuf-compiler, protobuf-compiler-grpc) or "
            "python3-grpc-tools")
    r = subprocess.run(cmd + files, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=120)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (
            " ".join(cmd[:2]), r.returncode, (r.stderr or r.stdout).strip()))


def _cache_dir():
    base = os.environ.get("SLACKSWAP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or
        os.path.join(os.path.expanduser("~"), ".cache"), "slackswap")
    return base


def _join(directory):
    """Makes directory/slackswap part of the slackswap package."""
    portion = os.path.join(directory, "slackswap")
    if portion not in slackswap.__path__:
        slackswap.__path__.append(portion)
    importlib.invalidate_caches()
    # A failed earlier `import slackswap.v1` leaves nothing cached, but a
    # namespace package found before this portion would miss it.
    sys.modules.pop("slackswap.v1", None)


def _importable():
    try:
        for name in MODULES:
            importlib.import_module("slackswap.v1." + name)
        return True
    except ImportError:
        return False


def load():
    """The generated modules as a namespace: .graph_pb2, .plan_pb2,
    .planner_service_pb2, .planner_service_pb2_grpc, ..."""
    if not _importable():
        given = os.environ.get("SLACKSWAP_PROTO_PYTHON")
        if given:
            _join(os.path.abspath(given))
        if not _importable():
            _join(_generated_in_cache())
    mods = {}
    for name in MODULES:
        mods[name] = importlib.import_module("slackswap.v1." + name)
    return type("Protos", (), mods)


def _generated_in_cache():
    root = proto_root()
    if root is None:
        raise RuntimeError(
            "slackswap.v1 is not generated and there is no proto/ beside "
            "this package: install the package (pip install ./python), or "
            "set SLACKSWAP_PROTO_ROOT to the repository's proto/")
    digest = hashlib.sha256()
    for path in proto_files(root):
        digest.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    base = _cache_dir()
    final = os.path.join(base, "protos-" + digest.hexdigest()[:16])
    if os.path.isdir(os.path.join(final, "slackswap", "v1")):
        return final
    os.makedirs(base, exist_ok=True)
    # Generated aside and renamed into place, so that two processes never
    # see half a directory.
    tmp = tempfile.mkdtemp(prefix="protos-tmp-", dir=base)
    try:
        generate(root, tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.isdir(final):
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return final
