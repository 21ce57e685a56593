"""torch.utils.checkpoint regions in a step: recorded (the region's
forward pass once, its recompute as ops of the backward phase while it
runs inside backward, then the region's own backward ops), or inlined:
run as plain code.

checkpoint() and checkpoint_sequential() look CheckpointFunction and
_checkpoint_without_reentrant up in their module at each call, so
replacing those two names reaches every caller, for both variants.
"""

import contextlib
import types

import torch
import torch.utils.checkpoint

from slackswap._forward_ops import RecordingMode
from slackswap._numbering import flatten_tensors
from slackswap._saved import SavedTensorsHooks


@contextlib.contextmanager
def _checkpoint_replaced(apply, without_reentrant):
    """CheckpointFunction.apply and _checkpoint_without_reentrant replaced
    while the context is open."""
    cp = torch.utils.checkpoint
    saved = cp.CheckpointFunction, cp._checkpoint_without_reentrant
    cp.CheckpointFunction = types.SimpleNamespace(apply=apply)
    cp._checkpoint_without_reentrant = without_reentrant
    try:
        yield
    finally:
        cp.CheckpointFunction, cp._checkpoint_without_reentrant = saved


def _inline_reentrant_apply(function, preserve_rng_state, *args):
    return function(*args)


def _inline_non_reentrant(function, preserve_rng_state=True, *args,
                          **kwargs):
    return function(*args, **kwargs)


def checkpoint_inlined():
    """torch.utils.checkpoint regions run as plain code."""
    return _checkpoint_replaced(_inline_reentrant_apply,
                                _inline_non_reentrant)


class CheckpointRegions:
    """Checkpointed regions recorded by `recorder`: each region's function
    is wrapped so that its first call is the forward pass and each later
    one, from backward, a recompute recorded under the region's path."""

    def __init__(self, recorder):
        self.rec = recorder

    def patched(self, strip):
        """torch.utils.checkpoint, recorded (or, with strip, inlined)."""
        if strip:
            return checkpoint_inlined()
        cp = torch.utils.checkpoint
        reentrant = cp.CheckpointFunction
        non_reentrant = cp._checkpoint_without_reentrant

        def apply(function, preserve_rng_state, *args):
            return reentrant.apply(self.region(function, True),
                                   preserve_rng_state, *args)

        def without_reentrant(function, preserve_rng_state=True, *args,
                              **kwargs):
            # The hooks' closure holds the inputs until backward.
            for t in flatten_tensors((args, kwargs)):
                if self.rec.table.activation_id(t) is not None:
                    self.rec.saved.keep(t)
            with self.unpacks_observed():
                return non_reentrant(self.region(function, False),
                                     preserve_rng_state, *args, **kwargs)

        return _checkpoint_replaced(apply, without_reentrant)

    @contextlib.contextmanager
    def unpacks_observed(self):
        """While a non-reentrant checkpoint starts: the saved-tensor hooks
        it installs also tell the recorder what each node unpacks (the
        recomputed tensors), as the recorder's own hooks do elsewhere."""
        backward = self.rec.backward

        class Observed(SavedTensorsHooks):
            """The checkpoint's hooks, its unpacks told to the recorder."""

            slackswap_checkpoint = True

            def __init__(self, pack_hook, unpack_hook):
                def unpack(packed):
                    return backward.unpack(unpack_hook(packed))
                super().__init__(pack_hook, unpack)

        graph = torch.autograd.graph
        plain = graph.saved_tensors_hooks
        graph.saved_tensors_hooks = Observed
        try:
            yield
        finally:
            graph.saved_tensors_hooks = plain

    def region(self, function, reentrant):
        """Wraps a checkpointed function: its first call is the forward
        pass; each later one, from backward, is a recompute."""
        path = self.rec.paths.current_path()
        calls = []

        def run(*args, **kwargs):
            if not calls:
                calls.append(True)
                return function(*args, **kwargs)
            return self.recompute(function, path, reentrant, args, kwargs)

        run.slackswap_region = True
        return run

    def recompute(self, function, path, reentrant, args, kwargs):
        rec = self.rec
        if rec.backward.running:
            # The node that asked for the recompute unpacked the region's
            # inputs (reentrant): the recompute's ops read them instead.
            rec.backward.running[-1].unpacks.clear()
        frame = rec.paths.enter(path, None, (args, kwargs))
        rec.forward.recomputing += 1
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(RecordingMode(rec.forward))
                if reentrant:
                    # Its backward runs here, over the recompute's graph;
                    # without reentrancy torch's own hooks are innermost.
                    stack.enter_context(SavedTensorsHooks(
                        rec.saved.pack, rec.backward.unpack))
                out = function(*args, **kwargs)
        finally:
            rec.forward.recomputing -= 1
            rec.paths.frames.pop()
        roots = rec.paths.claim_frame(frame, out)
        if reentrant:  # CheckpointFunction runs this graph's backward next
            rec.backward.install_node_hooks(roots)
        return out
