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
    ### SUMMARY: Each position's output: the mean of itself and every position before it.
    ### HINT: Output row i only ever looks backwards: gather rows 0 up to and including i, take their mean along the position axis, and do that for every i in turn; stacking the T means back along the position axis rebuilds the sequence. A running sum divided by how many rows it holds gives the same numbers without a loop.
    ### API: x[..., :n, :] takes the first n positions, .mean(dim=-2) averages over positions, torch.stack(list, dim=-2) rebuilds a sequence; or torch.cumsum(x, dim=-2). `torch.tensor([[2., 0.], [4., 2.], [6., 4.]])[:2].mean(dim=-2)` gives `[3., 1.]`; `torch.cumsum(torch.tensor([1., 2., 3.]), dim=0)` gives `[1., 3., 6.]`
    ### LINE: return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(x.shape[-2])], dim=-2)
    T = x.shape[-2]
    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)
    ### END SOLUTION


def causal_average_weights(T: int) -> torch.Tensor:
    """The (T, T) float32 matrix W with W @ x == average_past(x): row i holds 1/(i + 1) in its
    first i + 1 columns and 0 after them, so every row sums to 1.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The (T, T) matrix that does average_past as one matrix product.
    ### HINT: Picture the matrix row by row: row i says which positions to mix, and with what weight. Mark the allowed positions (the past and i itself) with ones, which gives a triangle under and on the diagonal, then turn each row's ones into equal shares by dividing the row by how many ones it has.
    ### API: torch.tril keeps the lower triangle and the diagonal; .sum(dim=-1, keepdim=True) gives each row's total as a column that divides its own row. `torch.tril(torch.full((3, 3), 2.))` gives `[[2., 0., 0.], [2., 2., 0.], [2., 2., 2.]]`; `torch.tensor([[1., 3.], [2., 2.]]) / torch.tensor([[1., 3.], [2., 2.]]).sum(dim=-1, keepdim=True)` gives `[[0.25, 0.75], [0.5, 0.5]]`
    ### LINE: w = torch.tril(torch.ones(T, T)); return w / w.sum(dim=-1, keepdim=True)
    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones
    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count
    ### END SOLUTION


def causal_softmax_weights(T: int) -> torch.Tensor:
    """The same (T, T) weights from a softmax: scores all 0 (every position equally interesting),
    the future set to -inf, then a softmax over each row. Later the zeros become Q·Kᵀ.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The same weights again, this time from a masked softmax of zero scores.
    ### HINT: Start with every score equal, zero, so that nothing is preferred; then forbid the future by writing minus infinity over it, because its exponential is exactly zero. The softmax of a row of equal scores, some forbidden, spreads the weight evenly over what is left: i + 1 positions in row i, the same shares as the plain average.
    ### API: torch.zeros(n, n); a boolean mask of the future from torch.triu(..., diagonal=1) or from torch.tril(...) == 0; .masked_fill(mask, float('-inf')); torch.softmax(s, dim=-1). `torch.softmax(torch.tensor([0., 0., float('-inf')]), dim=-1)` gives `[0.5, 0.5, 0.]`; `torch.triu(torch.ones(2, 2), diagonal=1) == 1` gives `[[False, True], [False, False]]`
    ### LINE: future = torch.tril(torch.ones(T, T)) == 0; return torch.softmax(torch.zeros(T, T).masked_fill(future, float('-inf')), dim=-1)
    future = torch.tril(torch.ones(T, T)) == 0       # (T, T), True above the diagonal
    scores = torch.zeros(T, T).masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)
    ### END SOLUTION


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw scores: every query against every key.

    q: (..., T, K), k: (..., S, K)  ->  (..., T, S),  scores[i, j] = q_i · k_j
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Every query's dot product with every key: a (T, S) table of scores.
    ### HINT: All T times S dot products at once are one matrix product, queries on the left and keys on the right, once the keys are laid on their side so that head width meets head width. Swap only the last two axes of the keys: any batch or head axes in front must stay put, so that each head scores against its own keys.
    ### API: @ multiplies matrices over the last two axes and batches over the rest; .transpose(-2, -1) swaps the last two axes only (.T would reverse them all). `torch.ones(5, 2, 3).transpose(-2, -1).shape` gives `(5, 3, 2)`; `torch.tensor([[1., 2.]]) @ torch.tensor([[3., 4.], [5., 6.]]).transpose(-2, -1)` gives `[[11., 17.]]`
    ### LINE: return q @ k.transpose(-2, -1)
    return q @ k.transpose(-2, -1)
    ### END SOLUTION


def scale_scores(scores: torch.Tensor, d_head: int) -> torch.Tensor:
    """Divide by sqrt(K) so the scores stay near unit scale whatever the head width.

    scores: (..., T, S)  ->  (..., T, S)
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Divide the scores by the square root of the head width.
    ### HINT: Adding up K products of random unit-scale numbers gives a total whose spread grows with the square root of K, so wide heads would hand the softmax huge scores and make it nearly one-hot. One division by that same square root brings every head width back to scores of about unit size.
    ### API: math.sqrt(n) (or n ** 0.5) for a Python number; dividing a tensor by a number divides every entry. `torch.tensor([8., -16.]) / math.sqrt(16)` gives `[2., -4.]`
    ### LINE: return scores / math.sqrt(d_head)
    return scores / math.sqrt(d_head)
    ### END SOLUTION


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean (T, S) matrix, True where query i may look at key j.

    Without a cache S = T and the rule is j <= i (lower triangle, diagonal included).
    With S - T earlier keys cached, query i sits at position i + (S - T): allowed j <= i + S - T.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: A (T, S) table of True where query i may look at key j.
    ### HINT: Give each query its absolute position (its row number plus the count of keys already cached, S - T) and each key its column number; a query may read a key exactly when the key's position is not after the query's. Comparing a column of query positions with a row of key positions fills the whole table in one broadcast comparison.
    ### API: torch.arange(n, device=device); t[:, None] makes a column and t[None, :] a row; comparing a column with a row broadcasts to a full table. `torch.arange(3)[:, None] >= torch.arange(2)[None, :] + 1` gives `[[False, False], [True, False], [True, True]]`
    ### LINE: S = T if S is None else S; return torch.arange(S, device=device)[None, :] <= torch.arange(T, device=device)[:, None] + (S - T)
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
    ### SUMMARY: Hide every future key from its query by giving its score minus infinity.
    ### HINT: The scores' last two sizes tell you how many queries and keys there are, and your causal mask already knows which pairs are allowed; what remains is to overwrite the scores of the forbidden pairs and leave the allowed ones untouched. Minus infinity is the value to write: the softmax turns it into a weight of exactly zero, and the row still sums to one.
    ### API: t.shape[-2:] gives the last two sizes; ~ flips a boolean mask; t.masked_fill(mask, value) writes value where the mask is True, broadcasting the mask over leading axes; build the mask on the scores' device. `torch.tensor([[1., 2.], [3., 4.]]).masked_fill(~torch.tensor([[True, False], [True, True]]), float('-inf'))` gives `[[1., -inf], [3., 4.]]`
    ### LINE: T, S = scores.shape[-2:]; return scores.masked_fill(~causal_mask(T, S, device=scores.device), float('-inf'))
    T, S = scores.shape[-2:]
    allowed = causal_mask(T, S, device=scores.device)
    return scores.masked_fill(~allowed, float("-inf"))
    ### END SOLUTION


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis (the keys): non-negative, each row sums to 1.

    scores: (..., T, S)  ->  (..., T, S).  Subtract the row maximum first so exp never overflows.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Turn each row of scores into positive weights that sum to one.
    ### HINT: Exponentials make every score positive and keep their order; dividing a row by its total makes it sum to one. Before exponentiating, shift each row down by its own largest value: the shift cancels in the division, so the answer is unchanged, but the largest exponent becomes zero and nothing overflows. Every per-row statistic must stay a column so that it lines up with its own row.
    ### API: .amax(dim=-1, keepdim=True) and .sum(dim=-1, keepdim=True) keep the reduced axis, with size 1, so the result broadcasts back over its row; .exp() is elementwise. `torch.tensor([[1., 3.], [2., 2.]]).amax(dim=-1, keepdim=True)` gives `[[3.], [2.]]`; `torch.tensor([[1., 3.]]) / torch.tensor([[1., 3.]]).sum(dim=-1, keepdim=True)` gives `[[0.25, 0.75]]`
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
    ### SUMMARY: Each query's output: the values mixed by that query's row of weights.
    ### HINT: For one query, multiply every value vector by the weight the query gives it and add them up; for all queries at once that is exactly a matrix product of the weight table with the stack of value vectors, any batch and head axes in front carried along unchanged.
    ### API: @ (torch.matmul) multiplies over the last two axes and batches over the others. `torch.tensor([[0.5, 0.5], [1., 0.]]) @ torch.tensor([[2., 4.], [6., 8.]])` gives `[[4., 6.], [2., 4.]]`
    ### LINE: return weights @ v
    return weights @ v
    ### END SOLUTION


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention end to end, from the four steps above.

    q: (..., T, K), k: (..., S, K), v: (..., S, K)  ->  (..., T, K)
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Scaled dot-product attention from your four steps, masked only when causal.
    ### HINT: Read the formula from the inside out: raw scores first, then the division by the square root of the head width (the last size of the queries), then the mask, but only when the caller asks for a causal one, then the softmax, and last the weighted sum of the values. Every step is a function you have written.
    ### API: attention_scores, scale_scores, apply_causal_mask, softmax and weighted_sum are yours; a step that applies only sometimes is an if around one reassignment. A pipeline of that kind on other data: `s = torch.tensor([[4., 8.]]); flip = True; s = s.flip(-1) if flip else s; torch.softmax(s / 4, dim=-1)` gives `[[0.7311, 0.2689]]`
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
        ### SUMMARY: Project x to queries, keys and values, then attend causally.
        ### HINT: The same input plays three roles: what each position is looking for, what it offers to be found by, and what it hands over once found. Each role has its own linear layer in the module; feed x through all three and pass the results to your attention, with the causal mask on.
        ### API: self.w_q, self.w_k and self.w_v are nn.Linear layers, called like functions; attention takes q, k, v and causal. A linear layer called on a batch: `lin = nn.Linear(2, 1); nn.init.ones_(lin.weight); nn.init.zeros_(lin.bias); lin(torch.tensor([[3., 4.]]))` gives `[[7.]]`
        ### LINE: return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)
        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)
        ### END SOLUTION
