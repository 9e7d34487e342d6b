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
    ### BEGIN SOLUTION
    ### HINT: for each position i, take the rows 0..i (i + 1 of them, i itself included) and average them; the future rows never enter.
    ### API: a loop over i with x[..., :i + 1, :].mean(dim=-2), and torch.stack(..., dim=-2); or torch.cumsum(x, dim=-2) divided by the counts 1..T.
    ### LINE: torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(x.shape[-2])], dim=-2)
    T = x.shape[-2]
    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)
    ### END SOLUTION


def causal_average_weights(T: int) -> torch.Tensor:
    """The (T, T) float32 matrix W with W @ x == average_past(x): row i holds 1/(i + 1) in its
    first i + 1 columns and 0 after them, so every row sums to 1.
    """
    ### BEGIN SOLUTION
    ### HINT: start from a lower-triangular matrix of ones (row i has i + 1 ones, the diagonal included), then divide each row by its own sum.
    ### API: torch.tril(torch.ones(T, T)), and .sum(dim=-1, keepdim=True)
    ### LINE: w = torch.tril(torch.ones(T, T)); return w / w.sum(dim=-1, keepdim=True)
    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones
    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count
    ### END SOLUTION


def causal_softmax_weights(T: int) -> torch.Tensor:
    """The same (T, T) weights from a softmax: scores all 0 (every position equally interesting),
    the future set to -inf, then a softmax over each row. Later the zeros become Q·Kᵀ.
    """
    ### BEGIN SOLUTION
    ### HINT: scores of zeros; hide every future position (j > i) behind minus infinity, whose exponential is 0; a softmax over each row then shares the weight equally among the i + 1 positions left.
    ### API: torch.zeros(T, T), torch.tril(torch.ones(T, T)) == 0 for the future, .masked_fill(..., float('-inf')), torch.softmax(..., dim=-1)
    ### LINE: torch.softmax(torch.zeros(T, T).masked_fill(torch.tril(torch.ones(T, T)) == 0, float('-inf')), dim=-1)
    future = torch.tril(torch.ones(T, T)) == 0       # (T, T), True above the diagonal
    scores = torch.zeros(T, T).masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)
    ### END SOLUTION


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw scores: every query against every key.

    q: (..., T, K), k: (..., S, K)  ->  (..., T, S),  scores[i, j] = q_i · k_j
    """
    ### BEGIN SOLUTION
    ### HINT: Score every query against every key with a dot product: a matrix product of the queries with the keys turned on their side, swapping only the last two axes (positions and head width) so that batch and head axes stay where they are.
    ### API: the @ operator, .transpose(-2, -1)
    ### LINE: return q @ k.transpose(-2, -1)
    return q @ k.transpose(-2, -1)
    ### END SOLUTION


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    """Divide by sqrt(K) so the scores stay near unit scale whatever the head width.

    scores: (..., T, S)  ->  (..., T, S)
    """
    ### BEGIN SOLUTION
    ### HINT: A dot product of two random K-wide vectors grows like the square root of K; divide the scores by that, so the softmax that follows does not saturate as heads get wider.
    ### API: math.sqrt (or ** 0.5)
    ### LINE: return scores / math.sqrt(d_head)
    return scores / math.sqrt(d_head)
    ### END SOLUTION


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean (T, S) matrix, True where query i may look at key j.

    Without a cache S = T and the rule is j <= i (lower triangle, diagonal included).
    With S - T earlier keys cached, query i sits at position i + (S - T): allowed j <= i + S - T.
    """
    ### BEGIN SOLUTION
    ### HINT: Query i may see key j unless j lies in its future. With S - T keys already cached, query i sits at position i + S - T. Compare a column of query positions with a row of key positions: broadcasting gives the whole T by S table of True and False at once.
    ### API: torch.arange(n, device=device), [:, None] for a column and [None, :] for a row, the <= comparison
    ### LINE: return torch.arange(S, device=device)[None, :] <= torch.arange(T, device=device)[:, None] + (S - T)
    S = T if S is None else S
    i = torch.arange(T, device=device)[:, None]   # (T, 1)
    j = torch.arange(S, device=device)[None, :]   # (1, S)
    return j <= i + (S - T)
    ### END SOLUTION


def apply_causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Set every score of a future key (j > i) to -inf, so softmax gives it weight 0.

    scores: (..., T, S)  ->  (..., T, S).  Mask *before* the softmax.
    """
    ### BEGIN SOLUTION
    ### HINT: Build the mask for the last two sizes of the scores and write minus infinity wherever a query may not look: after the softmax those keys get exactly zero weight, and the rows still sum to one.
    ### API: causal_mask(T, S, device=scores.device), ~ to invert a boolean mask, .masked_fill(mask, value), float('-inf')
    ### LINE: return scores.masked_fill(~causal_mask(T, S, device=scores.device), float('-inf'))
    T, S = scores.shape[-2:]
    allowed = causal_mask(T, S, device=scores.device)
    return scores.masked_fill(~allowed, float("-inf"))
    ### END SOLUTION


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis (the keys): non-negative, each row sums to 1.

    scores: (..., T, S)  ->  (..., T, S).  Subtract the row maximum first so exp never overflows.
    """
    ### BEGIN SOLUTION
    ### HINT: Each query's row of scores becomes weights that are positive and sum to one: exponentiate, then divide each row by its own sum, over the keys (the last axis). Subtract each row's largest score first (the result is the same, but exp cannot overflow), and keep the reduced axis so each row's statistic lines up with its row.
    ### API: .amax(dim=-1, keepdim=True), .exp(), .sum(dim=-1, keepdim=True)
    ### LINE: e = (scores - scores.amax(dim=-1, keepdim=True)).exp(); return e / e.sum(dim=-1, keepdim=True)
    z = scores - scores.amax(dim=-1, keepdim=True)
    e = z.exp()
    return e / e.sum(dim=-1, keepdim=True)
    ### END SOLUTION


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out_i = sum_j weights[i, j] · v_j.

    weights: (..., T, S), v: (..., S, K)  ->  (..., T, K)
    """
    ### BEGIN SOLUTION
    ### HINT: Each query's output is the average of the value vectors, weighted by that query's row of attention weights: one matrix product does it for every query.
    ### API: the @ operator (torch.matmul)
    ### LINE: return weights @ v
    return weights @ v
    ### END SOLUTION


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention end to end, from the four steps above.

    q: (..., T, K), k: (..., S, K), v: (..., S, K)  ->  (..., T, K)
    """
    ### BEGIN SOLUTION
    ### HINT: Chain your four steps in order: the scores, scaled by the square root of the head width, masked only when causal, turned into weights by the softmax, then the weighted sum of the values.
    ### API: attention_scores, scale_scores (the head width is the last size of q), apply_causal_mask, softmax, weighted_sum
    ### LINE: scores = scale_scores(attention_scores(q, k), q.shape[-1]); if causal: scores = apply_causal_mask(scores); return weighted_sum(softmax(scores), v)
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if causal:
        scores = apply_causal_mask(scores)
    return weighted_sum(softmax(scores), v)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: A head projects the same input three ways, into queries, keys and values, with its three linear layers, and runs causal attention on them.
        ### API: self.w_q, self.w_k, self.w_v (nn.Linear layers), attention(q, k, v, causal=True)
        ### LINE: return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)
        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)
        ### END SOLUTION
