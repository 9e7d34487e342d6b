"""Activity 8 · The modern block: RMSNorm, SwiGLU, weight tying, grouped key/value heads.

Each part answers a problem of the 2017 transformer:

    RMSNorm(x) = x / sqrt(mean(x²) + eps) ⊙ gamma
        LayerNorm's centring buys almost nothing and costs a second reduction over D:
        one reduction, no mean, no bias. Computed in fp32 even for bf16/fp16 input.
    SwiGLU(x)  = (x·w_up ⊙ Swish(x·w_gate))·w_down,   Swish(z) = z·sigmoid(z)
        a gate decides how much of each value passes; three matrices of width
        F = 8D/3 (rounded up) cost what the classic MLP's two of width 4D cost.
    weight tying: the token table is also the output head (cfg.tie_embeddings), saving V·D.
    grouped key/value heads: G <= H key/value heads (cfg.n_kv_heads) shrink the KV cache H/G times.
    RoPE (cfg.position = "rope"): no position table; q and k are turned by their position, pair
        of features by pair, so a query-key score depends only on how far apart they are.

Tying, grouped heads and RoPE are switches of the model (model.py, multihead.py);
this file holds the pieces they need that the classic model does not have.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import attention


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm over the last axis (D) of every token, computed in at least fp32 (float64 stays
    float64) and cast back to x's dtype.

    x: (..., D), weight (gamma): (D,)  ->  (..., D).  No mean is subtracted and there is no bias.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Divide each vector by its root mean square and scale by gamma, in fp32 or wider.
    ### HINT: Measure each token's size as the square root of the average of its squared features (with eps added under the root), divide the token by it, and multiply by gamma: nothing is subtracted and nothing is added. Squares of bf16 numbers added up in bf16 lose precision, so widen the input to at least fp32 (a float64 input stays float64) before the arithmetic, and hand the result back in the input's own type.
    ### API: torch.promote_types(a, b) gives the wider of two dtypes; .to(dtype); .pow(2).mean(dim=-1, keepdim=True); torch.rsqrt(t) is one over the square root. `torch.promote_types(torch.bfloat16, torch.float32)` gives `torch.float32`; `torch.rsqrt(torch.tensor([4., 0.25]))` gives `[0.5, 2.]`; `torch.tensor([[3., 4.]]).pow(2).mean(dim=-1, keepdim=True)` gives `[[12.5]]`
    ### LINE: wide = torch.promote_types(x.dtype, torch.float32); xw = x.to(wide); y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps); return (y * weight.to(wide)).to(x.dtype)
    wide = torch.promote_types(x.dtype, torch.float32)                    # bf16/fp16 lose the sum of squares
    xw = x.to(wide)
    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)
    return (y * weight.to(wide)).to(x.dtype)
    ### END SOLUTION


class RMSNorm(nn.Module):
    """weight (gamma) starts at 1; there is no bias.  self.rms_norm: rms_norm (or a fused kernel)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps
        self.rms_norm = rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms_norm(x, self.weight, self.eps)


def swiglu_hidden_dim(d_model: int, multiple_of: int = 256) -> int:
    """F that gives SwiGLU's three matrices the classic MLP's two-matrix budget:
    3·D·F = 2·D·4D  =>  F = 8D/3, rounded up to a multiple of `multiple_of`
    (D = 768 gives 2,048; D = 4096 gives 11,008)."""
    ### BEGIN SOLUTION
    ### SUMMARY: SwiGLU's hidden width: 8D over 3, rounded up to a multiple of multiple_of.
    ### HINT: Balance the budgets: the classic MLP spends two D by 4D matrices, SwiGLU three D by F ones, and setting the totals equal makes F two thirds of 4D. That is rarely a round number, so round it up, never down, to the next multiple of the given step, which suits the hardware's tiles.
    ### API: math.ceil rounds a float up to an int; rounding n up to a multiple of m is m times the ceiling of n over m. `math.ceil(7 / 2)` gives `4`; `64 * math.ceil(100 / 64)` gives `128`
    ### LINE: return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    ### END SOLUTION


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, elementwise: the value `up` says what to pass, the gate how much.

    gate, up: (..., F)  ->  (..., F).  Swish(z) = z·sigmoid(z) (torch calls it silu).
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Swish of the gate times the value, element by element.
    ### HINT: The gate is a soft switch: through Swish (a number times its own sigmoid) it stays close to itself for large positive values and goes to nearly zero for negative ones, and that factor scales the value element by element. Only the gate goes through Swish; the value is used as it is.
    ### API: F.silu(t) is t times its sigmoid (so is t * torch.sigmoid(t)); * multiplies elementwise. `F.silu(torch.tensor([0., 2.]))` gives `[0., 1.7616]`; `torch.tensor([0., 2.]) * torch.sigmoid(torch.tensor([0., 2.]))` gives `[0., 1.7616]`
    ### LINE: return F.silu(gate) * up
    return F.silu(gate) * up
    ### END SOLUTION


class SwiGLU(nn.Module):
    """Gated feed-forward sublayer.  x: (B, T, D) -> (B, T, D), hidden width F = cfg.d_ff.

    w_gate, w_up: D -> F;  w_down: F -> D;  self.swiglu: swiglu (or a fused kernel).
    """

    def __init__(self, cfg):
        super().__init__()
        self.w_gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.swiglu = swiglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        ### SUMMARY: Gate and value projections, combined by swiglu, projected back to D.
        ### HINT: Two projections of the same input widen it to F, one producing the gate and one the value; your gating function combines them element by element, and the third projection brings the result back down to the model's width.
        ### API: self.w_gate, self.w_up and self.w_down are nn.Linear layers, each called on a tensor; self.swiglu takes the gate, then the value. `nn.Linear(3, 5)(torch.zeros(2, 3)).shape` gives `(2, 5)`
        ### LINE: return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))
        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)
        ### END SOLUTION


def kv_cache_bytes(cfg, batch: int = 1, seq_len: int | None = None, bytes_per_value: int = 2) -> int:
    """Memory of a full KV cache: a key and a value of width K for every block (L), sequence
    (B), key/value head (G) and cached position (S = seq_len, default the context length T).

    bytes_per_value: 2 for bf16/fp16, 4 for fp32.  Grouped heads divide it by H/G.
    """
    S = cfg.context_length if seq_len is None else seq_len
    ### BEGIN SOLUTION
    ### SUMMARY: The bytes a full KV cache takes, for a batch of sequences.
    ### HINT: List what is stored and multiply: in each of the L blocks, both a key and a value, for each sequence of the batch, each cached position and each key/value head, a vector as wide as a head, every number taking the given bytes. Query heads are never stored, which is why grouping the key/value heads shrinks the cache.
    ### API: cfg.n_layers, cfg.kv_heads (G), cfg.d_head (K) and S (set above from seq_len or the context length) are ints; a product of ints is an int. Bytes of a tensor are its count of numbers times the bytes of one: `torch.zeros(3, 4, 5, dtype=torch.float16).nbytes` gives `120`
    ### LINE: return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value
    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value
    ### END SOLUTION


def rope_frequencies(d_head: int, T: int, theta: float = 10000.0):
    """The angles of rotary position embedding (RoPE), as cos and sin: (T, K/2) each, fp32.

    Feature pair i (i = 0 .. K/2 - 1) turns at the frequency theta^(-2i/K) radians per position:
    pair 0 once a position, the last pair almost not at all. Position t turns pair i by the
    angle t·theta^(-2i/K).
    """
    ### BEGIN SOLUTION
    ### SUMMARY: RoPE's angle for every position and feature pair, as a cosine and a sine table.
    ### HINT: Each pair of features turns at its own speed: pair 0 by one radian per position, and every later pair more slowly, the speeds falling geometrically so that the last pair barely moves; pair i's speed is theta raised to minus 2i over K. A position's angle for a pair is the position times that speed: lay them out as a table with a row per position and a column per pair, then take its cosine and its sine.
    ### API: torch.arange(0, n, 2, dtype=torch.float32) counts 0, 2, 4 and so on; a number ** a tensor powers elementwise; torch.outer(a, b) is the table of every product; .cos(), .sin(). `torch.arange(0, 6, 2, dtype=torch.float32)` gives `[0., 2., 4.]`; `100.0 ** -torch.tensor([0., 0.5, 1.])` gives `[1., 0.1, 0.01]`; `torch.outer(torch.tensor([0., 1., 2.]), torch.tensor([1., 10.]))` gives `[[0., 0.], [1., 10.], [2., 20.]]`
    ### LINE: inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head); angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq); return angles.cos(), angles.sin()
    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)              # (T, K/2)
    return angles.cos(), angles.sin()
    ### END SOLUTION


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Turn each pair of features of x by the angle of its position (RoPE), in the GPT-NeoX /
    Hugging Face LLaMA layout: feature i is paired with feature i + K/2 (the two halves of a
    head), and (x1, x2) becomes (x1·cos - x2·sin, x1·sin + x2·cos).

    x: (..., T, K), its T positions being start, start + 1, ... (start = what a KV cache already
    holds); cos, sin: (T_max, K/2) from rope_frequencies  ->  (..., T, K), in x's dtype.
    Computed in at least fp32 (float64 stays float64).
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Rotate each feature pair of x by its position's angle, in x's dtype.
    ### HINT: Features pair up across the two halves of a head, so cut the last axis in half: the first half holds one coordinate of every pair, the second half the other. The T positions are start onwards, so take those rows of the cosine and sine tables. Turning a point by an angle mixes its two coordinates with that angle's cosine and sine; do it for all pairs at once, put the halves back together, and hand back the input's type, having computed in fp32 or wider.
    ### API: x[..., :h] and x[..., h:] are the halves of the last axis; cos[a:b] picks rows; torch.cat([u, w], dim=-1) joins; torch.promote_types and .to(dtype) widen and narrow. A quarter turn takes the point (1, 0) to (0, 1): `c, s, p, q = 0., 1., torch.tensor([1.]), torch.tensor([0.]); torch.cat([p * c - q * s, p * s + q * c], dim=-1)` gives `[0., 1.]`
    ### LINE: T, half = x.shape[-2], x.shape[-1] // 2; c, s = cos[start:start + T], sin[start:start + T]; wide = torch.promote_types(x.dtype, torch.float32); x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide); return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2): positions start .. start + T - 1
    wide = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # pair (i, i + K/2)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)
    ### END SOLUTION


def rope_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   past_k: torch.Tensor, past_v: torch.Tensor):
    """Causal attention of T new positions with RoPE, after S0 positions already seen.

    q, k, v: (B, H, T, K) of the new positions S0 .. S0 + T - 1; past_k, past_v: (B, H, S0, K),
    what a KV cache holds (S0 may be 0), the keys stored already turned; cos, sin: from
    rope_frequencies. Returns (y, k_all, v_all): y (B, H, T, K), and the keys and values of all
    S0 + T positions, (B, H, S0 + T, K), to keep for the next call.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: RoPE attention after a cache: turn q and the new k, append, attend causally.
    ### HINT: Where a token sits must show up in the query-key scores, so the queries and the new keys are turned by their positions; values carry content, not place, and are never turned. The new positions continue from the number already cached, and the cached keys were turned when they were new, so they are appended to as they are. Causal attention over everything so far finishes the job, and the grown keys and values go back to the caller.
    ### API: The size of past_k's position axis (its second to last) is the count cached; apply_rope takes x, cos, sin and start; torch.cat([old, new], dim=-2) appends along positions; attention is causal by default and handles more keys than queries. `torch.cat([torch.zeros(1, 2, 3), torch.ones(1, 1, 3)], dim=-2).shape` gives `(1, 3, 3)`
    ### LINE: start = past_k.shape[-2]; q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start); k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2); return attention(q, k_all, v_all), k_all, v_all
    start = past_k.shape[-2]                                          # S0: positions already cached
    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)
    return attention(q, k_all, v_all), k_all, v_all
    ### END SOLUTION
