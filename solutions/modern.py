"""Activity · The modern block: RMSNorm and SwiGLU (weight tying and grouped key/value
heads are switches of the model's config).

    RMSNorm(x) = x / sqrt(mean(x²) + eps) ⊙ gamma           (no centring, no bias)
    SwiGLU(x)  = (x·w_up ⊙ Swish(x·w_gate))·w_down,  Swish(z) = z·sigmoid(z)
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm over the last axis, computed in fp32 and cast back to x's dtype.

    x: (..., D), weight (gamma): (D,)  ->  (..., D)
    """
    ### BEGIN SOLUTION
    ### HINT: x.float(), divide by sqrt(mean(x**2 over dim=-1) + eps) (torch.rsqrt), multiply by weight, cast back with .to(x.dtype). No mean subtraction.
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)
    ### END SOLUTION


class RMSNorm(nn.Module):
    """weight (gamma) starts at 1; there is no bias."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps
        self.norm_fn = rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_fn(x, self.weight, self.eps)


def swiglu_hidden_dim(d_model: int, multiple_of: int = 256) -> int:
    """F that gives SwiGLU's three matrices the classic MLP's two-matrix budget:
    3·D·F = 2·D·4D  =>  F = 8D/3, rounded up to a multiple of `multiple_of`."""
    ### BEGIN SOLUTION
    ### HINT: 8 * d_model / 3, rounded up with math.ceil to a multiple of multiple_of.
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)
    ### END SOLUTION


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, elementwise: the gate decides how much of each value passes.

    gate, up: (..., F)  ->  (..., F).  Swish(z) = z·sigmoid(z) (torch calls it silu).
    """
    ### BEGIN SOLUTION
    ### HINT: gate * torch.sigmoid(gate) * up (or F.silu(gate) * up).
    return F.silu(gate) * up
    ### END SOLUTION


class SwiGLU(nn.Module):
    """Gated feed-forward sublayer.  x: (B, T, D) -> (B, T, D), hidden width F = cfg.d_ff.

    w_gate, w_up: D -> F;  w_down: F -> D;  self.glu: swiglu (or a fused kernel).
    """

    def __init__(self, cfg):
        super().__init__()
        self.w_gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.glu = swiglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        ### HINT: self.w_down(self.glu(self.w_gate(x), self.w_up(x))).
        return self.w_down(self.glu(self.w_gate(x), self.w_up(x)))
        ### END SOLUTION
