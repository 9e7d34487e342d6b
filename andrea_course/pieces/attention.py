"""Activity 5 · Attention, as the engine computes it."""
import torch
import torch.nn as nn

from ..engine import ops
from ..lessons import lesson

__all__ = list(lesson("attention").pieces)     # the pieces the learner writes (lessons.py)


def average_past(x: torch.Tensor) -> torch.Tensor:
    """x (..., T, D) -> (..., T, D): the running mean over positions 0..i."""
    counts = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype, device=x.device)   # (T,)
    return x.cumsum(dim=-2) / counts[:, None]


def causal_average_weights(T: int) -> torch.Tensor:
    """(T, T) float32: row i is 1/(i + 1) on columns 0..i."""
    counts = torch.arange(1, T + 1, dtype=torch.float32)
    return torch.ones(T, T).tril() / counts[:, None]


def causal_softmax_weights(T: int) -> torch.Tensor:
    """(T, T) float32: softmax over each row of zero scores with the future at -inf."""
    return torch.softmax(apply_causal_mask(torch.zeros(T, T)), dim=-1)


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (..., T, K), k (..., S, K) -> (..., T, S)."""
    return torch.matmul(q, k.mT)


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    return scores * d_head ** -0.5


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """(T, S) bool, True where query i may see key j: j <= i + (S - T)."""
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


def apply_causal_mask(scores: torch.Tensor) -> torch.Tensor:
    T, S = scores.shape[-2:]
    return scores.masked_fill(~causal_mask(T, S, scores.device), float("-inf"))


def softmax(scores: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores, dim=-1)


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weights (..., T, S), v (..., S, K) -> (..., T, K)."""
    return torch.matmul(weights, v)


attention = ops.attention


def attention_by_steps(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """attention, step by step through the pieces above by their names (not a piece itself): the
    overlay runs it with a learner's steps that pass (their softmax, ...) when their attention does not."""
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if causal:
        scores = apply_causal_mask(scores)
    return weighted_sum(softmax(scores), v)


class AttentionHead(nn.Module):
    """One causal head: x (B, T, D) -> (B, T, K)."""

    def __init__(self, d_model: int, d_head: int, bias: bool = True):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_head, bias=bias)
        self.w_k = nn.Linear(d_model, d_head, bias=bias)
        self.w_v = nn.Linear(d_model, d_head, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.attention(self.w_q(x), self.w_k(x), self.w_v(x))
