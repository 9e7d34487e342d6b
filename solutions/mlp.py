"""Activity 7.1 · MLP and GELU: expand D -> F = 4D, a smooth non-linearity, project back F -> D.

    MLP(x) = GELU(x·W1 + b1)·W2 + b2
    GELU(x) = x·Phi(x) ≈ 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
"""
import math

import torch
import torch.nn as nn


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU in its tanh form (GPT-2's, and ANDREA's): 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))."""
    ### BEGIN SOLUTION
    ### HINT: GELU weighs x by the chance that a standard normal variable is below x; this version approximates that chance with a tanh of a cubic in x, using the constants: the square root of 2 over pi, and 0.044715 on the cube.
    ### API: torch.tanh, math.sqrt, math.pi, x ** 3
    ### LINE: return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    ### END SOLUTION


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU: x·Phi(x) with Phi the standard normal CDF, 0.5·(1 + erf(x / sqrt(2)))."""
    ### BEGIN SOLUTION
    ### HINT: The exact GELU: x times the standard normal's cumulative probability at x, which the error function gives as one half of one plus erf of x over the square root of 2.
    ### API: torch.erf, math.sqrt
    ### LINE: return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    ### END SOLUTION


def gelu_grad(x: torch.Tensor) -> torch.Tensor:
    """The slope of the exact GELU, d/dx [x·Phi(x)] = Phi(x) + x·phi(x), elementwise.

    Phi is the standard normal CDF, 0.5·(1 + erf(x / sqrt(2))); phi its density,
    exp(-x²/2) / sqrt(2·pi).  x: any shape, e.g. (B, T, F)  ->  the same shape.
    """
    ### BEGIN SOLUTION
    ### HINT: GELU is a product of two factors, x itself and the normal distribution's cumulative probability at x, so its slope follows the product rule: two terms, one for each factor. The derivative of a cumulative distribution is its density, the bell curve.
    ### API: torch.erf and torch.exp, math.sqrt and math.pi; the standard normal density is exp(-x²/2) / sqrt(2·pi)
    ### LINE: return 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-0.5 * x ** 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))                   # Phi(x), same shape as x
    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)
    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: Widen each position's vector from D to F, apply the GELU, then project back down to D: three layers the module already holds, in that order.
        ### API: self.fc, self.gelu, self.proj
        ### LINE: return self.proj(self.gelu(self.fc(x)))
        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)
        ### END SOLUTION
