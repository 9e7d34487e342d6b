# Your work for notebooks/04_mlp.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 7.1 · MLP and GELU: expand D -> F = 4D, a smooth non-linearity, project back F -> D.

    MLP(x) = GELU(x·W1 + b1)·W2 + b2
    GELU(x) = x·Phi(x) ≈ 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
"""
import math

import torch
import torch.nn as nn


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU in its tanh form (GPT-2's, and ANDREA's): 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))."""
    # Hint: GELU with the tanh approximation, elementwise.
    # More help: hint("mlp.gelu_tanh") in the notebook, one level at a time.
    raise NotImplementedError('mlp.gelu_tanh: not implemented yet. Hint: GELU with the tanh approximation, elementwise.')


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU: x·Phi(x) with Phi the standard normal CDF, 0.5·(1 + erf(x / sqrt(2)))."""
    # Hint: The exact GELU: x times the standard normal's cumulative probability at x.
    # More help: hint("mlp.gelu_erf") in the notebook, one level at a time.
    raise NotImplementedError('mlp.gelu_erf: not implemented yet. Hint: The exact GELU: x times the standard normal\'s cumulative probability at x.')


def gelu_grad(x: torch.Tensor) -> torch.Tensor:
    """The slope of the exact GELU, d/dx [x·Phi(x)] = Phi(x) + x·phi(x), elementwise.

    Phi is the standard normal CDF, 0.5·(1 + erf(x / sqrt(2))); phi its density,
    exp(-x²/2) / sqrt(2·pi).  x: any shape, e.g. (B, T, F)  ->  the same shape.
    """
    # Hint: The slope of the exact GELU at every element.
    # More help: hint("mlp.gelu_grad") in the notebook, one level at a time.
    raise NotImplementedError('mlp.gelu_grad: not implemented yet. Hint: The slope of the exact GELU at every element.')


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
        # Hint: Widen to F, apply GELU, project back to D.
        # More help: hint("mlp.MLP") in the notebook, one level at a time.
        raise NotImplementedError('mlp.MLP.forward: not implemented yet. Hint: Widen to F, apply GELU, project back to D.')
