"""Host copies of the tensors a plan swaps, and the streams they move on.

On CUDA the copy out goes into a pinned buffer on a side stream that waits
for the compute stream, with record_stream so that the allocator does not
reuse the device memory before the copy has read it; the copy back goes
on a second side stream, and the compute stream waits for it (an event)
only where a tensor is needed before it has landed. On the CPU both are
plain copies.
"""

import collections

import torch

from slackswap._numbering import flat


def _copy_on(stream, dst, src):
    """dst.copy_(src) queued on the CUDA `stream`; the event its end
    records."""
    with torch.cuda.stream(stream):
        dst.copy_(src, non_blocking=True)
        event = torch.cuda.Event()
        event.record(stream)
    return event


class HostCopies:
    """Swapped tensors' host copies: taken when autograd saves a tensor
    (again when an in-place write folded into its op changes it later),
    brought back when the plan's prefetch op starts, in order, each as
    soon as it fits the plan's budget (the simulator reserves memory when
    a copy starts), or at once when the tensor is needed.

    A prefetched copy goes to `resident` (slackswap._schedule.Resident),
    which holds the device copies of graph tensors; `quiet` marks the
    runtime's own tensor work; `stats` counts what was done."""

    def __init__(self, graph, budget, meter, resident, quiet, stats):
        self.graph = graph
        self.budget = budget
        self.meter = meter
        self.resident = resident
        self.quiet = quiet
        self.stats = stats
        self.device = None           # the step's, once the model is called
        self.host = {}               # graph tensor -> flat host copy
        self.copy_events = {}        # CUDA: graph tensor -> event (copied)
        self.h2d_queue = collections.deque()
        self.streams = None

    def has_host(self, t):
        """Whether t is out on the host and not yet prefetched."""
        return t in self.host

    def pending(self, t):
        """Whether t is out on the host or queued to come back."""
        return t in self.host or t in self.h2d_queue

    def clear(self):
        """Lets go of every copy (the step is over)."""
        self.host.clear()
        self.h2d_queue.clear()
        self.copy_events.clear()

    def side_streams(self):
        """CUDA: (device-to-host, host-to-device) copy streams."""
        if self.streams is None:
            self.streams = (torch.cuda.Stream(self.device),
                            torch.cuda.Stream(self.device))
        return self.streams

    def swap_out(self, g, t):
        """Copies the storage of t (graph tensor g) to host memory (again,
        into the same buffer, when it is there already)."""
        device_copy = flat(t)
        host = self.host.get(g)
        first = host is None
        if device_copy.is_cuda:
            if first:
                host = torch.empty(device_copy.shape,
                                   dtype=device_copy.dtype, pin_memory=True)
            stream = self.side_streams()[0]
            stream.wait_stream(torch.cuda.current_stream(device_copy.device))
            event = _copy_on(stream, host, device_copy)
            # The allocator keeps the block until the copy is done.
            device_copy.record_stream(stream)
            self.copy_events[g] = event
        elif first:
            host = device_copy.clone()
        else:
            host.copy_(device_copy)
        self.host[g] = host
        self.stats["swapped_out" if first else "swap_outs_refreshed"] += 1
        self.stats["d2h_bytes"] += host.numel() * host.element_size()

    def queue(self, ts):
        """The prefetches of graph tensors ts are due: queued, in order."""
        self.h2d_queue.extend(ts)
        self.pump()

    def pump(self):
        """Starts queued prefetches, in order, while they fit the plan's
        budget."""
        while self.h2d_queue:
            t = self.h2d_queue[0]
            if (self.budget and self.meter.current()[0] + self.graph.size[t]
                    > self.budget):
                return
            self.h2d_queue.popleft()
            self.prefetch(t)

    def prefetch(self, t):
        host = self.host.pop(t, None)
        if host is None:
            raise RuntimeError(
                "slackswap.torch: %s is to be prefetched but autograd never "
                "saved it, so it was never copied out (the plan's schedule "
                "and the step disagree)" % self.graph.tensor_label(t))
        with self.quiet():
            if self.device is not None and self.device.type == "cuda":
                stream = self.side_streams()[1]
                device_copy = torch.empty(host.shape, dtype=host.dtype,
                                          device=self.device)
                done = self.copy_events.pop(t, None)
                if done is not None:
                    stream.wait_event(done)
                event = _copy_on(stream, device_copy, host)
                device_copy.record_stream(stream)
                self.copy_events[t] = event
            else:
                device_copy = host.clone()
        self.resident.hold(t, device_copy)
        self.stats["prefetched"] += 1
        self.stats["h2d_bytes"] += host.numel() * host.element_size()
        self.meter.sample(("prefetch", t))

    def arrive(self, t):
        """Swapped tensor t is needed now: started if it had not, waited
        for on the compute stream if it has not landed."""
        if t in self.h2d_queue:
            self.h2d_queue.remove(t)
            self.stats["prefetches_forced"] += 1
            self.prefetch(t)
        elif t not in self.resident and t in self.host:
            self.stats["prefetches_forced"] += 1
            self.prefetch(t)
        event = self.copy_events.pop(t, None)
        if event is not None and t in self.resident:
            torch.cuda.current_stream(self.device).wait_event(event)

    def land(self, t):
        """A copy of t still in flight is waited for (an unpack)."""
        if t in self.copy_events:
            self.arrive(t)
