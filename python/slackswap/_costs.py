"""The exporter's cost model: FLOPs, bytes and kernels of each recorded op.

Costs come from tensor shapes (docs/workloads.md, "What the graph holds"):
GEMMs and convolutions are OP_KIND_MATMUL, batched GEMMs
OP_KIND_BATCHED_MATMUL, fused attention OP_KIND_FLASH_ATTENTION, and their
backward costs one such GEMM per gradient computed. Everything else is
memory bound: a few FLOPs per element and the bytes it reads and writes.
A GEMM's cost also carries its `shape` {m, n, k, causal} (one matrix of a
batched GEMM; a convolution's implicit GEMM), fused attention's the
queries m, keys n and head dimension k of one sequence and whether it is
causal (a causal kernel's FLOPs are counted halved, as the graph counts
them); a backward cost carries its forward's shape, and an op whose shape
is not known carries none.

The functions take `nbytes(t)` (bytes of t's elements at the graph's
dtype) and `numel(t)` (elements t really holds: a sparse tensor's values)
from the recorder, so that this module knows nothing of storages.
"""

import functools
import re

import torch


def canon(aten_name):
    """The op name without a trailing `_`: `silu_` costs what `silu` does,
    and a composite may pick either form."""
    return aten_name[:-1] if aten_name.endswith("_") else aten_name


def node_base(name):
    """An autograd node type without its version digit (MmBackward0)."""
    return re.sub(r"\d+$", "", name)


# Per-element FLOPs of memory-bound forward ops, by canonical aten name.
_FWD_FLOPS_PER_ELEM = {
    "native_layer_norm": 8, "native_batch_norm": 8,
    "_native_batch_norm_legit": 8, "native_group_norm": 8,
    "_softmax": 5, "_log_softmax": 5, "gelu": 8, "silu": 5, "tanh": 4,
    "sigmoid": 4, "erf": 4, "exp": 1, "log": 1, "mean": 1, "sum": 1,
    "clone": 0, "copy": 0, "_to_copy": 0, "cat": 0, "stack": 0,
    "index_select": 0, "embedding": 0, "gather": 0, "zero": 0, "fill": 0,
    "zeros": 0, "zeros_like": 0, "ones": 0, "ones_like": 0, "full": 0,
    "full_like": 0, "arange": 0, "constant_pad_nd": 0,
}
# Ops that only allocate: no kernel, no bytes.
ALLOC_ONLY = {"empty", "empty_like", "empty_strided", "new_empty",
              "new_empty_strided", "new_zeros"}
# aten ops as the dispatch mode sees them in torch 1.13: composite ops
# (matmul, linear, conv1d/2d/3d, _convolution) have decomposed into these.
_MATMUL_OPS = {"mm", "addmm"}
_BMM_OPS = {"bmm", "baddbmm"}
_CONV_OPS = {"convolution", "mkldnn_convolution",
             "cudnn_convolution", "cudnn_convolution_transpose",
             "slow_conv2d_forward", "_slow_conv2d_forward",
             "thnn_conv2d"}
_ATTN_OPS = {"_scaled_dot_product_attention",
             "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_efficient_attention",
             "scaled_dot_product_attention",
             "_efficient_attention_forward", "_flash_attention_forward"}
# Of those, the ones without query [..., Lq, D] and key [..., Lk, D]
# (theirs are [B, L, H, D]): no shape.
_ATTN_OTHER_LAYOUT = {"_efficient_attention_forward",
                      "_flash_attention_forward"}
# Per-element FLOPs of memory-bound backward nodes, by node_base().
_BWD_FLOPS_PER_ELEM = {
    "NativeLayerNormBackward": 12, "NativeBatchNormBackward": 12,
    "NativeGroupNormBackward": 12, "SoftmaxBackward": 4,
    "LogSoftmaxBackward": 4, "GeluBackward": 8, "SiluBackward": 5,
    "TanhBackward": 3, "SigmoidBackward": 3,
}
_FLASH_BWD_FACTOR = 2.5  # FlashAttention-2 backward recomputes S = QK^T

MEMORY_BOUND = "OP_KIND_MEMORY_BOUND"
_MAX_DIM = 2**31 - 1  # a shape's dimensions fit an int32 (io/convert.cc)


def _empty_cost():
    return {"kind": MEMORY_BOUND, "flops": 0.0, "bytes_accessed": 0,
            "kernels": 1}


def add_cost(dst, src):
    """Adds src into dst (an in-place op folded into its producer). The
    sum keeps a shape its GEMM or attention parts all agree on."""
    dst["flops"] += src["flops"]
    dst["bytes_accessed"] += src["bytes_accessed"]
    dst["kernels"] += src["kernels"]
    if src["kind"] != MEMORY_BOUND:
        agree = (dst["kind"] == MEMORY_BOUND or
                 (dst["kind"] == src["kind"] and
                  dst.get("shape") == src.get("shape")))
        dst["kind"] = src["kind"]
        dst.pop("shape", None)
        if agree and src.get("shape") is not None:
            dst["shape"] = dict(src["shape"])


def _gemm_shape(m, n, k):
    """The shape of a GEMM [m, k] x [k, n]; None unless every dimension is
    in [1, 2^31)."""
    m, n, k = int(m), int(n), int(k)
    if not all(0 < d <= _MAX_DIM for d in (m, n, k)):
        return None
    return {"m": m, "n": n, "k": k, "causal": False}


def _halve_if_causal(cost):
    """A causal kernel skips the masked half of its tiles: the graph counts
    its FLOPs halved (as model/transformer.cc and the FlashAttention
    benchmarks the efficiency tables come from do)."""
    shape = cost.get("shape")
    if shape is not None and shape.get("causal"):
        cost["flops"] /= 2


def _attention_shape(q, k, causal):
    """The shape of fused attention on query [..., Lq, D] and key
    [..., Lk, D]: m = Lq, n = Lk, k = D; None when causal is unknown."""
    if causal is None or q.dim() < 2 or k.dim() < 2:
        return None
    shape = _gemm_shape(q.shape[-2], k.shape[-2], q.shape[-1])
    if shape is not None:
        shape["causal"] = bool(causal)
    return shape


def _conv_shape(x, w, y, transposed):
    """A convolution's implicit GEMM, of the volume its FLOPs count: m =
    batch x output positions, n = output channels, k = input channels per
    group x kernel elements (w [Cout, Cin/groups, kernel...]; y the
    output). A transposed one (w [Cin, Cout/groups, kernel...]) as the data
    gradient it is: m = batch x input positions, n = output channels per
    group x kernel elements, k = input channels."""
    if w.dim() < 2 or w.shape[0] == 0:
        return None
    per = w.numel() // w.shape[0]
    if transposed:
        return _gemm_shape(x.numel() // w.shape[0], per, w.shape[0])
    return _gemm_shape(y.numel() // w.shape[0], w.shape[0], per)


def _set_shape(cost, shape):
    if shape is not None:
        cost["shape"] = shape


@functools.lru_cache(maxsize=None)
def _causal_arg(name):
    """(position, default) of aten::name's is_causal argument, None when it
    has none. Read off the schema: the position differs between the SDPA
    ops and between torch versions."""
    try:
        packet = getattr(torch.ops.aten, name)
        overloads = packet.overloads()
        schema = getattr(packet, "default" if "default" in overloads
                         else overloads[0])._schema
    except (AttributeError, IndexError, RuntimeError):
        return None
    for i, a in enumerate(schema.arguments):
        if a.name == "is_causal" and not a.kwarg_only:
            return i, bool(a.default_value)
    return None


def _is_causal(name, args):
    """The is_causal argument of the attention op `name`, None when unknown.
    It is positional in every SDPA op's schema, and __torch_dispatch__
    gets positional arguments in args, less trailing ones left at their
    default."""
    found = _causal_arg(name)
    if found is None:
        return None
    i, default = found
    return bool(args[i]) if len(args) > i else default


def forward_cost(name, args, ins, outs, nbytes, numel):
    """Cost of the aten op `name` (also a recompute in backward)."""
    cost = _empty_cost()
    if name in ALLOC_ONLY:
        cost["kernels"] = 0
        return cost
    cost["bytes_accessed"] = (sum(nbytes(t) for t in ins) +
                              sum(nbytes(t) for t in outs))
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    out0 = outs[0] if outs else None
    if name in _MATMUL_OPS and out0 is not None and len(tensors) >= 2:
        k = tensors[-2].shape[-1]
        cost["kind"] = "OP_KIND_MATMUL"
        cost["flops"] = 2.0 * out0.numel() * k
        if name == "addmm":
            cost["flops"] += out0.numel()
        _set_shape(cost, _gemm_shape(out0.shape[-2], out0.shape[-1], k))
    elif name in _BMM_OPS and out0 is not None and len(tensors) >= 2:
        k = tensors[-2].shape[-1]
        cost["kind"] = "OP_KIND_BATCHED_MATMUL"
        cost["flops"] = 2.0 * out0.numel() * k
        if name == "baddbmm":
            cost["flops"] += out0.numel()
        _set_shape(cost, _gemm_shape(out0.shape[-2], out0.shape[-1], k))
    elif name in _CONV_OPS and out0 is not None and len(tensors) >= 2:
        x, w = tensors[0], tensors[1]
        transposed = len(args) > 6 and args[6] is True
        per = w.numel() / w.shape[0]
        cost["kind"] = "OP_KIND_MATMUL"
        cost["flops"] = 2.0 * (x.numel() if transposed else
                               out0.numel()) * per
        _set_shape(cost, _conv_shape(x, w, out0, transposed))
    elif name in _ATTN_OPS and len(tensors) >= 3:
        q, k, v = tensors[0], tensors[1], tensors[2]
        # The sequence is dim -2 of SDPA's [B, H, L, D] and dim -3 of the
        # memory-efficient and flash kernels' own [B, L, H, D].
        seq = -3 if name in _ATTN_OTHER_LAYOUT and q.dim() >= 3 else -2
        batch = q.numel() // (q.shape[-1] * q.shape[seq])
        cost["kind"] = "OP_KIND_FLASH_ATTENTION"
        cost["flops"] = 2.0 * batch * q.shape[seq] * k.shape[seq] * (
            q.shape[-1] + v.shape[-1])
        if name not in _ATTN_OTHER_LAYOUT:
            _set_shape(cost, _attention_shape(q, k, _is_causal(name, args)))
        _halve_if_causal(cost)
    else:
        elems = max([numel(t) for t in outs] + [0])
        cost["flops"] = float(_FWD_FLOPS_PER_ELEM.get(canon(name), 1) *
                              elems)
    return cost


def backward_cost(node, nodename, gi, go, saved, nbytes, numel, key):
    """Cost of running autograd node `node`: gi are the gradients it made
    (grad_inputs), go the gradients it received, saved what it unpacked;
    `key(t)` identifies t's storage."""
    base = node_base(nodename)
    cost = _empty_cost()
    gos = [g for g in go if g is not None]
    gis = [g for g in gi if g is not None]
    saved = [t for t in saved if t is not None]
    g0 = gos[0] if gos else None
    if base in ("MmBackward", "AddmmBackward", "BmmBackward",
                "BaddbmmBackward") and g0 is not None:
        # Gradients of the two GEMM operands: the last two of gi.
        operands = list(gi[-2:]) if len(gi) >= 2 else []
        k = None
        for j, t in enumerate(operands):
            if t is not None:
                k = t.shape[-1] if j == 0 else t.shape[-2]
        if k is None:
            k = saved[0].shape[-1] if saved else 0
        gemms = sum(1 for t in operands if t is not None)
        cost["kind"] = ("OP_KIND_BATCHED_MATMUL"
                        if base.startswith(("Bmm", "Baddbmm"))
                        else "OP_KIND_MATMUL")
        cost["flops"] = 2.0 * g0.numel() * k * gemms
        cost["kernels"] = max(1, gemms)
        if gemms and g0.dim() >= 2:  # the forward's [m, k] x [k, n]
            _set_shape(cost, _gemm_shape(g0.shape[-2], g0.shape[-1], k))
        cost["bytes_accessed"] = gemms * (
            nbytes(g0) + sum(nbytes(t) for t in operands if t is not None))
        cost["bytes_accessed"] += sum(nbytes(t) for t in saved)
        return cost
    if base == "ConvolutionBackward" and g0 is not None:
        weight = gi[1] if len(gi) > 1 and gi[1] is not None else None
        if weight is None:
            cand = [t for t in saved if t.dim() == g0.dim() and
                    t.shape[0] == g0.shape[1]]
            weight = cand[0] if cand else None
        transposed = bool(getattr(node, "_saved_transposed", False))
        per = weight.numel() / weight.shape[0] if weight is not None else 1
        x = gi[0] if gi and gi[0] is not None else None
        if transposed and x is None:
            cand = [t for t in saved if t.dim() == g0.dim() and
                    t is not weight]
            x = cand[0] if cand else g0
        gemms = sum(1 for t in gi[:2] if t is not None)
        cost["kind"] = "OP_KIND_MATMUL"
        cost["flops"] = 2.0 * (x.numel() if transposed else g0.numel()) \
            * per * gemms
        if gemms and weight is not None and not (transposed and x is g0):
            _set_shape(cost, _conv_shape(x, weight, g0, transposed))
        cost["kernels"] = max(1, gemms) + (
            1 if len(gi) > 2 and gi[2] is not None else 0)
        cost["bytes_accessed"] = (gemms * nbytes(g0) +
                                  sum(nbytes(t) for t in gis) +
                                  sum(nbytes(t) for t in saved))
        return cost
    if "ScaledDotProduct" in base or "AttentionBackward" in base:
        q, k, v = (gis + saved + [None] * 3)[:3]
        if q is not None and k is not None and v is not None:
            batch = q.numel() // (q.shape[-1] * q.shape[-2])
            fwd = 2.0 * batch * q.shape[-2] * k.shape[-2] * (
                q.shape[-1] + v.shape[-1])
            cost["kind"] = "OP_KIND_FLASH_ATTENTION"
            cost["flops"] = _FLASH_BWD_FACTOR * fwd
            # The forward's shape, from the query and key gradients (the
            # node's first two); SDPA's nodes keep is_causal.
            dq, dk = (list(gi) + [None, None])[:2]
            if (base.startswith("ScaledDotProduct") and dq is not None and
                    dk is not None):
                _set_shape(cost, _attention_shape(
                    dq, dk, getattr(node, "_saved_is_causal", None)))
            _halve_if_causal(cost)
    elems = max([numel(t) for t in gis + gos] + [0])
    if cost["flops"] == 0:
        cost["flops"] = float(_BWD_FLOPS_PER_ELEM.get(base, 1) * elems)
    new_keys = {key(t) for t in gis}
    cost["bytes_accessed"] = (
        sum(nbytes(t) for t in dedup(gos, key)) +
        sum(nbytes(t) for t in dedup(gis, key)) +
        sum(nbytes(t) for t in dedup(saved, key) if key(t) not in new_keys))
    return cost


def copy_cost(nbytes):
    """A copy of nbytes bytes: read once, written once."""
    cost = _empty_cost()
    cost["bytes_accessed"] = 2 * nbytes
    return cost


def accumulate_cost(n_inputs, numel, nbytes):
    """The engine summing n_inputs gradients of `numel` elements."""
    cost = _empty_cost()
    cost["flops"] = float(numel * max(1, n_inputs - 1))
    cost["bytes_accessed"] = (n_inputs + 1) * nbytes
    cost["kernels"] = max(1, n_inputs - 1)
    return cost


def dedup(ts, key):
    """ts without repeats of a key(t), in order."""
    seen = set()
    out = []
    for t in ts:
        k = key(t)
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out
