"""Activity 7.2 · The transformer block: a residual stream, LayerNorm before each sublayer.

    x = x + Attention(LN(x))
    x = x + MLP(LN(x))
    LN(x) = gamma·(x - mean)/sqrt(var + eps) + beta, over D, for each token separately
"""
import torch
import torch.nn as nn

from andrea_course.model import KVCache

from .mlp import MLP
from .modern import RMSNorm, SwiGLU
from .multihead import MultiHeadAttention


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm from its formula, over the last axis (D) of every token.

    x: (..., D), weight (gamma) and bias (beta): (D,)  ->  (..., D).
    The variance is the biased one (divide by D, not D - 1), and eps goes inside the sqrt.
    """
    ### BEGIN SOLUTION
    ### HINT: Normalise each position's vector on its own: subtract its mean and divide by its standard deviation, both taken over that vector's D features, keeping the reduced axis so they line up with the vector. Use the biased variance (divide by D), put eps inside the square root, then scale by gamma and shift by beta when there is one.
    ### API: .mean(dim=-1, keepdim=True), ** 2, torch.sqrt, * weight, + bias
    ### LINE: mean = x.mean(dim=-1, keepdim=True); var = ((x - mean) ** 2).mean(dim=-1, keepdim=True); y = (x - mean) / torch.sqrt(var + eps) * weight; add bias unless it is None
    mean = x.mean(dim=-1, keepdim=True)                        # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased
    y = (x - mean) / torch.sqrt(var + eps)
    y = y * weight
    return y + bias if bias is not None else y
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    ### HINT: Outside training dropout does nothing. In training draw one uniform random number per element of x from the generator, keep the elements whose number is at least p (so each survives with probability 1 - p), zero the rest and divide the survivors by 1 - p; when p is 1 nothing survives and there is nothing to divide.
    ### API: torch.rand(x.shape, generator=generator, device=x.device); a comparison gives a bool mask; x * mask; torch.zeros_like(x)
    ### LINE: keep = torch.rand(x.shape, generator=generator, device=x.device) >= p; return x * keep / (1 - p)
    if not training or p == 0:
        return x
    if p == 1:
        return torch.zeros_like(x)                              # 1 / (1 - p) would be 1/0
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p
    return x * keep / (1 - p)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: Pre-norm: each sublayer reads a normalised copy of the stream, and its output, through dropout, is added to the raw stream, which itself is never normalised. Attention first (hand it the cache), then the MLP.
        ### API: self.ln1, self.attn(h, cache), self.drop, self.ln2, self.mlp
        ### LINE: x = x + self.drop(self.attn(self.ln1(x), cache)); x = x + self.drop(self.mlp(self.ln2(x)))
        x = x + self.drop(self.attn(self.ln1(x), cache))
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x
        ### END SOLUTION


class PostNormBlock(Block):
    """The 2017 paper's post-norm block: the norm sits on the residual path itself.

        x = LN(x + Attention(x));  x = LN(x + MLP(x))
    """

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        ### HINT: Post-norm, as in the original Transformer: each sublayer reads the stream as it is, its output goes through dropout and is added to the stream, and the sum is normalised. Attention with the first norm, then the MLP with the second.
        ### API: self.attn(x, cache), self.drop, self.ln1, self.mlp, self.ln2
        ### LINE: x = self.ln1(x + self.drop(self.attn(x, cache))); x = self.ln2(x + self.drop(self.mlp(x)))
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        x = self.ln2(x + self.drop(self.mlp(x)))
        return x
        ### END SOLUTION
