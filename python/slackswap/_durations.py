"""Measured op durations from a torch.profiler Chrome trace.

apply_trace_durations() sets cost.duration_ns of the recorder's ops from a
trace of the same step (prof.export_chrome_trace(FILE), CPU or GPU), which
then replaces the cost model for those ops (docs/workloads.md, "Measured
durations").
"""

import collections
import json
import math

from slackswap._costs import canon


_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_RUNTIME_CATS = ("cuda_runtime", "runtime", "cuda_driver")
_BWD_PREFIX = "autograd::engine::evaluate_function: "


def apply_trace_durations(graph_ops, num_forward, path):
    """Sets cost.duration_ns of graph_ops (exporter op dicts) from a Chrome
    trace written by torch.profiler; returns (matched, total)."""
    xs = _complete_events(path)
    duration_ns = _event_timer(xs)
    cpu = _cpu_events(xs)
    bwd_by_node, bwd_start = _backward_events(cpu)
    by_name = _forward_events(cpu, _recorded_names(graph_ops[:num_forward]),
                              bwd_start)
    matched = 0
    used = collections.Counter()
    for i, op in enumerate(graph_ops):
        if i < num_forward:
            ns = _forward_duration(op, by_name, used, duration_ns)
        elif op.get("ordinal") is None:
            # grad_accumulate (the engine's own sum) and a checkpoint's
            # recompute (aten events nested in backward nodes' events)
            continue
        else:
            ns = _backward_duration(op, bwd_by_node, duration_ns)
        if ns is not None:
            op["cost"]["duration_ns"] = ns
            matched += 1
    return matched, len(graph_ops)


def _complete_events(path):
    """The trace's complete ("X") events with a name, start and duration:
    the only ones that say how long something ran."""
    with open(path) as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and
            "dur" in e and "ts" in e and "name" in e]


def _category(e):
    """e's category, lower case: torch.profiler versions differ in case."""
    return str(e.get("cat", "")).lower()


def _kernel_us_by_correlation(kernels):
    """Device microseconds per correlation id: the id is all that ties a
    kernel (or copy, memset) to the runtime call that launched it."""
    by_corr = collections.defaultdict(float)
    for e in kernels:
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            by_corr[corr] += float(e["dur"])
    return by_corr


def _launches_by_thread(runtime):
    """(pid, tid) -> [(ts, correlation)] sorted by time: the launches each
    CPU thread made, so those inside one op's event can be found."""
    launches = collections.defaultdict(list)
    for r in runtime:
        corr = (r.get("args") or {}).get("correlation")
        if corr is not None:
            launches[(r.get("pid"), r.get("tid"))].append(
                (float(r["ts"]), corr))
    for v in launches.values():
        v.sort(key=lambda x: x[0])
    return launches


def _event_timer(xs):
    """duration_ns(ev) for events of this trace: on a GPU trace what the
    op costs is its kernels' time, not the CPU time spent launching them."""
    kernels = [e for e in xs if _category(e) in _KERNEL_CATS]
    kernel_by_corr = _kernel_us_by_correlation(kernels)
    launches = _launches_by_thread(
        [e for e in xs if _category(e) in _RUNTIME_CATS])

    def duration_ns(ev):
        """Kernel time launched inside ev (GPU trace), else ev's CPU time."""
        us = float(ev["dur"])
        if kernels:
            t0, t1 = float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])
            us = sum(kernel_by_corr.get(c, 0.0) for ts, c in
                     launches.get((ev.get("pid"), ev.get("tid")), [])
                     if t0 <= ts <= t1)
        return int(round(us * 1000.0))

    return duration_ns


def _cpu_events(xs):
    """The host-side op events, per thread in start order with the outer
    of two events starting together first, so nesting can be read off."""
    cpu = [e for e in xs
           if _category(e) not in _KERNEL_CATS + _RUNTIME_CATS]
    cpu.sort(key=lambda e: (str(e.get("pid")), str(e.get("tid")),
                            float(e["ts"]), -float(e["dur"])))
    return cpu


def _backward_events(cpu):
    """(node name -> its evaluate_function events in time order, start of
    the first): backward ops are matched by node and ordinal, and forward
    events are only those before backward starts."""
    bwd_events = [e for e in cpu if str(e["name"]).startswith(_BWD_PREFIX)]
    bwd_events.sort(key=lambda e: float(e["ts"]))
    bwd_start = min([float(e["ts"]) for e in bwd_events] + [math.inf])
    bwd_by_node = collections.defaultdict(list)
    for e in bwd_events:
        node = str(e["name"])[len(_BWD_PREFIX):].split("::")[-1]
        bwd_by_node[node].append(e)
    return bwd_by_node, bwd_start


def _recorded_names(forward_ops):
    """The canonical aten names the recorder saw: only events of these
    names stand for forward ops."""
    recorded = set()
    for op in forward_ops:
        recorded.update(canon(n) for n in op["aten"])
    return recorded


def _forward_events(cpu, recorded, bwd_start):
    """Canonical name -> its forward aten events in order: those of a
    recorded name that are not nested inside an event of a recorded name
    (its own kernels' allocations, copies...)."""
    by_name = collections.defaultdict(list)
    stacks = collections.defaultdict(list)  # thread -> [(end, recorded?)]
    for e in cpu:
        name = str(e["name"])
        ts = float(e["ts"])
        if not name.startswith("aten::") or ts >= bwd_start:
            continue
        stack = stacks[(e.get("pid"), e.get("tid"))]
        while stack and stack[-1][0] <= ts:
            stack.pop()
        c = canon(name[len("aten::"):])
        inside = any(r for _, r in stack)
        if not inside and c in recorded:
            by_name[c].append(e)
        stack.append((ts + float(e["dur"]), c in recorded))
    return by_name


def _forward_duration(op, by_name, used, duration_ns):
    """A forward op's duration: its aten calls' events summed, each the
    next of its name not taken by an earlier op (used counts them); None
    when the trace has too few, as then the op has no measurement."""
    parts = []
    for name in op["aten"]:
        c = canon(name)
        k = used[c]
        used[c] += 1
        lst = by_name.get(c, [])
        parts.append(lst[k] if k < len(lst) else None)
    if all(p is not None for p in parts):
        return sum(duration_ns(p) for p in parts)
    return None


def _backward_duration(op, bwd_by_node, duration_ns):
    """A backward op's duration: the ordinal-th evaluate_function event of
    its node; None when the trace has fewer."""
    lst = bwd_by_node.get(op["node"], [])
    if op["ordinal"] < len(lst):
        return duration_ns(lst[op["ordinal"]])
    return None
