"""A plan's lowered schedule (slackswap._lowering), lived while the step
runs: what autograd holds for each saved tensor, what each op's start and
end do, and the device copies the runtime holds meanwhile."""

from slackswap._lowering import KEEP, SWAP
from slackswap._numbering import flat, storage
from slackswap._replay import View


class _Packed(View):
    """What autograd holds for a swapped or recomputed tensor (or a kept
    one a chain reads): the graph tensor and the saved view's geometry.
    A type of its own: unpacking tells it from a tensor autograd kept."""

    __slots__ = ()


class Resident:
    """The device copies of graph tensors the runtime holds (prefetched,
    rebuilt, or kept for a recompute chain), as flat tensors. A copy it
    makes is told to the recorder as its graph tensor (alias(flat, t)),
    so that a node unpacking it reads that tensor, and the meter watches
    it when it is a saved activation."""

    def __init__(self, graph, meter, alias):
        self.graph = graph
        self.meter = meter
        self.alias = alias
        self.held = {}               # graph tensor -> flat device tensor

    def __contains__(self, t):
        return t in self.held

    def __len__(self):
        return len(self.held)

    def get(self, t):
        return self.held.get(t)

    def hold(self, t, copy):
        """A device copy of graph tensor t, held here."""
        self.held[t] = copy
        self.alias(copy, t)
        if self.graph.is_saved[t]:  # a chain's other temporaries are not
            self.meter.watch(t, storage(copy))

    def keep(self, t, original):
        """Graph tensor t's own storage, held until the schedule frees it."""
        self.held[t] = original

    def free(self, ts):
        for t in ts:
            self.held.pop(t, None)

    def clear(self):
        self.held.clear()


class ScheduleRun:
    """The schedule's tasks, run as the step reaches them: before an op,
    its recompute tasks, its prefetches (HostCopies) and a wait for each
    swapped tensor it reads; after it, its frees. Autograd's saved-tensor
    hooks come here (pack, unpacked) for the tensors the plan does not
    simply keep."""

    def __init__(self, graph, decisions, schedule, resident, copies, replay,
                 meter, quiet, stats):
        self.graph = graph
        self.decisions = decisions
        self.schedule = schedule
        self.resident = resident
        self.copies = copies
        self.replay = replay
        self.meter = meter
        self.quiet = quiet
        self.stats = stats
        self.started = set()         # graph ops whose start actions ran
        # Kept tensors a re-run reads while they are live: autograd must
        # not be their only holder.
        self.needs_handle = set()
        for task in schedule.tasks:
            if task.recompute:
                for t in graph.inputs[task.op]:
                    if graph.is_saved[t] and decisions.action[t] == KEEP:
                        self.needs_handle.add(t)

    def task(self, o):
        return self.schedule.tasks[self.schedule.task_of_op[o]]

    def start(self, o):
        """Graph op o starts (once): its recompute tasks run first, then it
        issues its prefetches and waits for the swapped tensors it reads."""
        if o in self.started:
            return
        self.started.add(o)
        for task in self.schedule.recompute_tasks_before(o):
            self.run_recompute(task)
        task = self.task(o)
        self.copies.queue(task.prefetches)
        for t in task.waits:
            self.copies.arrive(t)

    def end(self, o):
        """Graph op o ends: what the schedule frees then goes."""
        self.resident.free(self.task(o).frees)
        self.copies.pump()

    def run_recompute(self, task):
        for t in task.waits:
            self.copies.arrive(t)
        outs = self.rerun(task.op)
        for t in task.restored:
            self.resident.hold(t, outs[t])
        self.stats["recompute_tasks"] += 1
        self.stats["recomputed"] += sum(
            1 for t in task.restored if self.graph.is_saved[t])
        self.meter.sample(("recompute", task.op))
        self.resident.free(task.frees)

    def rerun(self, p):
        device = self.copies.device
        return self.replay.rerun(p, self.resolve,
                                 device.type if device is not None else "cpu")

    def resolve(self, t):
        """A device copy of graph tensor t for a re-run or an unpack."""
        copy = self.resident.get(t)
        if copy is not None:
            return copy
        if self.copies.pending(t):
            self.copies.arrive(t)
            return self.resident.get(t)
        p = self.graph.producer[t]
        if not self.replay.can_rerun(p):
            raise RuntimeError(
                "slackswap.torch: %s is needed but is neither resident nor "
                "rebuildable (the plan's schedule and the step disagree)" %
                self.graph.tensor_label(t))
        # Off the schedule: rebuilt now (counted, so a test can see it).
        self.stats["late_rebuilds"] += 1
        outs = self.rerun(p)
        self.resident.hold(t, outs[t])
        self.meter.sample(("late rebuild", p))
        return outs[t]

    def pack(self, g, t):
        """What autograd saves for t, which holds saved graph tensor g:
        t itself (kept), or a _Packed handle (the tensor swapped out, or
        held here for a recompute chain)."""
        action = self.decisions.action[g]
        if action == KEEP and g not in self.needs_handle:
            return t
        with self.quiet():
            if action == SWAP and not self.copies.has_host(g):
                self.copies.swap_out(g, t)
            elif action == KEEP and g not in self.resident:
                self.resident.keep(g, flat(t))
        return _Packed(g, t)

    def unpacked(self, packed):
        """What autograd gets back for what pack() gave it."""
        if not isinstance(packed, _Packed):
            return packed
        copy = self.resolve(packed.t)
        self.copies.land(packed.t)
        with self.quiet():
            return packed.of(copy)

    def clear(self):
        """Nothing of the step outlives it here: copies, captured calls."""
        self.resident.clear()
        self.copies.clear()
        self.replay.clear()
