# Your work for notebooks/07_modern.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
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
    # Hint: Divide each vector by its root mean square and scale by gamma, in fp32 or wider.
    # More help: hint("modern.rms_norm") in the notebook, one level at a time.
    raise NotImplementedError('modern.rms_norm: not implemented yet. Hint: Divide each vector by its root mean square and scale by gamma, in fp32 or wider.')


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
    # Hint: SwiGLU's hidden width: 8D over 3, rounded up to a multiple of multiple_of.
    # More help: hint("modern.swiglu_hidden_dim") in the notebook, one level at a time.
    raise NotImplementedError('modern.swiglu_hidden_dim: not implemented yet. Hint: SwiGLU\'s hidden width: 8D over 3, rounded up to a multiple of multiple_of.')


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, elementwise: the value `up` says what to pass, the gate how much.

    gate, up: (..., F)  ->  (..., F).  Swish(z) = z·sigmoid(z) (torch calls it silu).
    """
    # Hint: Swish of the gate times the value, element by element.
    # More help: hint("modern.swiglu") in the notebook, one level at a time.
    raise NotImplementedError('modern.swiglu: not implemented yet. Hint: Swish of the gate times the value, element by element.')


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
        # Hint: Gate and value projections, combined by swiglu, projected back to D.
        # More help: hint("modern.SwiGLU") in the notebook, one level at a time.
        raise NotImplementedError('modern.SwiGLU.forward: not implemented yet. Hint: Gate and value projections, combined by swiglu, projected back to D.')


def kv_cache_bytes(cfg, batch: int = 1, seq_len: int | None = None, bytes_per_value: int = 2) -> int:
    """Memory of a full KV cache: a key and a value of width K for every block (L), sequence
    (B), key/value head (G) and cached position (S = seq_len, default the context length T).

    bytes_per_value: 2 for bf16/fp16, 4 for fp32.  Grouped heads divide it by H/G.
    """
    S = cfg.context_length if seq_len is None else seq_len
    # Hint: The bytes a full KV cache takes, for a batch of sequences.
    # More help: hint("modern.kv_cache_bytes") in the notebook, one level at a time.
    raise NotImplementedError('modern.kv_cache_bytes: not implemented yet. Hint: The bytes a full KV cache takes, for a batch of sequences.')


def rope_frequencies(d_head: int, T: int, theta: float = 10000.0):
    """The angles of rotary position embedding (RoPE), as cos and sin: (T, K/2) each, fp32.

    Feature pair i (i = 0 .. K/2 - 1) turns at the frequency theta^(-2i/K) radians per position:
    pair 0 once a position, the last pair almost not at all. Position t turns pair i by the
    angle t·theta^(-2i/K).
    """
    # Hint: RoPE's angle for every position and feature pair, as a cosine and a sine table.
    # More help: hint("modern.rope_frequencies") in the notebook, one level at a time.
    raise NotImplementedError('modern.rope_frequencies: not implemented yet. Hint: RoPE\'s angle for every position and feature pair, as a cosine and a sine table.')


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Turn each pair of features of x by the angle of its position (RoPE), in the GPT-NeoX /
    Hugging Face LLaMA layout: feature i is paired with feature i + K/2 (the two halves of a
    head), and (x1, x2) becomes (x1·cos - x2·sin, x1·sin + x2·cos).

    x: (..., T, K), its T positions being start, start + 1, ... (start = what a KV cache already
    holds); cos, sin: (T_max, K/2) from rope_frequencies  ->  (..., T, K), in x's dtype.
    Computed in at least fp32 (float64 stays float64).
    """
    # Hint: Rotate each feature pair of x by its position's angle, in x's dtype.
    # More help: hint("modern.apply_rope") in the notebook, one level at a time.
    raise NotImplementedError('modern.apply_rope: not implemented yet. Hint: Rotate each feature pair of x by its position\'s angle, in x\'s dtype.')


def rope_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   past_k: torch.Tensor, past_v: torch.Tensor):
    """Causal attention of T new positions with RoPE, after S0 positions already seen.

    q, k, v: (B, H, T, K) of the new positions S0 .. S0 + T - 1; past_k, past_v: (B, H, S0, K),
    what a KV cache holds (S0 may be 0), the keys stored already turned; cos, sin: from
    rope_frequencies. Returns (y, k_all, v_all): y (B, H, T, K), and the keys and values of all
    S0 + T positions, (B, H, S0 + T, K), to keep for the next call.
    """
    # Hint: RoPE attention after a cache: turn q and the new k, append, attend causally.
    # More help: hint("modern.rope_attention") in the notebook, one level at a time.
    raise NotImplementedError('modern.rope_attention: not implemented yet. Hint: RoPE attention after a cache: turn q and the new k, append, attend causally.')
