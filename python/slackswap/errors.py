"""Errors and warnings of the package (exporter, runtime), importable
without torch."""


class ExportError(Exception):
    """An export that cannot be done: the message is one line naming the
    model part (a module path, `loss`, or a backward node) and what failed
    or is unsupported there."""

    def __init__(self, part, what):
        self.part = part
        self.what = what
        super().__init__("%s: %s" % (part, what) if part else what)


class ExportWarning(UserWarning):
    """The graph was written, but part of the step could not be measured
    exactly (e.g. state on a custom Function's ctx of unknown size)."""


def first_line(text):
    """The first non-blank line of text, stripped."""
    lines = [s.strip() for s in str(text).splitlines() if s.strip()]
    return lines[0] if lines else ""


def one_line(exc):
    """`Type: first line of the message`, for an exception from torch or
    the model, whose messages may span many lines."""
    text = first_line(exc)
    name = type(exc).__name__
    return "%s: %s" % (name, text) if text else name


class PlanError(ValueError):
    """A plan that cannot be applied: it does not fit its graph, or the
    step run under it is not the step the graph describes. The message is
    one line naming the first mismatch."""


class PlanMismatch(PlanError):
    """The model run under slackswap.torch.apply is not the one the graph
    was exported from (parameters, input shapes, or an op that differs)."""


class PlanRankError(PlanError):
    """A plan applied for a rank it does not have: a plan for a node
    applied without rank= or with a rank outside [0, ranks), or rank=
    given for a single-GPU plan. The message names the plan's ranks."""


class PlanLayoutError(PlanError):
    """A node's plan applied to a graph built for another layout (another
    rank's collectives, more ranks, or other tensors than the rank's plan
    was simulated with). The message names the field that differs."""
