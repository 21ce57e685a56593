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


def apply_trace_durations(graph_ops, num_forward, path):
    """Sets cost.duration_ns of graph_ops (exporter op dicts) from a Chrome
    trace written by torch.profiler; returns (matched, total)."""
    with open(path) as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and
          "dur" in e and "ts" in e and "name" in e]
    kernel_cats = ("kernel", "gpu_memcpy", "gpu_memset")
    kernels = [e for e in xs if str(e.get("cat", "")).lower() in kernel_cats]
    runtime = [e for e in xs if str(e.get("cat", "")).lower() in
               ("cuda_runtime", "runtime", "cuda_driver")]
    kernel_by_corr = collections.defaultdict(float)
    for e in kernels:
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            kernel_by_corr[corr] += float(e["dur"])
    launches = collections.defaultdict(list)  # (pid, tid) -> [(ts, corr)]
    for r in runtime:
        corr = (r.get("args") or {}).get("correlation")
        if corr is not None:
            launches[(r.get("pid"), r.get("tid"))].append(
                (float(r["ts"]), corr))
    for v in launches.values():
        v.sort(key=lambda x: x[0])
    cpu = [e for e in xs if str(e.get("cat", "")).lower() not in
           kernel_cats + ("cuda_runtime", "runtime", "cuda_driver")]
    cpu.sort(key=lambda e: (str(e.get("pid")), str(e.get("tid")),
                            float(e["ts"]), -float(e["dur"])))

    def duration_ns(ev):
        """Kernel time launched inside ev (GPU trace), else ev's CPU time."""
        us = float(ev["dur"])
        if kernels:
            t0, t1 = float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])
            us = sum(kernel_by_corr.get(c, 0.0) for ts, c in
                     launches.get((ev.get("pid"), ev.get("tid")), [])
                     if t0 <= ts <= t1)
        return int(round(us * 1000.0))

    bwd_prefix = "autograd::engine::evaluate_function: "
    bwd_events = [e for e in cpu if str(e["name"]).startswith(bwd_prefix)]
    bwd_events.sort(key=lambda e: float(e["ts"]))
    bwd_start = min([float(e["ts"]) for e in bwd_events] + [math.inf])
    recorded = set()
    for op in graph_ops[:num_forward]:
        recorded.update(canon(n) for n in op["aten"])
    # Forward: aten events of a recorded name that are not nested inside an
    # event of a recorded name (its own kernels' allocations, copies...).
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
    bwd_by_node = collections.defaultdict(list)
    for e in bwd_events:
        node = str(e["name"])[len(bwd_prefix):].split("::")[-1]
        bwd_by_node[node].append(e)

    matched = 0
    total = 0
    used = collections.Counter()
    for i, op in enumerate(graph_ops):
        if i < num_forward:
            total += 1
            parts = []
            for name in op["aten"]:
                c = canon(name)
                k = used[c]
                used[c] += 1
                lst = by_name.get(c, [])
                parts.append(lst[k] if k < len(lst) else None)
            if all(p is not None for p in parts):
                op["cost"]["duration_ns"] = sum(duration_ns(p)
                                                for p in parts)
                matched += 1
        else:
            total += 1
            if op.get("ordinal") is None:
                # grad_accumulate (the engine's own sum) and a checkpoint's
                # recompute (aten events nested in backward nodes' events)
                continue
            lst = bwd_by_node.get(op["node"], [])
            if op["ordinal"] < len(lst):
                op["cost"]["duration_ns"] = duration_ns(lst[op["ordinal"]])
                matched += 1
    return matched, total
