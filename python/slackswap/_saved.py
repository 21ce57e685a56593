"""What autograd keeps from the forward pass of a recorded step: the
tensors its saved-tensor hooks pack, and those a custom autograd.Function
keeps on its ctx, out of the hooks' sight."""

import contextlib
import enum
import functools
import types

import torch

# torch.autograd.graph.saved_tensors_hooks as torch defines it: the class
# is replaced for a moment while a non-reentrant checkpoint starts.
SavedTensorsHooks = torch.autograd.graph.saved_tensors_hooks

# ctx attributes that hold no tensor memory of their own.
_PLAIN_STATE = (type(None), bool, int, float, complex, str, bytes,
                torch.dtype, torch.device, torch.layout, torch.memory_format,
                torch.Generator, enum.Enum, type, types.FunctionType,
                types.BuiltinFunctionType, types.MethodType,
                functools.partial, torch.nn.Module)


class SavedTensors:
    """What autograd keeps from the forward pass, by storage key -> bytes
    (packed saved tensors, tensors on custom Functions' ctx, the inputs a
    non-reentrant checkpoint holds), measured apart from the graph to
    check its saved bytes; and, per custom Function node, the activations
    its backward reads off its ctx."""

    def __init__(self, table, paths, forward, warnings):
        self.table = table
        self.paths = paths
        self.forward = forward      # its `recomputing`: nothing is kept then
        self.warnings = warnings
        self.kept = {}              # storage key -> bytes
        self.ctx_reads = {}         # custom Function node -> tensor ids

    def keep(self, t):
        """Notes that autograd keeps t from the forward pass."""
        if not self.forward.recomputing:
            self.kept.setdefault(self.table.pin(t),
                                 self.table.storage_bytes(t))

    def pack(self, t):
        self.keep(t)
        return t

    def kept_bytes(self):
        return sum(b for k, b in self.kept.items()
                   if k not in self.table.static_keys)

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
            tid = self.table.activation_id(t)
            if tid is not None and tid not in ids:
                ids.append(tid)
                self.keep(t)
        if ids:
            self.ctx_reads[node] = ids
        for where, what in unsized:
            self.warnings.append(
                "%s: custom Function %s keeps %s (%s) on its ctx, whose "
                "size the exporter cannot tell: not counted" % (
                    self.paths.part_name(self.paths.node_path.get(node, "")),
                    type(node).__name__, where, what))

    @contextlib.contextmanager
    def own_hooks_noted(self, current_part):
        """During the forward pass: saved-tensor hooks of the model's own
        (torch.autograd.graph.save_on_cpu, offloading) are innermost, so
        what autograd saves under them is hidden from the recorder, and
        where they put it is theirs: a warning names the part
        (current_part())."""
        enter = SavedTensorsHooks.__enter__
        pack, warnings = self.pack, self.warnings

        def noted_enter(hooks):
            if (hooks.pack_hook != pack and
                    not getattr(hooks, "slackswap_checkpoint", False)):
                warnings.append(
                    "%s: tensors saved under the model's own saved-tensor "
                    "hooks (%s) are not in the graph" % (
                        current_part(), type(hooks).__name__))
            return enter(hooks)

        SavedTensorsHooks.__enter__ = noted_enter
        try:
            yield
        finally:
            SavedTensorsHooks.__enter__ = enter


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
