"""Experiments on stacks of blocks, for notebooks 05 (the block) and 06 (twelve blocks).

Every experiment builds a small ANDREA (the engine), then *rewires* its blocks by
swapping their class (same weights, other wiring): pre-norm `Block`, `PostNormBlock`, or a
block with its residual additions removed. The block classes come from the notebook (the
learner's once their graded tests pass, see `use`), so the experiments run the learner's code.

All shapes are tiny and one CPU thread is used: each experiment takes well under a second,
except `train_small`, a few seconds.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..engine.config import ModelConfig
from ..engine.model import ANDREA


@contextlib.contextmanager
def one_thread():
    """Tiny tensors run faster on one thread, and two notebooks under test share two cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def without_residuals(block_cls: type) -> type:
    """A subclass of block_cls whose forward drops both skip connections:
    x = Attention(LN(x)); x = MLP(LN(x)). Same submodules, same weights."""

    class NoResidualBlock(block_cls):
        def forward(self, x, cache=None):
            x = self.attn(self.ln1(x), cache)
            return self.mlp(self.ln2(x))

    NoResidualBlock.__name__ = NoResidualBlock.__qualname__ = "NoResidualBlock"
    return NoResidualBlock


def without_residuals_or_norms(block_cls: type) -> type:
    """A subclass of block_cls with neither skip connections nor LayerNorms:
    x = MLP(Attention(x)), the plain deep stack where gradients vanish."""

    class BareBlock(block_cls):
        def forward(self, x, cache=None):
            return self.mlp(self.attn(x, cache))

    BareBlock.__name__ = BareBlock.__qualname__ = "BareBlock"
    return BareBlock


def small_config(L: int, D: int = 64, H: int = 4, T: int = 32, V: int = 256, **kw) -> ModelConfig:
    """andrea-tiny's shape with L blocks of width D (F = 4D), a byte vocabulary V = 256."""
    return ModelConfig.preset("andrea-tiny", n_layers=L, d_model=D, n_heads=H, d_ff=4 * D,
                              context_length=T, vocab_size=V, **kw)


def build(cfg: ModelConfig, block_cls: type, seed: int = 0) -> nn.Module:
    """ANDREA (the engine), initialised with `seed`, its blocks rewired to block_cls."""
    torch.manual_seed(seed)
    model = ANDREA(cfg)
    for block in model.blocks:
        block.__class__ = block_cls
    return model


def stream_gradients(model: nn.Module, B: int = 4, seed: int = 1) -> dict:
    """One backward pass of the next-token loss on random ids.

    Returns {"stream": [|dLoss/dx_l| for l = 0..L-1] (x_0 = the embeddings, x_l the input of
    block l), "params": [the gradient norm of block l's parameters]}.
    """
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (B, cfg.context_length), generator=g)
    targets = torch.randint(0, cfg.vocab_size, (B, cfg.context_length), generator=g)
    inputs = []

    def keep(module, args):
        args[0].retain_grad()
        inputs.append(args[0])

    hooks = [b.register_forward_pre_hook(keep) for b in model.blocks]
    try:
        with one_thread():
            model.zero_grad(set_to_none=True)
            _, loss = model(ids, targets)
            loss.backward()
    finally:
        for h in hooks:
            h.remove()
    stream = [x.grad.norm().item() for x in inputs]
    params = [math.sqrt(sum(float(p.grad.norm()) ** 2 for p in b.parameters() if p.grad is not None))
              for b in model.blocks]
    return {"stream": stream, "params": params}


@torch.no_grad()
def walk_stream(model: nn.Module, ids: torch.Tensor) -> dict:
    """Run the blocks one at a time and record, after the embeddings and after every block:
    the mean per-token norm of the stream, the relative change |block(x) - x| / |x| each block
    makes, and the mean cosine similarity between the vectors of different positions."""
    norms, rel, sim = [], [], []
    with one_thread():
        x = model.embed(ids)                                   # (B, T, D)
        norms.append(x.norm(dim=-1).mean().item())
        sim.append(position_similarity(x))
        for block in model.blocks:
            y = block(x)
            rel.append(((y - x).norm() / x.norm()).item())
            x = y
            norms.append(x.norm(dim=-1).mean().item())
            sim.append(position_similarity(x))
    return {"norm": norms, "relative_change": rel, "similarity": sim}


def position_similarity(x: torch.Tensor) -> float:
    """Mean cosine similarity between the vectors of different positions of sequence 0.
    x: (B, T, D). 1.0 means every position holds the same vector: the tokens are lost."""
    u = F.normalize(x[0].float(), dim=-1)                       # (T, D)
    T = u.shape[0]
    c = u @ u.T                                                 # (T, T)
    return ((c.sum() - c.diagonal().sum()) / (T * T - T)).item()


def byte_text() -> torch.Tensor:
    """The course's shipped stories as bytes (V = 256): a corpus that needs no tokenizer."""
    from ..train import load_corpus
    text = "\n".join(load_corpus())
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def train_small(model: nn.Module, data: torch.Tensor, steps: int = 80, lr: float = 1e-2,
                B: int = 8, seed: int = 1, warmup: int = 0) -> list[float]:
    """AdamW at a constant learning rate lr, from the first step when warmup == 0, else after
    a linear ramp from lr/warmup over the first `warmup` steps; returns the losses."""
    T = model.cfg.context_length
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    ramp = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    losses = []
    with one_thread():
        for _ in range(steps):
            ix = torch.randint(0, len(data) - T - 1, (B,), generator=g)
            x = torch.stack([data[i:i + T] for i in ix])           # (B, T)
            y = torch.stack([data[i + 1:i + T + 1] for i in ix])   # (B, T)
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ramp.step()
            losses.append(loss.item())
    return losses
