# Your work for notebooks/05_block.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 7.2 · The transformer block: a residual stream, LayerNorm before each sublayer.

    x = x + Attention(LN(x))
    x = x + MLP(LN(x))
    LN(x) = gamma·(x - mean)/sqrt(var + eps) + beta, over D, for each token separately
"""
import torch
import torch.nn as nn

from andrea_course.engine.model import KVCache

from .mlp import MLP
from .modern import RMSNorm, SwiGLU
from .multihead import MultiHeadAttention


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm from its formula, over the last axis (D) of every token.

    x: (..., D), weight (gamma) and bias (beta): (D,)  ->  (..., D).
    The variance is the biased one (divide by D, not D - 1), and eps goes inside the sqrt.
    """
    # Hint: Normalise each token's features to mean 0 and variance 1, then scale and shift.
    # More help: hint("block.layer_norm") in the notebook, one level at a time.
    raise NotImplementedError('block.layer_norm: not implemented yet. Hint: Normalise each token\'s features to mean 0 and variance 1, then scale and shift.')


class LayerNorm(nn.Module):
    """weight (gamma) starts at 1, bias (beta) at 0, both (D,)."""

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.eps = eps
        self.layer_norm = layer_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x, self.weight, self.bias, self.eps)


def make_norm(cfg) -> nn.Module:
    """The block's normalisation: LayerNorm (classic) or RMSNorm (modern)."""
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


def make_mlp(cfg) -> nn.Module:
    """The block's feed-forward sublayer: GELU MLP (classic) or SwiGLU (modern)."""
    return SwiGLU(cfg) if cfg.mlp == "swiglu" else MLP(cfg)


def dropout(x: torch.Tensor, p: float, training: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """Inverted dropout, what the block's self.drop (nn.Dropout) does to each sublayer's output.

    x: any shape, e.g. (B, T, D)  ->  the same shape and dtype.
    While training: each element independently becomes 0 with probability p, and the elements
    kept are divided by 1 - p, so that every element keeps its expected value. p = 1 drops
    everything (zeros, no NaN). Not training, or p = 0: x unchanged. The random numbers come
    from `generator` (torch's global one when it is None), so a seeded generator gives the same mask.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    # Hint: Inverted dropout: in training zero each element with probability p, rescale the rest.
    # More help: hint("block.dropout") in the notebook, one level at a time.
    raise NotImplementedError('block.dropout: not implemented yet. Hint: Inverted dropout: in training zero each element with probability p, rescale the rest.')


class Block(nn.Module):
    """Pre-norm transformer block.  x: (B, T, D) -> (B, T, D).

    ln1 -> attn, ln2 -> mlp; each sublayer's output (after dropout, self.drop) is added to
    the raw residual stream x, never to the normalised x.
    """

    def __init__(self, cfg, dropout: float = 0.0):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = MultiHeadAttention(cfg)
        self.ln2 = make_norm(cfg)
        self.mlp = make_mlp(cfg)
        self.drop = nn.Dropout(dropout)      # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        # Hint: Pre-norm: attention, then the MLP, each added back to the stream.
        # More help: hint("block.Block") in the notebook, one level at a time.
        raise NotImplementedError('block.Block.forward: not implemented yet. Hint: Pre-norm: attention, then the MLP, each added back to the stream.')


class PostNormBlock(Block):
    """The 2017 paper's post-norm block: the norm sits on the residual path itself.

        x = LN(x + Attention(x));  x = LN(x + MLP(x))
    """

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        # Hint: Post-norm: add each sublayer's output to the stream, then normalise the sum.
        # More help: hint("block.PostNormBlock") in the notebook, one level at a time.
        raise NotImplementedError('block.PostNormBlock.forward: not implemented yet. Hint: Post-norm: add each sublayer\'s output to the stream, then normalise the sum.')
