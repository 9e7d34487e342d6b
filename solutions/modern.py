"""Activity · The modern block: RMSNorm, SwiGLU, weight tying, grouped key/value heads.

Each part answers a problem of the 2017 transformer:

    RMSNorm(x) = x / sqrt(mean(x²) + eps) ⊙ gamma
        LayerNorm's centring buys almost nothing and costs a second reduction over D:
        one reduction, no mean, no bias. Computed in fp32 even for bf16/fp16 input.
    SwiGLU(x)  = (x·w_up ⊙ Swish(x·w_gate))·w_down,   Swish(z) = z·sigmoid(z)
        a gate decides how much of each value passes; three matrices of width
        F = 8D/3 (rounded up) cost what the classic MLP's two of width 4D cost.
    weight tying: the token table is also the output head (cfg.tie_embeddings), saving V·D.
    grouped key/value heads: G <= H key/value heads (cfg.n_kv_heads) shrink the KV cache H/G times.

Tying and grouped heads are switches of the model (model.py, multihead.py);
this file holds the pieces they need that the classic model does not have.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm over the last axis (D) of every token, computed in at least fp32 (float64 stays
    float64) and cast back to x's dtype.

    x: (..., D), weight (gamma): (D,)  ->  (..., D).  No mean is subtracted and there is no bias.
    """
    ### BEGIN SOLUTION
    ### HINT: work in at least fp32: wide = torch.promote_types(x.dtype, torch.float32) (float64 stays float64); xw = x.to(wide); multiply xw by torch.rsqrt(mean of xw**2 over dim=-1, keepdim=True, + eps); multiply by weight; cast back with .to(x.dtype). Subtract no mean.
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
    ### HINT: F = 8 * d_model / 3, then round UP to a multiple of multiple_of: multiple_of * math.ceil(F / multiple_of).
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    ### END SOLUTION


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, elementwise: the value `up` says what to pass, the gate how much.

    gate, up: (..., F)  ->  (..., F).  Swish(z) = z·sigmoid(z) (torch calls it silu).
    """
    ### BEGIN SOLUTION
    ### HINT: gate * torch.sigmoid(gate) * up. The Swish goes on the gate only, not on up.
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
        ### HINT: gate = self.w_gate(x) and up = self.w_up(x), both (B, T, F); combine them with self.swiglu(gate, up); project back with self.w_down.
        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)
        ### END SOLUTION


def kv_cache_bytes(cfg, batch: int = 1, seq_len: int | None = None, bytes_per_value: int = 2) -> int:
    """Memory of a full KV cache: a key and a value of width K for every block (L), sequence
    (B), key/value head (G) and cached position (S = seq_len, default the context length T).

    bytes_per_value: 2 for bf16/fp16, 4 for fp32.  Grouped heads divide it by H/G.
    """
    S = cfg.context_length if seq_len is None else seq_len
    ### BEGIN SOLUTION
    ### HINT: 2 (keys and values) · L · B · G · S · K · bytes_per_value, with L = cfg.n_layers, G = cfg.kv_heads (not n_heads), K = cfg.d_head.
    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value
    ### END SOLUTION
