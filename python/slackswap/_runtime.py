"""The machinery behind slackswap.torch.apply: one training step under a plan.

The step is watched the way the exporter watched it (slackswap._recorder:
a TorchDispatchMode numbers the forward ops, forward hooks name them by
module path, node hooks follow the backward pass in engine order), so
each saved tensor is found by the same key the graph was written with:
forward op, output slot, storage. Against that the plan is lowered as the
simulator lowers it (slackswap._lowering) and lived:

* keep: autograd keeps the tensor, as without a plan (a kept tensor that a
  recompute chain reads is also held here until its last use);
* swap: its storage is copied to host memory the first time autograd
  saves it (a pinned buffer on a side stream on CUDA; again if an in-place
  write the exporter folds into the same op changes it later), and the
  device copy goes when the forward pass lets go of it; the copy back
  starts when the plan's prefetch op starts, as soon as it fits the plan's
  budget, and the first op that needs it waits for it only if it has not
  landed;
* recompute: autograd gets a handle, not the tensor, so the storage goes
  after its last forward use; before the backward op that first needs it
  the recompute tasks of the simulator's schedule re-run the producing
  aten calls (a chain when inputs were dropped too) with the RNG state
  each seeded call had, so a dropout mask comes back bitwise equal.

It measures, at every op and copy, the bytes of saved activations
resident on the device: each storage that holds one (the original, a
prefetched copy, a rebuilt one) is watched through a weak reference, so
what counts is what really is allocated, and what the model's own code
holds past the plan's frees is told apart (_Meter).
"""

import collections
import contextlib
import re
import time

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from slackswap import _lowering, _recorder
from slackswap.errors import ExportError, PlanError, PlanMismatch

KEEP, SWAP, RECOMPUTE = (_lowering.KEEP, _lowering.SWAP,
                         _lowering.RECOMPUTE)
_FLOAT_BYTES = {"fp8": 1, "bf16": 2, "fp32": 4, "fp64": 8}
_SEEDED = getattr(getattr(torch, "Tag", None), "nondeterministic_seeded",
                  None)


def graph_dtype_bytes(graph):
    """Bytes per floating element the graph was exported with (its
    tensors' dtype names: bf16, fp32...)."""
    for t in graph.tensors:
        name = t.get("dtype", "")
        if name.startswith("complex"):
            name = name[len("complex"):]
        if name in _FLOAT_BYTES:
            return _FLOAT_BYTES[name]
        m = re.fullmatch(r"b(\d+)", name)
        if m:
            return int(m.group(1)) // 8
    return 4


def _bare(name):
    """An op name without the #k that numbers ops of one name."""
    return re.sub(r"#\d+", "", str(name))


def _flat(t):
    """The whole storage of t as a 1-D tensor (no autograd history)."""
    return t.detach().as_strided((_recorder._storage(t).size(),), (1,), 0)


class _View:
    """A graph tensor and the geometry of one view of its storage."""

    __slots__ = ("t", "size", "stride", "offset")

    def __init__(self, t, view):
        self.t = t
        self.size = tuple(view.size())
        self.stride = tuple(view.stride())
        self.offset = view.storage_offset()

    def geometry(self):
        return self.size, self.stride, self.offset


class _Act(_View):
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


class _Packed(_View):
    """What autograd holds for a swapped or recomputed tensor (or a kept
    one a chain reads): the graph tensor and the saved view's geometry.
    A type of its own: unpacking tells it from a tensor autograd kept."""

    __slots__ = ()


def _copy_on(stream, dst, src):
    """dst.copy_(src) queued on the CUDA `stream`; the event its end
    records."""
    with torch.cuda.stream(stream):
        dst.copy_(src, non_blocking=True)
        event = torch.cuda.Event()
        event.record(stream)
    return event


def _written_args(func):
    """Positions and names of the arguments func writes in place."""
    out = set()
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            out.add(i)
            out.add(a.name)
    return out


def _map(obj, fn):
    """obj with each tensor leaf replaced by fn(leaf) (lists, tuples,
    dicts kept)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def _map_refs(obj, fn):
    """obj with each _Act/_Static leaf replaced by fn(leaf)."""
    if isinstance(obj, (_Act, _Static)):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_refs(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: _map_refs(v, fn) for k, v in obj.items()}
    return obj


def _rng_state(func, args, kwargs):
    """The state of the generator a seeded aten call draws from, to
    replay it: (generator or device, state)."""
    for x in list(args) + list(kwargs.values()):
        if isinstance(x, torch.Generator):
            return x, x.get_state()
    # The device's default generator: the first tensor's, or a factory's
    # device= (randn(..., device="cuda") has no tensor argument).
    tensors = _recorder.flatten_tensors((args, kwargs))
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
        now = where.get_state()
        where.set_state(state)
        try:
            yield
        finally:
            where.set_state(now)
    elif where is not None:  # a CUDA device
        now = torch.cuda.get_rng_state(where)
        torch.cuda.set_rng_state(state, where)
        try:
            yield
        finally:
            torch.cuda.set_rng_state(now, where)
    else:
        now = torch.get_rng_state()
        torch.set_rng_state(state)
        try:
            yield
        finally:
            torch.set_rng_state(now)


class _Meter:
    """Saved-activation bytes resident on the device, from the storages
    themselves: each storage holding a saved activation is watched through
    a weak reference and counts while it is allocated, in graph bytes
    (elements at the graph's dtype size) and in real bytes.

    The original storage of a swapped or recomputed tensor is due to go
    after its last forward reader (`due`, a forward op); one still
    allocated after that is overdue: something other than the plan holds
    it (a Python variable of the model's forward, another version of the
    tensor in the same storage). Resident minus overdue is what the plan's
    schedule has resident."""

    def __init__(self, graph):
        self.graph = graph
        self.watched = collections.defaultdict(list)  # t -> [(ref, n, due)]
        self.now = 0  # the forward op running (after forward: their count)
        self.peak = 0
        self.peak_real = 0
        self.peak_on_schedule = 0
        self.peak_at = None
        self.overdue_at_peak = 0
        self.timeline = []  # (where, bytes, real bytes, overdue bytes)

    def watch(self, t, storage, due=None):
        self.watched[t].append((StorageWeakRef(storage), storage.nbytes(),
                                due))

    def current(self):
        """(graph bytes, real bytes, overdue graph bytes) allocated now."""
        total = real = overdue = 0
        for t in list(self.watched):
            alive = [w for w in self.watched[t] if not w[0].expired()]
            if not alive:
                del self.watched[t]
                continue
            self.watched[t] = alive
            for _, n, due in alive:
                total += self.graph.size[t]
                real += n
                if due is not None and due < self.now:
                    overdue += self.graph.size[t]
        return total, real, overdue

    def sample(self, where):
        total, real, overdue = self.current()
        self.timeline.append((where, total, real, overdue))
        if total > self.peak:
            self.peak, self.peak_at = total, where
            self.overdue_at_peak = overdue
        self.peak_real = max(self.peak_real, real)
        self.peak_on_schedule = max(self.peak_on_schedule, total - overdue)
        return total


class _Mode(TorchDispatchMode):
    """Hands every aten call to the runtime."""

    def __init__(self, runtime):
        super().__init__()
        self.runtime = runtime

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.runtime.dispatch(func, args, kwargs or {})


class _StepRecorder(_recorder.Recorder):
    """The exporter's recorder, telling the runtime when backward nodes
    start and end."""

    def __init__(self, model, runtime):
        super().__init__(model, runtime.dtype_bytes)
        self.runtime = runtime

    def on_node_start(self, node, grad_outputs):
        super().on_node_start(node, grad_outputs)
        self.runtime.on_node_start()

    def on_node_end(self, node, grad_inputs, grad_outputs):
        super().on_node_end(node, grad_inputs, grad_outputs)
        self.runtime.on_node_end()


class Runtime:
    """One training step under a plan; see slackswap.torch.apply."""

    def __init__(self, plan, graph, prediction=None, dropout=None):
        self.graph = _lowering.Graph(graph)
        g = self.graph
        name = plan.get("graph_name", "")
        if name and g.name and name != g.name:
            raise PlanError("the plan is for graph %r, not %r" % (name,
                                                                  g.name))
        self.decisions = _lowering.Decisions(g, plan)
        if any(n.endswith("@recompute") or "@recompute#" in n
               for n in (o.get("name", "") for o in g.ops)):
            raise PlanError(
                "the graph %r has checkpointed regions: export it with "
                "strip_checkpoint=True (--strip-checkpoint), so that the plan "
                "decides every tensor; apply runs checkpoint() regions as "
                "plain code" % g.name)
        self.schedule = _lowering.lower(g, self.decisions)
        self.budget = int(plan.get("budget_bytes") or 0)
        self.prediction = prediction
        self.dtype_bytes = graph_dtype_bytes(g)
        if dropout not in (None, "native", "eager"):
            raise PlanError("dropout must be native or eager, not %r" %
                            (dropout,))
        if dropout is None:
            dropout = "native" if any(
                re.search(r"(^|\.)native_dropout(\+|$|#)", o.get("name", ""))
                for o in g.ops) else "eager"
        self.dropout = dropout
        # Ops the schedule re-runs, and kept tensors a re-run reads while
        # they are live: autograd must not be their only holder.
        self.rerun_ops = {task.op for task in self.schedule.tasks
                          if task.recompute}
        self.needs_handle = set()
        for task in self.schedule.tasks:
            if task.recompute:
                for t in g.inputs[task.op]:
                    if g.is_saved[t] and self.decisions.action[t] == KEEP:
                        self.needs_handle.add(t)
        self.rec = None
        self.buffer_keys = set()
        self.meter = _Meter(g)
        self.rt_to_graph = {}
        self.graph_to_rt = {}
        self.calls = collections.defaultdict(list)
        self.held = {}        # graph tensor -> flat device tensor held here
        self.host = {}        # graph tensor -> flat host copy
        self.copy_events = {}  # CUDA: graph tensor -> event (copy done)
        self.h2d_queue = collections.deque()
        self.started = set()  # graph ops whose start actions ran
        self.processed = 0    # ops whose end actions ran
        self.base_of = {}     # id(backward op dict) -> its base name
        self.internal = 0
        self.backward_started = False
        self.finished = False
        self.device = None
        self.stats = collections.Counter()
        self.stack = None
        self.mode = None
        self.streams = None
        self.timing = None
        self.measured = None

    # --- entering and leaving ---------------------------------------------

    def __enter__(self):
        if self.stack is not None or self.rec is not None:
            raise PlanError("an apply() context runs one step: make another "
                            "for the next")
        stack = contextlib.ExitStack()
        try:
            handle = torch.nn.modules.module.register_module_forward_pre_hook(
                self.on_module_call)
            stack.callback(handle.remove)
            stack.enter_context(_recorder.checkpoint_inlined())
            stack.enter_context(
                _recorder.native_dropout(self.dropout == "native"))
            stack.enter_context(_recorder._SavedTensorsHooks(self.pack,
                                                             self.unpack))
            self.mode = stack.enter_context(_Mode(self))
            original = torch.autograd.backward

            def backward(tensors, *args, **kwargs):
                return self.backward(original, tensors, *args, **kwargs)

            torch.autograd.backward = backward
            stack.callback(setattr, torch.autograd, "backward", original)
        except BaseException:
            stack.close()
            raise
        self.stack = stack
        return self

    def __exit__(self, exc_type, exc, tb):
        stack, self.stack = self.stack, None
        stack.close()
        if self.rec is not None:
            self.rec.release_nodes()
        # Nothing of the step outlives it here: copies, captured calls.
        self.held.clear()
        self.host.clear()
        self.calls.clear()
        self.h2d_queue.clear()
        self.copy_events.clear()
        if exc_type is None and not self.finished:
            raise PlanError(
                "the step under the plan did not finish: %s" % (
                    "no model ran inside apply()" if self.rec is None else
                    "backward() was not called inside apply()"))
        return False

    @contextlib.contextmanager
    def quiet(self):
        """The runtime's own tensor work: not part of the step."""
        self.internal += 1
        try:
            with torch.no_grad():
                yield
        finally:
            self.internal -= 1

    # --- the model call: up-front checks ----------------------------------

    def on_module_call(self, module, inputs):
        if self.rec is not None:
            return None
        rec = self.rec = _StepRecorder(module, self)
        try:
            rec.refuse_torchscript()
        except ExportError as e:
            raise PlanMismatch(str(e)) from None
        rec.register_step_statics(inputs, {})
        self.buffer_keys = {rec.key(b) for b in module.buffers()}
        self.check_statics()
        for h in rec.install_module_hooks():
            self.stack.callback(h.remove)
        # After the recorder's own hooks on the root: what runs once the
        # model has returned is the loss.
        h = module.register_forward_hook(self.on_model_return)
        self.stack.callback(h.remove)
        rec._pre_hook("", module, inputs)  # the root's hooks came too late
        tensors = list(module.parameters()) + _recorder.flatten_tensors(
            inputs)
        self.device = tensors[0].device if tensors else torch.device("cpu")
        self.start_clock()
        return None

    def on_model_return(self, module, inputs, output):
        if not self.backward_started:
            self.rec.base_path = "loss"

    def check_statics(self):
        """Parameters, buffers and inputs against the graph's static
        tensors, which the exporter numbered first in the same order."""
        rec, g = self.rec, self.graph
        for i, mine in enumerate(rec.tensors):
            theirs = g.tensors[i] if i < len(g.tensors) else None
            if theirs is None or _described(theirs) != _described(mine):
                raise PlanMismatch(
                    "the model is not the one graph %r was exported from: "
                    "its %s %s %s %s is %s in the graph" % (
                        g.name, _kind_word(mine["kind"]), mine["name"],
                        mine["shape"], mine["dtype"],
                        "missing" if theirs is None else "%s %s %s %s" % (
                            _kind_word(theirs.get("kind")),
                            theirs.get("name"), theirs.get("shape"),
                            theirs.get("dtype"))))
        n = len(rec.tensors)
        if n < len(g.tensors):
            extra = g.tensors[n]
            if (extra.get("kind") == _recorder.KIND_PARAM or
                    re.fullmatch(r"input\d*(\.\d+)?",
                                 extra.get("name", ""))):
                raise PlanMismatch(
                    "the model is not the one graph %r was exported from: "
                    "the graph has %s %s %s beyond the model's" % (
                        g.name, _kind_word(extra.get("kind")),
                        extra.get("name"), extra.get("shape")))

    # --- the forward pass -------------------------------------------------

    def recording(self):
        return (self.rec is not None and not self.internal and
                not self.backward_started)

    def dispatch(self, func, args, kwargs):
        if (func == torch.ops.aten.detach.default and args and
                not isinstance(args[0], torch.Tensor)):
            return _recorder._scalar_tensor(args[0])  # as the exporter's
        if not self.recording():
            out = func(*args, **kwargs)
            if (func == torch.ops.aten.detach.default and
                    not isinstance(out, torch.Tensor)):
                # torch 1.13 hands a Python mode a wrapped number (a saved
                # Python scalar, detached in backward) back as a number.
                return _recorder._scalar_tensor(out)
            return out
        rec = self.rec
        rng = (_rng_state(func, args, kwargs)
               if _SEEDED is not None and _SEEDED in func.tags else None)
        out = func(*args, **kwargs)
        written = _written_args(func)
        written_tensors = [
            t for pos, v in list(enumerate(args)) + list(kwargs.items())
            if pos in written for t in _recorder.flatten_tensors(v)]
        # What the written arguments were before the recorder makes new
        # versions of them.
        before = {id(t): self.activation_of(t) for t in written_tensors}
        first_new = len(rec.ops)
        idx = rec.on_op(func, args, kwargs, out)
        if idx is None:
            return out
        if idx == first_new:
            self.check_forward_op(
                idx, _recorder.flatten_tensors(out) + written_tensors)
        else:
            # Folded into an op made earlier: a tensor it writes may be
            # out on the host already (an in-place write to another part
            # of its storage, as the LSTM cell's gates), so its copy is
            # taken again.
            for t in written_tensors:
                g = self.activation_of(t)
                if g in self.host:
                    with self.quiet():
                        self.swap_out(g, t)
        if idx in self.rerun_ops:
            self.calls[idx].append(self.capture(func, args, kwargs, written,
                                                rng, out, before, idx))
        if idx == first_new:
            self.meter.now = idx
            self.start(idx)
            self.meter.sample(("forward", idx))
            self.end(idx)
        return out

    def activation_of(self, t):
        """The graph tensor t's storage holds now, None if static."""
        rt = self.rec.activation_id(t)
        if rt is None:
            return None
        g = self.rt_to_graph.get(rt)
        if g is None:
            raise PlanMismatch("an activation no forward op of graph %r "
                               "made: %s" % (self.graph.name,
                                             self.rec.tensors[rt]["name"]))
        return g

    def capture(self, func, args, kwargs, written, rng, out, before, idx):
        """An aten call of forward op idx, kept to run it again."""
        def ref(t):
            g = before[id(t)] if id(t) in before else self.activation_of(t)
            if g is None:
                return _Static(t, self.rec.key(t) in self.buffer_keys)
            return _Act(g, t)

        outs = []
        mine = set(self.graph.outputs[idx])
        for i, t in enumerate(_recorder.flatten_tensors(out)):
            g = self.activation_of(t)
            if g in mine:
                outs.append((i, g, _Act(g, t).geometry() +
                             (_recorder._storage(t).size(),)))
        return _Call(func, _map(tuple(args), ref), _map(dict(kwargs), ref),
                     written, rng, outs)

    def check_forward_op(self, i, made):
        """Forward op i against the graph's: name and outputs (among the
        tensors `made`, which the meter watches if they are saved)."""
        rec, g = self.rec, self.graph
        op = rec.ops[i]
        if i >= g.num_forward or g.phase[i] != _lowering.FORWARD:
            raise PlanMismatch(
                "forward op %d (%s): graph %r has only %d forward ops" % (
                    i, op["name"], g.name, g.num_forward))
        gname = g.ops[i].get("name", "")
        if gname != op["name"] and not gname.startswith(op["name"] + "+"):
            raise PlanMismatch("forward op %d: the graph %r has %s, the model "
                               "ran %s" % (i, g.name, gname, op["name"]))
        if len(op["outputs"]) != len(g.outputs[i]):
            raise PlanMismatch(
                "forward op %d (%s): %d outputs in the graph, %d in the "
                "model" % (i, gname, len(g.outputs[i]), len(op["outputs"])))
        for slot, (rt, t) in enumerate(zip(op["outputs"], g.outputs[i])):
            mine, theirs = rec.tensors[rt], g.tensors[t]
            if _described(theirs)[2:] != _described(mine)[2:]:
                raise PlanMismatch(
                    "forward op %d (%s), output %d: the graph has %s %s (%s "
                    "bytes), the model made %s %s (%d bytes)" % (
                        i, gname, slot, theirs.get("shape"),
                        theirs.get("dtype"), theirs.get("size_bytes"),
                        mine["shape"], mine["dtype"], mine["size_bytes"]))
            self.rt_to_graph[rt] = t
            self.graph_to_rt[t] = rt
            if g.is_saved[t]:
                x = next(x for x in made
                         if rec.storage_to_tensor.get(rec.key(x)) == rt)
                due = None
                if self.decisions.action[t] != KEEP:
                    due = g.last_fwd_use[t]
                    due = g.producer[t] if due is None else due
                self.meter.watch(t, _recorder._storage(x), due)

    def pack(self, t):
        rec = self.rec
        if rec is None or self.backward_started or t.layout != torch.strided:
            return t
        rt = rec.storage_to_tensor.get(rec.key(t))
        g = self.rt_to_graph.get(rt)
        if g is None or not self.graph.is_saved[g]:
            return t
        action = self.decisions.action[g]
        if action == KEEP and g not in self.needs_handle:
            return t
        with self.quiet():
            if action == SWAP and g not in self.host:
                self.swap_out(g, t)
            elif action == KEEP and g not in self.held:
                self.held[g] = _flat(t)
        return _Packed(g, t)

    def swap_out(self, g, t):
        """Copies the storage of t (graph tensor g) to host memory (again,
        into the same buffer, when it is there already)."""
        flat = _flat(t)
        host = self.host.get(g)
        first = host is None
        if flat.is_cuda:
            if first:
                host = torch.empty(flat.shape, dtype=flat.dtype,
                                   pin_memory=True)
            stream = self.side_streams()[0]
            stream.wait_stream(torch.cuda.current_stream(flat.device))
            event = _copy_on(stream, host, flat)
            # The allocator keeps the block until the copy is done.
            flat.record_stream(stream)
            self.copy_events[g] = event
        elif first:
            host = flat.clone()
        else:
            host.copy_(flat)
        self.host[g] = host
        self.stats["swapped_out" if first else "swap_outs_refreshed"] += 1
        self.stats["d2h_bytes"] += host.numel() * host.element_size()

    def side_streams(self):
        """CUDA: (device-to-host, host-to-device) copy streams."""
        if self.streams is None:
            self.streams = (torch.cuda.Stream(self.device),
                            torch.cuda.Stream(self.device))
        return self.streams

    # --- the backward pass ------------------------------------------------

    def backward(self, original, tensors, *args, **kwargs):
        if self.rec is None or self.finished:
            return original(tensors, *args, **kwargs)
        if self.backward_started:
            raise PlanError("apply() runs one training step: backward() was "
                            "already called in it")
        rec = self.rec
        roots = [t.grad_fn for t in (
            [tensors] if isinstance(tensors, torch.Tensor) else tensors)
            if t.grad_fn is not None]
        self.backward_started = True
        rec.tracing = False
        rec.claim_nodes(roots, "loss")
        rec.install_node_hooks(roots)
        rec.num_forward_ops = len(rec.ops)
        rec.base_path = ""
        self.check_forward_done()
        self.processed = len(rec.ops)
        self.meter.now = len(rec.ops)
        self.meter.sample(("forward end", len(rec.ops) - 1))
        if _python_dispatch._get_current_dispatch_mode() is self.mode:
            # Backward runs without the mode: nothing in it is recorded,
            # and a CUDA step's time is not the mode's.
            with _python_dispatch._pop_mode_temporarily():
                result = original(tensors, *args, **kwargs)
        else:  # another mode above ours: ours passes calls through
            result = original(tensors, *args, **kwargs)
        self.finish()
        return result

    def check_forward_done(self):
        rec, g = self.rec, self.graph
        n = len(rec.ops)
        if n != g.num_forward:
            raise PlanMismatch(
                "the model ran %d forward ops, graph %r has %d (its op %d is "
                "%s)" % (n, g.name, g.num_forward, n, g.ops[n].get("name")))
        for i, op in enumerate(rec.ops):
            if op["name"] != g.ops[i].get("name"):
                raise PlanMismatch("forward op %d: the graph %r has %s, the "
                                   "model ran %s" % (i, g.name,
                                                     g.ops[i].get("name"),
                                                     op["name"]))
            mine = [self.rt_to_graph[x] for x in op["inputs"]
                    if x in self.rt_to_graph]
            theirs = [x for x in g.inputs[i] if g.producer[x] is not None]
            if mine != theirs:
                raise PlanMismatch(
                    "forward op %d (%s) reads other tensors in the model "
                    "(%s) than in the graph (%s)" % (
                        i, op["name"], _labels(g, mine), _labels(g, theirs)))
        for node, ids in rec.ctx_reads.items():
            for rt in ids:
                t = self.rt_to_graph.get(rt)
                if t is not None and self.decisions.action[t] != KEEP:
                    raise PlanError(
                        "decision for %s: a custom Function keeps it on its "
                        "ctx, out of autograd's saved-tensor hooks, so it "
                        "can only be kept" % g.tensor_label(t))

    def on_node_start(self):
        """A backward node starts: the ops the engine's gradient sums made
        start and end here; the node's own op starts, if the graph has it
        next."""
        self.process_new_ops()
        rec, g = self.rec, self.graph
        k = len(rec.ops)
        base = rec.running[-1].base if rec.running else None
        if (k < len(g.ops) and k not in self.started and
                g.phase[k] == _lowering.BACKWARD and base is not None and
                _bare(g.ops[k].get("name", "")) == _bare(base)):
            self.start(k)

    def on_node_end(self):
        self.process_new_ops()

    def process_new_ops(self):
        """The backward ops the recorder appended since the last call: each
        checked against the graph, started (if not yet), measured, ended."""
        rec = self.rec
        for op, base, _ in rec.bwd_named[len(self.base_of):]:
            self.base_of[id(op)] = base  # ops stay in rec.ops: ids hold
        while self.processed < len(rec.ops):
            j = self.processed
            self.check_backward_op(j)
            if j not in self.started:
                self.start(j)
            self.meter.sample(("backward", j))
            self.end(j)
            self.processed += 1

    def check_backward_op(self, j):
        rec, g = self.rec, self.graph
        op = rec.ops[j]
        name = op["name"]
        if isinstance(name, _recorder._Named):
            base = self.base_of[id(name.op)] + name.suffix
        else:
            base = self.base_of.get(id(op), name)
        if j >= len(g.ops):
            raise PlanMismatch("backward op %d (%s): graph %r has only %d "
                               "ops" % (j, base, g.name, len(g.ops)))
        gname = g.ops[j].get("name", "")
        mine = sorted(self.rt_to_graph[x] for x in op["inputs"]
                      if x in self.rt_to_graph)
        theirs = sorted(x for x in g.inputs[j] if g.is_saved[x])
        if _bare(gname) != _bare(base) or mine != theirs:
            raise PlanMismatch(
                "backward op %d: the graph %r has %s reading %s, the model "
                "ran %s reading %s" % (j, g.name, gname, _labels(g, theirs),
                                       base, _labels(g, mine)))

    def finish(self):
        """Backward has returned: the last checks, and the measurements."""
        rec, g = self.rec, self.graph
        self.process_new_ops()
        rec.name_backward_ops()
        if len(rec.ops) != len(g.ops):
            raise PlanMismatch("the step ran %d ops, graph %r has %d" % (
                len(rec.ops), g.name, len(g.ops)))
        for j in range(g.num_forward, len(g.ops)):
            if str(rec.ops[j]["name"]) != g.ops[j].get("name"):
                raise PlanMismatch("backward op %d: the graph %r has %s, the "
                                   "model ran %s" % (j, g.name,
                                                     g.ops[j].get("name"),
                                                     rec.ops[j]["name"]))
        self.meter.sample(("backward end", len(rec.ops) - 1))
        self.stop_clock()
        self.finished = True

    # --- the schedule -----------------------------------------------------

    def start(self, o):
        """Graph op o starts: its recompute tasks run first, then it issues
        its prefetches and waits for the swapped tensors it reads."""
        self.started.add(o)
        for task in self.schedule.recompute_tasks_before(o):
            self.run_recompute(task)
        task = self.schedule.tasks[self.schedule.task_of_op[o]]
        self.h2d_queue.extend(task.prefetches)
        self.pump()
        for t in task.waits:
            self.arrive(t)

    def end(self, o):
        """Graph op o ends: what the schedule frees then goes."""
        task = self.schedule.tasks[self.schedule.task_of_op[o]]
        for t in task.frees:
            self.held.pop(t, None)
        self.pump()

    def hold(self, t, flat):
        """A device copy of graph tensor t, held here (and known to the
        recorder as t, so that a node unpacking it reads t)."""
        rec = self.rec
        self.held[t] = flat
        key = rec.pin(flat)
        rec.storage_to_tensor[key] = self.graph_to_rt[t]
        if self.graph.is_saved[t]:  # a chain's other temporaries are not
            self.meter.watch(t, _recorder._storage(flat))

    def pump(self):
        """Starts queued prefetches, in order, while they fit the plan's
        budget (the simulator reserves memory when a copy starts)."""
        while self.h2d_queue:
            t = self.h2d_queue[0]
            if (self.budget and self.meter.current()[0] + self.graph.size[t]
                    > self.budget):
                return
            self.h2d_queue.popleft()
            self.prefetch(t)

    def prefetch(self, t):
        host = self.host.pop(t, None)
        if host is None:
            raise RuntimeError(
                "slackswap.torch: %s is to be prefetched but autograd never "
                "saved it, so it was never copied out (the plan's schedule "
                "and the step disagree)" % self.graph.tensor_label(t))
        with self.quiet():
            if self.device is not None and self.device.type == "cuda":
                stream = self.side_streams()[1]
                flat = torch.empty(host.shape, dtype=host.dtype,
                                   device=self.device)
                done = self.copy_events.pop(t, None)
                if done is not None:
                    stream.wait_event(done)
                event = _copy_on(stream, flat, host)
                flat.record_stream(stream)
                self.copy_events[t] = event
            else:
                flat = host.clone()
        self.hold(t, flat)
        self.stats["prefetched"] += 1
        self.stats["h2d_bytes"] += host.numel() * host.element_size()
        self.meter.sample(("prefetch", t))

    def arrive(self, t):
        """Swapped tensor t is needed now: started if it had not, waited
        for on the compute stream if it has not landed."""
        if t in self.h2d_queue:
            self.h2d_queue.remove(t)
            self.stats["prefetches_forced"] += 1
            self.prefetch(t)
        elif t not in self.held and t in self.host:
            self.stats["prefetches_forced"] += 1
            self.prefetch(t)
        event = self.copy_events.pop(t, None)
        if event is not None and t in self.held:
            torch.cuda.current_stream(self.device).wait_event(event)

    def run_recompute(self, task):
        for t in task.waits:
            self.arrive(t)
        outs = self.rerun(task.op)
        for t in task.restored:
            self.hold(t, outs[t])
        self.stats["recompute_tasks"] += 1
        self.stats["recomputed"] += sum(
            1 for t in task.restored if self.graph.is_saved[t])
        self.meter.sample(("recompute", task.op))
        for t in task.frees:
            self.held.pop(t, None)

    def resolve(self, t):
        """A device copy of graph tensor t for a re-run or an unpack."""
        flat = self.held.get(t)
        if flat is not None:
            return flat
        if t in self.host or t in self.h2d_queue:
            self.arrive(t)
            return self.held[t]
        p = self.graph.producer[t]
        if p not in self.calls:
            raise RuntimeError(
                "slackswap.torch: %s is needed but is neither resident nor "
                "rebuildable (the plan's schedule and the step disagree)" %
                self.graph.tensor_label(t))
        # Off the schedule: rebuilt now (counted, so a test can see it).
        self.stats["late_rebuilds"] += 1
        outs = self.rerun(p)
        self.hold(t, outs[t])
        self.meter.sample(("late rebuild", p))
        return outs[t]

    def rerun(self, p):
        """Runs forward op p's aten calls again; returns {graph output:
        flat tensor}. Arguments it writes in place that are not its own
        outputs (a batch norm's running statistics) are copies, so the
        re-run changes nothing but what it makes."""
        local = {}
        device_type = self.device.type if self.device is not None else "cpu"

        def value(ref, written):
            if isinstance(ref, _Static):
                # torch 1.13's native_batch_norm updates the running
                # statistics without saying so in its schema: buffers are
                # copied whether or not the call declares the write.
                return (ref.tensor.clone() if written or ref.mutable
                        else ref.tensor)
            base = local.get(ref.t)
            if base is None:
                base = self.resolve(ref.t)
                if written:
                    base = base.clone()
            return base.as_strided(ref.size, ref.stride, ref.offset)

        with self.quiet(), torch.autocast(device_type, enabled=False):
            for call in self.calls[p]:
                args = tuple(
                    _map_refs(a, lambda r, w=(i in call.written):
                              value(r, w))
                    for i, a in enumerate(call.args))
                kwargs = {k: _map_refs(v, lambda r, w=(k in call.written):
                                       value(r, w))
                          for k, v in call.kwargs.items()}
                with _rng_replayed(call.rng):
                    out = call.func(*args, **kwargs)
                leaves = _recorder.flatten_tensors(out)
                for i, t, geometry in call.outs:
                    x = leaves[i]
                    got = (tuple(x.size()), tuple(x.stride()),
                           x.storage_offset(), _recorder._storage(x).size())
                    if got != geometry:
                        raise RuntimeError(
                            "slackswap.torch: re-running %s gave %s a "
                            "different layout (%s, not %s)" % (
                                self.graph.op_label(p),
                                self.graph.tensor_label(t), got, geometry))
                    local[t] = _flat(x)
        return local

    def unpack(self, packed):
        if not isinstance(packed, _Packed):
            return self.rec.unpack(packed) if self.rec else packed
        flat = self.resolve(packed.t)
        if packed.t in self.copy_events:
            self.arrive(packed.t)
        with self.quiet():
            view = flat.as_strided(packed.size, packed.stride, packed.offset)
        return self.rec.unpack(view)

    # --- time and memory --------------------------------------------------

    def start_clock(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            self.timing = [start, time.perf_counter()]
        else:
            self.timing = [None, time.perf_counter()]

    def stop_clock(self):
        start, t0 = self.timing
        measured = {
            "device": str(self.device),
            "peak_saved_bytes": self.meter.peak,
            "peak_saved_real_bytes": self.meter.peak_real,
            "peak_at": _where_label(self.graph, self.meter.peak_at),
            "overdue_bytes_at_peak": self.meter.overdue_at_peak,
            "peak_saved_bytes_on_schedule": self.meter.peak_on_schedule,
            "timeline": list(self.meter.timeline),
            "held_after_step": len(self.held),
            "h2d_queued_after_step": len(self.h2d_queue),
        }
        measured.update({k: int(v) for k, v in self.stats.items()})
        if start is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            torch.cuda.synchronize(self.device)
            measured["step_seconds"] = start.elapsed_time(end) / 1e3
            measured["max_memory_allocated"] = int(
                torch.cuda.max_memory_allocated(self.device))
        else:
            measured["step_seconds"] = time.perf_counter() - t0
        self.measured = measured


def _described(tensor):
    """(name, kind, shape, dtype, bytes) of a graph tensor dict, whether
    the recorder's or the graph's (where proto3 JSON leaves out zeros)."""
    return (str(tensor.get("name", "")), tensor.get("kind", ""),
            tensor.get("shape", ""), tensor.get("dtype", ""),
            int(tensor.get("size_bytes") or 0))


def _kind_word(kind):
    return {_recorder.KIND_PARAM: "parameter",
            _recorder.KIND_INPUT: "input"}.get(kind, "tensor")


def _labels(g, ts):
    return ", ".join(g.tensor_label(t) for t in ts) or "no saved tensor"


def _where_label(g, where):
    if where is None:
        return ""
    kind, x = where
    if kind == "prefetch":
        return "prefetch of %s" % g.tensor_label(x)
    return "%s, %s" % (kind, g.op_label(x))
