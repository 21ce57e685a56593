"""The checks of a step under a plan against the graph the plan was made
for: each raises PlanMismatch (a PlanError where the plan cannot be
lived) naming the first difference, in one line."""

import re

from slackswap._lowering import FORWARD, KEEP
from slackswap._numbering import KIND_INPUT, KIND_PARAM, base_name, unnumbered
from slackswap.errors import PlanError, PlanMismatch


def _described(tensor):
    """(name, kind, shape, dtype, bytes) of a graph tensor dict, whether
    the recorder's or the graph's (where proto3 JSON leaves out zeros)."""
    return (str(tensor.get("name", "")), tensor.get("kind", ""),
            tensor.get("shape", ""), tensor.get("dtype", ""),
            int(tensor.get("size_bytes") or 0))


def _kind_word(kind):
    return {KIND_PARAM: "parameter", KIND_INPUT: "input"}.get(kind, "tensor")


def _labels(g, ts):
    return ", ".join(g.tensor_label(t) for t in ts) or "no saved tensor"


class StepChecks:
    """The recorded step (its ops and tensors as the recorder numbers
    them, slackswap._numbering) against the graph (slackswap._lowering's
    Graph) and the plan's decisions. `graph_of` maps the runtime's tensor
    ids to the graph's (rule 6)."""

    def __init__(self, graph, decisions):
        self.graph = graph
        self.decisions = decisions

    def statics(self, tensors):
        """Parameters, buffers and inputs against the graph's static
        tensors, which the exporter numbered first in the same order."""
        g = self.graph
        for i, mine in enumerate(tensors):
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
        n = len(tensors)
        if n < len(g.tensors):
            extra = g.tensors[n]
            if (extra.get("kind") == KIND_PARAM or
                    re.fullmatch(r"input\d*(\.\d+)?",
                                 extra.get("name", ""))):
                raise PlanMismatch(
                    "the model is not the one graph %r was exported from: "
                    "the graph has %s %s %s beyond the model's" % (
                        g.name, _kind_word(extra.get("kind")),
                        extra.get("name"), extra.get("shape")))

    def forward_op(self, i, op, tensors):
        """Forward op i as it is made: name, number of outputs, and each
        output's shape, dtype and bytes."""
        g = self.graph
        if i >= g.num_forward or g.phase[i] != FORWARD:
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
            mine, theirs = tensors[rt], g.tensors[t]
            if _described(theirs)[2:] != _described(mine)[2:]:
                raise PlanMismatch(
                    "forward op %d (%s), output %d: the graph has %s %s (%s "
                    "bytes), the model made %s %s (%d bytes)" % (
                        i, gname, slot, theirs.get("shape"),
                        theirs.get("dtype"), theirs.get("size_bytes"),
                        mine["shape"], mine["dtype"], mine["size_bytes"]))

    def forward_done(self, ops, graph_of):
        """The whole forward pass, as backward starts: the number of ops,
        their names (folded calls included) and what each reads."""
        g = self.graph
        n = len(ops)
        if n != g.num_forward:
            raise PlanMismatch(
                "the model ran %d forward ops, graph %r has %d (its op %d is "
                "%s)" % (n, g.name, g.num_forward, n, g.ops[n].get("name")))
        for i, op in enumerate(ops):
            if op["name"] != g.ops[i].get("name"):
                raise PlanMismatch("forward op %d: the graph %r has %s, the "
                                   "model ran %s" % (i, g.name,
                                                     g.ops[i].get("name"),
                                                     op["name"]))
            mine = [graph_of[x] for x in op["inputs"] if x in graph_of]
            theirs = [x for x in g.inputs[i] if g.producer[x] is not None]
            if mine != theirs:
                raise PlanMismatch(
                    "forward op %d (%s) reads other tensors in the model "
                    "(%s) than in the graph (%s)" % (
                        i, op["name"], _labels(g, mine), _labels(g, theirs)))

    def custom_function_reads(self, reads, graph_of):
        """What custom Functions keep on their ctx can only be kept."""
        for node, ids in reads:
            for rt in ids:
                t = graph_of.get(rt)
                if t is not None and self.decisions.action[t] != KEEP:
                    raise PlanError(
                        "decision for %s: a custom Function keeps it on its "
                        "ctx, out of autograd's saved-tensor hooks, so it "
                        "can only be kept" % self.graph.tensor_label(t))

    def backward_op(self, j, op, graph_of):
        """Backward op j as it is recorded: its unnumbered name and the
        saved tensors it reads."""
        g = self.graph
        base = base_name(op)
        if j >= len(g.ops):
            raise PlanMismatch("backward op %d (%s): graph %r has only %d "
                               "ops" % (j, base, g.name, len(g.ops)))
        gname = g.ops[j].get("name", "")
        mine = sorted(graph_of[x] for x in op["inputs"] if x in graph_of)
        theirs = sorted(x for x in g.inputs[j] if g.is_saved[x])
        if unnumbered(gname) != unnumbered(base) or mine != theirs:
            raise PlanMismatch(
                "backward op %d: the graph %r has %s reading %s, the model "
                "ran %s reading %s" % (j, g.name, gname, _labels(g, theirs),
                                       base, _labels(g, mine)))

    def step_done(self, ops):
        """The whole step, backward ops numbered: as many ops as the graph,
        each backward op of the graph's name."""
        g = self.graph
        if len(ops) != len(g.ops):
            raise PlanMismatch("the step ran %d ops, graph %r has %d" % (
                len(ops), g.name, len(g.ops)))
        for j in range(g.num_forward, len(g.ops)):
            if str(ops[j]["name"]) != g.ops[j].get("name"):
                raise PlanMismatch("backward op %d: the graph %r has %s, the "
                                   "model ran %s" % (j, g.name,
                                                     g.ops[j].get("name"),
                                                     ops[j]["name"]))
