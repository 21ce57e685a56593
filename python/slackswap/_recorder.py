"""Records one real training step of a PyTorch model as an operator graph.

The Recorder watches a forward and backward pass (docs/workloads.md, "What
the graph holds"):

* forward ops: every aten op below autograd (a TorchDispatchMode), named
  by module path (forward hooks); one graph tensor per storage, in-place
  ops folded into their producer where nothing read the storage since
  (slackswap._forward_ops, slackswap._module_paths);
* saved activations: what each autograd node unpacks while it runs
  (torch.autograd.graph.saved_tensors_hooks), plus the tensors a custom
  autograd.Function keeps on its ctx (found on the node, which is the
  ctx: slackswap._saved);
* backward ops: one per autograd node that does work, in the order the
  engine runs them (node pre- and post-hooks: slackswap._backward_ops);
* checkpointed regions (torch.utils.checkpoint, both variants): the
  recompute, recorded as ops of the backward phase while it runs inside
  backward, and the region's own backward ops (slackswap._checkpoint).

Storages are identified by their StorageImpl address
(slackswap._tensor_table), so the traced step keeps and frees what a
plain one does.

Tensors and ops are numbered by the rules of slackswap._numbering, so
that anything that runs the same step again (the runtime applying a plan,
which records it with this class) can find each of them.
"""

import contextlib
import warnings

import torch

from slackswap._backward_ops import BackwardOps
from slackswap._checkpoint import CheckpointRegions
from slackswap._forward_ops import ForwardOps, RecordingMode
from slackswap._module_paths import ModulePaths
from slackswap._numbering import (KIND_INPUT, KIND_PARAM, Unsupported,
                                  flatten_tensors)
from slackswap._saved import SavedTensors, SavedTensorsHooks
from slackswap._tensor_table import TensorTable
from slackswap.errors import ExportError, one_line


class native_dropout:
    """Context: aten::dropout runs as aten::native_dropout, as on CUDA.

    On CUDA, at::dropout in training dispatches to native_dropout: one
    kernel writing the output and a bool mask, which is all its backward
    keeps. On the CPU torch 1.13 takes a composite path instead (a float
    mask from bernoulli_, divided by 1-p, then a mul), which keeps the mask
    in the activation dtype. The graph describes a GPU step, so by default
    the CPU trace runs dropout the CUDA way. The kernel is replaced in the
    dispatcher, so every caller is reached: F.dropout, nn.Dropout, and the
    dropout between the layers of nn.LSTM/GRU/RNN, which C++ calls. p == 0,
    eval mode and in-place dropout keep torch's own behaviour.
    """

    def __init__(self, enabled=True):
        self.enabled = enabled
        self.lib = None

    def __enter__(self):
        if self.enabled:
            self.lib = torch.library.Library("aten", "IMPL")
            with warnings.catch_warnings():
                # "Overriding a previously registered kernel": intended.
                warnings.simplefilter("ignore")
                self.lib.impl("dropout", _dropout_as_on_cuda,
                              "CompositeImplicitAutograd")
        return self

    def __exit__(self, *exc):
        # The last reference: the registration goes with the Library.
        lib, self.lib = self.lib, None
        del lib
        return False


def _dropout_as_on_cuda(input, p, train):
    """at::dropout on CUDA (aten/src/ATen/native/Dropout.cpp)."""
    if train and 0 < p < 1 and input.numel() > 0:
        return torch.native_dropout(input, p, train)[0]
    if not train or p == 0 or input.numel() == 0:
        return input
    return input.mul(torch.zeros((), dtype=input.dtype))  # p == 1


class Recorder:
    """Records one training step of `model` as graph dicts: the step
    (run), and the parts that each keep one side of it.

    The exporter calls run(). The runtime re-records a step it drives
    itself through the methods under "a step driven from outside";
    listener, an object with node_started() and node_ended(), is then
    told after each backward node's start and end is recorded.
    """

    def __init__(self, model, dtype_bytes, listener=None):
        self.model = model
        self.ops = []               # dicts in launch order, both phases
        self.warnings = []
        self.num_forward_ops = None
        self.table = TensorTable(dtype_bytes)
        self.paths = ModulePaths(model)
        self.forward = ForwardOps(self.table, self.paths, self.ops)
        self.saved = SavedTensors(self.table, self.paths, self.forward,
                                  self.warnings)
        self.backward = BackwardOps(self.table, self.paths, self.forward,
                                    self.saved, self.warnings, listener)
        self.regions = CheckpointRegions(self)

    @property
    def tensors(self):
        """The graph tensors as dicts, index = id."""
        return self.table.tensors

    def register_static(self, t, name, kind):
        return self.table.register_static(t, name, kind)

    def current_part(self):
        """The model part running now, for an error message."""
        running = self.backward.running
        if running:
            node = running[-1].node
            path = self.paths.node_path.get(node, "")
            return "backward of %s (%s)" % (path or "model",
                                            type(node).__name__)
        return self.paths.current_part()

    # --- the step ---------------------------------------------------------

    def run(self, args, kwargs, loss_fn, strip_checkpoint=False):
        """One forward and backward step; loss_fn(recorder, output) makes
        the loss (traced under the module path `loss`)."""
        self.refuse_torchscript()
        self.register_step_statics(args, kwargs)
        handles = self.install_module_hooks()
        try:
            with self.regions.patched(strip_checkpoint):
                hooks = SavedTensorsHooks(self.saved.pack,
                                          self.backward.unpack)
                with hooks, self.saved.own_hooks_noted(self.current_part), \
                        RecordingMode(self.forward):
                    out = self.model(*args, **kwargs)
                    self.begin_loss()
                    loss = loss_fn(self, out)
                if (not isinstance(loss, torch.Tensor) or
                        loss.numel() != 1 or loss.grad_fn is None):
                    raise ExportError("loss", "the loss must be a tensor of "
                                      "one element that requires grad")
                self.begin_backward([loss.grad_fn])
                loss.backward()
        except ExportError:
            raise
        except Exception as e:  # the model's, torch's or an unsupported use
            what = str(e) if isinstance(e, Unsupported) else one_line(e)
            raise ExportError(self.current_part(), what) from e
        finally:
            for h in handles:
                h.remove()
            self.release_nodes()
        self.name_backward_ops()
        return loss

    @contextlib.contextmanager
    def untraced(self):
        """Ops run without being recorded (a built-in loss's labels)."""
        self.forward.tracing = False
        try:
            yield
        finally:
            self.forward.tracing = True

    # --- a step driven from outside (the runtime) -------------------------

    def refuse_torchscript(self):
        self.paths.refuse_torchscript()

    def register_step_statics(self, args, kwargs):
        """The step's static tensors, numbered first (slackswap._numbering,
        rule 2)."""
        for name, p in self.model.named_parameters():
            self.register_static(p, name, KIND_PARAM)
        for name, b in self.model.named_buffers():
            self.register_static(b, name, KIND_PARAM)
        named = [("input%d" % i, a) for i, a in enumerate(args)]
        named += [("input." + k, v) for k, v in kwargs.items()]
        inputs = [(n, flatten_tensors(v)) for n, v in named]
        count = sum(len(ts) for _, ts in inputs)
        for n, ts in inputs:
            for j, t in enumerate(ts):
                self.register_static(
                    t, "input" if count == 1 else
                    n if len(ts) == 1 else "%s.%d" % (n, j), KIND_INPUT)

    def install_module_hooks(self):
        """Forward hooks on every module; returns their handles."""
        return self.paths.install_hooks()

    def enter_module(self, path, module, inputs):
        """A module call starts whose forward pre-hook came too late."""
        self.paths.enter(path, module, inputs)

    def on_op(self, func, args, kwargs, out):
        """One aten call: a Recorded (op index, folded or not), or None
        when the call is no op of the graph."""
        return self.forward.on_op(func, args, kwargs, out)

    def begin_loss(self):
        """The model has returned: what runs now is the loss."""
        self.paths.base_path = "loss"

    def begin_backward(self, roots):
        """backward() is about to run from the autograd nodes `roots`."""
        self.paths.claim_nodes(roots, "loss")
        self.backward.install_node_hooks(roots)
        self.num_forward_ops = len(self.ops)
        self.paths.base_path = ""

    def tensor_id(self, t):
        """The tensor id t's storage holds now, None if none."""
        return self.table.id_of(t)

    def activation_id(self, t):
        return self.table.activation_id(t)

    def alias(self, t, tid):
        """t's storage, a copy of tensor tid, is tensor tid from now on (a
        node that unpacks it reads tid)."""
        self.table.alias(t, tid)

    def custom_function_reads(self):
        """(node, tensor ids) of each custom Function that reads tensors
        off its ctx, out of the saved-tensor hooks."""
        return self.saved.ctx_reads.items()

    def running_base(self):
        """The unnumbered name of the innermost backward node running,
        None when none is."""
        running = self.backward.running
        return running[-1].base if running else None

    def unpack(self, t):
        """Saved tensor t is unpacked by the running backward node."""
        return self.backward.unpack(t)

    def release_nodes(self):
        self.backward.release_nodes()

    def name_backward_ops(self):
        self.backward.name_backward_ops()

    # --- the graph --------------------------------------------------------

    def graph(self, name, description):
        """The graph as a dict in the proto3 JSON mapping."""
        tensors = []
        for t in self.tensors:
            tensors.append({
                "id": str(t["id"]), "name": str(t["name"]),
                "size_bytes": str(t["size_bytes"]), "kind": t["kind"],
                "dtype": t["dtype"], "shape": t["shape"]})
        ops = []
        for i, op in enumerate(self.ops):
            c = op["cost"]
            cost = {"flops": float(c["flops"]),
                    "bytes_accessed": str(int(c["bytes_accessed"])),
                    "kernels": int(c["kernels"]), "kind": c["kind"]}
            if "duration_ns" in c:
                cost["duration_ns"] = str(int(c["duration_ns"]))
            shape = c.get("shape")
            if shape is not None:  # a KernelShape: GEMMs and attention
                cost["shape"] = {d: str(int(shape[d])) for d in "mnk"}
                cost["shape"]["causal"] = bool(shape["causal"])
            ops.append({
                "id": str(i), "name": str(op["name"]), "phase": op["phase"],
                "input_ids": [str(x) for x in op["inputs"]],
                "output_ids": [str(x) for x in op["outputs"]],
                "workspace_bytes": "0", "layer": op["layer"], "cost": cost})
        return {"name": name, "description": description, "tensors": tensors,
                "ops": ops}

    def saved_summary(self):
        """(graph saved bytes, kept bytes, tensor ids saved): the tensors
        forward ops make and backward ops read, and, measured apart, what
        autograd kept from the forward pass."""
        producer = {}
        for i, op in enumerate(self.ops):
            for o in op["outputs"]:
                producer[o] = i
        saved = set()
        for op in self.ops[self.num_forward_ops:]:
            for i in op["inputs"]:
                p = producer.get(i)
                if p is not None and p < self.num_forward_ops:
                    saved.add(i)
        graph_bytes = sum(self.tensors[i]["size_bytes"] for i in saved)
        return graph_bytes, self.saved.kept_bytes(), saved
