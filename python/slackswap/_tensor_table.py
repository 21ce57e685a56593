"""The graph tensors of a recorded step: one per storage, numbered in
order of first appearance (slackswap._numbering, rules 1 and 2)."""

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from slackswap._numbering import (KIND_ACT, KIND_GRAD, KIND_INPUT, storage,
                                  storage_key)


def _float_dtype_name(nbytes):
    return {1: "fp8", 2: "bf16", 4: "fp32", 8: "fp64"}.get(
        nbytes, "b%d" % (nbytes * 8))


class TensorTable:
    """The step's graph tensors as dicts (index = id), found by storage,
    floating ones sized at the graph's bytes per element.

    The table holds a weak reference to each storage it has seen, which
    keeps the StorageImpl address (the key) from being reused while
    letting the memory go when the step frees it, so the traced step keeps
    and frees what a plain one does (AccumulateGrad still steals
    gradients)."""

    key = staticmethod(storage_key)

    def __init__(self, dtype_bytes):
        self.dtype_bytes = dtype_bytes
        self.tensors = []            # dicts, index = id
        self.storage_to_tensor = {}  # storage key -> current tensor id
        self.pinned = {}             # storage key -> StorageWeakRef
        self.static_keys = set()     # keys of parameters, inputs, constants
        self.const_count = 0

    def pin(self, t):
        k = self.key(t)
        if k not in self.pinned:
            self.pinned[k] = StorageWeakRef(storage(t))
        return k

    def scaled_elem(self, t):
        if t.is_floating_point():
            return self.dtype_bytes
        if t.is_complex():
            return 2 * self.dtype_bytes
        return t.element_size()

    def dtype_name(self, t):
        if t.is_floating_point():
            return _float_dtype_name(self.dtype_bytes)
        if t.is_complex():
            return "complex" + _float_dtype_name(self.dtype_bytes)
        return str(t.dtype).replace("torch.", "")

    def storage_bytes(self, t):
        """The whole storage (a sparse tensor: indices and values)."""
        if t.layout == torch.sparse_coo:
            idx = t._indices()
            return (idx.storage().size() * idx.element_size() +
                    t._values().storage().size() * self.scaled_elem(t))
        return storage(t).size() * self.scaled_elem(t)

    def view_bytes(self, t):
        """The bytes t's elements occupy (what an op reads or writes)."""
        if t.layout == torch.sparse_coo:
            idx = t._indices()
            return (idx.numel() * idx.element_size() +
                    t._values().numel() * self.scaled_elem(t))
        return t.numel() * self.scaled_elem(t)

    @staticmethod
    def numel(t):
        if t.layout == torch.sparse_coo:
            return t._values().numel()
        return t.numel()

    def new_tensor(self, t, name, kind):
        tid = len(self.tensors)
        self.tensors.append({
            "id": tid, "name": name, "size_bytes": self.storage_bytes(t),
            "kind": kind, "dtype": self.dtype_name(t),
            "shape": "[" + ",".join(str(d) for d in t.shape) + "]",
        })
        self.storage_to_tensor[self.pin(t)] = tid
        return tid

    def register_static(self, t, name, kind):
        k = self.key(t)
        if k in self.storage_to_tensor:
            return self.storage_to_tensor[k]
        self.static_keys.add(k)
        return self.new_tensor(t, name, kind)

    def lookup(self, t):
        """The tensor id of t's storage; unknown storages become constants."""
        k = self.key(t)
        tid = self.storage_to_tensor.get(k)
        if tid is None:
            tid = self.new_tensor(t, "const%d" % self.const_count, KIND_INPUT)
            self.const_count += 1
            self.static_keys.add(k)
        return tid

    def id_of(self, t):
        """The tensor id t's storage holds now, None if it has none."""
        return self.storage_to_tensor.get(self.key(t))

    def alias(self, t, tid):
        """t's storage (a copy of tensor tid's) is tensor tid from now on."""
        self.storage_to_tensor[self.pin(t)] = tid

    def is_activation(self, tid):
        """Whether an op of the step made tensor tid (or its gradient)."""
        return self.tensors[tid]["kind"] in (KIND_ACT, KIND_GRAD)

    def activation_id(self, t):
        """t's tensor id if an op of the step made its storage, else None
        (parameters, inputs, constants, state made outside any op such as
        torch.get_rng_state())."""
        tid = self.id_of(t)
        if tid is None or not self.is_activation(tid):
            return None
        return tid
