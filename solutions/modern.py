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
    ### HINT: RMSNorm divides each vector by its root mean square over its D features (no mean is subtracted) and scales by gamma. Compute in at least fp32, since bf16 loses the sum of squares (float64 stays float64), and return the input's dtype.
    ### API: torch.promote_types(x.dtype, torch.float32), .to(dtype), .pow(2).mean(dim=-1, keepdim=True), torch.rsqrt
    ### LINE: xw = x.to(wide); y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps); return (y * weight.to(wide)).to(x.dtype)
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
    ### HINT: SwiGLU has three matrices where the GELU MLP has two, so to keep the parameter count its width is two thirds of 4D, that is 8D over 3, rounded up to the next multiple of multiple_of so the matrices suit the hardware.
    ### API: math.ceil, integer multiplication
    ### LINE: return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    ### END SOLUTION


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, elementwise: the value `up` says what to pass, the gate how much.

    gate, up: (..., F)  ->  (..., F).  Swish(z) = z·sigmoid(z) (torch calls it silu).
    """
    ### BEGIN SOLUTION
    ### HINT: A gated unit: the Swish of the gate (the gate times its own sigmoid) decides, element by element, how much of the up value passes. The Swish goes on the gate only.
    ### API: torch.sigmoid or F.silu, elementwise *
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
        ### HINT: Project x twice to the hidden width, once for the gate and once for the value, combine the two with your swiglu, and project back down to D.
        ### API: self.w_gate, self.w_up, self.swiglu, self.w_down
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
    ### HINT: Every block caches a key and a value vector for every sequence, every cached position and every key/value head: multiply those counts by the head width and by the bytes per value. Only the G key/value heads are cached, not the H query heads.
    ### API: cfg.n_layers, cfg.kv_heads, cfg.d_head, and S (seq_len, or the context length by default, given above)
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
    ### HINT: one frequency per pair of features, falling from 1 geometrically with the pair's index over the head's width; the angle is position times frequency (a table of T rows and K/2 columns); return its cosine and sine.
    ### API: torch.arange(0, d_head, 2, dtype=torch.float32), theta ** (-...), torch.outer(positions, freqs), .cos(), .sin()
    ### LINE: angles = torch.outer(torch.arange(T, dtype=torch.float32), theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))
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
    ### HINT: split the last axis into its two halves; take the rows of cos and sin for the positions start .. start + T - 1; turn each pair (first half, second half) by its angle as a 2-D rotation; join the halves back and return x's dtype.
    ### API: x[..., :half], cos[start:start + T], torch.cat([...], dim=-1), torch.promote_types(x.dtype, torch.float32), .to(x.dtype)
    ### LINE: torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)
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
    ### HINT: position lives in the scores, so turn the queries and the new keys (never the values), each by its own position, which starts after the cached ones; the cached keys were turned when they were new, so append the new keys and values to them untouched; then attend causally.
    ### API: start = past_k.shape[-2]; apply_rope(x, cos, sin, start); torch.cat([...], dim=-2); attention(q, k, v)
    ### LINE: q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)
    start = past_k.shape[-2]                                          # S0: positions already cached
    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)
    return attention(q, k_all, v_all), k_all, v_all
    ### END SOLUTION
