# Your work for notebooks/02_attention.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 5 · Attention: first averaging the past (a loop, a lower-triangular matrix, a masked
softmax of zeros), then scores, the 1/sqrt(K) scaling, the causal mask, softmax, and the weighted
sum of the values.

    Attention(Q, K, V) = softmax(mask(Q·Kᵀ / sqrt(K))) · V
"""
import math

import torch
import torch.nn as nn


# ----- attention as averaging the past (before any query or key) -----

def average_past(x: torch.Tensor) -> torch.Tensor:
    """out[..., i, :] = the mean of x[..., 0, :], ..., x[..., i, :]: position i averages itself and
    every position before it, never one after it.

    x: (..., T, D)  ->  (..., T, D)
    """
    # Hint: Each position's output: the mean of itself and every position before it.
    # More help: hint("attention.average_past") in the notebook, one level at a time.
    raise NotImplementedError('attention.average_past: not implemented yet. Hint: Each position\'s output: the mean of itself and every position before it.')


def causal_average_weights(T: int) -> torch.Tensor:
    """The (T, T) float32 matrix W with W @ x == average_past(x): row i holds 1/(i + 1) in its
    first i + 1 columns and 0 after them, so every row sums to 1.
    """
    # Hint: The (T, T) matrix that does average_past as one matrix product.
    # More help: hint("attention.causal_average_weights") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_average_weights: not implemented yet. Hint: The (T, T) matrix that does average_past as one matrix product.')


def causal_softmax_weights(T: int) -> torch.Tensor:
    """The same (T, T) weights from a softmax: scores all 0 (every position equally interesting),
    the future set to -inf, then a softmax over each row. Later the zeros become Q·Kᵀ.
    """
    # Hint: The same weights again, this time from a masked softmax of zero scores.
    # More help: hint("attention.causal_softmax_weights") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_softmax_weights: not implemented yet. Hint: The same weights again, this time from a masked softmax of zero scores.')


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw scores: every query against every key.

    q: (..., T, K), k: (..., S, K)  ->  (..., T, S),  scores[i, j] = q_i · k_j
    """
    # Hint: Every query's dot product with every key: a (T, S) table of scores.
    # More help: hint("attention.attention_scores") in the notebook, one level at a time.
    raise NotImplementedError('attention.attention_scores: not implemented yet. Hint: Every query\'s dot product with every key: a (T, S) table of scores.')


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    """Divide by sqrt(K) so the scores stay near unit scale whatever the head width.

    scores: (..., T, S)  ->  (..., T, S)
    """
    # Hint: Divide the scores by the square root of the head width.
    # More help: hint("attention.scale_scores") in the notebook, one level at a time.
    raise NotImplementedError('attention.scale_scores: not implemented yet. Hint: Divide the scores by the square root of the head width.')


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean (T, S) matrix, True where query i may look at key j.

    Without a cache S = T and the rule is j <= i (lower triangle, diagonal included).
    With S - T earlier keys cached, query i sits at position i + (S - T): allowed j <= i + S - T.
    """
    # Hint: A (T, S) table of True where query i may look at key j.
    # More help: hint("attention.causal_mask") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_mask: not implemented yet. Hint: A (T, S) table of True where query i may look at key j.')


def apply_causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Set every score of a future key (j > i) to -inf, so softmax gives it weight 0.

    scores: (..., T, S)  ->  (..., T, S).  Mask *before* the softmax.
    """
    # Hint: Hide every future key from its query by giving its score minus infinity.
    # More help: hint("attention.apply_causal_mask") in the notebook, one level at a time.
    raise NotImplementedError('attention.apply_causal_mask: not implemented yet. Hint: Hide every future key from its query by giving its score minus infinity.')


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis (the keys): non-negative, each row sums to 1.

    scores: (..., T, S)  ->  (..., T, S).  Subtract the row maximum first so exp never overflows.
    """
    # Hint: Turn each row of scores into positive weights that sum to one.
    # More help: hint("attention.softmax") in the notebook, one level at a time.
    raise NotImplementedError('attention.softmax: not implemented yet. Hint: Turn each row of scores into positive weights that sum to one.')


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out_i = sum_j weights[i, j] · v_j.

    weights: (..., T, S), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: Each query's output: the values mixed by that query's row of weights.
    # More help: hint("attention.weighted_sum") in the notebook, one level at a time.
    raise NotImplementedError('attention.weighted_sum: not implemented yet. Hint: Each query\'s output: the values mixed by that query\'s row of weights.')


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention end to end, from the four steps above.

    q: (..., T, K), k: (..., S, K), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: Scaled dot-product attention from your four steps, masked only when causal.
    # More help: hint("attention.attention") in the notebook, one level at a time.
    raise NotImplementedError('attention.attention: not implemented yet. Hint: Scaled dot-product attention from your four steps, masked only when causal.')


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
        # Hint: Project x to queries, keys and values, then attend causally.
        # More help: hint("attention.AttentionHead") in the notebook, one level at a time.
        raise NotImplementedError('attention.AttentionHead.forward: not implemented yet. Hint: Project x to queries, keys and values, then attend causally.')
