"""A plan lowered onto its graph, as the simulator lowers it.

The runtime (slackswap.torch) must free, prefetch and rebuild at the same
points the simulator judged the plan at, so this is a port of LowerPlan
(sim/schedule.cc; rules in docs/SIMULATOR.md, "The tasks"): the graph's
ops in launch order, a recompute task inserted before the first task that
needs each dropped tensor (chains rebuild dropped inputs first; a re-run
restores the producer's other dropped outputs that the plan recomputes;
forward tensors nobody saved come back as temporaries), and per task what
it allocates, frees, prefetches and waits for. Timing is not modelled: the
runtime lives it.

Also the checks the simulator makes on a plan (decisions only on saved
activations; a swap's prefetch op after the tensor's last forward use and
before its first need), so that a plan the simulator would refuse is
refused here before the step runs.
"""

import collections

from slackswap.errors import PlanError

KEEP = "ACTION_KEEP"
SWAP = "ACTION_SWAP"
RECOMPUTE = "ACTION_RECOMPUTE"
_ACTIONS = {0: KEEP, 1: KEEP, 2: SWAP, 3: RECOMPUTE,
            "ACTION_UNSPECIFIED": KEEP, KEEP: KEEP, SWAP: SWAP,
            RECOMPUTE: RECOMPUTE}

FORWARD = "PHASE_FORWARD"
BACKWARD = "PHASE_BACKWARD"
_PHASES = {1: FORWARD, 2: BACKWARD, 3: "PHASE_OPTIMIZER"}
STATIC_KINDS = ("TENSOR_KIND_PARAMETER", "TENSOR_KIND_OPTIMIZER_STATE",
                "TENSOR_KIND_INPUT")

# Where a tensor is, as the lowering walks the launch order (schedule.cc).
_STATIC, _ABSENT, _LIVE, _ON_HOST, _DROPPED, _TEMP = range(6)


def _int(v):
    return int(v) if v not in (None, "") else 0


class Graph:
    """An OperatorGraph dict (proto3 JSON mapping) with the simulator's
    index: per tensor its producer, last forward use, first backward use,
    last use and whether it is a saved activation. Tensors and ops are
    addressed by position; `tensor_pos` and `op_pos` map the graph's ids."""

    def __init__(self, g):
        self.name = g.get("name", "")
        self.description = g.get("description", "")
        self.tensors = list(g.get("tensors", []))
        self.ops = list(g.get("ops", []))
        self.tensor_pos = {_int(t.get("id")): i
                           for i, t in enumerate(self.tensors)}
        self.op_pos = {_int(o.get("id")): i for i, o in enumerate(self.ops)}
        if (len(self.tensor_pos) != len(self.tensors) or
                len(self.op_pos) != len(self.ops)):
            raise PlanError("graph %r: tensor or op ids are not unique" %
                            self.name)
        n = len(self.tensors)
        self.size = [_int(t.get("size_bytes")) for t in self.tensors]
        self.phase = [_PHASES.get(o.get("phase"), o.get("phase"))
                      for o in self.ops]
        self.inputs = [[self.tensor_pos[_int(x)] for x in o.get("input_ids",
                                                                [])]
                       for o in self.ops]
        self.outputs = [[self.tensor_pos[_int(x)]
                         for x in o.get("output_ids", [])]
                        for o in self.ops]
        self.producer = [None] * n
        for o, outs in enumerate(self.outputs):
            for t in outs:
                self.producer[t] = o
        self.last_fwd_use = [None] * n
        self.first_bwd_use = [None] * n
        self.last_use = [None] * n
        for o, ins in enumerate(self.inputs):
            for t in ins:
                if self.phase[o] == FORWARD:
                    self.last_fwd_use[t] = o
                elif self.phase[o] == BACKWARD and \
                        self.first_bwd_use[t] is None:
                    self.first_bwd_use[t] = o
                self.last_use[t] = o
        self.is_saved = [
            p is not None and self.phase[p] == FORWARD and
            self.first_bwd_use[t] is not None
            for t, p in enumerate(self.producer)]
        self.num_forward = sum(1 for p in self.phase if p == FORWARD)
        self.rebuilds = [t for t in self.tensors if t.get("rebuild")]

    def tensor_label(self, t):
        return "tensor %s (%s)" % (self.tensors[t].get("id"),
                                   self.tensors[t].get("name", ""))

    def op_label(self, o):
        return "op %s (%s)" % (self.ops[o].get("id"),
                               self.ops[o].get("name", ""))

    def saved(self):
        """Saved activations in production order."""
        return [t for o in range(len(self.ops)) for t in self.outputs[o]
                if self.is_saved[t]]


class Decisions:
    """A plan's decisions by tensor position: action and prefetch op."""

    def __init__(self, graph, plan):
        self.action = [KEEP] * len(graph.tensors)
        self.prefetch = [None] * len(graph.tensors)
        for d in plan.get("decisions", []):
            tid = _int(d.get("tensor_id"))
            if tid not in graph.tensor_pos:
                raise PlanError("decision for tensor %d: the graph %r has no "
                                "such tensor" % (tid, graph.name))
            t = graph.tensor_pos[tid]
            action = _ACTIONS.get(d.get("action", KEEP))
            if action is None:
                raise PlanError("decision for %s: unknown action %r" % (
                    graph.tensor_label(t), d.get("action")))
            self.action[t] = action
            size = _int(d.get("size_bytes"))
            if size and size != graph.size[t]:
                raise PlanError(
                    "decision for %s: the plan says %d bytes, the graph %d "
                    "(a plan for another graph)" % (graph.tensor_label(t),
                                                    size, graph.size[t]))
            p = d.get("prefetch_after_op_id")
            if p is not None and p != "":
                if _int(p) not in graph.op_pos:
                    raise PlanError(
                        "decision for %s: prefetch_after_op_id %s is not an "
                        "op of the graph" % (graph.tensor_label(t), p))
                self.prefetch[t] = graph.op_pos[_int(p)]


class Task:
    """One compute-stream task: a graph op, or a re-run of one."""

    __slots__ = ("op", "recompute", "restored", "waits", "frees",
                 "prefetches")

    def __init__(self, op, recompute=False, restored=()):
        self.op = op
        self.recompute = recompute
        self.restored = list(restored)  # a re-run: what it brings back
        self.waits = []       # swapped tensors it waits for
        self.frees = []       # tensors freed at its end
        self.prefetches = []  # prefetches issued at its start


class Schedule:
    """The task list LowerPlan makes, with task_of_op (op -> its task) and
    first_need (swapped tensor -> the first task that needs it back).
    Swap-outs and the release of swapped device copies after forward are
    not listed: autograd's saving and Python's references place them."""

    def __init__(self, graph, decisions):
        self.graph = graph
        self.decisions = decisions
        self.tasks = []
        self.task_of_op = [None] * len(graph.ops)
        self.first_need = [None] * len(graph.tensors)

    def recompute_tasks_before(self, op):
        """The recompute tasks that run right before graph op `op`."""
        end = self.task_of_op[op]
        start = end
        while start > 0 and self.tasks[start - 1].recompute:
            start -= 1
        return self.tasks[start:end]


def check(graph, decisions):
    """The simulator's checks of a plan against its graph (CheckPlan)."""
    if graph.rebuilds:
        raise PlanError(
            "%s has a rebuild recipe: a runtime can only re-run producers "
            "(exported graphs have no recipes)" % graph.tensor_label(
                graph.tensor_pos[_int(graph.rebuilds[0].get("id"))]))
    for t, action in enumerate(decisions.action):
        if action == KEEP:
            continue
        if not graph.is_saved[t]:
            raise PlanError(
                "decision for %s: only saved activations (produced in "
                "forward, read in backward) can be %s" % (
                    graph.tensor_label(t),
                    "swapped" if action == SWAP else "recomputed"))
        if action != SWAP:
            continue
        k = decisions.prefetch[t]
        if k is None:
            raise PlanError("decision for %s: swap needs "
                            "prefetch_after_op_id, an op of the graph" %
                            graph.tensor_label(t))
        after = max(x for x in (graph.producer[t], graph.last_fwd_use[t])
                    if x is not None)
        if k <= after:
            raise PlanError(
                "decision for %s: prefetch_after_op %s must come after the "
                "tensor's last forward use %s" % (
                    graph.tensor_label(t), graph.op_label(k),
                    graph.op_label(after)))


def lower(graph, decisions):
    """The plan's Schedule (LowerPlan with prefetch points)."""
    check(graph, decisions)
    return _Lowerer(graph, decisions).run()


class _Lowerer:
    """One lowering: walks the graph's ops in order, as LowerPlan does,
    and makes the Schedule's tasks: each op's own, after the re-runs it
    needs first, with its prefetches, waits and frees."""

    def __init__(self, graph, decisions):
        self.g = graph
        self.d = decisions
        n = len(graph.tensors)
        self.where = [_STATIC if graph.producer[t] is None else _ABSENT
                      for t in range(n)]
        self.temp_last_reader = [None] * n
        self.temps = []
        self.current_op = 0
        self.last_reader_op = [None] * n
        self.s = Schedule(graph, decisions)
        self.prefetch_at = collections.defaultdict(list)
        for t, action in enumerate(decisions.action):
            if action == SWAP:
                self.prefetch_at[decisions.prefetch[t]].append(t)

    def run(self):
        g, s = self.g, self.s
        for o in range(len(g.ops)):
            self.lower_op(o)
        # Prefetches issued together queue in the order their tensors are
        # first needed (never-needed ones last).
        big = len(s.tasks) + 1
        for task in s.tasks:
            task.prefetches.sort(key=lambda t: s.first_need[t]
                                 if s.first_need[t] is not None else big)
        for t, action in enumerate(self.d.action):
            if action != SWAP:
                continue
            issue = s.task_of_op[self.d.prefetch[t]]
            need = s.first_need[t]
            if need is None or issue >= need:
                raise PlanError(
                    "decision for %s: prefetch_after_op %s must start before "
                    "the tensor's first backward need at %s" % (
                        g.tensor_label(t),
                        g.op_label(self.d.prefetch[t]),
                        "none" if need is None else
                        g.op_label(s.tasks[need].op)))
        return s

    def new_task(self, task):
        self.s.tasks.append(task)
        return len(self.s.tasks) - 1

    def emit_reading(self, inputs, task):
        """Makes inputs resident, rebuilding dropped ones (a chain, walked
        with an explicit stack), then appends task; returns its index."""
        stack = [[inputs, task, 0]]
        while True:
            top = stack[-1]
            if top[2] < len(top[0]):
                t = top[0][top[2]]
                top[2] += 1
                if self.where[t] == _DROPPED:
                    stack.append(self.rebuild_of(t))
                continue
            idx = self.emit(top[0], top[1])
            if len(stack) == 1:
                return idx
            stack.pop()

    def rebuild_of(self, t):
        """The task that rebuilds dropped tensor t: its producer re-run,
        restoring the producer's other dropped outputs the plan
        recomputes and still needs."""
        g = self.g
        p = g.producer[t]
        restored = [t]
        for sib in g.outputs[p]:
            if (sib != t and self.where[sib] == _DROPPED and
                    g.is_saved[sib] and self.d.action[sib] == RECOMPUTE and
                    g.last_use[sib] >= self.current_op):
                restored.append(sib)
        return [g.inputs[p], Task(p, True, restored), 0]

    def emit(self, inputs, task):
        """Appends task, whose inputs are resident now: it waits for those
        still on the host; what it restores lives until its last use, or
        as a temporary until this chain's last reader."""
        g, s = self.g, self.s
        idx = self.new_task(task)
        for t in inputs:
            if self.where[t] == _ON_HOST:
                task.waits.append(t)
                if s.first_need[t] is None:
                    s.first_need[t] = idx
                self.where[t] = _LIVE
            elif self.where[t] == _TEMP:
                self.temp_last_reader[t] = idx
        for t in task.restored:
            # A saved tensor lives until its last use; anything else (or a
            # saved tensor needed again after its last use) only for this
            # chain.
            if g.is_saved[t] and g.last_use[t] >= self.current_op:
                self.where[t] = _LIVE
            else:
                self.where[t] = _TEMP
                self.temp_last_reader[t] = idx
                self.temps.append(t)
        return idx

    def lower_op(self, o):
        """Graph op o's task (after any recompute tasks it needs), what it
        issues and what goes when it ends."""
        g, s = self.g, self.s
        self.current_op = o
        idx = self.emit_reading(g.inputs[o], Task(o))
        task = s.tasks[idx]
        s.task_of_op[o] = idx
        task.prefetches.extend(self.prefetch_at.get(o, []))
        for t in g.inputs[o]:
            if self.last_reader_op[t] == o:
                continue  # an input listed twice is released once
            self.last_reader_op[t] = o
            if self.where[t] == _STATIC:
                continue
            if g.last_use[t] == o:
                task.frees.append(t)
                self.where[t] = _DROPPED
            elif g.is_saved[t] and g.last_fwd_use[t] == o:
                self.release_after_forward(idx, t)
        for t in g.outputs[o]:
            self.where[t] = _LIVE
            if g.last_use[t] is None:
                task.frees.append(t)
                self.where[t] = _DROPPED
            elif g.is_saved[t] and g.last_fwd_use[t] is None:
                self.release_after_forward(None, t)
                if self.d.action[t] == RECOMPUTE:
                    task.frees.append(t)
        for t in self.temps:
            s.tasks[self.temp_last_reader[t]].frees.append(t)
            self.where[t] = _DROPPED
        self.temps = []

    def release_after_forward(self, idx, t):
        """Forward is done with saved tensor t at task idx (None: it had no
        forward reader and the caller frees it)."""
        action = self.d.action[t]
        if action == RECOMPUTE:
            if idx is not None:
                self.s.tasks[idx].frees.append(t)
            self.where[t] = _DROPPED
        elif action == SWAP:
            self.where[t] = _ON_HOST
