"""The numbering contract between the recorder and the runtime.

The exporter writes a graph from one recorded training step
(slackswap._recorder.Recorder); the runtime that applies a plan
(slackswap._runtime.Runtime) records the same step again with the same
Recorder and finds each graph tensor and op by the number the exporter
gave it. These are the rules it relies on; the names below are what both
sides use to keep them (neither reaches into the other's private names).

1. One graph tensor per storage: a tensor is known by its StorageImpl
   (`storage_key`; a sparse COO tensor by its values'), and what the
   runtime holds for a graph tensor is that whole storage (`flat`).
2. Tensor ids count up in order of first appearance. The step's statics
   come first: the parameters (named_parameters() order), the buffers
   (named_buffers()), then the inputs (`input`, or `input0`, `input1`...
   and `input.NAME` for keyword arguments, `.J` added for the J-th tensor
   of a nested one). Then each op's outputs as it runs, and a constant or
   an incoming gradient when it is first read. The runtime checks the
   statics against the graph's tensors of the same ids.
3. Op ids count up in launch order: the forward ops (each aten call below
   autograd that makes a storage or writes one, from the model call up to
   backward(), the loss's included), then the backward ops in the order
   the engine runs them. Both dispatch modes answer the same calls alike
   (`detached_number`) and agree on what a call writes
   (`written_tensors`).
4. An in-place call that writes only activations one op made, which
   nothing has read since, is folded into that op: it gets no id of its
   own, and the recorder says so (`Recorded.folded`).
5. A forward op is named by module path and aten name, `+aten` for each
   call folded into it, `#k` for the k-th later op of that name. A
   backward op is named by module path and autograd node type
   (`base_name`), then `#k` in the order the forward pass made the nodes,
   which is known only once the step has ended (`unnumbered` compares
   names before that); names made from a backward op's name
   (`BackwardName`) follow it.
6. A saved activation is found by the forward op that made it and its
   output slot: there the runtime maps its own tensor ids to the graph's.
"""

import re

import torch

KIND_ACT = "TENSOR_KIND_ACTIVATION"
KIND_PARAM = "TENSOR_KIND_PARAMETER"
KIND_GRAD = "TENSOR_KIND_GRADIENT"
KIND_INPUT = "TENSOR_KIND_INPUT"
FORWARD = "PHASE_FORWARD"
BACKWARD = "PHASE_BACKWARD"


class Unsupported(Exception):
    """A construct the recorder refuses; the step's error names the part."""


def flatten_tensors(obj):
    """The tensors in obj (nested lists, tuples, dicts), in order."""
    out = []
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
    return out


def storage(t):
    """The storage that identifies t: a sparse COO tensor by its values."""
    if t.layout == torch.strided:
        return t.storage()
    if t.layout == torch.sparse_coo:
        return t._values().storage()
    raise Unsupported("tensors of layout %s are not supported (strided "
                      "and sparse COO are)" % t.layout)


def storage_key(t):
    """The key of t's graph tensor (rule 1)."""
    return storage(t)._cdata


def flat(t):
    """The whole storage of t as a 1-D tensor (no autograd history)."""
    return t.detach().as_strided((storage(t).size(),), (1,), 0)


def written_tensors(func, args, kwargs):
    """The tensors an aten call writes in place, as its schema says."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        out.extend(flatten_tensors(v))
    return out


def scalar_tensor(value):
    """A Python number as the 0-dim tensor torch wraps it in."""
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64)
    if isinstance(value, complex):
        return torch.tensor(value, dtype=torch.complex128)
    return torch.tensor(value, dtype=torch.float64)


def detached_number(func, args):
    """What a mode answers for aten::detach of a number, None for any
    other call. torch 1.13 hands a Python mode a wrapped scalar operand
    (the 0.5 of x * 0.5) as a number; a non-reentrant checkpoint's
    recompute detaches every tensor autograd saves, that one too. Its
    detached copy: the same value, as a tensor."""
    if (func == torch.ops.aten.detach.default and args and
            not isinstance(args[0], torch.Tensor)):
        return scalar_tensor(args[0])
    return None


class Recorded:
    """What the recorder made of an aten call: the index of its op, and
    whether the call was folded into that op, made earlier (rule 4),
    rather than making it."""

    __slots__ = ("index", "folded")

    def __init__(self, index, folded):
        self.index = index
        self.folded = folded


class BackwardName:
    """A name made from a backward op's final name (backward ops are
    numbered at the end, in forward order: rule 5)."""

    __slots__ = ("op", "suffix")

    def __init__(self, op, suffix):
        self.op = op
        self.suffix = suffix

    def __str__(self):
        return self.op["name"] + self.suffix

    def base(self):
        """The name before the op is numbered."""
        return self.op["base"] + self.suffix


def base_name(op):
    """A backward op's name without its final numbering, known as soon
    as the op is recorded (its `name` only when the step has ended)."""
    name = op["name"]
    if isinstance(name, BackwardName):
        return name.base()
    return op.get("base", name)


def unnumbered(name):
    """An op name without the #k that numbers ops of one name."""
    return re.sub(r"#\d+", "", str(name))
