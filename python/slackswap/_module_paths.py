"""Module paths and layers in a recorded step: which module call each op
and each autograd node belongs to, for their names and for errors."""

import collections

import torch

from slackswap._numbering import flatten_tensors
from slackswap.errors import ExportError


class _Frame:
    """A module call, or a checkpointed region being recomputed."""

    __slots__ = ("path", "module", "frontier", "since")

    def __init__(self, path, module, frontier, since):
        self.path = path
        self.module = module
        self.frontier = frontier
        self.since = since


class ModulePaths:
    """The module calls running now (forward hooks), the layers (composite
    blocks beside others of their type) and the module path each autograd
    node was claimed for: the node's module, not its submodules'."""

    def __init__(self, model):
        self.model = model
        self.frames = []             # module calls running, innermost last
        self.base_path = ""          # outside any module call ("loss")
        self.blocks = set()          # module paths of repeated blocks
        self.block_index = {}        # block path -> layer index
        self.node_path = {}          # autograd node -> module path
        self.node_claim = {}         # autograd node -> claim number
        self.claimed = []            # nodes in claim order

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
        """The module call running now, for an error message."""
        if self.frames:
            f = self.frames[-1]
            part = self.part_name(f.path, f.module)
            return part + (", recompute" if f.module is None else "")
        return self.base_path or "model"

    def install_hooks(self):
        """Finds the layers and hooks every module; returns the handles."""
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
                lambda m, inp, out: self.leave(out)))
        return handles

    def _pre_hook(self, name, module, inputs):
        self.enter(name, module, inputs)  # None: the inputs stay as they are

    def enter(self, path, module, inputs):
        """A module call (module None: a recompute) starts; its frame."""
        frontier = {t.grad_fn for t in flatten_tensors(inputs)
                    if t.grad_fn is not None}
        frame = _Frame(path, module, frontier, len(self.claimed))
        self.frames.append(frame)
        return frame

    def leave(self, outputs):
        """The innermost module call returned `outputs`."""
        self.claim_frame(self.frames.pop(), outputs)

    def claim_frame(self, frame, outputs):
        """Claims for the frame's path the nodes its call made; returns the
        outputs' nodes."""
        roots = [t.grad_fn for t in flatten_tensors(outputs)
                 if t.grad_fn is not None]
        self.claim_nodes(roots, frame.path, frame.frontier, frame.since)
        return roots

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
