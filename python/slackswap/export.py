"""Exports one real PyTorch training step as a SlackSwap OperatorGraph.

Runs one forward + backward step of a real model (Debian's PyTorch 1.13,
python3-torch, under /usr/bin/python3) and describes what it did as a
slackswap.v1.OperatorGraph for `slackswap simulate|plan --graph`. What the
graph holds, and which constructs are supported: docs/workloads.md.

Python, with python/ on sys.path:

  from slackswap.export import export, write
  graph = export(model, (tokens,), loss_fn="seq_cross_entropy")
  write(graph, "lm.json")

Command line (tools/torch_export.py runs the same main()):

  PYTHONPATH=python /usr/bin/python3 -m slackswap.export \\
      --model torchvision.models.resnet18 --input-shape 8,3,224,224 \\
      --out resnet18.json
  tools/torch_export.py --model "torch.nn.TransformerDecoderLayer(
      d_model=64, nhead=4)" --inputs 16,2,64 24,2,64 --out dec.json

Importing this module does not import torch; export() and main() do.
"""

import argparse
import contextlib
import importlib
import importlib.util
import os
import re
import sys
import warnings

from slackswap import graph as _graph
from slackswap.errors import ExportError, ExportWarning, first_line, one_line

write = _graph.write

LOSSES = ("sum", "cross_entropy", "seq_cross_entropy")

# --inputs / --input-dtype names -> torch dtype attribute.
_DTYPES = {
    "float": "float32", "float32": "float32", "double": "float64",
    "float64": "float64", "half": "float16", "float16": "float16",
    "bfloat16": "bfloat16", "long": "int64", "int64": "int64",
    "int": "int32", "int32": "int32", "short": "int16", "int16": "int16",
    "int8": "int8", "uint8": "uint8", "bool": "bool",
}


def export(model, example_inputs=(), loss_fn=None, dtype_bytes=2, *,
           example_kwargs=None, strip_checkpoint=False, dropout="native",
           num_classes=0, name=None, trace_durations=None, seed=0,
           as_bytes=False):
    """One training step of `model` as a slackswap.v1.OperatorGraph.

    model: an nn.Module (not TorchScript). It is left as it was: training
      flag, .grad, buffers, and the global RNG are restored afterwards.
    example_inputs: the positional inputs, a tuple; any other value (a
      tensor, a list) is the single positional input. Any dtype.
    example_kwargs: keyword inputs, a dict.
    loss_fn: None or "sum" (every floating output summed);
      "cross_entropy" (F.cross_entropy of the first floating output
      against seeded random labels, classes on dim 1 as in torch);
      "seq_cross_entropy" (logits [B, T, V] flattened to [B*T, V] against
      labels [B, T]); or a callable, called as
      loss_fn(output, *example_inputs, **example_kwargs), returning a
      one-element tensor.
    dtype_bytes: bytes per floating element in the graph (default 2: a
      bf16 step traced in fp32).
    strip_checkpoint: run torch.utils.checkpoint regions as plain code, so
      that the planner decides from scratch.
    dropout: "native" (dropout keeps a bool mask, as on CUDA) or "eager"
      (torch 1.13's CPU path, a float mask).
    num_classes: label range of the built-in cross-entropies (0: the
      logits' class dimension).
    name: the graph's name (default: the model's class name).
    trace_durations: a torch.profiler Chrome trace of the same step, whose
      measured durations replace the cost model where ops match.
    seed: torch.manual_seed before the step.
    as_bytes: return the binary serialization.

    Returns the OperatorGraph message when slackswap.v1.graph_pb2 is
    importable (see slackswap.graph), else a dict in the proto3 JSON
    mapping; bytes with as_bytes. Raises ExportError, whose message is one
    line naming the model part and what failed; warns ExportWarning where
    part of the step cannot be measured exactly.
    """
    args = example_inputs if isinstance(example_inputs, tuple) else (
        example_inputs,)
    result = _run(model, args, dict(example_kwargs or {}), loss_fn,
                  dtype_bytes, strip_checkpoint, dropout, num_classes, name,
                  trace_durations, seed, type(model).__name__)
    for w in result.warnings:
        warnings.warn(w, ExportWarning, stacklevel=2)
    try:
        if as_bytes:
            return _graph.to_bytes(result.graph)
        if _graph.message_class() is not None:
            return _graph.to_message(result.graph)
    except RuntimeError as e:
        raise ExportError("", str(e)) from e
    return result.graph


class _Result:
    """An export: the graph dict and the figures the command line prints."""

    def __init__(self, graph, num_forward, saved_bytes, saved_count,
                 kept_bytes, warnings_, durations):
        self.graph = graph
        self.num_forward = num_forward
        self.saved_bytes = saved_bytes
        self.saved_count = saved_count
        self.kept_bytes = kept_bytes
        self.warnings = warnings_
        self.durations = durations  # (matched, total) or None


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise ExportError("", "cannot import torch (%s): run under "
                          "Debian's /usr/bin/python3 with python3-torch" % e)
    return torch


def _run(model, args, kwargs, loss_fn, dtype_bytes, strip_checkpoint,
         dropout, num_classes, name, trace_durations, seed, model_text):
    torch = _import_torch()
    from slackswap import _durations, _numbering, _recorder

    if not isinstance(model, torch.nn.Module):
        raise ExportError("model", "want an nn.Module, got %s" %
                          type(model).__name__)
    if dtype_bytes <= 0:
        raise ExportError("", "dtype_bytes must be > 0")
    if dropout not in ("native", "eager"):
        raise ExportError("", "dropout must be native or eager, not %r" %
                          (dropout,))
    loss, loss_text = _make_loss(torch, loss_fn, num_classes, args, kwargs)
    rec = _recorder.Recorder(model, dtype_bytes)
    with _model_kept(torch, model), torch.random.fork_rng(devices=[]), \
            _recorder.native_dropout(dropout == "native"):
        torch.manual_seed(seed)
        rec.run(args, kwargs, loss, strip_checkpoint)

    graph_bytes, kept_bytes, saved = rec.saved_summary()
    if graph_bytes != kept_bytes:
        rec.warnings.append("saved bytes %d differ from what autograd keeps "
                            "from the forward pass (%d)" % (graph_bytes,
                                                            kept_bytes))
    inputs = ", ".join(
        "[%s] %s" % (",".join(str(d) for d in t.shape),
                     str(t.dtype).replace("torch.", ""))
        for t in _numbering.flatten_tensors((args, kwargs)))
    num_backward = len(rec.ops) - rec.num_forward_ops
    description = (
        "traced with torch %s: %s on inputs %s, loss %s, one training step "
        "on the CPU, floating tensors at %d bytes%s; %d forward + %d "
        "backward ops; saved activations %d tensors, %d bytes (autograd "
        "keeps %d bytes)" % (
            torch.__version__, model_text, inputs or "(none)", loss_text,
            dtype_bytes, ", checkpointing stripped" if strip_checkpoint
            else "", rec.num_forward_ops, num_backward, len(saved),
            graph_bytes, kept_bytes))
    durations = None
    if trace_durations:
        durations = _durations.apply_trace_durations(
            rec.ops, rec.num_forward_ops, trace_durations)
        description += "; durations of %d of %d ops from %s" % (
            durations + (trace_durations,))
    graph = rec.graph(name or re.sub(r"[^A-Za-z0-9_.-]+", "_", model_text),
                      description)
    return _Result(graph, rec.num_forward_ops, graph_bytes, len(saved),
                   kept_bytes, rec.warnings, durations)


@contextlib.contextmanager
def _model_kept(torch, model):
    """Trains model for the step, then restores its training flag, its
    gradients and its buffers (running statistics)."""
    training = model.training
    grads = [(p, p.grad) for p in model.parameters()]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    model.train()
    try:
        yield
    finally:
        model.train(training)
        with torch.no_grad():
            for p, g in grads:
                p.grad = g
            for b, v in buffers:
                b.copy_(v)


def _make_loss(torch, loss_fn, num_classes, args, kwargs):
    """(loss(recorder, output), its description) for export()."""
    from slackswap import _numbering

    if callable(loss_fn):
        def user_loss(rec, out):
            return loss_fn(out, *args, **kwargs)
        return user_loss, getattr(loss_fn, "__name__", "custom")
    kind = loss_fn or "sum"
    if kind not in LOSSES:
        raise ExportError("loss", "unknown loss %r: want one of %s, or a "
                          "callable" % (kind, ", ".join(LOSSES)))

    def builtin_loss(rec, out):
        parts = [t for t in _numbering.flatten_tensors(out)
                 if t.is_floating_point() and t.requires_grad]
        if not parts:
            raise ExportError("loss", "the model's output has no floating "
                              "tensor that requires grad")
        if kind == "sum":
            loss = parts[0].sum()
            for t in parts[1:]:
                loss = loss + t.sum()
            return loss
        logits = parts[0]
        if kind == "cross_entropy":
            cdim = 1 if logits.dim() > 1 else 0
        elif logits.dim() >= 2:
            cdim = logits.dim() - 1
        else:
            raise ExportError("loss", "seq_cross_entropy wants logits "
                              "[B, T, V], got %s" % list(logits.shape))
        classes = logits.shape[cdim]
        n = num_classes or classes
        if n > classes:
            raise ExportError("loss", "num_classes %d is more than the %d "
                              "classes of the logits %s" % (
                                  n, classes, list(logits.shape)))
        shape = tuple(logits.shape[:cdim]) + tuple(logits.shape[cdim + 1:])
        with rec.untraced():
            gen = torch.Generator().manual_seed(0)
            labels = torch.randint(0, n, shape, generator=gen).to(
                logits.device)
        rec.register_static(labels, "labels", _numbering.KIND_INPUT)
        F = torch.nn.functional
        if kind == "cross_entropy":
            return F.cross_entropy(logits, labels)
        return F.cross_entropy(logits.reshape(-1, classes),
                               labels.reshape(-1))

    return builtin_loss, kind


# --- command line ---------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """Usage errors are one line too (exit status 1)."""

    def error(self, message):
        raise ExportError("", "%s (see %s --help)" % (message, self.prog))


def _load(spec, what):
    """MODULE:ATTR (imported, the working directory first on the path) or
    FILE.py:ATTR."""
    path, _, attr = spec.rpartition(":")
    try:
        if path.endswith(".py") or os.sep in path:
            name = os.path.splitext(os.path.basename(path))[0]
            mspec = importlib.util.spec_from_file_location(name, path)
            if mspec is None:
                raise ImportError("cannot load %s" % path)
            mod = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(mod)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            mod = importlib.import_module(path)
        obj = mod
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    except Exception as e:  # the user's module: report it in one line
        raise ExportError("%s %s" % (what, spec), one_line(e)) from e


def build_model(expr, torch, torchvision):
    """--model: MODULE:ATTR, FILE.py:ATTR, or a Python expression with
    torch, torchvision and nn imported; a no-argument callable is called."""
    if re.fullmatch(r"[\w./-]+:[\w.]+", expr):
        obj = _load(expr, "--model")
    else:
        env = {"torch": torch, "torchvision": torchvision, "nn": torch.nn}
        try:
            obj = eval(expr, env)  # noqa: S307 - the user's model expression
        except Exception as e:  # report the user's mistake in one line
            raise ExportError("--model %r" % expr, one_line(e)) from e
    if not isinstance(obj, torch.nn.Module) and callable(obj):
        try:
            obj = obj()
        except Exception as e:
            raise ExportError("--model %r" % expr, one_line(e)) from e
    if not isinstance(obj, torch.nn.Module):
        raise ExportError("--model %r" % expr, "did not give an nn.Module")
    return obj


def parse_shape(s):
    try:
        dims = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        dims = []
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError("want positive integers such as "
                                         "8,3,224,224, got %r" % s)
    return dims


def parse_input(spec):
    """[NAME=]D1,D2,...[:DTYPE[:HIGH]] -> (name or None, dims, dtype, high):
    a keyword input when NAME is given; integers in [0, HIGH)."""
    name, eq, rest = spec.partition("=")
    if not eq:
        name, rest = None, spec
    elif not name.isidentifier():
        raise argparse.ArgumentTypeError("bad input name in %r" % spec)
    parts = rest.split(":")
    if len(parts) > 3:
        raise argparse.ArgumentTypeError("want [NAME=]SHAPE[:DTYPE[:HIGH]],"
                                         " got %r" % spec)
    dims = parse_shape(parts[0])
    dtype = parts[1] if len(parts) > 1 else "float"
    if dtype not in _DTYPES:
        raise argparse.ArgumentTypeError("unknown dtype %r in %r (want %s)" % (
            dtype, spec, ", ".join(sorted(_DTYPES))))
    high = None
    if len(parts) > 2:
        try:
            high = int(parts[2])
        except ValueError:
            high = 0
        if high <= 0:
            raise argparse.ArgumentTypeError("bad HIGH in %r" % spec)
    return name, dims, dtype, high


def _make_input(torch, dims, dtype_name, high):
    dtype = getattr(torch, _DTYPES[dtype_name])
    if dtype.is_floating_point:
        return torch.randn(*dims, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(dims)).bool()
    return torch.randint(0, high, tuple(dims), dtype=dtype)


def _parser(prog):
    ap = _Parser(
        prog=prog,
        description="Trace one real PyTorch training step (CPU) into a "
                    "SlackSwap OperatorGraph.",
        epilog="Run under Debian's /usr/bin/python3 (python3-torch, "
               "python3-torchvision). See docs/workloads.md.")
    ap.add_argument("--model", required=True,
                    help="Python expression (torch, torchvision imported): a "
                         "no-argument callable or an nn.Module; or "
                         "MODULE:ATTR or FILE.py:ATTR")
    ap.add_argument("--input-shape", type=parse_shape,
                    help="the single input's shape, e.g. 8,3,224,224")
    ap.add_argument("--input-dtype", default="float", choices=sorted(_DTYPES),
                    help="--input-shape's dtype: floating ones torch.randn, "
                         "integers in [0, --input-high) (token ids)")
    ap.add_argument("--input-high", type=int, default=1000)
    ap.add_argument("--inputs", nargs="+", type=parse_input,
                    metavar="[NAME=]SHAPE[:DTYPE[:HIGH]]",
                    help="several inputs, in order; NAME= makes a keyword "
                         "input (e.g. 16,2,64 24,2,64 or 4,128:long:50257)")
    ap.add_argument("--dtype-bytes", type=int, default=2,
                    help="bytes per element of floating tensors in the graph "
                         "(default 2: bf16)")
    ap.add_argument("--dropout", default="native", choices=["native", "eager"],
                    help="native (default): dropout runs as torch.native_"
                         "dropout, one op keeping a bool mask, as on CUDA; "
                         "eager: torch 1.13's CPU path (bernoulli_ into a "
                         "float mask, then mul)")
    ap.add_argument("--loss", default="sum", choices=LOSSES,
                    help="sum (default); cross_entropy (classes on dim 1); "
                         "seq_cross_entropy (logits [B,T,V], labels [B,T])")
    ap.add_argument("--loss-fn", metavar="MODULE:FUNC",
                    help="a loss function, called as FUNC(output, *inputs, "
                         "**keyword_inputs); MODULE may be FILE.py")
    ap.add_argument("--num-classes", type=int, default=0,
                    help="cross-entropy labels in [0, N) (default: the "
                         "logits' class dimension)")
    ap.add_argument("--strip-checkpoint", action="store_true",
                    help="run torch.utils.checkpoint regions as plain code, "
                         "so that the planner decides from scratch")
    ap.add_argument("--name", default="", help="graph name")
    ap.add_argument("--trace-durations", metavar="FILE",
                    help="Chrome trace (torch.profiler export_chrome_trace) "
                         "of the same step: measured op durations")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--out", required=True,
                    help="output file: .json (proto3 JSON); .pb or .txtpb "
                         "with generated protobuf code")
    return ap


def _cli(args, tag):
    """Runs one export for main(); returns the summary line."""
    if (args.inputs is None) == (args.input_shape is None):
        raise ExportError("", "give exactly one of --input-shape and "
                          "--inputs")
    if args.dtype_bytes <= 0:
        raise ExportError("", "--dtype-bytes must be > 0")
    if args.loss_fn and args.loss != "sum":
        raise ExportError("", "give --loss or --loss-fn, not both")
    torch = _import_torch()
    try:
        import torchvision
    except ImportError:  # only --model expressions can use it
        torchvision = None
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    loss = _load(args.loss_fn, "--loss-fn") if args.loss_fn else args.loss
    specs = args.inputs or [(None, args.input_shape, args.input_dtype,
                             None)]
    torch.manual_seed(0)
    model = build_model(args.model, torch, torchvision)
    torch.manual_seed(0)
    positional, keywords = [], {}
    for name, dims, dtype, high in specs:
        t = _make_input(torch, dims, dtype, high or args.input_high)
        if name is None:
            positional.append(t)
        else:
            keywords[name] = t
    result = _run(model, tuple(positional), keywords, loss, args.dtype_bytes,
                  args.strip_checkpoint, args.dropout, args.num_classes,
                  args.name or re.sub(r"[^A-Za-z0-9_.-]+", "_",
                                      args.model.split("(")[0]),
                  args.trace_durations, 0, args.model)
    write(result.graph, args.out)
    if result.durations:
        print("%s: trace durations: matched %d of %d ops" % (
            (tag,) + result.durations), file=sys.stderr)
    for w in result.warnings:
        print("%s: warning: %s" % (tag, w), file=sys.stderr)
    return ("wrote %s: %d ops (%d forward), %d tensors, saved activations "
            "%d bytes in %d tensors" % (
                args.out, len(result.graph["ops"]), result.num_forward,
                len(result.graph["tensors"]), result.saved_bytes,
                result.saved_count))


def main(argv=None, prog="python3 -m slackswap.export",
         tag="slackswap.export"):
    """The command line. Every failure is one line on stderr, `TAG: part:
    what`, with exit status 1; warnings (the exporter's and torch's) are
    one line each."""
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            summary = _cli(_parser(prog).parse_args(argv), tag)
        except ExportError as e:
            error = str(e)
        except KeyboardInterrupt:
            error = "interrupted"
        except Exception as e:  # never a traceback: one line, status 1
            error = one_line(e)
    if error is not None:
        print("%s: %s" % (tag, error), file=sys.stderr)
        return 1
    seen = set()
    for w in caught:
        line = first_line(w.message)
        if (w.category, line) not in seen:
            seen.add((w.category, line))
            print("%s: %s: %s" % (tag, w.category.__name__, line),
                  file=sys.stderr)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
