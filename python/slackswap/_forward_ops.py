"""The forward pass of a recorded step as graph ops: each aten call below
autograd that makes or writes an activation (slackswap._numbering, rules
3 to 5), seen through a TorchDispatchMode."""

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from slackswap import _costs
from slackswap._numbering import (BACKWARD, FORWARD, KIND_ACT, Recorded,
                                  detached_number, flatten_tensors,
                                  written_tensors)


class RecordingMode(TorchDispatchMode):
    """Hands every aten call to the recorder's forward ops."""

    def __init__(self, forward_ops):
        super().__init__()
        self.forward_ops = forward_ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        number = detached_number(func, args)
        if number is not None:
            return number
        out = func(*args, **kwargs)
        self.forward_ops.on_op(func, args, kwargs, out)
        return out


class ForwardOps:
    """Aten calls as graph ops in launch order, named by module path, an
    in-place write folded into the op that last wrote the storage where
    nothing read it since; also the ops a checkpointed region's recompute
    runs inside backward (ops of the backward phase, `@recompute`)."""

    def __init__(self, table, paths, ops):
        self.table = table
        self.paths = paths
        self.ops = ops                # the recorder's: dicts, both phases
        self.name_counts = collections.Counter()
        self.last_writer = {}         # tensor id -> index of its op
        self.read_since_write = {}    # tensor id -> read since written
        # autograd node -> (index of the forward op whose output carries
        # it, depth): the order the forward pass made the nodes in.
        self.node_order = {}
        self.recomputing = 0          # > 0 while a checkpoint recomputes
        self.tracing = True           # False: ops run unrecorded (labels)

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
            w = self.last_writer.get(self.table.id_of(t))
            if w is not None:
                self.node_order[g] = (w, 0)

    def on_op(self, func, args, kwargs, out):
        """Records one aten call: the op it made or was folded into
        (Recorded), None when it is not an op of the graph."""
        if not self.tracing:
            return None
        if hasattr(torch, "Tag") and torch.Tag.inplace_view in func.tags:
            return None  # metadata only (transpose_, unsqueeze_...)
        table, key = self.table, self.table.key
        written = written_tensors(func, args, kwargs)
        ins = _costs.dedup(flatten_tensors((args, kwargs)), key)
        self.note_node_order(ins)
        outs = _costs.dedup(flatten_tensors(out), key)
        new_outs = [t for t in outs
                    if key(t) not in table.storage_to_tensor]
        written = _costs.dedup(written, key)
        if not new_outs and not written:
            return None  # a view, or no tensor result: not an op
        name = func.overloadpacket.__name__
        phase = BACKWARD if self.recomputing else FORWARD
        cost = _costs.forward_cost(name, args, ins, outs, table.view_bytes,
                                   table.numel)
        in_ids = [table.lookup(t) for t in ins]
        written_ids = [table.lookup(t) for t in written]
        written_act = [w for w in written_ids if table.is_activation(w)]
        if written_act and not new_outs:  # in place on activations only
            target = self.fold_target(phase, in_ids, written_act)
            if target is not None:
                self.fold(target, name, in_ids, cost)
                return Recorded(target, folded=True)
        op = {"name": None, "phase": phase, "inputs": [], "outputs": [],
              "layer": None, "cost": cost, "aten": [name]}
        self.add_op(op, in_ids, [(t, w) for w, t in zip(written_ids, written)
                                 if w in written_act], new_outs)
        return Recorded(len(self.ops) - 1, folded=False)

    def fold_target(self, phase, in_ids, written_act):
        """The op an in-place write to activations folds into: the one that
        last wrote all of them, in the same phase, when nothing read them
        since and no input of the call is newer; None when there is none."""
        target = self.last_writer.get(written_act[0])
        if target is None or self.ops[target]["phase"] != phase:
            return None
        if not all(self.last_writer.get(w) == target and
                   not self.read_since_write.get(w) for w in written_act):
            return None
        for i in in_ids:
            p = self.last_writer.get(i)
            if p is not None and p > target:
                return None
        return target

    def fold(self, target, name, in_ids, cost):
        op = self.ops[target]
        op["name"] += "+" + name
        op["aten"].append(name)
        for i in in_ids:
            if i not in op["inputs"] and i not in op["outputs"]:
                op["inputs"].append(i)
                self.read_since_write[i] = True
        _costs.add_cost(op["cost"], cost)

    def add_op(self, op, in_ids, written_act, new_outs):
        """Appends op, named by the module path running now. Written
        activations (tensor, id) get a new version (an output); other
        written tensors (static buffers such as running stats) are updated
        in place."""
        path = self.paths.current_path()
        name = op["aten"][0]
        base = name if not path else path + "." + name
        op["name"] = opname = self.unique(
            base + ("@recompute" if self.recomputing else ""))
        op["layer"] = self.paths.layer_of(path)
        idx = len(self.ops)
        self.ops.append(op)
        for i in in_ids:
            if i not in op["inputs"]:
                op["inputs"].append(i)
                self.read_since_write[i] = True
        made = [(t, opname) for t, _ in written_act]
        made += [(t, opname if len(new_outs) == 1 else "%s:%d" % (opname, j))
                 for j, t in enumerate(new_outs)]
        for t, tname in made:
            nid = self.table.new_tensor(t, tname, KIND_ACT)
            op["outputs"].append(nid)
            self.last_writer[nid] = idx
            self.read_since_write[nid] = False
