"""Runs a PyTorch training step under a SlackSwap plan.

    import slackswap.torch

    graph = slackswap.export.export(model, (x,), dtype_bytes=4)
    best = client.best_plan(graph, budget_fraction=0.5)  # PolicyResult
    with slackswap.torch.apply(best, graph) as step:
        loss = model(x).sum()
        loss.backward()
    print(step.summary())          # measured beside predicted

Inside apply() one training step of the model the graph was exported from,
with inputs of the same shapes, runs under the plan: every saved
activation is kept, swapped to host memory and prefetched back when the
plan's prefetch op starts, or freed after its last forward use and
rebuilt before backward needs it by re-running the ops that made it (with
their RNG state: a dropout mask comes back bitwise equal). Gradients are
those of the same step without a plan, bit for bit.

The first model call inside the context is the step's model; what runs
after it returns is the loss, as in the exporter. Its parameters and
inputs are checked against the graph before any op runs, and each op as
it runs, so a plan for another model is refused with PlanMismatch naming
the first difference, before backward starts. backward() (the one call in
the context) ends the step. How it works, what it measures and where the
runtime and the simulator differ: docs/launcher.md.

A plan for a node (Client.plan(..., node=, ranks=)) runs per rank: each
process applies it with its own rank, and gets its rank's prediction:

    best = client.best_plan(graph, budget_fraction=0.5,
                            node="dgx-a100-80gb", ranks=4)
    with slackswap.torch.apply(best, graph, rank=rank) as step:
        ...

Importing this module imports torch; `import slackswap` does not.
"""

from slackswap import _runtime
from slackswap.errors import (  # noqa: F401 - API
    PlanError, PlanLayoutError, PlanMismatch, PlanRankError)
from slackswap.plans import check_rank_graph, rank_plan, read_graph

__all__ = ["apply", "Step", "PlanError", "PlanLayoutError", "PlanMismatch",
           "PlanRankError"]


class Step:
    """What apply() yields: after the step, `measured` (a dict) beside
    `predicted` (the simulator's SimulationResult for the plan as a dict,
    or None when the plan came without one; for a node's plan, the
    rank's own), and `rank` (the rank of a node's plan it runs; None for
    one GPU).

    measured:
      peak_saved_bytes       the most bytes of saved activations resident
                             on the device at once, counting the graph's
                             bytes per element (what peak_activation_bytes
                             predicts)
      peak_saved_real_bytes  the same in the tensors' own element sizes
      peak_at                where that peak was first reached
      overdue_bytes_at_peak  of that peak, the originals of swapped or
                             recomputed tensors still allocated after
                             their last forward reader (held by the
                             model's own code, not by the plan)
      peak_saved_bytes_on_schedule
                             the peak without overdue bytes: what the
                             plan's schedule had resident
      timeline               (where, bytes, real bytes, overdue bytes)
                             at every op, copy and re-run
      step_seconds           the step from the model call to the end of
                             backward (CUDA: events; CPU: wall clock)
      max_memory_allocated   CUDA only: torch.cuda.max_memory_allocated
                             over the step
      swapped_out, swap_outs_refreshed, prefetched, prefetches_forced,
      d2h_bytes, h2d_bytes, recompute_tasks, recomputed, late_rebuilds:
      what the runtime did
    """

    def __init__(self, runtime, rank=None):
        self._runtime = runtime
        self.predicted = runtime.prediction
        self.rank = rank

    def __enter__(self):
        self._runtime.__enter__()
        return self

    def __exit__(self, *exc):
        return self._runtime.__exit__(*exc)

    @property
    def measured(self):
        return self._runtime.measured

    @property
    def graph_name(self):
        return self._runtime.graph.name

    def summary(self):
        """Measured against predicted, one line per figure."""
        m, p = self.measured or {}, self.predicted or {}
        lines = []

        def row(what, measured, predicted, unit):
            if measured is None and predicted is None:
                return
            text = "%-34s measured %s" % (what, _fmt(measured, unit))
            if predicted is not None:
                text += ", predicted %s" % _fmt(predicted, unit)
                if measured and predicted:
                    text += " (%+.2f%%)" % (100.0 * (measured - predicted) /
                                            predicted)
            lines.append(text)

        row("peak saved activations", m.get("peak_saved_bytes"),
            _int(p.get("peak_activation_bytes")), "B")
        if m.get("overdue_bytes_at_peak"):
            lines.append("  of which %s held past the plan's frees by the "
                         "model's code (the schedule's own peak: %s)" % (
                             _fmt(m["overdue_bytes_at_peak"], "B"),
                             _fmt(m["peak_saved_bytes_on_schedule"], "B")))
        predicted_ns = _int(p.get("step_ns"))
        if "max_memory_allocated" in m:  # a CUDA step: times compare
            row("step time", m.get("step_seconds"),
                predicted_ns / 1e9 if predicted_ns is not None else None,
                "s")
        elif m.get("step_seconds") is not None:
            lines.append("%-34s measured %s on %s (the prediction, %s, is "
                         "for the GPU)" % (
                             "step time", _fmt(m["step_seconds"], "s"),
                             m.get("device"),
                             _fmt(predicted_ns / 1e9, "s")
                             if predicted_ns is not None else "-"))
        if "max_memory_allocated" in m:
            row("max memory allocated", m["max_memory_allocated"],
                predicted_total_bytes(p), "B")
        return "\n".join(lines)


def predicted_total_bytes(prediction):
    """Device memory the simulator's result implies at its peak: static
    bytes plus the highest activation + transient point of its timeline
    (without a timeline, the two peaks added: an upper bound)."""
    if not prediction:
        return None
    static = _int(prediction.get("static_bytes")) or 0
    timeline = prediction.get("memory_timeline") or []
    if timeline:
        return static + max(_int(x.get("activation_bytes")) +
                            _int(x.get("transient_bytes")) for x in timeline)
    return (static + (_int(prediction.get("peak_activation_bytes")) or 0) +
            (_int(prediction.get("peak_transient_bytes")) or 0))


def apply(plan, graph, *, prediction=None, policy=None, dropout=None,
          rank=None):
    """A context manager that runs one training step under `plan`.

    plan: a Plan, a PolicyResult (its simulated result becomes the
      prediction), or a PlanReport / PlanResponse with `policy` naming one
      of its results; a dict in the proto3 JSON mapping, a generated
      message, or a .json file.
    graph: the OperatorGraph the plan was made for (dict, message, bytes
      or .json path), exported from the model that runs in the context;
      for a node's plan, the graph of the rank that runs it.
    prediction: a SimulationResult (dict or message) to report beside the
      measurements, when plan carries none.
    dropout: "native" or "eager", as the graph was exported (default: read
      from the graph's op names).
    rank: for a plan for a node (its PolicyResult has `node`, its report
      `ranks`), the rank this process runs, in [0, ranks): it runs the
      plan that rank runs (today every rank's is the same) with that
      rank's own simulated result as the prediction. Leave it out for a
      single-GPU plan.

    Raises PlanRankError at once when the rank does not fit the plan (a
    node's plan without rank or with a rank outside its ranks, or a rank
    for a single-GPU plan or a bare Plan); PlanLayoutError when the graph
    is not that rank's graph of the plan's layout, as far as the report
    can tell (slackswap.plans.check_rank_graph: each collective's group
    within the node's ranks and including the rank, and the graph's
    static bytes equal to the rank's simulated ones); PlanError when the
    plan does not fit the graph (as the simulator would refuse it); and
    PlanMismatch inside the context at the first difference between the
    model and the graph.
    """
    chosen = rank_plan(plan, rank, policy)
    graph = read_graph(graph)
    check_rank_graph(graph, chosen)
    result = chosen.result
    if prediction is not None:
        from slackswap.plans import to_dict
        result = to_dict(prediction)
    runtime = _runtime.Runtime(chosen.plan, graph, result, dropout)
    return Step(runtime, chosen.rank)


def _int(v):
    return None if v is None or v == "" else int(v)


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "s":
        return "%.3f ms" % (v * 1e3)
    return "{:,} B".format(int(v))
