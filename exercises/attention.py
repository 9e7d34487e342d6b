# GENERATED from solutions/attention.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
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
    # Hint: for each position i, take the rows 0..i (i + 1 of them, i itself included) and
    #       average them; the future rows never enter.
    # More help: hint("attention.average_past") in the notebook, one level at a time.
    raise NotImplementedError('attention.average_past: not implemented yet. Hint: for each position i, take the rows 0..i (i + 1 of them, i itself included) and average them; the future rows never enter.')


def causal_average_weights(T: int) -> torch.Tensor:
    """The (T, T) float32 matrix W with W @ x == average_past(x): row i holds 1/(i + 1) in its
    first i + 1 columns and 0 after them, so every row sums to 1.
    """
    # Hint: start from a lower-triangular matrix of ones (row i has i + 1 ones, the diagonal
    #       included), then divide each row by its own sum.
    # More help: hint("attention.causal_average_weights") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_average_weights: not implemented yet. Hint: start from a lower-triangular matrix of ones (row i has i + 1 ones, the diagonal included), then divide each row by its own sum.')


def causal_softmax_weights(T: int) -> torch.Tensor:
    """The same (T, T) weights from a softmax: scores all 0 (every position equally interesting),
    the future set to -inf, then a softmax over each row. Later the zeros become Q·Kᵀ.
    """
    # Hint: scores of zeros; hide every future position (j > i) behind minus infinity, whose
    #       exponential is 0; a softmax over each row then shares the weight equally among the i
    #       + 1 positions left.
    # More help: hint("attention.causal_softmax_weights") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_softmax_weights: not implemented yet. Hint: scores of zeros; hide every future position (j > i) behind minus infinity, whose exponential is 0; a softmax over each row then shares the weight equally among the i + 1 positions left.')


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw scores: every query against every key.

    q: (..., T, K), k: (..., S, K)  ->  (..., T, S),  scores[i, j] = q_i · k_j
    """
    # Hint: Score every query against every key with a dot product: a matrix product of the
    #       queries with the keys turned on their side, swapping only the last two axes
    #       (positions and head width) so that batch and head axes stay where they are.
    # More help: hint("attention.attention_scores") in the notebook, one level at a time.
    raise NotImplementedError('attention.attention_scores: not implemented yet. Hint: Score every query against every key with a dot product: a matrix product of the queries with the keys turned on their side, swapping only the last two axes (positions and head width) so that batch and head axes stay where they are.')


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    """Divide by sqrt(K) so the scores stay near unit scale whatever the head width.

    scores: (..., T, S)  ->  (..., T, S)
    """
    # Hint: A dot product of two random K-wide vectors grows like the square root of K; divide
    #       the scores by that, so the softmax that follows does not saturate as heads get
    #       wider.
    # More help: hint("attention.scale_scores") in the notebook, one level at a time.
    raise NotImplementedError('attention.scale_scores: not implemented yet. Hint: A dot product of two random K-wide vectors grows like the square root of K; divide the scores by that, so the softmax that follows does not saturate as heads get wider.')


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean (T, S) matrix, True where query i may look at key j.

    Without a cache S = T and the rule is j <= i (lower triangle, diagonal included).
    With S - T earlier keys cached, query i sits at position i + (S - T): allowed j <= i + S - T.
    """
    # Hint: Query i may see key j unless j lies in its future. With S - T keys already cached,
    #       query i sits at position i + S - T. Compare a column of query positions with a row
    #       of key positions: broadcasting gives the whole T by S table of True and False at
    #       once.
    # More help: hint("attention.causal_mask") in the notebook, one level at a time.
    raise NotImplementedError('attention.causal_mask: not implemented yet. Hint: Query i may see key j unless j lies in its future. With S - T keys already cached, query i sits at position i + S - T. Compare a column of query positions with a row of key positions: broadcasting gives the whole T by S table of True and False at once.')


def apply_causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Set every score of a future key (j > i) to -inf, so softmax gives it weight 0.

    scores: (..., T, S)  ->  (..., T, S).  Mask *before* the softmax.
    """
    # Hint: Build the mask for the last two sizes of the scores and write minus infinity
    #       wherever a query may not look: after the softmax those keys get exactly zero weight,
    #       and the rows still sum to one.
    # More help: hint("attention.apply_causal_mask") in the notebook, one level at a time.
    raise NotImplementedError('attention.apply_causal_mask: not implemented yet. Hint: Build the mask for the last two sizes of the scores and write minus infinity wherever a query may not look: after the softmax those keys get exactly zero weight, and the rows still sum to one.')


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis (the keys): non-negative, each row sums to 1.

    scores: (..., T, S)  ->  (..., T, S).  Subtract the row maximum first so exp never overflows.
    """
    # Hint: Each query's row of scores becomes weights that are positive and sum to one:
    #       exponentiate, then divide each row by its own sum, over the keys (the last axis).
    #       Subtract each row's largest score first (the result is the same, but exp cannot
    #       overflow), and keep the reduced axis so each row's statistic lines up with its row.
    # More help: hint("attention.softmax") in the notebook, one level at a time.
    raise NotImplementedError('attention.softmax: not implemented yet. Hint: Each query\'s row of scores becomes weights that are positive and sum to one: exponentiate, then divide each row by its own sum, over the keys (the last axis). Subtract each row\'s largest score first (the result is the same, but exp cannot overflow), and keep the reduced axis so each row\'s statistic lines up with its row.')


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out_i = sum_j weights[i, j] · v_j.

    weights: (..., T, S), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: Each query's output is the average of the value vectors, weighted by that query's
    #       row of attention weights: one matrix product does it for every query.
    # More help: hint("attention.weighted_sum") in the notebook, one level at a time.
    raise NotImplementedError('attention.weighted_sum: not implemented yet. Hint: Each query\'s output is the average of the value vectors, weighted by that query\'s row of attention weights: one matrix product does it for every query.')


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention end to end, from the four steps above.

    q: (..., T, K), k: (..., S, K), v: (..., S, K)  ->  (..., T, K)
    """
    # Hint: Chain your four steps in order: the scores, scaled by the square root of the head
    #       width, masked only when causal, turned into weights by the softmax, then the
    #       weighted sum of the values.
    # More help: hint("attention.attention") in the notebook, one level at a time.
    raise NotImplementedError('attention.attention: not implemented yet. Hint: Chain your four steps in order: the scores, scaled by the square root of the head width, masked only when causal, turned into weights by the softmax, then the weighted sum of the values.')


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
        # Hint: A head projects the same input three ways, into queries, keys and values,
        #       with its three linear layers, and runs causal attention on them.
        # More help: hint("attention.AttentionHead") in the notebook, one level at a time.
        raise NotImplementedError('attention.AttentionHead.forward: not implemented yet. Hint: A head projects the same input three ways, into queries, keys and values, with its three linear layers, and runs causal attention on them.')
