"""Activity 11 · Inside your model, as the engine computes it: the model's own modules called one
after another (no hooks), for classic models (learned positions, G = H)."""
import math

import torch
import torch.nn as nn

from ..engine.model import ANDREA  # noqa: F401  (given in the exercise file)
from ..lessons import lesson

__all__ = list(lesson("inside").pieces)     # the pieces the learner writes (lessons.py)


@torch.no_grad()
def residual_stream(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> (L + 1, B, T, D): the embeddings' output, then each block's."""
    x = model.embed(ids)                                               # (B, T, D)
    stream = [x]
    for block in model.blocks:
        x = block(x)
        stream.append(x)
    return torch.stack(stream)


def _weights(attn: nn.Module, x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """attn's causal softmax weights on its input x (B, T, D) -> (B, H, T, T)."""
    q, k, _ = attn.qkv(x).chunk(3, dim=-1)                             # (B, T, D) each
    q, k = (t.unflatten(-1, (n_heads, -1)).transpose(1, 2) for t in (q, k))   # (B, H, T, K)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (B, H, T, T)
    T = x.shape[1]
    visible = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)


@torch.no_grad()
def attention_patterns(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> (L, B, H, T, T): every head's weights, recomputed from its normalised input."""
    x = model.embed(ids)
    out = []
    for block in model.blocks:
        out.append(_weights(block.attn, block.ln1(x), model.cfg.n_heads))
        x = block(x)
    return torch.stack(out)


@torch.no_grad()
def logit_lens(model: nn.Module, stream: torch.Tensor) -> torch.Tensor:
    """(L + 1, B, T, D) -> (L + 1, B, T, V): each layer's stream through ln_f and the output matrix."""
    return torch.matmul(model.ln_f(stream), model.output_weight().transpose(0, 1))


def induction_scores(patterns: torch.Tensor, period: int) -> torch.Tensor:
    """(L, B, H, T, T) weights on period-repeated sequences -> (L, H): the mean weight from query
    t >= period to key t - period + 1."""
    diagonal = patterns.diagonal(offset=1 - period, dim1=-2, dim2=-1)   # (L, B, H, T - period + 1): query i, key i - period + 1
    return diagonal[..., 1:].mean(dim=(1, 3))                          # queries period .. T - 1
