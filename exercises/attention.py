# GENERATED from solutions/attention.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
"""Activity 5 · Attention: scores, the 1/sqrt(K) scaling, the causal mask, softmax, and the
weighted sum of the values.

    Attention(Q, K, V) = softmax(mask(Q·Kᵀ / sqrt(K))) · V
"""
import math

import torch
import torch.nn as nn


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw scores: every query against every key.

    q: (..., T, K), k: (..., S, K)  ->  (..., T, S),  scores[i, j] = q_i · k_j
    """
    # Hint: q @ k.transpose(-2, -1): transpose the last two axes of k only.
    raise NotImplementedError('attention.attention_scores: not implemented yet. Hint: q @ k.transpose(-2, -1): transpose the last two axes of k only.')


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    """Divide by sqrt(K) so the scores stay near unit scale whatever the head width.

    scores: (..., T, S)  ->  (..., T, S)
    """
    # Hint: divide by math.sqrt(d_head).
    raise NotImplementedError('attention.scale_scores: not implemented yet. Hint: divide by math.sqrt(d_head).')


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean (T, S) matrix, True where query i may look at key j.

    Without a cache S = T and the rule is j <= i (lower triangle, diagonal included).
    With S - T earlier keys cached, query i sits at position i + (S - T): allowed j <= i + S - T.
    """
    # Hint: compare torch.arange(T)[:, None] with torch.arange(S)[None, :]; future keys have j > i + (S - T).
    raise NotImplementedError('attention.causal_mask: not implemented yet. Hint: compare torch.arange(T)[:, None] with torch.arange(S)[None, :]; future keys have j > i + (S - T).')


def apply_causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Set every score of a future key (j > i) to -inf, so softmax gives it weight 0.

    scores: (..., T, S)  ->  (..., T, S).  Mask *before* the softmax.
    """
    # Hint: scores.masked_fill(~causal_mask(T, S, device=...), float('-inf')).
    raise NotImplementedError("attention.apply_causal_mask: not implemented yet. Hint: scores.masked_fill(~causal_mask(T, S, device=...), float('-inf')).")


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis (the keys): non-negative, each row sums to 1.

    scores: (..., T, S)  ->  (..., T, S).  Subtract the row maximum first so exp never overflows.
    """
    # Hint: subtract scores.amax(dim=-1, keepdim=True), exponentiate, divide by the row sums (dim=-1).
    raise NotImplementedError('attention.softmax: not implemented yet. Hint: subtract scores.amax(dim=-1, keepdim=True), exponentiate, divide by the row sums (dim=-1).')


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out_i = sum_j weights[i, j] · v_j.

    weights: (..., T, S), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: a matrix product of the weights with v.
    raise NotImplementedError('attention.weighted_sum: not implemented yet. Hint: a matrix product of the weights with v.')


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention end to end, from the four steps above.

    q: (..., T, K), k: (..., S, K), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: scale_scores(attention_scores(q, k), K) with K = q.shape[-1]; apply_causal_mask if causal; softmax; weighted_sum with v.
    raise NotImplementedError('attention.attention: not implemented yet. Hint: scale_scores(attention_scores(q, k), K) with K = q.shape[-1]; apply_causal_mask if causal; softmax; weighted_sum with v.')


class AttentionHead(nn.Module):
    """One causal attention head: project x to q, k, v of width K, then attend.

    x: (B, T, D)  ->  (B, T, K)
    """

    def __init__(self, d_model: int, d_head: int, bias: bool = True):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_head, bias=bias)
        self.w_k = nn.Linear(d_model, d_head, bias=bias)
        self.w_v = nn.Linear(d_model, d_head, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Hint: attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True).
        raise NotImplementedError('attention.AttentionHead.forward: not implemented yet. Hint: attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True).')
