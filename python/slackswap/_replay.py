"""Forward ops run again, to rebuild what a plan recomputes: each aten
call of an op the schedule re-runs is captured as it first runs, with its
activations by graph tensor and, when it is seeded, the RNG state it drew
from, so that the re-run (a dropout mask) comes back bitwise equal."""

import collections
import contextlib

import torch

from slackswap._numbering import flat, flatten_tensors, storage

_SEEDED = getattr(getattr(torch, "Tag", None), "nondeterministic_seeded",
                  None)


class View:
    """A graph tensor and the geometry of one view of its storage."""

    __slots__ = ("t", "size", "stride", "offset")

    def __init__(self, t, view):
        self.t = t
        self.size = tuple(view.size())
        self.stride = tuple(view.stride())
        self.offset = view.storage_offset()

    def geometry(self):
        return self.size, self.stride, self.offset

    def of(self, flat_storage):
        """This view of a flat copy of the storage."""
        return flat_storage.as_strided(self.size, self.stride, self.offset)


class _Act(View):
    """An aten argument that is an activation: graph tensor and view."""

    __slots__ = ()


class _Static:
    """An aten argument that is static (parameter, input, constant);
    mutable: a buffer, which a re-run must not update."""

    __slots__ = ("tensor", "mutable")

    def __init__(self, tensor, mutable):
        self.tensor = tensor
        self.mutable = mutable


class _Call:
    """One aten call of a forward op, enough to run it again: arguments
    with activations by graph tensor, the RNG state before it if seeded,
    and which result is which graph output (with its geometry)."""

    __slots__ = ("func", "args", "kwargs", "written", "rng", "outs")

    def __init__(self, func, args, kwargs, written, rng, outs):
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.written = written  # argument names/positions it writes
        self.rng = rng
        self.outs = outs  # [(result leaf index, graph tensor, geometry)]


def _written_args(func):
    """Positions and names of the arguments func writes in place."""
    out = set()
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            out.add(i)
            out.add(a.name)
    return out


def _map(obj, fn, leaf):
    """obj with each leaf of type `leaf` replaced by fn(leaf) (lists,
    tuples, dicts kept)."""
    if isinstance(obj, leaf):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(x, fn, leaf) for x in obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn, leaf) for k, v in obj.items()}
    return obj


def rng_before(func, args, kwargs):
    """The state of the generator a seeded aten call draws from, to replay
    it: (generator or device, state); None for a call that is not
    seeded."""
    if _SEEDED is None or _SEEDED not in func.tags:
        return None
    for x in list(args) + list(kwargs.values()):
        if isinstance(x, torch.Generator):
            return x, x.get_state()
    # The device's default generator: the first tensor's, or a factory's
    # device= (randn(..., device="cuda") has no tensor argument).
    tensors = flatten_tensors((args, kwargs))
    device = tensors[0].device if tensors else torch.device(
        kwargs.get("device") or "cpu")
    if device.type == "cuda":
        return device, torch.cuda.get_rng_state(device)
    return None, torch.get_rng_state()


@contextlib.contextmanager
def _rng_replayed(rng):
    """Runs the body with the generator as it was (then as it is now)."""
    if rng is None:
        yield
        return
    where, state = rng
    if isinstance(where, torch.Generator):
        get, put = where.get_state, where.set_state
    elif where is not None:  # a CUDA device
        def get():
            return torch.cuda.get_rng_state(where)

        def put(s):
            torch.cuda.set_rng_state(s, where)
    else:
        get, put = torch.get_rng_state, torch.set_rng_state
    now = get()
    put(state)
    try:
        yield
    finally:
        put(now)


class Replay:
    """The captured calls of the forward ops in `ops` (those the schedule
    re-runs), and their re-runs. `quiet` marks the runtime's own tensor
    work (slackswap._runtime)."""

    def __init__(self, graph, ops, quiet):
        self.graph = graph
        self.ops = ops
        self.quiet = quiet
        self.calls = collections.defaultdict(list)

    def wants(self, idx):
        """Whether forward op idx is one to capture."""
        return idx in self.ops

    def can_rerun(self, p):
        return p in self.calls

    def clear(self):
        self.calls.clear()

    def capture(self, idx, call, before, activation_of, is_buffer):
        """Keeps an aten call of forward op idx to run it again. call:
        (func, args, kwargs, rng, out); activation_of(t): the graph tensor
        t's storage holds (None: static), except for the tensors the call
        wrote, by id in `before`: what they were before it;
        is_buffer(t): whether static t is a buffer."""
        func, args, kwargs, rng, out = call

        def ref(t):
            g = before[id(t)] if id(t) in before else activation_of(t)
            if g is None:
                return _Static(t, is_buffer(t))
            return _Act(g, t)

        outs = []
        mine = set(self.graph.outputs[idx])
        for i, t in enumerate(flatten_tensors(out)):
            g = activation_of(t)
            if g in mine:
                outs.append((i, g, _Act(g, t).geometry() +
                             (storage(t).size(),)))
        self.calls[idx].append(_Call(
            func, _map(tuple(args), ref, torch.Tensor),
            _map(dict(kwargs), ref, torch.Tensor), _written_args(func),
            rng, outs))

    def rerun(self, p, resolve, device_type):
        """Runs forward op p's aten calls again; returns {graph output:
        flat tensor}. resolve(t): a flat device copy of graph tensor t.
        Arguments it writes in place that are not its own outputs (a batch
        norm's running statistics) are copies, so the re-run changes
        nothing but what it makes."""
        local = {}

        def value(ref, written):
            if isinstance(ref, _Static):
                # torch 1.13's native_batch_norm updates the running
                # statistics without saying so in its schema: buffers are
                # copied whether or not the call declares the write.
                return (ref.tensor.clone() if written or ref.mutable
                        else ref.tensor)
            base = local.get(ref.t)
            if base is None:
                base = resolve(ref.t)
                if written:
                    base = base.clone()
            return ref.of(base)

        def values(obj, written):
            return _map(obj, lambda r: value(r, written), (_Act, _Static))

        with self.quiet(), torch.autocast(device_type, enabled=False):
            for call in self.calls[p]:
                args = tuple(values(a, i in call.written)
                             for i, a in enumerate(call.args))
                kwargs = {k: values(v, k in call.written)
                          for k, v in call.kwargs.items()}
                with _rng_replayed(call.rng):
                    out = call.func(*args, **kwargs)
                self._check_layouts(p, call, out, local)
        return local

    def _check_layouts(self, p, call, out, local):
        """The re-run's outputs into local, each checked to have the
        layout the first run gave it."""
        leaves = flatten_tensors(out)
        for i, t, geometry in call.outs:
            x = leaves[i]
            got = (tuple(x.size()), tuple(x.stride()), x.storage_offset(),
                   storage(x).size())
            if got != geometry:
                raise RuntimeError(
                    "slackswap.torch: re-running %s gave %s a different "
                    "layout (%s, not %s)" % (
                        self.graph.op_label(p), self.graph.tensor_label(t),
                        got, geometry))
            local[t] = flat(x)
