# GENERATED from solutions/mlp.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
"""Activity · MLP and GELU: expand D -> F = 4D, a smooth non-linearity, project back F -> D.

    MLP(x) = GELU(x·W1 + b1)·W2 + b2
    GELU(x) = x·Phi(x) ≈ 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
"""
import math

import torch
import torch.nn as nn


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU in its tanh form (GPT-2's, and ANDREA's): 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))."""
    # Hint: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))).
    raise NotImplementedError('mlp.gelu_tanh: not implemented yet. Hint: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))).')


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU: x·Phi(x) with Phi the standard normal CDF, 0.5·(1 + erf(x / sqrt(2)))."""
    # Hint: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))).
    raise NotImplementedError('mlp.gelu_erf: not implemented yet. Hint: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))).')


class MLP(nn.Module):
    """x: (B, T, D) -> (B, T, D) through a hidden layer of width F.

    fc: W1, D -> F;  proj: W2, F -> D;  self.gelu: GELU in its tanh form.
    """

    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)     # W1: (D, F)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)   # W2: (F, D)
        self.gelu = gelu_tanh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Hint: self.proj(self.gelu(self.fc(x))).
        raise NotImplementedError('mlp.MLP.forward: not implemented yet. Hint: self.proj(self.gelu(self.fc(x))).')
