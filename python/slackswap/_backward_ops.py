"""The backward pass of a recorded step as graph ops: one per autograd
node that does work, in the order the engine runs them (node pre- and
post-hooks), and the gradient sums the engine makes between them."""

import collections

import torch

from slackswap import _costs
from slackswap._numbering import (BACKWARD, KIND_ACT, KIND_GRAD, KIND_INPUT,
                                  BackwardName)


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


class BackwardOps:
    """Follows the engine through the step's autograd graph: each node's
    op, named by the module path its forward call claimed it for and
    numbered at the end in the order the forward pass made the nodes.

    listener, when given, is told after each node's start and end
    (node_started(), node_ended()): the runtime lives its schedule there.
    """

    def __init__(self, table, paths, forward, saved, warnings,
                 listener=None):
        self.table = table
        self.paths = paths
        self.ops = forward.ops
        self.node_order = forward.node_order
        self.saved = saved
        self.warnings = warnings
        self.listener = listener
        self.running = []            # nodes started, innermost last
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
        self.named = []              # (op, base name, order) to name
        self.seen_backward = False

    def install_node_hooks(self, roots):
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n is None or n in self.hooked:
                continue
            self.hooked.add(n)
            if isinstance(n, torch.autograd.function.BackwardCFunction):
                self.saved.scan_ctx(n)
            if type(n).__name__ != "AccumulateGrad":
                self.node_handles.append(n.register_prehook(
                    lambda go, n=n: self._started(n, go)))
            self.node_handles.append(n.register_hook(
                lambda gi, go, n=n: self._ended(n, gi, go)))
            for nxt, _ in n.next_functions:
                stack.append(nxt)

    def release_nodes(self):
        """Removes the backward hooks and lets go of the nodes."""
        for h in self.node_handles:
            h.remove()
        self.node_handles = []
        self.hooked = set()

    def unpack(self, t):
        """Saved tensor t is unpacked: the running node reads it."""
        if self.running and t is not None:
            self.running[-1].unpacks.append(t)
        return t

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

    def _started(self, node, grad_outputs):
        """The gradients a node receives are known when it starts: a sum
        the engine made for it comes before anything the node runs (a
        reentrant checkpoint's whole recompute and backward)."""
        self.running.append(self.begin_node(node, grad_outputs))
        if self.listener is not None:
            self.listener.node_started()

    def _ended(self, node, grad_inputs, grad_outputs):
        self.end_node(node, grad_inputs, grad_outputs)
        if self.listener is not None:
            self.listener.node_ended()

    def begin_node(self, node, grad_outputs):
        nodename = type(node).__name__
        if nodename == "AccumulateGrad":
            var = getattr(node, "variable", None)
            tid = None if var is None else self.table.id_of(var)
            path = self.table.tensors[tid]["name"] if tid is not None else ""
            layer, ordinal = -1, None
        else:
            path = self.paths.node_path.get(node, "")
            layer = self.paths.layer_of(path)
            ordinal = self.node_counts[nodename]
            self.node_counts[nodename] += 1
        base = nodename if not path else path + "." + nodename
        op = {"name": None, "phase": BACKWARD, "inputs": [], "outputs": [],
              "layer": layer, "node": nodename, "ordinal": ordinal,
              "base": base}
        self.named.append((op, base, self.order_of(node)))
        grads = self.incoming_gradients(node, op, base, grad_outputs)
        self.seen_backward = True
        return _Running(node, op, base, grads)

    def end_node(self, node, grad_inputs, grad_outputs):
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
            self.contributions[(nxt, nr)].append(
                self.table.pin(grad_inputs[i]))
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
        for tid in ([self.table.lookup(t) for t in run.unpacks] +
                    self.saved.ctx_reads.get(node, [])):
            if tid not in saved_ids:
                saved_ids.append(tid)
        outputs = []
        for i, g in enumerate(grad_inputs):
            if g is None:
                continue
            if self.table.id_of(g) is not None:
                continue  # passes an existing gradient through (or a view)
            outputs.append(self.table.new_tensor(
                g, BackwardName(op, ".grad%d" % i), KIND_GRAD))
        if not outputs and not saved_ids:
            return  # a view or a pass-through: no work of its own
        for tid in saved_ids + run.grads:
            if tid not in op["inputs"]:
                op["inputs"].append(tid)
        op["outputs"] = outputs
        op["cost"] = _costs.backward_cost(
            node, nodename, grad_inputs, grad_outputs, run.unpacks,
            self.table.view_bytes, self.table.numel, self.table.key)
        self.ops.append(op)

    def leaf_gradient_copy(self, node, op, grads):
        """AccumulateGrad copies a gradient whose layout does not suit its
        leaf (a slice of a cat's gradient). A parameter's .grad is outside
        the activation memory, but a reentrant checkpoint's detached inputs
        pass theirs on as the region's input gradients: an op, then."""
        var = getattr(node, "variable", None)
        g = None if var is None else var.grad
        if g is None or self.table.id_of(g) is not None:
            return  # none, or the incoming gradient itself (stolen)
        tid = self.table.id_of(var)
        if tid is None or self.table.tensors[tid]["kind"] != KIND_ACT:
            return
        op["inputs"] = list(grads)
        op["outputs"] = [self.table.new_tensor(g, BackwardName(op, ".grad"),
                                               KIND_GRAD)]
        op["cost"] = _costs.copy_cost(self.table.view_bytes(g))
        self.ops.append(op)

    def incoming_gradients(self, node, op, base, grad_outputs):
        """Tensor ids of the gradients node received; where the engine
        summed several contributions, a grad_accumulate op makes the sum
        just before."""
        inputs = []
        for nr, g in enumerate(grad_outputs):
            if g is None:
                continue
            k = self.table.pin(g)
            s2t = self.table.storage_to_tensor
            contrib = [s2t[c] for c in self.contributions.get((node, nr), [])
                       if c in s2t]
            tid = s2t.get(k)
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
                sum_id = self.table.new_tensor(
                    g, BackwardName(op, ".grad_sum%d" % nr), KIND_GRAD)
                self.accumulate_op(op, nr, cids, sum_id, g)
                inputs.append(sum_id)
                continue
            inputs.append(self.incoming_seed(op, base, nr, g))
        return inputs

    def incoming_seed(self, op, base, nr, g):
        """A gradient nothing recorded made: the loss's seed, or a static
        input."""
        seed = not self.seen_backward
        tid = self.table.new_tensor(
            g, "grad_seed" if seed else BackwardName(op, ".grad_in%d" % nr),
            KIND_INPUT)
        self.table.static_keys.add(self.table.key(g))
        if not seed:
            self.warnings.append(
                "%s: incoming gradient %d has no producer; static input"
                % (base, nr))
        return tid

    def accumulate_op(self, consumer, nr, inputs, output, g):
        self.ops.append({
            "name": BackwardName(consumer, ".grad_accumulate%d" % nr),
            "phase": BACKWARD, "inputs": list(inputs),
            "outputs": [] if output is None else [output],
            "layer": consumer["layer"], "node": "grad_accumulate",
            "cost": _costs.accumulate_cost(len(inputs),
                                           self.table.numel(g),
                                           self.table.view_bytes(g))})

    def name_backward_ops(self):
        """Backward ops of one name are numbered in the order the forward
        pass made their nodes (the engine runs them in reverse)."""
        groups = collections.defaultdict(list)
        for seq, (op, base, order) in enumerate(self.named):
            groups[base].append((order, seq, op))
        for base, lst in groups.items():
            lst.sort(key=lambda x: (x[0], x[1]))
            for k, (_, _, op) in enumerate(lst):
                op["name"] = base if k == 0 else "%s#%d" % (base, k)
