"""Small models for tests/torch/torch_export_test.py.

The tests build them directly and hand them to the exporter's command line
as `--model tests/torch/models.py:NAME` (a no-argument callable).
"""

import types

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn


class MLPBlock(nn.Module):
    """x + fc2(gelu(fc1(x))): GEMM-bound at the test's sizes."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class CheckpointedMLP(nn.Module):
    """An input projection, blocks each run under torch.utils.checkpoint
    (the projection makes the blocks' input require grad, as the reentrant
    variant needs), and a head."""

    def __init__(self, use_reentrant=True, checkpointed=True, dim=128,
                 hidden=512, blocks=2):
        super().__init__()
        self.use_reentrant = use_reentrant
        self.checkpointed = checkpointed
        self.proj = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(MLPBlock(dim, hidden)
                                    for _ in range(blocks))
        self.head = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.proj(x)
        for block in self.blocks:
            if self.checkpointed:
                x = torch.utils.checkpoint.checkpoint(
                    block, x, use_reentrant=self.use_reentrant)
            else:
                x = block(x)
        return self.head(x)


def reentrant_mlp():
    return CheckpointedMLP(use_reentrant=True)


def non_reentrant_mlp():
    return CheckpointedMLP(use_reentrant=False)


def plain_mlp():
    return CheckpointedMLP(checkpointed=False)


class _ScaledTanh(torch.autograd.Function):
    """2 tanh(x w), keeping tanh's output on ctx as an attribute and x, w
    through save_for_backward."""

    @staticmethod
    def forward(ctx, x, w):
        t = torch.tanh(x * w)
        ctx.t = t
        ctx.save_for_backward(x, w)
        return t * 2

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        d = g * 2 * (1 - ctx.t * ctx.t)
        return d * w, (d * x).sum(0)


class _Opaque(torch.autograd.Function):
    """Keeps its input inside an object the exporter cannot size."""

    @staticmethod
    def forward(ctx, x):
        y = x * 3
        ctx.state = types.SimpleNamespace(y=y)
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 3


class CtxModel(nn.Module):
    """A Linear, the custom Function, a Linear."""

    def __init__(self, dim=64, opaque=False):
        super().__init__()
        self.opaque = opaque
        self.fc = nn.Linear(dim, dim)
        self.w = nn.Parameter(torch.ones(dim))
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        h = _ScaledTanh.apply(self.fc(x), self.w)
        if self.opaque:
            h = _Opaque.apply(h)
        return self.out(h)


def ctx_model():
    return CtxModel()


class TinyCausalLM(nn.Module):
    """Token and position embeddings, pre-norm causal transformer layers
    with dropout, a final norm and an untied head: logits [B, T, V]."""

    def __init__(self, vocab=100, dim=32, heads=2, layers=2, max_len=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(max_len, dim))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1,
                                       batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        mask = torch.triu(torch.full((max_len, max_len), float("-inf")), 1)
        self.register_buffer("causal_mask", mask)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens) + self.pos[:t]
        for layer in self.layers:
            x = layer(x, src_mask=self.causal_mask[:t, :t])
        return self.head(self.norm(x))


def shifted_lm_loss(logits, tokens):
    """Hugging Face's causal LM loss: position t predicts token t + 1."""
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, v),
                           tokens[:, 1:].reshape(-1))


class SparseLSTM(nn.Module):
    """A sparse-gradient embedding, a two-layer LSTM with dropout between
    its layers, a head."""

    def __init__(self, vocab=200, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, sparse=True)
        self.lstm = nn.LSTM(dim, dim, num_layers=2, dropout=0.25,
                            batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


class Activations(nn.Module):
    """SiLU, sigmoid and tanh between Linears, in place or not."""

    def __init__(self, inplace, dim=16):
        super().__init__()
        self.inplace = inplace
        self.fcs = nn.ModuleList(nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x):
        x = F.silu(self.fcs[0](x), inplace=self.inplace)
        x = self.fcs[1](x)
        x = x.sigmoid_() if self.inplace else x.sigmoid()
        x = self.fcs[2](x)
        x = x.tanh_() if self.inplace else x.tanh()
        return self.fcs[3](x)


class Reused(nn.Module):
    """One Tanh module called twice."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.fc2(self.act(self.fc1(x))))


class NestedCheckpoints(nn.Module):
    """A checkpointed region holding another, each reentrant or not; the
    outer one multiplies by a Python scalar (a wrapped-number operand) and
    returns two tensors."""

    def __init__(self, outer_reentrant, inner_reentrant, dim=32):
        super().__init__()
        self.reentrant = (outer_reentrant, inner_reentrant)
        self.proj = nn.Linear(dim, dim)
        self.inner = MLPBlock(dim, 2 * dim)
        self.after = MLPBlock(dim, 2 * dim)

    def region(self, x, scale):
        y = torch.utils.checkpoint.checkpoint(
            self.inner, x, use_reentrant=self.reentrant[1]) * scale
        return self.after(y), y

    def forward(self, x):
        a, b = torch.utils.checkpoint.checkpoint(
            self.region, self.proj(x), 0.5, use_reentrant=self.reentrant[0])
        return a + b


class SequentialCheckpoint(nn.Module):
    """torch.utils.checkpoint.checkpoint_sequential over four blocks in two
    segments: the first segment's output feeds a block and its residual."""

    def __init__(self, dim=32):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.blocks = nn.Sequential(*(MLPBlock(dim, 2 * dim)
                                      for _ in range(4)))

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint_sequential(
            self.blocks, 2, self.proj(x))


class OffloadedMLP(nn.Module):
    """An MLPBlock whose saved tensors go to host memory
    (torch.autograd.graph.save_on_cpu)."""

    def __init__(self, dim=16):
        super().__init__()
        self.block = MLPBlock(dim, 2 * dim)

    def forward(self, x):
        with torch.autograd.graph.save_on_cpu():
            return self.block(x)
