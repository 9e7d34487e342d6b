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
    ### SUMMARY: GELU with the tanh approximation, elementwise.
    ### HINT: GELU keeps a fraction of each input, the fraction being the probability that a standard normal draw falls below it: near one for large positive inputs, near zero for large negative ones. The tanh form estimates that probability as one half of one plus the tanh of a scaled cubic, the scale being the square root of two over pi and 0.044715 the weight of the cube.
    ### API: torch.tanh is elementwise; math.sqrt and math.pi are Python numbers; t ** 3 cubes every entry. `torch.tanh(torch.tensor([0., 100.]))` gives `[0., 1.]`; `torch.tensor([-2., 3.]) ** 3` gives `[-8., 27.]`; `math.sqrt(2 / math.pi)` gives `0.7979`
    ### LINE: return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    ### END SOLUTION


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU: x·Phi(x) with Phi the standard normal CDF, 0.5·(1 + erf(x / sqrt(2)))."""
    ### BEGIN SOLUTION
    ### SUMMARY: The exact GELU: x times the standard normal's cumulative probability at x.
    ### HINT: No approximation this time: the probability that a standard normal draw falls below x has a closed form through the error function, once x is divided by the square root of two; half of one plus that error function is the probability. Multiply x by it.
    ### API: torch.erf is the error function, elementwise; math.sqrt(2) is a Python number. `torch.erf(torch.tensor([0., 1.]))` gives `[0., 0.8427]`; `0.5 * (1 + torch.erf(torch.tensor([0.])))` gives `[0.5]`
    ### LINE: return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    ### END SOLUTION


def gelu_grad(x: torch.Tensor) -> torch.Tensor:
    """The slope of the exact GELU, d/dx [x·Phi(x)] = Phi(x) + x·phi(x), elementwise.

    Phi is the standard normal CDF, 0.5·(1 + erf(x / sqrt(2))); phi its density,
    exp(-x²/2) / sqrt(2·pi).  x: any shape, e.g. (B, T, F)  ->  the same shape.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The slope of the exact GELU at every element.
    ### HINT: Differentiate a product: the slope of x times a function of x is that function plus x times the function's own slope. Here the function is the normal cumulative probability, and the slope of any cumulative probability is its density, the bell curve, highest at zero.
    ### API: torch.erf and torch.exp are elementwise; the standard normal density at x is e to the power minus x squared over 2, divided by the square root of 2π. `torch.exp(torch.tensor([0., -0.5]))` gives `[1., 0.6065]`; `math.sqrt(2 * math.pi)` gives `2.5066`
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
        ### SUMMARY: Widen to F, apply GELU, project back to D.
        ### HINT: The sublayer is a sandwich: a linear layer that widens every position's vector, the non-linearity in the middle, and a linear layer that brings it back to the model's width. The module already holds all three parts; apply them in order, the innermost first.
        ### API: self.fc and self.proj are nn.Linear layers and self.gelu a function, each called on a tensor. The same sandwich shape with other parts: `nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))(torch.zeros(4, 2)).shape` gives `(4, 2)`
        ### LINE: return self.proj(self.gelu(self.fc(x)))
        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)
        ### END SOLUTION
