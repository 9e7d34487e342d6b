"""Activity 7.1 · The MLP and GELU, as the engine computes them."""
import torch
import torch.nn.functional as F

from .. import ops
from ..model import MLP

__all__ = ["gelu_tanh", "gelu_erf", "MLP"]

gelu_tanh = ops.gelu


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU, x·Phi(x)."""
    return F.gelu(x)
