"""Activity 7.1 · The MLP and GELU, as the engine computes them."""
import torch
import torch.nn.functional as F

from ..engine import ops
from ..engine.model import MLP
from ..lessons import lesson

__all__ = list(lesson("mlp").pieces)     # the pieces the learner writes (lessons.py)

gelu_tanh = ops.gelu


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU, x·Phi(x)."""
    return F.gelu(x)


def gelu_grad(x: torch.Tensor) -> torch.Tensor:
    """d GELU(x) / dx for the exact GELU, as PyTorch's own backward of F.gelu computes it (any shape)."""
    x = x.detach().requires_grad_()
    with torch.enable_grad():
        return torch.autograd.grad(F.gelu(x).sum(), x)[0]
