#!/usr/bin/python3
"""Exports one real PyTorch training step as a SlackSwap OperatorGraph.

Runs one forward + backward step of a real model on the CPU (Debian's
PyTorch, python3-torch and python3-torchvision, under /usr/bin/python3) and
writes what it did as a slackswap.v1.OperatorGraph in the proto3 JSON
mapping (proto field names), ready for `slackswap simulate|plan --graph`:

  tools/torch_export.py --model torchvision.models.resnet18 \\
      --input-shape 8,3,224,224 --out resnet18.json
  tools/torch_export.py --model "torch.nn.TransformerEncoderLayer(d_model=512,
      nhead=8, batch_first=True)" --input-shape 4,128,512 --out enc.json

--model is a Python expression evaluated with `torch` and `torchvision`
imported: a callable taking no arguments (torchvision.models.resnet18) or an
nn.Module (a call such as torch.nn.TransformerEncoderLayer(...)).

What is recorded, and how it maps onto the graph:

* Forward: every aten op in launch order, as the dispatcher sees it below
  autograd (a TorchDispatchMode), with its module path (forward hooks). An op
  that makes no new storage and writes none is a view (view, t, transpose,
  split, _unsafe_view...) and is not an op of the graph.
* One graph tensor per storage: a view is its base. An in-place op (relu_,
  add_, bernoulli_, div_...) writes an existing storage; it is folded into
  the op that last wrote that storage when nothing read the storage since and
  its other inputs already existed then (conv -> batch_norm -> relu_ is one
  op `native_batch_norm+relu_`; dropout's empty_like -> bernoulli_ -> div_ is
  one op), and otherwise makes a new version of the tensor (a new graph
  tensor, read from the old one: the in-place op is then an op of its own).
  Autograd forbids modifying a tensor it saved, so one version at most of a
  storage is ever saved.
* Sizes: a tensor is its whole storage. Floating tensors are scaled to
  --dtype-bytes per element (default 2: the graph is a bf16 step, traced in
  fp32); integer and bool tensors keep their element size (max-pool indices
  stay int64, 8 bytes).
* Static tensors: parameters and buffers (kind PARAMETER), the model input
  (kind INPUT), and any storage an op reads that no recorded op produced
  (kind INPUT, named const*: e.g. the 0-dim tensor autograd saves for the
  Python scalar of `x / 2.0`). They are never activations.
* Saved activations: tensors produced by a forward op and read by a backward
  op. What each backward op reads is what its autograd node unpacks while it
  runs (torch.autograd.graph.saved_tensors_hooks: a node's unpacks are
  attributed to it when its post-hook fires), so the graph's saved bytes are
  exactly the storages autograd saved for backward, de-duplicated by
  storage, without parameters, the input and constants. The tool checks this
  against the storages the pack hook saw and says so on stderr.
* Backward: one op per autograd node in the order the engine runs them (a
  post-hook on every node; TorchDispatchMode cannot be used around backward
  in torch 1.13). Inputs: the incoming gradients and the unpacked saved
  tensors; outputs: the gradients the node makes in new storage. Nodes that
  make nothing new and read nothing saved (views, AddBackward passing the
  gradient through, AccumulateGrad) are not ops. Where the engine summed
  the gradients of a tensor used twice into new storage, a `grad_accumulate`
  op reading the contributions produces the sum, just before the node that
  reads it. The seed gradient of the loss (ones) is a static INPUT tensor
  (grad_seed). Parameter gradients are produced and never read (their
  accumulation into .grad is outside the activation memory).
* Dropout (--dropout native, the default): torch.nn.functional.dropout runs
  as torch.native_dropout, one op keeping a bool mask, as at::dropout does
  on CUDA; --dropout eager keeps torch 1.13's CPU composite (bernoulli_ into
  a float mask, then mul). See native_dropout below.
* Under a Python dispatch mode torch 1.13's composites take their
  tensor-subclass branches (linear adds its bias out of place, not with
  add_): a transient tensor more here and there, the same saved tensors.
* Loss: --loss sum (default: out.sum() over every floating output) or
  cross_entropy (against seeded random class labels, an INPUT), traced as
  forward ops under the module path `loss`.
* Costs from shapes: mm/addmm (2MKN) and convolution (2 x output elements x
  Cin/groups x kernel volume) are OP_KIND_MATMUL, bmm/baddbmm
  OP_KIND_BATCHED_MATMUL, fused scaled-dot-product attention
  OP_KIND_FLASH_ATTENTION; their backward costs one such GEMM per gradient
  computed (dgrad + wgrad: twice the forward). Everything else is memory
  bound: a few FLOPs per element (norms, softmax, GELU...) and the bytes of
  its tensors read and written. Allocation-only ops (empty*) cost nothing.
* Layers: ops inside the k-th repeated block (a child of an nn.Sequential or
  nn.ModuleList with a sibling of the same type: resnet's layer1.0,
  ViT's encoder.layers.encoder_layer_3) get layer k, numbered in order of
  first use; other ops -1.
* Measured durations (--trace-durations FILE): a Chrome trace written by
  torch.profiler (export_chrome_trace) of the same step. A forward op takes
  the duration of the k-th event aten::NAME before the first backward
  event, where it is the k-th forward op of that aten name; events nested
  in an event of a recorded name (an op's own allocations and copies) do
  not count, and NAME_ matches NAME (a composite may pick either). A folded
  op sums its parts. A backward op takes the k-th
  `autograd::engine::evaluate_function: NODE` event, where it is the k-th
  node of that type the engine ran. In a GPU trace (events of category
  "kernel") an op's duration is the sum of the kernels launched inside its
  CPU event (by correlation id), else the CPU event's duration. Ops left
  unmatched (grad_accumulate always) keep the cost model; stderr and the
  graph's description say how many matched.

The step is deterministic: torch.manual_seed(0) before the model, the input
and the run; ids are assigned in order of first appearance.
"""

import argparse
import collections
import json
import math
import re
import sys

# Per-element FLOPs of memory-bound ops (forward), by aten op name.
_FWD_FLOPS_PER_ELEM = {
    "native_layer_norm": 8, "native_batch_norm": 8,
    "_native_batch_norm_legit": 8, "native_group_norm": 8,
    "_softmax": 5, "_log_softmax": 5, "gelu": 8, "silu": 5, "tanh": 4,
    "sigmoid": 4, "erf": 4, "exp": 1, "log": 1, "mean": 1, "sum": 1,
    "clone": 0, "copy_": 0, "_to_copy": 0, "cat": 0, "stack": 0,
    "index_select": 0, "embedding": 0, "gather": 0, "zero_": 0, "fill_": 0,
    "zeros": 0, "zeros_like": 0, "ones": 0, "ones_like": 0, "full": 0,
    "full_like": 0, "arange": 0, "constant_pad_nd": 0,
}
# Ops that only allocate: no kernel, no bytes.
_ALLOC_ONLY = {"empty", "empty_like", "empty_strided", "new_empty",
               "new_empty_strided", "new_zeros"}
# aten ops as the dispatch mode sees them in torch 1.13: composite ops
# (matmul, linear, conv1d/2d/3d, _convolution) have decomposed into these.
_MATMUL_OPS = {"mm", "addmm"}
_BMM_OPS = {"bmm", "baddbmm"}
_CONV_OPS = {"convolution", "mkldnn_convolution",
             "cudnn_convolution", "cudnn_convolution_transpose",
             "slow_conv2d_forward", "_slow_conv2d_forward",
             "thnn_conv2d"}
_ATTN_OPS = {"_scaled_dot_product_attention",
             "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention",
             "scaled_dot_product_attention",
             "_efficient_attention_forward", "_flash_attention_forward"}
# Per-element FLOPs of memory-bound backward nodes, by node type without
# its trailing version digit.
_BWD_FLOPS_PER_ELEM = {
    "NativeLayerNormBackward": 12, "NativeBatchNormBackward": 12,
    "NativeGroupNormBackward": 12, "SoftmaxBackward": 4,
    "LogSoftmaxBackward": 4, "GeluBackward": 8, "SiluBackward": 5,
    "TanhBackward": 3, "SigmoidBackward": 3,
}
_FLASH_BWD_FACTOR = 2.5  # FlashAttention-2 backward recomputes S = QK^T

KIND_ACT = "TENSOR_KIND_ACTIVATION"
KIND_PARAM = "TENSOR_KIND_PARAMETER"
KIND_GRAD = "TENSOR_KIND_GRADIENT"
KIND_INPUT = "TENSOR_KIND_INPUT"


def _node_base(name):
    return re.sub(r"\d+$", "", name)


def _float_dtype_name(nbytes):
    return {1: "fp8", 2: "bf16", 4: "fp32", 8: "fp64"}.get(
        nbytes, "b%d" % (nbytes * 8))


class Exporter:
    """Records one training step of `model` on `example` as a graph."""

    def __init__(self, torch, model, dtype_bytes):
        self.torch = torch
        self.model = model
        self.dtype_bytes = dtype_bytes
        self.tensors = []   # dicts, index = id
        self.ops = []       # dicts, index = id (final order fixed at the end)
        self.storage_to_tensor = {}  # storage key -> current tensor id
        self.keep = []      # keeps every storage seen alive: keys stay unique
        self.read_since_write = {}   # tensor id -> read by an op since written
        # tensor id -> op index that wrote it (a write makes a new id).
        self.last_writer = {}
        self.module_stack = []
        self.block_of_module = {}    # paths of repeated blocks
        self.block_index = {}        # block path -> layer index
        self.const_count = 0
        self.packed_storages = collections.OrderedDict()  # key -> tensor
        self.pending_unpacks = []
        self.node_path = {}          # autograd node -> module path
        self.node_claim = {}         # autograd node -> claim number
        self.claimed = []            # nodes in claim order (kept alive)
        self.name_counts = collections.Counter()
        self.node_counts = collections.Counter()  # fired nodes per type
        self.bwd_ops = []
        self.contributions = collections.defaultdict(list)
        self.warnings = []
        self.static_keys = set()

    # --- tensors ----------------------------------------------------------

    def key(self, t):
        return t.storage()._cdata

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
        return t.storage().size() * self.scaled_elem(t)

    def view_bytes(self, t):
        return t.numel() * self.scaled_elem(t)

    def new_tensor(self, t, name, kind):
        tid = len(self.tensors)
        self.tensors.append({
            "id": tid, "name": name, "size_bytes": self.storage_bytes(t),
            "kind": kind, "dtype": self.dtype_name(t),
            "shape": "[" + ",".join(str(d) for d in t.shape) + "]",
        })
        self.storage_to_tensor[self.key(t)] = tid
        self.keep.append(t)
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

    # --- modules and layers ----------------------------------------------

    def install_module_hooks(self):
        torch = self.torch
        names = {}
        for name, mod in self.model.named_modules():
            names.setdefault(mod, name)
        # Blocks: children of Sequential/ModuleList with a same-type sibling.
        for name, mod in self.model.named_modules():
            if isinstance(mod, (torch.nn.Sequential, torch.nn.ModuleList)):
                kids = list(mod.named_children())
                types = collections.Counter(type(c) for _, c in kids)
                for cname, child in kids:
                    if types[type(child)] >= 2:
                        path = cname if not name else name + "." + cname
                        self.block_of_module.setdefault(path, path)
        handles = []
        for mod, name in names.items():
            handles.append(mod.register_forward_pre_hook(
                lambda m, inp, name=name: self._pre_hook(name, inp)))
            handles.append(mod.register_forward_hook(
                lambda m, inp, out, name=name: self._post_hook(name, out)))
        return handles

    def _pre_hook(self, name, inputs):
        frontier = set()
        for t in _flatten_tensors(inputs, self.torch):
            if t.grad_fn is not None:
                frontier.add(t.grad_fn)
        self.module_stack.append((name, frontier, len(self.claimed)))

    def _post_hook(self, name, outputs):
        _, frontier, since = self.module_stack.pop()
        roots = [t.grad_fn for t in _flatten_tensors(outputs, self.torch)
                 if t.grad_fn is not None]
        self.claim_nodes(roots, name, frontier, since)

    def claim_nodes(self, roots, path, frontier=(), since=0):
        """Gives `path` to the autograd nodes made since claim number
        `since` that its submodules did not claim: walks back from `roots`
        through nodes claimed since then (by submodules), stopping at the
        module's inputs (`frontier`) and at nodes claimed before."""
        stack = list(roots)
        visited = set()
        while stack:
            n = stack.pop()
            if n is None or n in visited or n in frontier:
                continue
            visited.add(n)
            if type(n).__name__ == "AccumulateGrad":
                continue
            claim = self.node_claim.get(n)
            if claim is not None and claim < since:
                continue  # made before this module ran
            if claim is None:
                self.node_claim[n] = len(self.claimed)
                self.claimed.append(n)
                self.node_path[n] = path
            for nxt, _ in n.next_functions:
                stack.append(nxt)

    def current_path(self):
        return self.module_stack[-1][0] if self.module_stack else self.base_path

    def layer_of(self, path):
        parts = path.split(".") if path else []
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in self.block_of_module:
                if prefix not in self.block_index:
                    self.block_index[prefix] = len(self.block_index)
                return self.block_index[prefix]
        return -1

    # --- forward ----------------------------------------------------------

    def add_op(self, op):
        self.ops.append(op)
        return len(self.ops) - 1

    def unique(self, name):
        """name, then name#1, name#2... for later ops of the same name."""
        k = self.name_counts[name]
        self.name_counts[name] += 1
        return name if k == 0 else "%s#%d" % (name, k)

    def on_forward_op(self, func, args, kwargs, out):
        torch = self.torch
        name = func.overloadpacket.__name__
        if hasattr(torch, "Tag") and torch.Tag.inplace_view in func.tags:
            return  # metadata only (transpose_, unsqueeze_...)
        schema = func._schema
        written = []
        for i, a in enumerate(schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            v = args[i] if i < len(args) else kwargs.get(a.name)
            written.extend(_flatten_tensors(v, torch))
        ins = _dedup_by_key(_flatten_tensors((args, kwargs), torch), self.key)
        outs = _dedup_by_key(_flatten_tensors(out, torch), self.key)
        new_outs = [t for t in outs if self.key(t) not in self.storage_to_tensor]
        written = _dedup_by_key(written, self.key)
        if not new_outs and not written:
            return  # a view, or no tensor result: not an op of the graph
        path = self.current_path()
        cost = self.forward_cost(name, args, ins, outs)
        in_ids = [self.lookup(t) for t in ins]
        written_ids = [self.lookup(t) for t in written]
        written_act = [w for w in written_ids
                       if self.tensors[w]["kind"] in (KIND_ACT, KIND_GRAD)]

        # In-place on activations: fold into the op that last wrote them.
        if written_act and not new_outs:
            target = self.last_writer.get(written_act[0])
            ok = target is not None and all(
                self.last_writer.get(w) == target and
                not self.read_since_write.get(w) for w in written_act)
            if ok:
                for i in in_ids:
                    p = self.last_writer.get(i)
                    if p is not None and p > target:
                        ok = False
            if ok:
                op = self.ops[target]
                op["name"] += "+" + name
                op["aten"].append(name)
                for i in in_ids:
                    if i not in op["inputs"] and i not in op["outputs"]:
                        op["inputs"].append(i)
                        self.read_since_write[i] = True
                _add_cost(op["cost"], cost)
                return

        opname = self.unique(name if not path else path + "." + name)
        op = {"name": opname, "phase": "PHASE_FORWARD", "inputs": [],
              "outputs": [], "layer": self.layer_of(path), "cost": cost,
              "aten": [name]}
        idx = self.add_op(op)
        for i in in_ids:
            if i not in op["inputs"]:
                op["inputs"].append(i)
                self.read_since_write[i] = True
        # Written activations get a new version (an output), others (static
        # buffers such as running stats) are updated in place.
        for w, t in zip(written_ids, written):
            if w in written_act:
                nid = self.new_tensor(t, opname, KIND_ACT)
                op["outputs"].append(nid)
                self.last_writer[nid] = idx
                self.read_since_write[nid] = False
        for j, t in enumerate(new_outs):
            tname = opname if len(new_outs) == 1 else "%s:%d" % (opname, j)
            nid = self.new_tensor(t, tname, KIND_ACT)
            op["outputs"].append(nid)
            self.last_writer[nid] = idx
            self.read_since_write[nid] = False

    def forward_cost(self, name, args, ins, outs):
        cost = {"kind": "OP_KIND_MEMORY_BOUND", "flops": 0.0,
                "bytes_accessed": 0, "kernels": 1}
        if name in _ALLOC_ONLY:
            cost["kernels"] = 0
            return cost
        cost["bytes_accessed"] = (sum(self.view_bytes(t) for t in ins) +
                                  sum(self.view_bytes(t) for t in outs))
        tensors = [a for a in args if isinstance(a, self.torch.Tensor)]
        out0 = outs[0] if outs else None
        if name in _MATMUL_OPS and out0 is not None and len(tensors) >= 2:
            a = tensors[-2]
            k = a.shape[-1]
            cost["kind"] = "OP_KIND_MATMUL"
            cost["flops"] = 2.0 * out0.numel() * k
            if name == "addmm":
                cost["flops"] += out0.numel()
        elif name in _BMM_OPS and out0 is not None and len(tensors) >= 2:
            a = tensors[-2]
            cost["kind"] = "OP_KIND_BATCHED_MATMUL"
            cost["flops"] = 2.0 * out0.numel() * a.shape[-1]
            if name == "baddbmm":
                cost["flops"] += out0.numel()
        elif name in _CONV_OPS and out0 is not None and len(tensors) >= 2:
            x, w = tensors[0], tensors[1]
            transposed = len(args) > 6 and args[6] is True
            per = w.numel() / w.shape[0]
            cost["kind"] = "OP_KIND_MATMUL"
            cost["flops"] = 2.0 * (x.numel() if transposed else out0.numel()) * per
        elif name in _ATTN_OPS and len(tensors) >= 3:
            q, k, v = tensors[0], tensors[1], tensors[2]
            batch = q.numel() // (q.shape[-1] * q.shape[-2])
            lq, lk = q.shape[-2], k.shape[-2]
            cost["kind"] = "OP_KIND_FLASH_ATTENTION"
            cost["flops"] = 2.0 * batch * lq * lk * (q.shape[-1] + v.shape[-1])
        else:
            numel = max([t.numel() for t in outs] + [0])
            cost["flops"] = float(_FWD_FLOPS_PER_ELEM.get(name, 1) * numel)
        return cost

    # --- autograd hooks ---------------------------------------------------

    def pack(self, t):
        self.packed_storages.setdefault(self.key(t), t)
        return t

    def unpack(self, t):
        self.pending_unpacks.append(t)
        return t

    def install_node_hooks(self, roots):
        seen = set()
        stack = list(roots)
        order = []
        while stack:
            n = stack.pop()
            if n is None or n in seen:
                continue
            seen.add(n)
            order.append(n)
            for nxt, _ in n.next_functions:
                stack.append(nxt)
        # Hold every node's Python object: a hook that refers to its node
        # forms a cycle through the node's hook dict that the garbage
        # collector would otherwise clear, silently dropping the hook.
        self.hooked_nodes = order
        for n in order:
            n.register_hook(lambda gi, go, n=n: self.on_backward_node(n, gi, go))

    def on_backward_node(self, node, grad_inputs, grad_outputs):
        unpacked = self.pending_unpacks
        self.pending_unpacks = []
        nodename = type(node).__name__
        ordinal = self.node_counts[nodename]
        self.node_counts[nodename] += 1
        for t in grad_inputs:
            if t is not None:
                self.keep.append(t)
        # Where the node's gradients go (for sums the engine makes later).
        for i, (nxt, nr) in enumerate(node.next_functions):
            if nxt is None or i >= len(grad_inputs) or grad_inputs[i] is None:
                continue
            self.contributions[(nxt, nr)].append(grad_inputs[i])
        if nodename == "AccumulateGrad":
            return
        path = self.node_path.get(node, "")
        opname = self.unique(nodename if not path else path + "." + nodename)
        layer = self.layer_of(path)
        inputs = []
        pre_ops = []
        for nr, g in enumerate(grad_outputs):
            if g is None:
                continue
            k = self.key(g)
            if k in self.storage_to_tensor:
                tid = self.storage_to_tensor[k]
                contrib = self.contributions.get((node, nr), [])
                others = [self.storage_to_tensor[self.key(c)] for c in contrib
                          if self.key(c) in self.storage_to_tensor and
                          self.storage_to_tensor[self.key(c)] != tid]
                if others:  # summed in place into the first contribution
                    pre_ops.append(self._accumulate_op(
                        opname, nr, layer, others + [tid], None, g))
                inputs.append(tid)
                continue
            contrib = self.contributions.get((node, nr), [])
            cids = []
            for c in contrib:
                ck = self.key(c)
                if ck in self.storage_to_tensor and \
                        self.storage_to_tensor[ck] not in cids:
                    cids.append(self.storage_to_tensor[ck])
            if cids:
                sum_id = self.new_tensor(g, "%s.grad_sum%d" % (opname, nr),
                                         KIND_GRAD)
                pre_ops.append(self._accumulate_op(opname, nr, layer, cids,
                                                   sum_id, g))
                inputs.append(sum_id)
            else:
                tid = self.new_tensor(g, "grad_seed" if not self.bwd_ops
                                      else "%s.grad_in%d" % (opname, nr),
                                      KIND_INPUT)
                self.static_keys.add(k)
                if self.bwd_ops:
                    self.warnings.append(
                        "%s: incoming gradient %d has no producer; static "
                        "input" % (opname, nr))
                inputs.append(tid)
        grad_ids = list(inputs)
        saved_ids = []
        for t in unpacked:
            if t is None:
                continue
            tid = self.lookup(t)
            if tid not in saved_ids:
                saved_ids.append(tid)
        outputs = []
        for i, g in enumerate(grad_inputs):
            if g is None:
                continue
            k = self.key(g)
            if k in self.storage_to_tensor:
                continue  # passes an existing gradient through (or a view)
            outputs.append(self.new_tensor(g, "%s.grad%d" % (opname, i),
                                           KIND_GRAD))
        self.bwd_ops.extend(pre_ops)
        if not outputs and not saved_ids:
            return  # a view or a pass-through: no work of its own
        all_inputs = []
        for tid in saved_ids + grad_ids:
            if tid not in all_inputs:
                all_inputs.append(tid)
        cost = self.backward_cost(node, nodename, grad_inputs, grad_outputs,
                                  unpacked, outputs)
        self.bwd_ops.append({
            "name": opname, "phase": "PHASE_BACKWARD", "inputs": all_inputs,
            "outputs": outputs, "layer": layer, "cost": cost,
            "node": nodename, "ordinal": ordinal})

    def _accumulate_op(self, opname, nr, layer, inputs, output, g):
        n = g.numel()
        cost = {"kind": "OP_KIND_MEMORY_BOUND",
                "flops": float(n * max(1, len(inputs) - 1)),
                "bytes_accessed": (len(inputs) + 1) * self.view_bytes(g),
                "kernels": max(1, len(inputs) - 1)}
        return {"name": "%s.grad_accumulate%d" % (opname, nr),
                "phase": "PHASE_BACKWARD", "inputs": list(inputs),
                "outputs": [] if output is None else [output], "layer": layer,
                "cost": cost, "node": "grad_accumulate"}

    def backward_cost(self, node, nodename, gi, go, unpacked, outputs):
        base = _node_base(nodename)
        cost = {"kind": "OP_KIND_MEMORY_BOUND", "flops": 0.0,
                "bytes_accessed": 0, "kernels": 1}
        gos = [g for g in go if g is not None]
        gis = [g for g in gi if g is not None]
        saved = [t for t in unpacked if t is not None]
        g0 = gos[0] if gos else None
        if base in ("MmBackward", "AddmmBackward", "BmmBackward",
                    "BaddbmmBackward") and g0 is not None:
            # Gradients of the two GEMM operands: the last two of gi.
            operands = list(gi[-2:]) if len(gi) >= 2 else []
            k = None
            for j, t in enumerate(operands):
                if t is not None:
                    k = t.shape[-1] if j == 0 else t.shape[-2]
            if k is None:
                k = saved[0].shape[-1] if saved else 0
            gemms = sum(1 for t in operands if t is not None)
            cost["kind"] = ("OP_KIND_BATCHED_MATMUL" if base.startswith(("Bmm", "Baddbmm"))
                            else "OP_KIND_MATMUL")
            cost["flops"] = 2.0 * g0.numel() * k * gemms
            cost["kernels"] = max(1, gemms)
            cost["bytes_accessed"] = gemms * (
                self.view_bytes(g0) + sum(self.view_bytes(t) for t in operands
                                          if t is not None))
            cost["bytes_accessed"] += sum(self.view_bytes(t) for t in saved)
            return cost
        if base == "ConvolutionBackward" and g0 is not None:
            weight = gi[1] if len(gi) > 1 and gi[1] is not None else None
            if weight is None:
                cand = [t for t in saved if t.dim() == g0.dim() and
                        t.shape[0] == g0.shape[1]]
                weight = cand[0] if cand else None
            transposed = bool(getattr(node, "_saved_transposed", False))
            per = weight.numel() / weight.shape[0] if weight is not None else 1
            x = gi[0] if gi and gi[0] is not None else None
            if transposed and x is None:
                cand = [t for t in saved if t.dim() == g0.dim() and
                        t is not weight]
                x = cand[0] if cand else g0
            gemms = sum(1 for t in gi[:2] if t is not None)
            cost["kind"] = "OP_KIND_MATMUL"
            cost["flops"] = 2.0 * (x.numel() if transposed else g0.numel()) \
                * per * gemms
            cost["kernels"] = max(1, gemms) + (1 if len(gi) > 2 and
                                               gi[2] is not None else 0)
            cost["bytes_accessed"] = (gemms * self.view_bytes(g0) +
                                      sum(self.view_bytes(t) for t in gis) +
                                      sum(self.view_bytes(t) for t in saved))
            return cost
        if "ScaledDotProduct" in base or "AttentionBackward" in base:
            q, k, v = (gis + saved + [None] * 3)[:3]
            if q is not None and k is not None and v is not None:
                batch = q.numel() // (q.shape[-1] * q.shape[-2])
                fwd = 2.0 * batch * q.shape[-2] * k.shape[-2] * (
                    q.shape[-1] + v.shape[-1])
                cost["kind"] = "OP_KIND_FLASH_ATTENTION"
                cost["flops"] = _FLASH_BWD_FACTOR * fwd
        numel = max([t.numel() for t in gis + gos] + [0])
        if cost["flops"] == 0:
            cost["flops"] = float(_BWD_FLOPS_PER_ELEM.get(base, 1) * numel)
        new_keys = {self.key(t) for t in gis}
        cost["bytes_accessed"] = (
            sum(self.view_bytes(t) for t in _dedup_by_key(gos, self.key)) +
            sum(self.view_bytes(t) for t in _dedup_by_key(gis, self.key)) +
            sum(self.view_bytes(t) for t in _dedup_by_key(saved, self.key)
                if self.key(t) not in new_keys))
        return cost

    # --- the step ---------------------------------------------------------

    def run(self, example, loss_kind, labels=None):
        torch = self.torch
        from torch.utils._python_dispatch import TorchDispatchMode

        for name, p in self.model.named_parameters():
            self.register_static(p, name, KIND_PARAM)
        for name, b in self.model.named_buffers():
            self.register_static(b, name, KIND_PARAM)
        self.register_static(example, "input", KIND_INPUT)
        if labels is not None:
            self.register_static(labels, "labels", KIND_INPUT)

        exporter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                exporter.on_forward_op(func, args, kwargs, out)
                return out

        handles = self.install_module_hooks()
        self.base_path = ""
        try:
            with torch.autograd.graph.saved_tensors_hooks(self.pack,
                                                          self.unpack):
                with Mode():
                    out = self.model(example)
                    self.base_path = "loss"
                    loss = _loss(torch, out, loss_kind, labels)
        finally:
            for h in handles:
                h.remove()
        self.claim_nodes([loss.grad_fn], "loss")
        self.install_node_hooks([loss.grad_fn])
        self.num_forward_ops = len(self.ops)
        loss.backward()
        self.ops.extend(self.bwd_ops)
        return loss

    def graph(self, name, description):
        tensors = []
        for t in self.tensors:
            tensors.append({
                "id": str(t["id"]), "name": t["name"],
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
            ops.append({
                "id": str(i), "name": op["name"], "phase": op["phase"],
                "input_ids": [str(x) for x in op["inputs"]],
                "output_ids": [str(x) for x in op["outputs"]],
                "workspace_bytes": "0", "layer": op["layer"], "cost": cost})
        return {"name": name, "description": description, "tensors": tensors,
                "ops": ops}

    def saved_summary(self):
        """(graph saved bytes, hook-saved bytes, tensor ids saved)."""
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
        hook_bytes = 0
        for k, t in self.packed_storages.items():
            if k in self.static_keys:
                continue
            hook_bytes += self.storage_bytes(t)
        return graph_bytes, hook_bytes, saved


def _add_cost(dst, src):
    dst["flops"] += src["flops"]
    dst["bytes_accessed"] += src["bytes_accessed"]
    dst["kernels"] += src["kernels"]
    if src["kind"] != "OP_KIND_MEMORY_BOUND":
        dst["kind"] = src["kind"]


def _flatten_tensors(obj, torch):
    out = []
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
    return out


def _dedup_by_key(ts, key):
    seen = set()
    out = []
    for t in ts:
        k = key(t)
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out


def _loss(torch, out, kind, labels):
    if kind == "cross_entropy":
        logits = out if isinstance(out, torch.Tensor) else \
            _flatten_tensors(out, torch)[0]
        return torch.nn.functional.cross_entropy(logits, labels)
    parts = [t for t in _flatten_tensors(out, torch)
             if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise SystemExit("torch_export: the model's output has no floating "
                         "tensor that requires grad")
    loss = parts[0].sum()
    for t in parts[1:]:
        loss = loss + t.sum()
    return loss


class native_dropout:
    """Context: torch.nn.functional.dropout runs as torch.native_dropout.

    On CUDA, at::dropout in training dispatches to native_dropout: one
    kernel writing the output and a bool mask, which is all its backward
    keeps. On the CPU torch 1.13 takes a composite path instead (a float
    mask from bernoulli_, divided by 1-p, then a mul), which keeps the mask
    in the activation dtype. The graph describes a GPU step, so by default
    the CPU trace runs dropout the CUDA way. p == 0, eval mode and in-place
    dropout keep torch's own behaviour.
    """

    def __init__(self, torch, enabled):
        self.torch = torch
        self.enabled = enabled
        self.saved = None

    def __enter__(self):
        if not self.enabled:
            return self
        F = self.torch.nn.functional
        orig = F.dropout
        torch = self.torch

        def dropout(input, p=0.5, training=True, inplace=False):
            if inplace or not training or p == 0 or input.numel() == 0:
                return orig(input, p, training, inplace)
            return torch.native_dropout(input, p, training)[0]

        self.saved = orig
        F.dropout = dropout
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.torch.nn.functional.dropout = self.saved
            self.saved = None
        return False


# --- trace durations ------------------------------------------------------

def _canon(aten_name):
    """add_ and add match each other: a composite may pick either."""
    return aten_name[:-1] if aten_name.endswith("_") else aten_name


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
        recorded.update(_canon(n) for n in op["aten"])
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
        c = _canon(name[len("aten::"):])
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
                c = _canon(name)
                k = used[c]
                used[c] += 1
                lst = by_name.get(c, [])
                parts.append(lst[k] if k < len(lst) else None)
            if all(p is not None for p in parts):
                op["cost"]["duration_ns"] = sum(duration_ns(p) for p in parts)
                matched += 1
        else:
            total += 1
            if op.get("ordinal") is None:
                continue  # grad_accumulate: the engine's own sum
            lst = bwd_by_node.get(op["node"], [])
            if op["ordinal"] < len(lst):
                op["cost"]["duration_ns"] = duration_ns(lst[op["ordinal"]])
                matched += 1
    return matched, total


# --- command line ---------------------------------------------------------

def build_model(expr, torch, torchvision):
    env = {"torch": torch, "torchvision": torchvision, "nn": torch.nn}
    try:
        obj = eval(expr, env)  # noqa: S307 - the user's model expression
        if not isinstance(obj, torch.nn.Module) and callable(obj):
            obj = obj()
    except Exception as e:  # report the user's mistake in one line
        raise SystemExit("torch_export: --model %r: %s: %s" % (
            expr, type(e).__name__, e))
    if not isinstance(obj, torch.nn.Module):
        raise SystemExit("torch_export: --model %r did not give an nn.Module"
                         % expr)
    return obj


def parse_shape(s):
    try:
        dims = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        dims = []
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError("want positive integers such as "
                                         "8,3,224,224, got %r" % s)
    return dims


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="torch_export.py",
        description="Trace one real PyTorch training step (CPU) into a "
                    "SlackSwap OperatorGraph (JSON).",
        epilog="Run under Debian's /usr/bin/python3 (python3-torch, "
               "python3-torchvision).")
    ap.add_argument("--model", required=True,
                    help="Python expression (torch, torchvision imported): a "
                         "no-argument callable or an nn.Module")
    ap.add_argument("--input-shape", required=True, type=parse_shape,
                    help="comma-separated input shape, e.g. 8,3,224,224")
    ap.add_argument("--input-dtype", default="float",
                    choices=["float", "long"],
                    help="float: torch.randn; long: integers in "
                         "[0, --input-high) (token ids)")
    ap.add_argument("--input-high", type=int, default=1000)
    ap.add_argument("--dtype-bytes", type=int, default=2,
                    help="bytes per element of floating tensors in the graph "
                         "(default 2: bf16)")
    ap.add_argument("--dropout", default="native", choices=["native", "eager"],
                    help="native (default): dropout runs as torch.native_dropout"
                         ", one op keeping a bool mask, as on CUDA; eager: "
                         "torch 1.13's CPU path (bernoulli_ into a float mask,"
                         " then mul)")
    ap.add_argument("--loss", default="sum", choices=["sum", "cross_entropy"])
    ap.add_argument("--num-classes", type=int, default=0,
                    help="cross_entropy: classes (default: the output's last "
                         "dimension)")
    ap.add_argument("--name", default="", help="graph name")
    ap.add_argument("--trace-durations", metavar="FILE",
                    help="Chrome trace (torch.profiler export_chrome_trace) "
                         "of the same step: measured op durations")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--out", required=True, help="output .json file")
    args = ap.parse_args(argv)
    if args.dtype_bytes <= 0:
        ap.error("--dtype-bytes must be > 0")

    import torch
    import torchvision

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(args.model, torch, torchvision)
    model.train()
    torch.manual_seed(0)
    if args.input_dtype == "float":
        example = torch.randn(*args.input_shape)
    else:
        example = torch.randint(0, args.input_high, tuple(args.input_shape))
    labels = None
    exp = Exporter(torch, model, args.dtype_bytes)
    try:
        if args.loss == "cross_entropy":
            classes = args.num_classes
            if classes <= 0:
                with torch.no_grad():
                    classes = model(example).shape[-1]
            labels = torch.randint(0, classes, (args.input_shape[0],))
        torch.manual_seed(0)
        with native_dropout(torch, args.dropout == "native"):
            exp.run(example, args.loss, labels)
    except RuntimeError as e:  # the model's own error, e.g. a shape mismatch
        raise SystemExit("torch_export: the step failed: %s" % e)

    graph_bytes, hook_bytes, saved = exp.saved_summary()
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]+", "_",
                               args.model.split("(")[0])
    description = (
        "traced with torch %s: %s on input [%s] (%s), loss %s, one training "
        "step on the CPU, floating tensors at %d bytes; %d forward + %d "
        "backward ops; saved activations %d tensors, %d bytes "
        "(saved_tensors_hooks: %d bytes)" % (
            torch.__version__, args.model,
            ",".join(str(d) for d in args.input_shape), args.input_dtype,
            args.loss, args.dtype_bytes, exp.num_forward_ops,
            len(exp.ops) - exp.num_forward_ops, len(saved), graph_bytes,
            hook_bytes))
    if args.trace_durations:
        matched, total = apply_trace_durations(exp.ops, exp.num_forward_ops,
                                               args.trace_durations)
        description += "; durations of %d of %d ops from %s" % (
            matched, total, args.trace_durations)
        print("torch_export: trace durations: matched %d of %d ops" %
              (matched, total), file=sys.stderr)
    graph = exp.graph(name, description)
    with open(args.out, "w") as f:
        json.dump(graph, f, indent=1)
        f.write("\n")
    for w in exp.warnings:
        print("torch_export: warning: " + w, file=sys.stderr)
    if graph_bytes != hook_bytes:
        print("torch_export: warning: saved bytes %d differ from what "
              "saved_tensors_hooks packed (%d)" % (graph_bytes, hook_bytes),
              file=sys.stderr)
    print("wrote %s: %d ops (%d forward), %d tensors, saved activations "
          "%d bytes in %d tensors" % (args.out, len(graph["ops"]),
                                      exp.num_forward_ops,
                                      len(graph["tensors"]), graph_bytes,
                                      len(saved)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
