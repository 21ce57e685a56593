"""What the runtime measures of a step under a plan: the saved-activation
bytes resident on the device (Meter) and the step's time (Clock)."""

import collections
import time

import torch
from torch.multiprocessing.reductions import StorageWeakRef


class Meter:
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

    def figures(self):
        """The measurements slackswap.torch.Step documents, as a dict."""
        return {
            "peak_saved_bytes": self.peak,
            "peak_saved_real_bytes": self.peak_real,
            "peak_at": _where_label(self.graph, self.peak_at),
            "overdue_bytes_at_peak": self.overdue_at_peak,
            "peak_saved_bytes_on_schedule": self.peak_on_schedule,
            "timeline": list(self.timeline),
        }


def _where_label(g, where):
    if where is None:
        return ""
    kind, x = where
    if kind == "prefetch":
        return "prefetch of %s" % g.tensor_label(x)
    return "%s, %s" % (kind, g.op_label(x))


class Clock:
    """The step's time: CUDA events on a GPU (and the allocator's peak),
    the wall clock elsewhere."""

    def __init__(self):
        self.device = None
        self.start_event = None
        self.t0 = None

    def start(self, device):
        self.device = device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            self.start_event = torch.cuda.Event(enable_timing=True)
            self.start_event.record()
        self.t0 = time.perf_counter()

    def stop(self):
        """step_seconds, and on CUDA max_memory_allocated, as a dict."""
        if self.start_event is None:
            return {"step_seconds": time.perf_counter() - self.t0}
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        torch.cuda.synchronize(self.device)
        return {
            "step_seconds": self.start_event.elapsed_time(end) / 1e3,
            "max_memory_allocated": int(
                torch.cuda.max_memory_allocated(self.device)),
        }
