#!/usr/bin/python3
"""Fits a hardware profile's efficiency tables to a measured training step.

  tools/fit_efficiencies.py --graph step.json --hardware a100-80gb-pcie4 \\
      --out calibrated.json [--name my-a100]

--graph is an OperatorGraph exported with measured durations
(tools/torch_export.py ... --trace-durations trace.json --out step.json):
its GEMMs and fused attention carry cost.shape and cost.duration_ns. Each
such op implies the efficiency at which the cost model (model/cost_model.h)
gives its measured time:

  compute_ns = duration_ns - kernels x kernel_launch_us x 1000
  efficiency = flops / (compute_ns x peak_tflops_bf16 x 1e3)
               (/ 0.8 for OP_KIND_BATCHED_MATMUL, kBatchedMatmulScale)

An op whose bytes alone take compute_ns or longer (bytes_accessed /
(hbm_gbps x hbm_efficiency), rounded up to whole nanoseconds as the model
rounds, >= compute_ns) is memory bound, and one with compute_ns <= 0 is all
launch: neither says anything about the efficiency, and both are skipped.
An efficiency above 1 is clamped to 1.

The points (docs/FIDELITY.md, "Calibration from your own measurements"):

* gemm_efficiency: the ops are binned by size (m x n x k)^(1/3) rounded to
  the nearest power of two in log2 (bin b holds sizes in
  [2^(b-1/2), 2^(b+1/2))); a point's size is the geometric mean of its
  ops' sizes, its efficiency the FLOP-weighted harmonic mean of theirs,
  sum(flops) / sum(flops / efficiency) (a batched GEMM's FLOPs / 0.8): the
  efficiency at which the bin's ops take their measured total time.
* attention_efficiency: one curve per (causal, head_dim = k), one point per
  sequence length n, fwd from PHASE_FORWARD ops and bwd from PHASE_BACKWARD
  ops, each weighted as above. A point measured in one phase only takes
  the other from the base profile (its tables at that point, as the cost
  model looks them up, else its constant). A curve with more than 64
  sequence lengths is binned like the GEMMs.

The output is the base profile with these curves in place of its own: the
base's attention curves for (causal, head_dim) pairs the graph has no data
for are kept, as is its gemm_efficiency when the graph has no GEMM data.
--hardware is a HardwareProfile file (.json with proto field names; .pb or
.txtpb with the generated protobuf modules) or a catalog name, read from
`slackswap list hardware --json`. --graph may be given several times (steps
at several sequence lengths or batch sizes); all their ops are pooled.

The report goes to stderr; failures are one line, `fit_efficiencies:
WHAT`, with exit status 1.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.normpath(os.path.join(_HERE, os.pardir))
TAG = "fit_efficiencies"

BATCHED_MATMUL_SCALE = 0.8  # model/cost_model.h, kBatchedMatmulScale
MAX_CURVES = 64             # model/efficiency.h, kMaxEfficiencyCurves
MAX_POINTS = 64             # model/efficiency.h, kMaxEfficiencyPoints

_KINDS = {0: "OP_KIND_UNSPECIFIED", 1: "OP_KIND_MEMORY_BOUND",
          2: "OP_KIND_MATMUL", 3: "OP_KIND_BATCHED_MATMUL",
          4: "OP_KIND_FLASH_ATTENTION"}
_PHASES = {0: "PHASE_UNSPECIFIED", 1: "PHASE_FORWARD", 2: "PHASE_BACKWARD",
           3: "PHASE_OPTIMIZER"}
_GEMM_KINDS = ("OP_KIND_MATMUL", "OP_KIND_BATCHED_MATMUL")
_ATTENTION = "OP_KIND_FLASH_ATTENTION"
_FORMATS = (".json", ".pb", ".txtpb")


class FitError(Exception):
    """A failure reported as one line, exit status 1."""


# --------------------------------------------------------------- reading


def _protos():
    """The generated modules (graph_pb2, hardware_pb2, ...), from an
    installed package, $SLACKSWAP_PROTO_PYTHON, the checkout's build/python,
    or protoc (python/slackswap/_protos.py)."""
    sys.path.insert(0, os.path.join(_ROOT, "python"))
    built = os.path.join(_ROOT, "build", "python")
    if not os.environ.get("SLACKSWAP_PROTO_PYTHON") and os.path.isdir(
            os.path.join(built, "slackswap", "v1")):
        os.environ["SLACKSWAP_PROTO_PYTHON"] = built
    try:
        from slackswap import _protos as protos
        return protos.load()
    except Exception as e:  # no protobuf runtime, no protoc, ...
        raise FitError(
            ".pb and .txtpb files need the generated protobuf modules "
            "(build the project, or set SLACKSWAP_PROTO_PYTHON); use the "
            ".json form instead (%s)" % str(e).splitlines()[0])


def _read_message(path, cls):
    """A .pb or .txtpb file as a dict in the proto3 JSON mapping."""
    from google.protobuf import json_format, text_format
    msg = cls()
    try:
        if path.endswith(".pb"):
            with open(path, "rb") as f:
                msg.ParseFromString(f.read())
        else:
            with open(path) as f:
                text_format.Parse(f.read(), msg)
    except OSError as e:
        raise FitError("%s: cannot read: %s" % (path, e.strerror or e))
    except Exception as e:  # DecodeError, ParseError
        raise FitError("%s: not a %s: %s" % (
            path, cls.DESCRIPTOR.name, str(e).splitlines()[0]))
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise FitError("%s: cannot read: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise FitError("%s: not JSON: %s" % (path, e))


def _format(path, flag):
    for ext in _FORMATS:
        if path.endswith(ext):
            return ext
    raise FitError("%s: %s wants a .json, .pb or .txtpb file" % (path, flag))


def read_graph(path):
    ext = _format(path, "--graph")
    if ext == ".json":
        graph = _read_json(path)
    else:
        graph = _read_message(path, _protos().graph_pb2.OperatorGraph)
    if not isinstance(graph, dict) or not isinstance(graph.get("ops", []),
                                                     list):
        raise FitError("%s: not an OperatorGraph (want an object with "
                       "\"ops\")" % path)
    return graph


def _snake(key):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def _profile_fields(profile, where):
    """profile with proto field names (a JSON file may use the
    lowerCamelCase JSON names, which parsers accept too)."""
    if not isinstance(profile, dict):
        raise FitError("%s: not a HardwareProfile object" % where)
    return {_snake(k): v for k, v in profile.items()}


def read_hardware(value, slackswap):
    """(profile dict, where it came from)."""
    if not value.endswith(_FORMATS):
        return catalog_profile(value, slackswap), "catalog"
    ext = _format(value, "--hardware")
    if ext == ".json":
        data = _read_json(value)
        if isinstance(data, dict) and isinstance(data.get("profiles"), list):
            # a ListHardwareProfilesResponse of one profile
            if len(data["profiles"]) != 1:
                raise FitError(
                    "%s: holds %d profiles; give one HardwareProfile, or "
                    "a catalog name" % (value, len(data["profiles"])))
            data = data["profiles"][0]
    else:
        data = _read_message(value, _protos().hardware_pb2.HardwareProfile)
    return _profile_fields(data, value), value


def catalog_profile(name, slackswap):
    cmd = [slackswap, "list", "hardware", "--json"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=120)
    except OSError as e:
        raise FitError("--hardware %s is a catalog name, and running %s "
                       "failed: %s (give --slackswap, or a profile file)" % (
                           name, slackswap, e.strerror or e))
    except subprocess.TimeoutExpired:
        raise FitError("%s did not answer in 120 s" % " ".join(cmd))
    if r.returncode != 0:
        raise FitError("%s failed (%d): %s" % (
            " ".join(cmd), r.returncode,
            (r.stderr or r.stdout).strip().splitlines()[-1:] or ""))
    try:
        profiles = json.loads(r.stdout)["profiles"]
    except (ValueError, KeyError, TypeError):
        raise FitError("%s did not print a ListHardwareProfilesResponse" %
                       " ".join(cmd))
    names = []
    for p in profiles:
        p = _profile_fields(p, " ".join(cmd))
        if p.get("name") == name:
            return p
        names.append(str(p.get("name")))
    raise FitError("--hardware %s: no such catalog profile (the catalog "
                   "has %s; or give a .json, .pb or .txtpb file)" % (
                       name, ", ".join(names)))


# ------------------------------------------------------ the base profile


def _number(profile, field, default=None):
    v = profile.get(field, default)
    try:
        v = float(v)
    except (TypeError, ValueError):
        v = float("nan")
    return v


def check_base(profile, where):
    for field in ("peak_tflops_bf16", "hbm_gbps", "hbm_efficiency"):
        v = _number(profile, field)
        if not (v > 0 and math.isfinite(v)):
            raise FitError("%s: %s must be > 0, got %s" % (
                where, field, profile.get(field)))
    v = _number(profile, "kernel_launch_us", 0)
    if not (v >= 0 and math.isfinite(v)):
        raise FitError("%s: kernel_launch_us must be >= 0, got %s" % (
            where, profile.get("kernel_launch_us")))


def interpolate_log2(xs, ys, x):
    """ys at x, linear in log2(x) between points, clamped outside
    (model/efficiency.cc, InterpolateLog2)."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    hi = next(i for i, p in enumerate(xs) if x < p)
    lo = hi - 1
    t = (math.log2(x) - math.log2(xs[lo])) / (math.log2(xs[hi]) -
                                              math.log2(xs[lo]))
    return ys[lo] + t * (ys[hi] - ys[lo])


def _curve(c):
    """An attention curve dict with numbers, not strings."""
    return {"causal": bool(c.get("causal", False)),
            "head_dim": int(c.get("head_dim", c.get("headDim", 0))),
            "seq_len": [int(s) for s in c.get("seq_len",
                                              c.get("seqLen", []))],
            "fwd": [float(v) for v in c.get("fwd", [])],
            "bwd": [float(v) for v in c.get("bwd", [])]}


def base_attention(profile, causal, head_dim, seq_len, phase):
    """(efficiency, where from) as the cost model gives it on the base
    profile (model/efficiency.cc, AttentionEfficiency)."""
    field = "bwd" if phase == "bwd" else "fwd"
    constant = _number(profile, "attn_efficiency_" + field)
    curves = [_curve(c) for c in profile.get("attention_efficiency") or []]
    curves = [c for c in curves if c["causal"] == causal and c["seq_len"]
              and len(c[field]) == len(c["seq_len"])]
    if not curves:
        return constant, "the base profile's attn_efficiency_" + field
    below = max((c for c in curves if c["head_dim"] <= head_dim),
                key=lambda c: c["head_dim"], default=None)
    above = min((c for c in curves if c["head_dim"] >= head_dim),
                key=lambda c: c["head_dim"], default=None)
    below = below or above
    above = above or below
    lo = interpolate_log2(below["seq_len"], below[field], seq_len)
    where = "the base profile's table"
    if below is above:
        return lo, where
    hi = interpolate_log2(above["seq_len"], above[field], seq_len)
    t = (math.log2(head_dim) - math.log2(below["head_dim"])) / (
        math.log2(above["head_dim"]) - math.log2(below["head_dim"]))
    return lo + t * (hi - lo), where


# ------------------------------------------------------------ measuring


def _enum(value, names):
    if isinstance(value, int):
        return names.get(value, str(value))
    return value or names[0]


class Sample(object):
    """One op's measured efficiency: weight w (its FLOPs, a batched GEMM's
    / 0.8) over compute time; efficiency = w / (compute_ns x peak)."""

    def __init__(self, coord, weight, eff):
        self.coord = coord
        self.weight = weight
        self.eff = eff


class Counts(object):
    def __init__(self):
        self.measured = 0        # ops with duration_ns
        self.unshaped = 0        # GEMM/attention ops measured, no shape
        self.shaped = 0          # GEMM/attention ops measured, with shape
        self.memory_bound = 0
        self.launch_bound = 0
        self.no_flops = 0
        self.unknown_phase = 0
        self.clamped = 0


def measure(graphs, profile):
    """(gemm samples, {(causal, head_dim): {"fwd": [...], "bwd": [...]}},
    Counts) of the graphs' measured, shaped compute ops."""
    peak = _number(profile, "peak_tflops_bf16") * 1e3  # FLOP per ns
    hbm = _number(profile, "hbm_gbps") * _number(profile, "hbm_efficiency")
    # The model rounds the launch to whole nanoseconds (io/convert.cc).
    launch_ns = int(round(_number(profile, "kernel_launch_us", 0) * 1e3))
    gemm, attention, n = [], {}, Counts()
    for path, graph in graphs:
        for i, op in enumerate(graph.get("ops") or []):
            if not isinstance(op, dict) or op.get("collective"):
                continue
            cost = op.get("cost") or {}
            if cost.get("duration_ns") is None:
                continue
            n.measured += 1
            kind = _enum(cost.get("kind"), _KINDS)
            if kind not in _GEMM_KINDS and kind != _ATTENTION:
                continue
            shape = cost.get("shape")
            if not isinstance(shape, dict):
                n.unshaped += 1
                continue
            label = "%s: op %s (%s)" % (path, op.get("id", i),
                                        op.get("name", ""))
            try:
                m, nn, k = (int(shape.get(d, 0)) for d in ("m", "n", "k"))
                duration = int(cost["duration_ns"])
                flops = float(cost.get("flops", 0))
                nbytes = int(cost.get("bytes_accessed", 0))
                kernels = int(cost.get("kernels", 1))
            except (TypeError, ValueError) as e:
                raise FitError("%s: cost is not numbers: %s" % (label, e))
            # What the model needs (model/graph.cc, CheckKernelShape):
            # attention's m (the queries) is informational.
            if nn <= 0 or k <= 0 or (kind != _ATTENTION and m <= 0):
                raise FitError("%s: cost.shape needs %s > 0, got m=%d n=%d "
                               "k=%d" % (label, "n and k" if kind ==
                                         _ATTENTION else "m, n and k", m,
                                         nn, k))
            n.shaped += 1
            if not flops > 0:
                n.no_flops += 1
                continue
            compute_ns = duration - kernels * launch_ns
            if compute_ns <= 0:
                n.launch_bound += 1
                continue
            # Memory bound: the bytes take as long (rounded up to whole
            # nanoseconds, as the model rounds).
            if math.ceil(nbytes / hbm * (1.0 - 1e-12)) >= compute_ns:
                n.memory_bound += 1
                continue
            weight = flops
            if kind == "OP_KIND_BATCHED_MATMUL":
                weight = flops / BATCHED_MATMUL_SCALE
            eff = weight / (compute_ns * peak)
            if eff > 1:
                eff = 1.0
                n.clamped += 1
            if kind == _ATTENTION:
                phase = _enum(op.get("phase"), _PHASES)
                if phase not in ("PHASE_FORWARD", "PHASE_BACKWARD"):
                    n.unknown_phase += 1
                    continue
                key = (bool(shape.get("causal", False)), k)
                which = "fwd" if phase == "PHASE_FORWARD" else "bwd"
                attention.setdefault(key, {"fwd": [], "bwd": []})[
                    which].append(Sample(nn, weight, eff))
            else:
                size = (float(m) * float(nn) * float(k)) ** (1.0 / 3.0)
                gemm.append(Sample(size, weight, eff))
    return gemm, attention, n


# -------------------------------------------------------------- fitting


def harmonic(samples):
    """The efficiency at which the samples take their total time:
    sum(w) / sum(w / eff)."""
    return sum(s.weight for s in samples) / sum(s.weight / s.eff
                                                 for s in samples)


def _log2_bin(x):
    """The nearest power of two's exponent, in log2: floor(log2 x + 1/2)."""
    return int(math.floor(math.log2(x) + 0.5))


def bin_log2(samples):
    """[(point, samples)], sorted, points strictly increasing ints: the
    samples binned by their coordinate's nearest power of two (in log2),
    each point the geometric mean of its samples' coordinates. Bins whose
    points round to the same integer are merged."""
    bins = {}
    for s in samples:
        bins.setdefault(_log2_bin(s.coord), []).append(s)
    out = []
    for b in sorted(bins):
        group = bins[b]
        point = _geomean(group)
        while out and point <= out[-1][0]:
            group = out.pop()[1] + group
            point = _geomean(group)
        out.append((point, group))
    return out


def _geomean(samples):
    mean = sum(math.log(s.coord) for s in samples) / len(samples)
    return max(1, int(round(math.exp(mean))))


def fit_gemm(samples):
    return [(size, harmonic(group), len(group))
            for size, group in bin_log2(samples)]


def fit_attention(key, phases, profile, notes):
    """One curve for (causal, head_dim) = key: (curve dict, point lines)."""
    causal, head_dim = key
    by_len = {}
    for which in ("fwd", "bwd"):
        for s in phases[which]:
            by_len.setdefault(s.coord, {"fwd": [], "bwd": []})[which].append(
                s)
    lens = sorted(by_len)
    if len(lens) > MAX_POINTS:
        notes.append("attention_efficiency %s: %d sequence lengths, more "
                     "than %d points: binned to the nearest power of two" % (
                         _curve_name(causal, head_dim), len(lens),
                         MAX_POINTS))
        merged = {}
        everything = [s for v in by_len.values() for w in ("fwd", "bwd")
                      for s in v[w]]
        for point, group in bin_log2(everything):
            ids = set(id(s) for s in group)
            merged[point] = {w: [s for v in by_len.values() for s in v[w]
                                 if id(s) in ids] for w in ("fwd", "bwd")}
        by_len = merged
        lens = sorted(by_len)
    curve = {"causal": causal, "head_dim": head_dim, "seq_len": [],
             "fwd": [], "bwd": []}
    lines = []
    for seq in lens:
        curve["seq_len"].append(str(seq))
        parts = []
        for which in ("fwd", "bwd"):
            group = by_len[seq][which]
            if group:
                value = harmonic(group)
                parts.append("%s %.6f (%s)" % (
                    which, value, _plural(len(group), "op")))
            else:
                value, where = base_attention(profile, causal, head_dim, seq,
                                              which)
                parts.append("%s %.6f (not measured: from %s)" % (
                    which, value, where))
            curve[which].append(value)
        lines.append("    seq_len %d: %s" % (seq, ", ".join(parts)))
    return curve, lines


def _plural(count, noun):
    return "%d %s%s" % (count, noun, "" if count == 1 else "s")


def _curve_name(causal, head_dim):
    return "%s head_dim %d" % ("causal" if causal else "non-causal",
                               head_dim)


def calibrate(profile, gemm, attention, name):
    """(calibrated profile, report lines)."""
    out = dict(profile)
    lines, notes = [], []
    if gemm:
        points = fit_gemm(gemm)
        out["gemm_efficiency"] = {
            "size": [str(size) for size, _, _ in points],
            "efficiency": [eff for _, eff, _ in points]}
        lines.append("gemm_efficiency: %s, %s" % (
            _plural(len(gemm), "op"), _plural(len(points), "point")))
        for size, eff, count in points:
            lines.append("    size %d: %.6f (%s)" % (
                size, eff, _plural(count, "op")))
    elif profile.get("gemm_efficiency"):
        lines.append("gemm_efficiency: no GEMM measured; the base "
                     "profile's kept")
    else:
        lines.append("gemm_efficiency: no GEMM measured; none (the base "
                     "profile's matmul_efficiency costs GEMMs)")
    fitted = {}
    for key in sorted(attention):
        curve, point_lines = fit_attention(key, attention[key], profile,
                                           notes)
        fitted[key] = curve
        lines.append("attention_efficiency %s: %d fwd ops, %d bwd ops, %s"
                     % (_curve_name(*key), len(attention[key]["fwd"]),
                        len(attention[key]["bwd"]),
                        _plural(len(curve["seq_len"]), "point")))
        lines.extend(point_lines)
    curves = []
    for c in profile.get("attention_efficiency") or []:
        base = _curve(c)
        key = (base["causal"], base["head_dim"])
        if key in fitted:
            continue
        curves.append(c)
        if attention:
            lines.append("attention_efficiency %s: not measured; the base "
                         "profile's kept" % _curve_name(*key))
    curves.extend(fitted[k] for k in sorted(fitted))
    if fitted and not profile.get("attention_efficiency"):
        # The base costs attention of either mask by its constants; a
        # table without a curve of some mask refuses that mask's attention
        # (model/efficiency.cc), so the constants become a one-point curve.
        for causal in (False, True):
            if any(k[0] == causal for k in fitted):
                continue
            fwd = _number(profile, "attn_efficiency_fwd")
            bwd = _number(profile, "attn_efficiency_bwd")
            if not (0 < fwd <= 1 and 0 < bwd <= 1):
                lines.append("attention_efficiency: no %s curve (the base "
                             "profile's constants are not in (0, 1])" % (
                                 "causal" if causal else "non-causal"))
                continue
            like = fitted[sorted(fitted)[0]]
            curves.append({"causal": causal, "head_dim": like["head_dim"],
                           "seq_len": [like["seq_len"][0]], "fwd": [fwd],
                           "bwd": [bwd]})
            lines.append("attention_efficiency %s: not measured; a "
                         "one-point curve of the base profile's constants "
                         "(fwd %.6f, bwd %.6f), as it costed them" % (
                             "causal" if causal else "non-causal", fwd,
                             bwd))
    curves.sort(key=lambda c: (bool(c.get("causal", False)),
                               int(c.get("head_dim", 0))))
    if len(curves) > MAX_CURVES:
        raise FitError("the calibrated profile would have %d attention "
                       "curves; at most %d (model/efficiency.h)" % (
                           len(curves), MAX_CURVES))
    if curves:
        out["attention_efficiency"] = curves
    else:
        out.pop("attention_efficiency", None)
    if not attention:
        lines.append("attention_efficiency: no fused attention measured; "
                     "the base profile's kept")
    out["name"] = name
    return out, notes + lines


# ---------------------------------------------------------------- output


def write_profile(profile, path):
    ext = _format(path, "--out")
    try:
        if ext == ".json":
            text = json.dumps(profile, indent=1) + "\n"
            with open(path, "w") as f:
                f.write(text)
            return
        from google.protobuf import json_format, text_format
        msg = json_format.ParseDict(profile,
                                    _protos().hardware_pb2.HardwareProfile())
        if ext == ".pb":
            with open(path, "wb") as f:
                f.write(msg.SerializeToString(deterministic=True))
        else:
            with open(path, "w") as f:
                f.write(text_format.MessageToString(msg))
    except OSError as e:
        raise FitError("%s: cannot write: %s" % (path, e.strerror or e))


def parser():
    ap = argparse.ArgumentParser(
        prog="fit_efficiencies.py",
        description="Fits a hardware profile's gemm_efficiency and "
                    "attention_efficiency tables to the measured durations "
                    "of an exported step (docs/FIDELITY.md, \"Calibration "
                    "from your own measurements\").")
    ap.add_argument("--graph", required=True, action="append",
                    metavar="FILE",
                    help="an OperatorGraph (.json, .pb, .txtpb) exported "
                         "with --trace-durations; may be repeated")
    ap.add_argument("--hardware", required=True, metavar="NAME|FILE",
                    help="the base profile: a HardwareProfile file (.json "
                         "with proto field names, .pb, .txtpb) or a catalog "
                         "name")
    ap.add_argument("--out", required=True, metavar="FILE",
                    help="the calibrated profile: .json (proto field "
                         "names), .pb or .txtpb")
    ap.add_argument("--name", default="",
                    help="its name (default: BASE-calibrated)")
    ap.add_argument("--slackswap", metavar="PATH",
                    default=os.path.join(_ROOT, "build", "cli", "slackswap"),
                    help="the slackswap binary that lists the catalog "
                         "(default: build/cli/slackswap of this checkout)")
    return ap


def run(args):
    graphs = [(path, read_graph(path)) for path in args.graph]
    profile, where = read_hardware(args.hardware, args.slackswap)
    check_base(profile, where)
    gemm, attention, n = measure(graphs, profile)
    paths = ", ".join(args.graph)
    if n.measured == 0:
        raise FitError(
            "%s: no op has a measured duration (cost.duration_ns); export "
            "with --trace-durations TRACE (docs/workloads.md, \"Measured "
            "durations\")" % paths)
    if n.shaped == 0:
        raise FitError(
            "%s: no measured GEMM or fused attention carries cost.shape "
            "(%d ops measured, %d of them GEMMs or attention without a "
            "shape): export with --trace-durations and a version of the "
            "exporter that writes cost.shape" % (paths, n.measured,
                                                  n.unshaped))
    if not gemm and not attention:
        raise FitError(
            "%s: none of the %d measured GEMMs and fused attention ops "
            "determines an efficiency (%d memory bound, %d no longer than "
            "their launches, %d without FLOPs, %d attention outside forward "
            "and backward)" % (paths, n.shaped, n.memory_bound,
                               n.launch_bound, n.no_flops, n.unknown_phase))
    base_name = str(profile.get("name") or "hardware")
    name = args.name or base_name + "-calibrated"
    out, lines = calibrate(profile, gemm, attention, name)
    used = len(gemm) + sum(len(v["fwd"]) + len(v["bwd"])
                           for v in attention.values())
    skipped = n.shaped - used
    report = [
        "%s: base %s (%s); %d ops measured, %d GEMM or attention with a "
        "shape: %d used, %d skipped (%d memory bound, %d no longer than "
        "their launches, %d without FLOPs, %d attention outside forward and "
        "backward), %d clamped to efficiency 1; %d GEMM or attention "
        "without a shape" % (
            TAG, base_name, where, n.measured, n.shaped, used, skipped,
            n.memory_bound, n.launch_bound, n.no_flops, n.unknown_phase,
            n.clamped, n.unshaped)]
    report += ["  " + line for line in lines]
    write_profile(out, args.out)
    report.append("%s: wrote %s: hardware \"%s\"" % (TAG, args.out, name))
    sys.stderr.write("\n".join(report) + "\n")


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        run(args)
    except FitError as e:
        sys.stderr.write("%s: %s\n" % (TAG, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
