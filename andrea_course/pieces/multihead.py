"""Activity 6 · Multi-head attention, as the engine computes it."""
import torch

from ..engine.model import KVCache, MultiHeadAttention, repeat_kv  # noqa: F401  (given in the exercise file)
from ..lessons import lesson

__all__ = list(lesson("multihead").pieces)     # the pieces the learner writes (lessons.py)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, H·K) -> (B, H, T, K)."""
    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K)."""
    return x.transpose(1, 2).flatten(2)


def head_entropy(weights: torch.Tensor) -> torch.Tensor:
    """(B, H, T, S) attention weights -> (H,): each head's entropy over the keys in nats,
    0·log 0 = 0, averaged over batch and queries."""
    return torch.special.entr(weights).sum(dim=-1).mean(dim=(0, 2))
