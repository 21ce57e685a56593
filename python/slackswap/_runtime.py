"""The machinery behind slackswap.torch.apply: one training step under a plan.

The step is watched the way the exporter watched it (slackswap._recorder:
a TorchDispatchMode numbers the forward ops, forward hooks name them by
module path, node hooks follow the backward pass in engine order), so
each saved tensor is found by the same key the graph was written with:
forward op, output slot, storage (slackswap._numbering). Against that the
plan is lowered as the simulator lowers it (slackswap._lowering) and
lived:

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
holds past the plan's frees is told apart.

One class a role: the checks against the graph (slackswap._checks), the
host copies and their streams (slackswap._copies), recompute and RNG
replay (slackswap._replay), the schedule's tasks as the step reaches them
(slackswap._schedule), the measurements (slackswap._meter). Runtime ties
them to the step: the model call, each forward aten call, backward.
"""

import collections
import contextlib
import re

import torch
from torch.utils import _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from slackswap import _lowering
from slackswap._checkpoint import checkpoint_inlined
from slackswap._checks import StepChecks
from slackswap._copies import HostCopies
from slackswap._meter import Clock, Meter
from slackswap._numbering import (detached_number, flatten_tensors,
                                  scalar_tensor, storage, storage_key,
                                  unnumbered, written_tensors)
from slackswap._recorder import Recorder, native_dropout
from slackswap._replay import Replay, rng_before
from slackswap._saved import SavedTensorsHooks
from slackswap._schedule import Resident, ScheduleRun
from slackswap.errors import ExportError, PlanError, PlanMismatch

_FLOAT_BYTES = {"fp8": 1, "bf16": 2, "fp32": 4, "fp64": 8}


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


class _Quiet:
    """The runtime's own tensor work, which is not part of the step: while
    it runs (`with quiet():`) the dispatch mode records nothing, and
    autograd records no history."""

    def __init__(self):
        self.depth = 0

    @contextlib.contextmanager
    def __call__(self):
        self.depth += 1
        try:
            with torch.no_grad():
                yield
        finally:
            self.depth -= 1


class _Mode(TorchDispatchMode):
    """Hands every aten call to the runtime."""

    def __init__(self, runtime):
        super().__init__()
        self.runtime = runtime

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.runtime.dispatch(func, args, kwargs or {})


@contextlib.contextmanager
def _backward_routed(on_backward):
    """torch.autograd.backward (which Tensor.backward calls) goes through
    on_backward(original, tensors, ...) while the context is open; the
    original is back when it closes, error or not.

    A global replaced, for as long as apply()'s context is open, because
    nothing narrower reaches the step in time (torch 1.13): the forward
    pass must be checked and the loss's nodes claimed and hooked before
    the engine runs any node, and the dispatch mode popped for the whole
    pass, and only the caller of the engine can do either. Node pre-hooks
    fire once the engine has started, and there is no hook before a pass
    nor after it; a TorchFunctionMode would see Tensor.backward but not a
    direct torch.autograd.backward call (it has no __torch_function__
    handling in 1.13), and would put every forward call through Python.
    Outside a step the wrapper calls the original unchanged.
    """
    original = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        return on_backward(original, tensors, *args, **kwargs)

    torch.autograd.backward = backward
    try:
        yield
    finally:
        torch.autograd.backward = original


def _checked_plan(plan, g, dropout):
    """(decisions, schedule, dropout): the plan for graph g, refused with
    PlanError as the simulator would refuse it."""
    name = plan.get("graph_name", "")
    if name and g.name and name != g.name:
        raise PlanError("the plan is for graph %r, not %r" % (name, g.name))
    decisions = _lowering.Decisions(g, plan)
    if any(n.endswith("@recompute") or "@recompute#" in n
           for n in (o.get("name", "") for o in g.ops)):
        raise PlanError(
            "the graph %r has checkpointed regions: export it with "
            "strip_checkpoint=True (--strip-checkpoint), so that the plan "
            "decides every tensor; apply runs checkpoint() regions as "
            "plain code" % g.name)
    schedule = _lowering.lower(g, decisions)
    if dropout not in (None, "native", "eager"):
        raise PlanError("dropout must be native or eager, not %r" %
                        (dropout,))
    if dropout is None:
        dropout = "native" if any(
            re.search(r"(^|\.)native_dropout(\+|$|#)", o.get("name", ""))
            for o in g.ops) else "eager"
    return decisions, schedule, dropout


class Runtime:
    """One training step under a plan; see slackswap.torch.apply. It ties
    the parts to the step: the first model call starts it (the recorder
    and the up-front checks), each forward aten call is recorded, checked
    and has the schedule's tasks around it, backward() ends it."""

    def __init__(self, plan, graph, prediction=None, dropout=None):
        g = self.graph = _lowering.Graph(graph)
        self.decisions, self.schedule, self.dropout = _checked_plan(
            plan, g, dropout)
        self.prediction = prediction
        self.dtype_bytes = graph_dtype_bytes(g)
        self.quiet = _Quiet()
        self.stats = collections.Counter()
        self.meter = Meter(g)
        self.clock = Clock()
        self.checks = StepChecks(g, self.decisions)
        self.resident = Resident(g, self.meter, self.alias)
        self.copies = HostCopies(g, int(plan.get("budget_bytes") or 0),
                                 self.meter, self.resident, self.quiet,
                                 self.stats)
        self.replay = Replay(g, {task.op for task in self.schedule.tasks
                                 if task.recompute}, self.quiet)
        self.tasks = ScheduleRun(g, self.decisions, self.schedule,
                                 self.resident, self.copies, self.replay,
                                 self.meter, self.quiet, self.stats)
        self.rec = None
        self.buffer_keys = set()
        self.graph_of = {}    # runtime tensor id -> graph tensor (rule 6)
        self.rt_of = {}       # graph tensor -> runtime tensor id
        self.processed = 0    # ops whose end actions ran
        self.backward_started = False
        self.finished = False
        self.device = None
        self.stack = None
        self.mode = None
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
            stack.enter_context(checkpoint_inlined())
            stack.enter_context(native_dropout(self.dropout == "native"))
            stack.enter_context(SavedTensorsHooks(self.pack, self.unpack))
            self.mode = stack.enter_context(_Mode(self))
            stack.enter_context(_backward_routed(self.backward))
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
        self.tasks.clear()
        if exc_type is None and not self.finished:
            raise PlanError(
                "the step under the plan did not finish: %s" % (
                    "no model ran inside apply()" if self.rec is None else
                    "backward() was not called inside apply()"))
        return False

    # --- the model call ---------------------------------------------------

    def on_module_call(self, module, inputs):
        """The first module called is the step's model: the recorder
        starts, and its statics are checked before any op runs."""
        if self.rec is not None:
            return None
        rec = self.rec = Recorder(module, self.dtype_bytes, listener=self)
        try:
            rec.refuse_torchscript()
        except ExportError as e:
            raise PlanMismatch(str(e)) from None
        rec.register_step_statics(inputs, {})
        self.buffer_keys = {storage_key(b) for b in module.buffers()}
        self.checks.statics(rec.tensors)
        for h in rec.install_module_hooks():
            self.stack.callback(h.remove)
        # After the recorder's own hooks on the root: what runs once the
        # model has returned is the loss.
        h = module.register_forward_hook(self.on_model_return)
        self.stack.callback(h.remove)
        rec.enter_module("", module, inputs)  # the root's hooks came too late
        tensors = list(module.parameters()) + flatten_tensors(inputs)
        self.device = tensors[0].device if tensors else torch.device("cpu")
        self.copies.device = self.device
        self.clock.start(self.device)
        return None

    def on_model_return(self, module, inputs, output):
        if not self.backward_started:
            self.rec.begin_loss()

    # --- the forward pass -------------------------------------------------

    def recording(self):
        return (self.rec is not None and not self.quiet.depth and
                not self.backward_started)

    def dispatch(self, func, args, kwargs):
        number = detached_number(func, args)
        if number is not None:
            return number  # as the recorder's own mode answers it
        if not self.recording():
            out = func(*args, **kwargs)
            if (func == torch.ops.aten.detach.default and
                    not isinstance(out, torch.Tensor)):
                # torch 1.13 hands a Python mode a wrapped number (a saved
                # Python scalar, detached in backward) back as a number.
                return scalar_tensor(out)
            return out
        return self.record(func, args, kwargs)

    def record(self, func, args, kwargs):
        """A forward aten call: run, recorded, checked against the graph,
        with the schedule's tasks around the op it makes."""
        rng = rng_before(func, args, kwargs)
        out = func(*args, **kwargs)
        written = written_tensors(func, args, kwargs)
        # What the written arguments were before the recorder makes new
        # versions of them.
        before = {id(t): self.activation_of(t) for t in written}
        recorded = self.rec.on_op(func, args, kwargs, out)
        if recorded is None:
            return out
        idx = recorded.index
        if recorded.folded:
            # Folded into an op made earlier: a tensor it writes may be
            # out on the host already (an in-place write to another part
            # of its storage, as the LSTM cell's gates), so its copy is
            # taken again.
            for t in written:
                g = self.activation_of(t)
                if self.copies.has_host(g):
                    with self.quiet():
                        self.copies.swap_out(g, t)
        else:
            self.op_made(idx, flatten_tensors(out) + written)
        if self.replay.wants(idx):
            self.replay.capture(idx, (func, args, kwargs, rng, out), before,
                                self.activation_of, self.is_buffer)
        if not recorded.folded:
            self.meter.now = idx
            self.tasks.start(idx)
            self.meter.sample(("forward", idx))
            self.tasks.end(idx)
        return out

    def op_made(self, idx, made):
        """Forward op idx, new: checked against the graph's op idx, its
        outputs mapped to the graph's, and the saved ones (among the
        tensors `made`) watched."""
        rec, g = self.rec, self.graph
        op = rec.ops[idx]
        self.checks.forward_op(idx, op, rec.tensors)
        for rt, t in zip(op["outputs"], g.outputs[idx]):
            self.graph_of[rt] = t
            self.rt_of[t] = rt
            if g.is_saved[t]:
                x = next(x for x in made if rec.tensor_id(x) == rt)
                due = None
                if self.decisions.action[t] != _lowering.KEEP:
                    due = g.last_fwd_use[t]
                    due = g.producer[t] if due is None else due
                self.meter.watch(t, storage(x), due)

    def activation_of(self, t):
        """The graph tensor t's storage holds now, None if static."""
        rt = self.rec.activation_id(t)
        if rt is None:
            return None
        g = self.graph_of.get(rt)
        if g is None:
            raise PlanMismatch("an activation no forward op of graph %r "
                               "made: %s" % (self.graph.name,
                                             self.rec.tensors[rt]["name"]))
        return g

    def is_buffer(self, t):
        return storage_key(t) in self.buffer_keys

    def alias(self, copy, t):
        """A device copy of graph tensor t is t to the recorder."""
        self.rec.alias(copy, self.rt_of[t])

    def pack(self, t):
        rec = self.rec
        if rec is None or self.backward_started or t.layout != torch.strided:
            return t
        g = self.graph_of.get(rec.tensor_id(t))
        if g is None or not self.graph.is_saved[g]:
            return t
        return self.tasks.pack(g, t)

    def unpack(self, packed):
        t = self.tasks.unpacked(packed)
        return self.rec.unpack(t) if self.rec else t

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
        rec.begin_backward(roots)
        self.checks.forward_done(rec.ops, self.graph_of)
        self.checks.custom_function_reads(rec.custom_function_reads(),
                                          self.graph_of)
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

    def node_started(self):
        """A backward node starts: the ops the engine's gradient sums made
        start and end here; the node's own op starts, if the graph has it
        next."""
        self.process_new_ops()
        g = self.graph
        k = len(self.rec.ops)
        base = self.rec.running_base()
        if (k < len(g.ops) and g.phase[k] == _lowering.BACKWARD and
                base is not None and
                unnumbered(g.ops[k].get("name", "")) == unnumbered(base)):
            self.tasks.start(k)

    def node_ended(self):
        self.process_new_ops()

    def process_new_ops(self):
        """The backward ops the recorder appended since the last call: each
        checked against the graph, started (if not yet), measured, ended."""
        ops = self.rec.ops
        while self.processed < len(ops):
            j = self.processed
            self.checks.backward_op(j, ops[j], self.graph_of)
            self.tasks.start(j)
            self.meter.sample(("backward", j))
            self.tasks.end(j)
            self.processed += 1

    def finish(self):
        """Backward has returned: the last checks, and the measurements."""
        rec = self.rec
        self.process_new_ops()
        rec.name_backward_ops()
        self.checks.step_done(rec.ops)
        self.meter.sample(("backward end", len(rec.ops) - 1))
        measured = {"device": str(self.device)}
        measured.update(self.meter.figures())
        measured["held_after_step"] = len(self.resident)
        measured["h2d_queued_after_step"] = len(self.copies.h2d_queue)
        measured.update({k: int(v) for k, v in self.stats.items()})
        measured.update(self.clock.stop())
        self.measured = measured
        self.finished = True
