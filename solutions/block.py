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
    ### BEGIN SOLUTION
    ### SUMMARY: Normalise each token's features to mean 0 and variance 1, then scale and shift.
    ### HINT: Each token is normalised on its own, with statistics of its D features only: centre it by its average, then divide by the square root of the average squared deviation (the biased variance, over D and not D - 1) plus eps. Keep those statistics as a trailing axis of size one so they line up with the token. Then multiply by gamma and, if there is one, add beta.
    ### API: .mean(dim=-1, keepdim=True) averages over the last axis and keeps it with size 1; ** 2 squares; torch.sqrt; an optional bias is tested with is None. `torch.tensor([[1., 3.], [2., 6.]]).mean(dim=-1, keepdim=True)` gives `[[2.], [4.]]`; `torch.tensor([1., 3.]).var(correction=0)` gives `1.0`
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
    ### SUMMARY: Inverted dropout: in training zero each element with probability p, rescale the rest.
    ### HINT: Nothing happens outside training. In training every element gets its own coin: draw a uniform number in [0, 1) for it from the given generator and keep the element when that number is p or more, which happens with probability 1 - p. Scale the kept elements up by one over 1 - p so the average is unchanged; p equal to 1 is the one case where that scale does not exist, and everything is zero. Build a new tensor rather than changing x in place.
    ### API: torch.rand(shape, generator=g, device=d) draws uniform numbers in [0, 1); comparing with a number gives a bool mask, and multiplying by a bool mask zeroes where it is False; torch.zeros_like. `g = torch.Generator().manual_seed(0); torch.rand(3, generator=g).shape` gives `(3,)`; `torch.tensor([2., 4., 6.]) * (torch.tensor([0.9, 0.1, 0.5]) >= 0.3) / 0.5` gives `[4., 0., 12.]`
    ### LINE: if not training or p == 0: return x; if p == 1: return torch.zeros_like(x); keep = torch.rand(x.shape, generator=generator, device=x.device) >= p; return x * keep / (1 - p)
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
        ### SUMMARY: Pre-norm: attention, then the MLP, each added back to the stream.
        ### HINT: Think of x as a running total that the two sublayers add corrections to. Each sublayer reads a normalised copy of the total, through its own norm, and its output passes through dropout before being added to the total itself, which is never normalised. Attention goes first, and it is the one that receives the cache.
        ### API: self.ln1 and self.ln2 are the norms, self.attn (input and cache) and self.mlp the sublayers, self.drop the dropout module; reassigning x to x plus a correction keeps what x was. `h = torch.tensor([1., 2.]); h = h + torch.relu(h - 1.5); h` gives `[1., 2.5]`
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
        ### SUMMARY: Post-norm: add each sublayer's output to the stream, then normalise the sum.
        ### HINT: The original 2017 layout puts the norm on the main road instead of the side road: each sublayer reads the stream unnormalised, its output goes through dropout and is added to the stream, and then the whole sum is normalised before moving on. The first norm follows attention (which takes the cache), the second follows the MLP.
        ### API: The parts of Block, used in another order: self.attn (input and cache), self.mlp, self.drop, self.ln1, self.ln2; here a norm wraps the sum. `F.layer_norm(torch.tensor([1., 2.]) + torch.tensor([2., 3.]), (2,))` gives `[-1., 1.]`
        ### LINE: x = self.ln1(x + self.drop(self.attn(x, cache))); x = self.ln2(x + self.drop(self.mlp(x)))
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        x = self.ln2(x + self.drop(self.mlp(x)))
        return x
        ### END SOLUTION
