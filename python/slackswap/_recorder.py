"""Records one real training step of a PyTorch model as an operator graph.

The Recorder watches a forward and backward pass (docs/workloads.md, "What
the graph holds"):

* forward ops: every aten op below autograd (a TorchDispatchMode), named
  by module path (forward hooks); one graph tensor per storage, in-place
  ops folded into their producer where nothing read the storage since;
* saved activations: what each autograd node unpacks while it runs
  (torch.autograd.graph.saved_tensors_hooks), plus the tensors a custom
  autograd.Function keeps on its ctx (found on the node, which is the ctx);
* backward ops: one per autograd node that does work, in the order the
  engine runs them (node pre- and post-hooks);
* checkpointed regions (torch.utils.checkpoint, both variants): the
  recompute, recorded as ops of the backward phase while it runs inside
  backward, and the region's own backward ops.

Storages are identified by their StorageImpl address: the recorder holds a
weak reference to each, which keeps the address from being reused while
letting the memory go when the step frees it, so the traced step keeps and
frees what a plain one does (AccumulateGrad still steals gradients).

Ids follow one rule, so that anything that runs the same step again (a
runtime applying a plan) can find each tensor: tensors and ops are
numbered in order of first appearance.
"""

import collections
import contextlib
import enum
import functools
import types
import warnings

import torch
import torch.utils.checkpoint
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from slackswap import _costs
from slackswap.errors import ExportError, one_line

KIND_ACT = "TENSOR_KIND_ACTIVATION"
KIND_PARAM = "TENSOR_KIND_PARAMETER"
KIND_GRAD = "TENSOR_KIND_GRADIENT"
KIND_INPUT = "TENSOR_KIND_INPUT"
FORWARD = "PHASE_FORWARD"
BACKWARD = "PHASE_BACKWARD"

# torch.autograd.graph.saved_tensors_hooks as torch defines it: the class
# is replaced for a moment while a non-reentrant checkpoint starts.
_SavedTensorsHooks = torch.autograd.graph.saved_tensors_hooks

# ctx attributes that hold no tensor memory of their own.
_PLAIN_STATE = (type(None), bool, int, float, complex, str, bytes,
                torch.dtype, torch.device, torch.layout, torch.memory_format,
                torch.Generator, enum.Enum, type, types.FunctionType,
                types.BuiltinFunctionType, types.MethodType,
                functools.partial, torch.nn.Module)


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


def _float_dtype_name(nbytes):
    return {1: "fp8", 2: "bf16", 4: "fp32", 8: "fp64"}.get(
        nbytes, "b%d" % (nbytes * 8))


class _Unsupported(Exception):
    """A construct the recorder refuses; the step's error names the part."""


def _storage(t):
    """The storage that identifies t: a sparse COO tensor by its values."""
    if t.layout == torch.strided:
        return t.storage()
    if t.layout == torch.sparse_coo:
        return t._values().storage()
    raise _Unsupported("tensors of layout %s are not supported (strided "
                       "and sparse COO are)" % t.layout)


class _Frame:
    """A module call, or a checkpointed region being recomputed."""

    __slots__ = ("path", "module", "frontier", "since")

    def __init__(self, path, module, frontier, since):
        self.path = path
        self.module = module
        self.frontier = frontier
        self.since = since


class _Running:
    """A backward node that has started and not finished: its op (appended
    when it ends, if it did work), the tensor ids of the gradients it
    received, what it unpacked so far."""

    __slots__ = ("node", "op", "base", "grads", "unpacks")

    def __init__(self, node, op, base, grads):
        self.node = node
        self.op = op
        self.base = base
        self.grads = grads
        self.unpacks = []


class _Named:
    """A name made from an op's final name (backward ops are numbered at
    the end, in forward order)."""

    __slots__ = ("op", "suffix")

    def __init__(self, op, suffix):
        self.op = op
        self.suffix = suffix

    def __str__(self):
        return self.op["name"] + self.suffix


class _Mode(TorchDispatchMode):
    """Hands every aten op to the recorder."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (func == torch.ops.aten.detach.default and args and
                not isinstance(args[0], torch.Tensor)):
            # torch 1.13 hands a Python mode a wrapped scalar operand (the
            # 0.5 of x * 0.5) as a number; a non-reentrant checkpoint's
            # recompute detaches every tensor autograd saves, that one
            # too. Its detached copy: the same value, as a tensor.
            return _scalar_tensor(args[0])
        out = func(*args, **kwargs)
        self.recorder.on_op(func, args, kwargs, out)
        return out


def _scalar_tensor(value):
    """A Python number as the 0-dim tensor torch wraps it in."""
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64)
    if isinstance(value, complex):
        return torch.tensor(value, dtype=torch.complex128)
    return torch.tensor(value, dtype=torch.float64)


class native_dropout:
    """Context: aten::dropout runs as aten::native_dropout, as on CUDA.

    On CUDA, at::dropout in training dispatches to native_dropout: one
    kernel writing the output and a bool mask, which is all its backward
    keeps. On the CPU torch 1.13 takes a composite path instead (a float
    mask from bernoulli_, divided by 1-p, then a mul), which keeps the mask
    in the activation dtype. The graph describes a GPU step, so by default
    the CPU trace runs dropout the CUDA way. The kernel is replaced in the
    dispatcher, so every caller is reached: F.dropout, nn.Dropout, and the
    dropout between the layers of nn.LSTM/GRU/RNN, which C++ calls. p == 0,
    eval mode and in-place dropout keep torch's own behaviour.
    """

    def __init__(self, enabled=True):
        self.enabled = enabled
        self.lib = None

    def __enter__(self):
        if self.enabled:
            self.lib = torch.library.Library("aten", "IMPL")
            with warnings.catch_warnings():
                # "Overriding a previously registered kernel": intended.
                warnings.simplefilter("ignore")
                self.lib.impl("dropout", _dropout_as_on_cuda,
                              "CompositeImplicitAutograd")
        return self

    def __exit__(self, *exc):
        # The last reference: the registration goes with the Library.
        lib, self.lib = self.lib, None
        del lib
        return False


def _dropout_as_on_cuda(input, p, train):
    """at::dropout on CUDA (aten/src/ATen/native/Dropout.cpp)."""
    if train and 0 < p < 1 and input.numel() > 0:
        return torch.native_dropout(input, p, train)[0]
    if not train or p == 0 or input.numel() == 0:
        return input
    return input.mul(torch.zeros((), dtype=input.dtype))  # p == 1


def _inline_reentrant_apply(function, preserve_rng_state, *args):
    return function(*args)


def _inline_non_reentrant(function, preserve_rng_state=True, *args,
                          **kwargs):
    return function(*args, **kwargs)


@contextlib.contextmanager
def checkpoint_inlined():
    """torch.utils.checkpoint regions run as plain code: checkpoint() and
    checkpoint_sequential() look CheckpointFunction and
    _checkpoint_without_reentrant up in their module at each call, so
    replacing those reaches every caller."""
    cp = torch.utils.checkpoint
    saved = cp.CheckpointFunction, cp._checkpoint_without_reentrant
    cp.CheckpointFunction = types.SimpleNamespace(
        apply=_inline_reentrant_apply)
    cp._checkpoint_without_reentrant = _inline_non_reentrant
    try:
        yield
    finally:
        cp.CheckpointFunction, cp._checkpoint_without_reentrant = saved


class Recorder:
    """Records one training step of `model` as graph dicts."""

    def __init__(self, model, dtype_bytes):
        self.model = model
        self.dtype_bytes = dtype_bytes
        self.tensors = []   # dicts, index = id
        self.ops = []       # dicts in launch order, both phases
        self.storage_to_tensor = {}  # storage key -> current tensor id
        self.pinned = {}    # storage key -> StorageWeakRef (see module doc)
        self.read_since_write = {}   # tensor id -> read since written
        self.last_writer = {}        # tensor id -> index of its op
        self.frames = []
        self.base_path = ""
        self.blocks = set()          # module paths of repeated blocks
        self.block_index = {}        # block path -> layer index
        self.const_count = 0
        self.name_counts = collections.Counter()
        self.static_keys = set()
        # What autograd keeps from the forward pass, by storage key ->
        # bytes: packed saved tensors, tensors on custom Functions' ctx, the
        # inputs a non-reentrant checkpoint holds. Checked against the
        # graph's saved bytes.
        self.kept = {}
        self.recomputing = 0         # > 0 while a checkpoint recomputes
        self.tracing = True          # False: ops run unrecorded (labels)
        self.running = []            # backward nodes started, innermost last
        self.node_path = {}          # autograd node -> module path
        self.node_claim = {}         # autograd node -> claim number
        self.claimed = []            # nodes in claim order
        # autograd node -> (index of the forward op whose output carries
        # it, depth): the order the forward pass made the nodes in.
        self.node_order = {}
        # Every hooked node, held: a hook that refers to its node forms a
        # cycle through the node's hook dict that the garbage collector
        # would otherwise clear, silently dropping the hook.
        self.hooked = set()
        # Their hook handles: a parameter's AccumulateGrad node outlives
        # the step (autograd reuses it while anything holds it), so hooks
        # left on it would run in every later backward pass.
        self.node_handles = []
        self.node_counts = collections.Counter()  # started nodes per type
        self.contributions = collections.defaultdict(list)  # -> keys
        self.ctx_reads = {}          # custom Function node -> tensor ids
        self.bwd_named = []          # (op, base name, order) to name
        self.seen_backward = False
        self.num_forward_ops = None
        self.warnings = []

    # --- tensors ----------------------------------------------------------

    def key(self, t):
        return _storage(t)._cdata

    def pin(self, t):
        k = self.key(t)
        if k not in self.pinned:
            self.pinned[k] = StorageWeakRef(_storage(t))
        return k

    def scaled_elem(self, t):
        if t.is_floating_point():
            return self.dtype_bytes
        if t.is_complex():
            return 2 * self.dtype_bytes
        return t.element_size()

    def dtype_name(self, t):
        if t.is_floating_point():
            return _float_dtype_name(self.dtype_bytes)
        if t.is_complex():
            return "complex" + _float_dtype_name(self.dtype_bytes)
        return str(t.dtype).replace("torch.", "")

    def storage_bytes(self, t):
        """The whole storage (a sparse tensor: indices and values)."""
        if t.layout == torch.sparse_coo:
            idx = t._indices()
            return (idx.storage().size() * idx.element_size() +
                    t._values().storage().size() * self.scaled_elem(t))
        return _storage(t).size() * self.scaled_elem(t)

    def view_bytes(self, t):
        """The bytes t's elements occupy (what an op reads or writes)."""
        if t.layout == torch.sparse_coo:
            idx = t._indices()
            return (idx.numel() * idx.element_size() +
                    t._values().numel() * self.scaled_elem(t))
        return t.numel() * self.scaled_elem(t)

    @staticmethod
    def numel(t):
        if t.layout == torch.sparse_coo:
            return t._values().numel()
        return t.numel()

    def new_tensor(self, t, name, kind):
        tid = len(self.tensors)
        self.tensors.append({
            "id": tid, "name": name, "size_bytes": self.storage_bytes(t),
            "kind": kind, "dtype": self.dtype_name(t),
            "shape": "[" + ",".join(str(d) for d in t.shape) + "]",
        })
        self.storage_to_tensor[self.pin(t)] = tid
        return tid

    def register_static(self, t, name, kind):
        k = self.key(t)
        if k in self.storage_to_tensor:
            return self.storage_to_tensor[k]
        self.static_keys.add(k)
        return self.new_tensor(t, name, kind)

    def lookup(self, t):
        """The tensor id of t's storage; unknown storages become constants."""
        k = self.key(t)
        tid = self.storage_to_tensor.get(k)
        if tid is None:
            tid = self.new_tensor(t, "const%d" % self.const_count, KIND_INPUT)
            self.const_count += 1
            self.static_keys.add(k)
        return tid

    def activation_id(self, t):
        """t's tensor id if an op of the step made its storage, else None
        (parameters, inputs, constants, state made outside any op such as
        torch.get_rng_state())."""
        tid = self.storage_to_tensor.get(self.key(t))
        if tid is None or self.tensors[tid]["kind"] not in (KIND_ACT,
                                                            KIND_GRAD):
            return None
        return tid

    def keep(self, t):
        """Notes that autograd keeps t from the forward pass."""
        if not self.recomputing:
            self.kept.setdefault(self.pin(t), self.storage_bytes(t))

    # --- modules, layers and errors ---------------------------------------

    def refuse_torchscript(self):
        for name, mod in self.model.named_modules():
            if isinstance(mod, torch.jit.ScriptModule):
                raise ExportError(
                    self.part_name(name, mod),
                    "TorchScript modules are not supported: torch cannot put "
                    "the forward hooks that name each op on a ScriptModule, "
                    "and its interpreter may fuse or specialise ops after "
                    "the traced step; export the eager nn.Module instead")

    @staticmethod
    def part_name(path, module=None):
        part = path or "model"
        if module is not None:
            part += " (%s)" % type(module).__name__
        return part

    def current_part(self):
        """The model part running now, for an error message."""
        if self.running:
            node = self.running[-1].node
            path = self.node_path.get(node, "")
            return "backward of %s (%s)" % (path or "model",
                                            type(node).__name__)
        if self.frames:
            f = self.frames[-1]
            part = self.part_name(f.path, f.module)
            return part + (", recompute" if f.module is None else "")
        return self.base_path or "model"

    def install_module_hooks(self):
        names = {}
        for name, mod in self.model.named_modules():
            names.setdefault(mod, name)
        for name, mod in self.model.named_modules():
            if not isinstance(mod, (torch.nn.Sequential, torch.nn.ModuleList,
                                    torch.nn.ModuleDict)):
                continue
            kids = list(mod.named_children())
            types_ = collections.Counter(type(c) for _, c in kids)
            for cname, child in kids:
                # A layer is a composite block beside others of its type
                # (resnet's layer1.0, a TransformerEncoder's layers.1); two
                # Linears of one MLP are not two layers.
                if types_[type(child)] >= 2 and next(child.children(),
                                                     None) is not None:
                    self.blocks.add(cname if not name else name + "." + cname)
        handles = []
        for mod, name in names.items():
            handles.append(mod.register_forward_pre_hook(
                lambda m, inp, name=name: self._pre_hook(name, m, inp)))
            handles.append(mod.register_forward_hook(
                lambda m, inp, out, name=name: self._post_hook(out)))
        return handles

    def _pre_hook(self, name, module, inputs):
        frontier = {t.grad_fn for t in flatten_tensors(inputs)
                    if t.grad_fn is not None}
        self.frames.append(_Frame(name, module, frontier, len(self.claimed)))

    def _post_hook(self, outputs):
        f = self.frames.pop()
        roots = [t.grad_fn for t in flatten_tensors(outputs)
                 if t.grad_fn is not None]
        self.claim_nodes(roots, f.path, f.frontier, f.since)

    def claim_nodes(self, roots, path, frontier=(), since=0):
        """Gives `path` to the autograd nodes made since claim number
        `since` that its submodules did not claim: walks back from `roots`
        through nodes claimed since then (by submodules), stopping at the
        module's inputs (`frontier`) and at nodes claimed before."""
        stack = list(roots)
        visited = set()
        while stack:
            n = stack.pop()
            if n is None or n in visited or n in frontier:
                continue
            visited.add(n)
            if type(n).__name__ == "AccumulateGrad":
                continue
            claim = self.node_claim.get(n)
            if claim is not None and claim < since:
                continue  # made before this module ran
            if claim is None:
                self.node_claim[n] = len(self.claimed)
                self.claimed.append(n)
                self.node_path[n] = path
            for nxt, _ in n.next_functions:
                stack.append(nxt)

    def current_path(self):
        return self.frames[-1].path if self.frames else self.base_path

    def layer_of(self, path):
        parts = path.split(".") if path else []
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in self.blocks:
                if prefix not in self.block_index:
                    self.block_index[prefix] = len(self.block_index)
                return self.block_index[prefix]
        return -1

    # --- ops of the forward pass (and of recomputes) ---------------------

    def unique(self, name):
        """name, then name#1, name#2... for later ops of the same name."""
        k = self.name_counts[name]
        self.name_counts[name] += 1
        return name if k == 0 else "%s#%d" % (name, k)

    def note_node_order(self, ins):
        """An input's autograd node was made by the op that wrote the
        input's storage last: that op's index orders the node."""
        for t in ins:
            g = t.grad_fn
            if g is None or g in self.node_order:
                continue
            w = self.last_writer.get(self.storage_to_tensor.get(self.key(t)))
            if w is not None:
                self.node_order[g] = (w, 0)

    def on_op(self, func, args, kwargs, out):
        """Records one aten call; returns the index of the op it made or
        was folded into, None when it is not an op of the graph."""
        if not self.tracing:
            return None
        name = func.overloadpacket.__name__
        if hasattr(torch, "Tag") and torch.Tag.inplace_view in func.tags:
            return None  # metadata only (transpose_, unsqueeze_...)
        written = []
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            v = args[i] if i < len(args) else kwargs.get(a.name)
            written.extend(flatten_tensors(v))
        ins = _costs.dedup(flatten_tensors((args, kwargs)), self.key)
        self.note_node_order(ins)
        outs = _costs.dedup(flatten_tensors(out), self.key)
        new_outs = [t for t in outs
                    if self.key(t) not in self.storage_to_tensor]
        written = _costs.dedup(written, self.key)
        if not new_outs and not written:
            return None  # a view, or no tensor result: not an op
        phase = BACKWARD if self.recomputing else FORWARD
        path = self.current_path()
        cost = _costs.forward_cost(name, args, ins, outs, self.view_bytes,
                                   self.numel)
        in_ids = [self.lookup(t) for t in ins]
        written_ids = [self.lookup(t) for t in written]
        written_act = [w for w in written_ids
                       if self.tensors[w]["kind"] in (KIND_ACT, KIND_GRAD)]

        # In-place on activations: fold into the op that last wrote them.
        if written_act and not new_outs:
            target = self.last_writer.get(written_act[0])
            ok = (target is not None and
                  self.ops[target]["phase"] == phase and
                  all(self.last_writer.get(w) == target and
                      not self.read_since_write.get(w) for w in written_act))
            if ok:
                for i in in_ids:
                    p = self.last_writer.get(i)
                    if p is not None and p > target:
                        ok = False
            if ok:
                op = self.ops[target]
                op["name"] += "+" + name
                op["aten"].append(name)
                for i in in_ids:
                    if i not in op["inputs"] and i not in op["outputs"]:
                        op["inputs"].append(i)
                        self.read_since_write[i] = True
                _costs.add_cost(op["cost"], cost)
                return target

        base = name if not path else path + "." + name
        opname = self.unique(base + ("@recompute" if self.recomputing
                                     else ""))
        op = {"name": opname, "phase": phase, "inputs": [], "outputs": [],
              "layer": self.layer_of(path), "cost": cost, "aten": [name]}
        idx = len(self.ops)
        self.ops.append(op)
        for i in in_ids:
            if i not in op["inputs"]:
                op["inputs"].append(i)
                self.read_since_write[i] = True
        # Written activations get a new version (an output), others (static
        # buffers such as running stats) are updated in place.
        for w, t in zip(written_ids, written):
            if w in written_act:
                nid = self.new_tensor(t, opname, KIND_ACT)
                op["outputs"].append(nid)
                self.last_writer[nid] = idx
                self.read_since_write[nid] = False
        for j, t in enumerate(new_outs):
            tname = opname if len(new_outs) == 1 else "%s:%d" % (opname, j)
            nid = self.new_tensor(t, tname, KIND_ACT)
            op["outputs"].append(nid)
            self.last_writer[nid] = idx
            self.read_since_write[nid] = False
        return idx

    # --- saved tensors ----------------------------------------------------

    def pack(self, t):
        self.keep(t)
        return t

    def unpack(self, t):
        if self.running and t is not None:
            self.running[-1].unpacks.append(t)
        return t

    def scan_ctx(self, node):
        """The activations a custom autograd.Function keeps as attributes
        of its ctx (the node itself) rather than through
        save_for_backward: its backward reads them."""
        found = []
        unsized = []
        for attr, value in sorted(vars(node).items()):
            _walk_state(value, "ctx." + attr, found, unsized)
        ids = []
        for _, t in found:
            tid = self.activation_id(t)
            if tid is not None and tid not in ids:
                ids.append(tid)
                self.keep(t)
        if ids:
            self.ctx_reads[node] = ids
        for where, what in unsized:
            self.warnings.append(
                "%s: custom Function %s keeps %s (%s) on its ctx, whose "
                "size the exporter cannot tell: not counted" % (
                    self.part_name(self.node_path.get(node, "")),
                    type(node).__name__, where, what))

    # --- checkpointed regions ---------------------------------------------

    @contextlib.contextmanager
    def checkpoint_patched(self, strip):
        """torch.utils.checkpoint, recorded (or, with strip, inlined), by
        replacing the same two names checkpoint_inlined() replaces."""
        if strip:
            with checkpoint_inlined():
                yield
            return
        cp = torch.utils.checkpoint
        saved = cp.CheckpointFunction, cp._checkpoint_without_reentrant
        reentrant, non_reentrant = saved

        def apply(function, preserve_rng_state, *args):
            return reentrant.apply(self.region(function, True),
                                   preserve_rng_state, *args)

        def without_reentrant(function, preserve_rng_state=True, *args,
                              **kwargs):
            # The hooks' closure holds the inputs until backward.
            for t in flatten_tensors((args, kwargs)):
                if self.activation_id(t) is not None:
                    self.keep(t)
            with self.unpacks_observed():
                return non_reentrant(self.region(function, False),
                                     preserve_rng_state, *args, **kwargs)

        cp.CheckpointFunction = types.SimpleNamespace(apply=apply)
        cp._checkpoint_without_reentrant = without_reentrant
        try:
            yield
        finally:
            cp.CheckpointFunction, cp._checkpoint_without_reentrant = saved

    @contextlib.contextmanager
    def unpacks_observed(self):
        """While a non-reentrant checkpoint starts: the saved-tensor hooks
        it installs also tell the recorder what each node unpacks (the
        recomputed tensors), as the recorder's own hooks do elsewhere."""
        recorder = self

        class Observed(_SavedTensorsHooks):
            slackswap_checkpoint = True

            def __init__(self, pack_hook, unpack_hook):
                def unpack(packed):
                    return recorder.unpack(unpack_hook(packed))
                super().__init__(pack_hook, unpack)

        graph = torch.autograd.graph
        plain = graph.saved_tensors_hooks
        graph.saved_tensors_hooks = Observed
        try:
            yield
        finally:
            graph.saved_tensors_hooks = plain

    @contextlib.contextmanager
    def own_hooks_noted(self):
        """During the forward pass: saved-tensor hooks of the model's own
        (torch.autograd.graph.save_on_cpu, offloading) are innermost, so
        what autograd saves under them is hidden from the recorder, and
        where they put it is theirs: a warning names the part."""
        recorder = self
        enter = _SavedTensorsHooks.__enter__

        def noted_enter(hooks):
            if (hooks.pack_hook != recorder.pack and
                    not getattr(hooks, "slackswap_checkpoint", False)):
                recorder.warnings.append(
                    "%s: tensors saved under the model's own saved-tensor "
                    "hooks (%s) are not in the graph" % (
                        recorder.current_part(), type(hooks).__name__))
            return enter(hooks)

        _SavedTensorsHooks.__enter__ = noted_enter
        try:
            yield
        finally:
            _SavedTensorsHooks.__enter__ = enter

    def region(self, function, reentrant):
        """Wraps a checkpointed function: its first call is the forward
        pass; each later one, from backward, is a recompute."""
        path = self.current_path()
        calls = []

        def run(*args, **kwargs):
            if not calls:
                calls.append(True)
                return function(*args, **kwargs)
            return self.recompute(function, path, reentrant, args, kwargs)

        run.slackswap_region = True
        return run

    def recompute(self, function, path, reentrant, args, kwargs):
        if self.running:
            # The node that asked for the recompute unpacked the region's
            # inputs (reentrant): the recompute's ops read them instead.
            self.running[-1].unpacks.clear()
        inputs = flatten_tensors((args, kwargs))
        frontier = {t.grad_fn for t in inputs if t.grad_fn is not None}
        since = len(self.claimed)
        self.frames.append(_Frame(path, None, frontier, since))
        self.recomputing += 1
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(_Mode(self))
                if reentrant:
                    # Its backward runs here, over the recompute's graph;
                    # without reentrancy torch's own hooks are innermost.
                    stack.enter_context(_SavedTensorsHooks(self.pack,
                                                           self.unpack))
                out = function(*args, **kwargs)
        finally:
            self.recomputing -= 1
            self.frames.pop()
        roots = [t.grad_fn for t in flatten_tensors(out)
                 if t.grad_fn is not None]
        self.claim_nodes(roots, path, frontier, since)
        if reentrant:  # CheckpointFunction runs this graph's backward next
            self.install_node_hooks(roots)
        return out

    # --- backward ---------------------------------------------------------

    def install_node_hooks(self, roots):
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n is None or n in self.hooked:
                continue
            self.hooked.add(n)
            if isinstance(n, torch.autograd.function.BackwardCFunction):
                self.scan_ctx(n)
            if type(n).__name__ != "AccumulateGrad":
                self.node_handles.append(n.register_prehook(
                    lambda go, n=n: self.on_node_start(n, go)))
            self.node_handles.append(n.register_hook(
                lambda gi, go, n=n: self.on_node_end(n, gi, go)))
            for nxt, _ in n.next_functions:
                stack.append(nxt)

    def order_of(self, node):
        """(forward op index, depth) ordering nodes as the forward pass made
        them; a node no op output carried comes just after its inputs'."""
        stack = [node]
        while stack:
            n = stack[-1]
            if n in self.node_order:
                stack.pop()
                continue
            nexts = [m for m, _ in n.next_functions if m is not None]
            todo = [m for m in nexts if m not in self.node_order]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            prev = max([self.node_order[m] for m in nexts] + [(-1, 0)])
            self.node_order[n] = (prev[0], prev[1] + 1)
        return self.node_order[node]

    def on_node_start(self, node, grad_outputs):
        """The gradients a node receives are known when it starts: a sum
        the engine made for it comes before anything the node runs (a
        reentrant checkpoint's whole recompute and backward)."""
        self.running.append(self.begin_node(node, grad_outputs))

    def begin_node(self, node, grad_outputs):
        nodename = type(node).__name__
        if nodename == "AccumulateGrad":
            var = getattr(node, "variable", None)
            tid = None if var is None else self.storage_to_tensor.get(
                self.key(var))
            path = self.tensors[tid]["name"] if tid is not None else ""
            layer, ordinal = -1, None
        else:
            path = self.node_path.get(node, "")
            layer = self.layer_of(path)
            ordinal = self.node_counts[nodename]
            self.node_counts[nodename] += 1
        base = nodename if not path else path + "." + nodename
        op = {"name": None, "phase": BACKWARD, "inputs": [], "outputs": [],
              "layer": layer, "node": nodename, "ordinal": ordinal}
        self.bwd_named.append((op, base, self.order_of(node)))
        grads = self.incoming_gradients(node, op, base, grad_outputs)
        self.seen_backward = True
        return _Running(node, op, base, grads)

    def on_node_end(self, node, grad_inputs, grad_outputs):
        nodename = type(node).__name__
        if nodename == "AccumulateGrad":  # no pre-hook: nothing nests
            run = self.begin_node(node, grad_outputs)
        else:
            run = self.running.pop()
            if run.node is not node:
                raise RuntimeError("backward hooks out of order at %s" %
                                   nodename)
        op = run.op
        # Where the node's gradients go (for sums the engine makes later).
        for i, (nxt, nr) in enumerate(node.next_functions):
            if nxt is None or i >= len(grad_inputs) or grad_inputs[i] is None:
                continue
            self.contributions[(nxt, nr)].append(self.pin(grad_inputs[i]))
        if nodename == "AccumulateGrad":
            self.leaf_gradient_copy(node, op, run.grads)
            return
        if (nodename == "CheckpointFunctionBackward" and
                not getattr(node.run_function, "slackswap_region", False)):
            self.warnings.append(
                "%s: a checkpointed region ran through CheckpointFunction "
                "directly, not torch.utils.checkpoint.checkpoint(): its "
                "recompute and backward are missing" % run.base)
        saved_ids = []
        for t in run.unpacks:
            tid = self.lookup(t)
            if tid not in saved_ids:
                saved_ids.append(tid)
        for tid in self.ctx_reads.get(node, []):
            if tid not in saved_ids:
                saved_ids.append(tid)
        outputs = []
        for i, g in enumerate(grad_inputs):
            if g is None:
                continue
            if self.key(g) in self.storage_to_tensor:
                continue  # passes an existing gradient through (or a view)
            outputs.append(self.new_tensor(g, _Named(op, ".grad%d" % i),
                                           KIND_GRAD))
        if not outputs and not saved_ids:
            return  # a view or a pass-through: no work of its own
        for tid in saved_ids + run.grads:
            if tid not in op["inputs"]:
                op["inputs"].append(tid)
        op["outputs"] = outputs
        op["cost"] = _costs.backward_cost(
            node, nodename, grad_inputs, grad_outputs, run.unpacks,
            self.view_bytes, self.numel, self.key)
        self.ops.append(op)

    def leaf_gradient_copy(self, node, op, grads):
        """AccumulateGrad copies a gradient whose layout does not suit its
        leaf (a slice of a cat's gradient). A parameter's .grad is outside
        the activation memory, but a reentrant checkpoint's detached inputs
        pass theirs on as the region's input gradients: an op, then."""
        var = getattr(node, "variable", None)
        g = None if var is None else var.grad
        if g is None or self.key(g) in self.storage_to_tensor:
            return  # none, or the incoming gradient itself (stolen)
        tid = self.storage_to_tensor.get(self.key(var))
        if tid is None or self.tensors[tid]["kind"] != KIND_ACT:
            return
        op["inputs"] = list(grads)
        op["outputs"] = [self.new_tensor(g, _Named(op, ".grad"), KIND_GRAD)]
        op["cost"] = _costs.copy_cost(self.view_bytes(g))
        self.ops.append(op)

    def incoming_gradients(self, node, op, base, grad_outputs):
        """Tensor ids of the gradients node received; where the engine
        summed several contributions, a grad_accumulate op makes the sum
        just before."""
        inputs = []
        for nr, g in enumerate(grad_outputs):
            if g is None:
                continue
            k = self.pin(g)
            contrib = [self.storage_to_tensor[c]
                       for c in self.contributions.get((node, nr), [])
                       if c in self.storage_to_tensor]
            tid = self.storage_to_tensor.get(k)
            if tid is not None:
                others = [c for c in contrib if c != tid]
                if others:  # summed in place into the first contribution
                    self.accumulate_op(op, nr, others + [tid], None, g)
                inputs.append(tid)
                continue
            cids = []
            for c in contrib:
                if c not in cids:
                    cids.append(c)
            if cids:
                sum_id = self.new_tensor(g, _Named(op, ".grad_sum%d" % nr),
                                         KIND_GRAD)
                self.accumulate_op(op, nr, cids, sum_id, g)
                inputs.append(sum_id)
                continue
            seed = not self.seen_backward
            tid = self.new_tensor(
                g, "grad_seed" if seed else _Named(op, ".grad_in%d" % nr),
                KIND_INPUT)
            self.static_keys.add(k)
            if not seed:
                self.warnings.append(
                    "%s: incoming gradient %d has no producer; static input"
                    % (base, nr))
            inputs.append(tid)
        return inputs

    def accumulate_op(self, consumer, nr, inputs, output, g):
        self.ops.append({
            "name": _Named(consumer, ".grad_accumulate%d" % nr),
            "phase": BACKWARD, "inputs": list(inputs),
            "outputs": [] if output is None else [output],
            "layer": consumer["layer"], "node": "grad_accumulate",
            "cost": _costs.accumulate_cost(len(inputs), self.numel(g),
                                           self.view_bytes(g))})

    # --- the step ---------------------------------------------------------

    def run(self, args, kwargs, loss_fn, strip_checkpoint=False):
        """One forward and backward step; loss_fn(recorder, output) makes
        the loss (traced under the module path `loss`)."""
        self.refuse_torchscript()
        self.register_step_statics(args, kwargs)
        handles = self.install_module_hooks()
        try:
            with self.checkpoint_patched(strip_checkpoint):
                with _SavedTensorsHooks(self.pack, self.unpack), \
                        self.own_hooks_noted(), _Mode(self):
                    out = self.model(*args, **kwargs)
                    self.base_path = "loss"
                    loss = loss_fn(self, out)
                if (not isinstance(loss, torch.Tensor) or
                        loss.numel() != 1 or loss.grad_fn is None):
                    raise ExportError("loss", "the loss must be a tensor of "
                                      "one element that requires grad")
                self.claim_nodes([loss.grad_fn], "loss")
                self.install_node_hooks([loss.grad_fn])
                self.num_forward_ops = len(self.ops)
                self.base_path = ""
                loss.backward()
        except ExportError:
            raise
        except Exception as e:  # the model's, torch's or an unsupported use
            what = str(e) if isinstance(e, _Unsupported) else one_line(e)
            raise ExportError(self.current_part(), what) from e
        finally:
            for h in handles:
                h.remove()
            self.release_nodes()
        self.name_backward_ops()
        return loss

    def release_nodes(self):
        """Removes the backward hooks and lets go of the nodes."""
        for h in self.node_handles:
            h.remove()
        self.node_handles = []
        self.hooked = set()

    def register_step_statics(self, args, kwargs):
        """The step's static tensors, numbered first: parameters, buffers,
        then the inputs (`input`, or `input0`, `input1`, `input.NAME`)."""
        for name, p in self.model.named_parameters():
            self.register_static(p, name, KIND_PARAM)
        for name, b in self.model.named_buffers():
            self.register_static(b, name, KIND_PARAM)
        named = [("input%d" % i, a) for i, a in enumerate(args)]
        named += [("input." + k, v) for k, v in kwargs.items()]
        inputs = [(n, flatten_tensors(v)) for n, v in named]
        count = sum(len(ts) for _, ts in inputs)
        for n, ts in inputs:
            for j, t in enumerate(ts):
                self.register_static(
                    t, "input" if count == 1 else
                    n if len(ts) == 1 else "%s.%d" % (n, j), KIND_INPUT)

    @contextlib.contextmanager
    def untraced(self):
        """Ops run without being recorded (a built-in loss's labels)."""
        self.tracing = False
        try:
            yield
        finally:
            self.tracing = True

    def name_backward_ops(self):
        """Backward ops of one name are numbered in the order the forward
        pass made their nodes (the engine runs them in reverse)."""
        groups = collections.defaultdict(list)
        for seq, (op, base, order) in enumerate(self.bwd_named):
            groups[base].append((order, seq, op))
        for base, lst in groups.items():
            lst.sort(key=lambda x: (x[0], x[1]))
            for k, (_, _, op) in enumerate(lst):
                op["name"] = base if k == 0 else "%s#%d" % (base, k)

    # --- the graph --------------------------------------------------------

    def graph(self, name, description):
        """The graph as a dict in the proto3 JSON mapping."""
        tensors = []
        for t in self.tensors:
            tensors.append({
                "id": str(t["id"]), "name": str(t["name"]),
                "size_bytes": str(t["size_bytes"]), "kind": t["kind"],
                "dtype": t["dtype"], "shape": t["shape"]})
        ops = []
        for i, op in enumerate(self.ops):
            c = op["cost"]
            cost = {"flops": float(c["flops"]),
                    "bytes_accessed": str(int(c["bytes_accessed"])),
                    "kernels": int(c["kernels"]), "kind": c["kind"]}
            if "duration_ns" in c:
                cost["duration_ns"] = str(int(c["duration_ns"]))
            ops.append({
                "id": str(i), "name": str(op["name"]), "phase": op["phase"],
                "input_ids": [str(x) for x in op["inputs"]],
                "output_ids": [str(x) for x in op["outputs"]],
                "workspace_bytes": "0", "layer": op["layer"], "cost": cost})
        return {"name": name, "description": description, "tensors": tensors,
                "ops": ops}

    def saved_summary(self):
        """(graph saved bytes, kept bytes, tensor ids saved): the tensors
        forward ops make and backward ops read, and, measured apart, what
        autograd kept from the forward pass."""
        producer = {}
        for i, op in enumerate(self.ops):
            for o in op["outputs"]:
                producer[o] = i
        saved = set()
        for op in self.ops[self.num_forward_ops:]:
            for i in op["inputs"]:
                p = producer.get(i)
                if p is not None and p < self.num_forward_ops:
                    saved.add(i)
        graph_bytes = sum(self.tensors[i]["size_bytes"] for i in saved)
        kept_bytes = sum(b for k, b in self.kept.items()
                         if k not in self.static_keys)
        return graph_bytes, kept_bytes, saved


def _walk_state(value, where, found, unsized):
    """Collects the tensors in a ctx attribute's value into found, and what
    cannot be sized into unsized, as (where, value or type name)."""
    if isinstance(value, torch.Tensor):
        found.append((where, value))
    elif isinstance(value, (list, tuple)):
        for i, x in enumerate(value):
            _walk_state(x, "%s[%d]" % (where, i), found, unsized)
    elif isinstance(value, dict):
        for k, x in value.items():
            _walk_state(x, "%s[%r]" % (where, k), found, unsized)
    elif isinstance(value, (set, frozenset)):
        for x in value:
            _walk_state(x, where + "{}", found, unsized)
    elif not isinstance(value, _PLAIN_STATE):
        unsized.append((where, type(value).__name__))
