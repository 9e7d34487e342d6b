"""Activity 4 · Embeddings: a token id becomes a vector by a table read, and learns its place.

x_t = token_table[id_t] + position_table[t]
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def embed_lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Read one row of `table` per token id.

    table: (V, D) float, ids: (B, T) integer in [0, V)  ->  (B, T, D); ids of any shape work the
    same way, e.g. one sequence (T,) -> (T, D)
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Give every id its row of the table, for the whole batch at once.
    ### HINT: Think of the table as a list of V vectors and of an id as a place in that list: a token's vector is whatever is stored at its place. PyTorch fetches a whole grid of places in one go, keeping the grid's shape and adding the vector's length as a last axis.
    ### API: Index a tensor with a tensor of integer ids (advanced indexing): the result has the ids' shape followed by the row's own axes. `torch.tensor([[10, 11], [20, 21], [30, 31]])[torch.tensor([[2, 0], [2, 1]])]` gives `[[[30, 31], [10, 11]], [[30, 31], [20, 21]]]`
    ### LINE: return table[ids]
    return table[ids]
    ### END SOLUTION


def embed_onehot(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The same lookup written as a matrix product: one_hot(ids) · table.

    table: (V, D), ids: (B, T)  ->  (B, T, D).  Slow and memory-hungry, but it shows that an
    embedding is a linear layer whose input is a one-hot vector.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The same lookup, as a one-hot matrix times the table.
    ### HINT: A row vector of zeros with a single 1 at place i, multiplied by a matrix, keeps only the matrix's row i, because every other row is weighted by zero. Build such a vector for every id, long enough to reach all V rows of the table (not only up to the largest id that happens to occur), in the table's floating-point type, and let one matrix product do every lookup.
    ### API: F.one_hot(ids, num_classes=n) gives integer vectors of length n (without num_classes, the length is the largest id in this batch plus one); .float() or .to(dtype) converts them; @ multiplies. `F.one_hot(torch.tensor([1, 0]), num_classes=3)` gives `[[0, 1, 0], [1, 0, 0]]`; `F.one_hot(torch.tensor([1, 0])).float() @ torch.tensor([[5., 6.], [7., 8.]])` gives `[[7., 8.], [5., 6.]]`
    ### LINE: return F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype) @ table
    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)  # (B, T, V)
    return one_hot @ table                                                  # (B, T, D)
    ### END SOLUTION


def add_positions(tok: torch.Tensor, position_table: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Add the learned position vector of each position: x_t = tok_t + position_table[start + t].

    tok: (B, T, D), position_table: (T_max, D)  ->  (B, T, D).
    `start` is the position of the first token (non-zero when earlier tokens are cached).
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Add to each token the learned vector of its position, counting from start.
    ### HINT: A run of T new tokens occupies positions start through start + T - 1, so it needs a contiguous block of T rows of the position table beginning at row start. That block has no batch axis and needs none: the same T position vectors go to every sequence in the batch.
    ### API: t[a:b] takes rows a to b - 1; adding a (T, D) tensor to a (B, T, D) one broadcasts it over B. `torch.arange(10)[3:3 + 4]` gives `[3, 4, 5, 6]`; `torch.zeros(2, 3, 1) + torch.tensor([[1.], [2.], [3.]])` gives `[[[1.], [2.], [3.]], [[1.], [2.], [3.]]]`
    ### LINE: return tok + position_table[start:start + tok.shape[1]]
    T = tok.shape[1]
    return tok + position_table[start:start + T]    # (T, D) broadcasts over B
    ### END SOLUTION


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(theta) = u·v / (||u|| ||v||) over the last axis.

    u: (..., D), v: (..., D)  ->  (...)
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The cosine of the angle between u and v, one number per pair of vectors.
    ### HINT: The cosine is what the dot product becomes once both vectors have length one: compute the dot product and divide it by the product of the two lengths. Every reduction runs along the feature axis only, so a batch of vector pairs gives a batch of cosines; and a zero vector must not make you divide by zero, so put a small floor under the denominator.
    ### API: Multiply elementwise and .sum(dim=-1) for row-wise dot products, .norm(dim=-1) for lengths, .clamp_min(eps) for a floor. `(torch.tensor([[1., 2.], [3., 4.]]) * torch.tensor([[5., 6.], [7., 8.]])).sum(dim=-1)` gives `[17., 53.]`; `torch.tensor([[3., 4.], [0., 0.]]).norm(dim=-1).clamp_min(0.5)` gives `[5., 0.5]`
    ### LINE: return (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)
    dot = (u * v).sum(-1)
    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)
    ### END SOLUTION


def nearest_tokens(table: torch.Tensor, query: torch.Tensor, k: int) -> torch.Tensor:
    """The ids of the k rows of `table` most similar to `query` by cosine similarity, most
    similar first.

    table: (V, D), query: (D,)  ->  ids: (k,) integer, in [0, V)
    """
    ### BEGIN SOLUTION
    ### SUMMARY: The ids of the k rows closest in direction to the query, best first.
    ### HINT: Give every row of the table one score against the query, the cosine, which ignores how long a row is and looks only at where it points: a vector of V scores. The answer is not the best scores themselves but their places in that vector, which are the ids, in order from the best down.
    ### API: Your cosine_similarity broadcasts a (D,) query against (V, D) rows; torch.topk(scores, k) returns .values and .indices, the largest first. `torch.topk(torch.tensor([0.2, 0.9, -0.5, 0.7]), 2).indices` gives `[1, 3]`
    ### LINE: return torch.topk(cosine_similarity(table, query), k).indices
    scores = cosine_similarity(table, query)          # (V, D) with (D,) -> (V,)
    return torch.topk(scores, k).indices              # (k,), the largest score first
    ### END SOLUTION


class Embeddings(nn.Module):
    """Token table (V, D) and learned position table (T, D); forward adds them."""

    def __init__(self, cfg, dropout: float = 0.0):
        super().__init__()
        self.token_table = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))         # (V, D)
        self.position_table = nn.Parameter(torch.empty(cfg.context_length, cfg.d_model))  # (T, D)
        self.drop = nn.Dropout(dropout)      # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids: (B, T) -> x: (B, T, D), using embed_lookup and add_positions."""
        ### BEGIN SOLUTION
        ### SUMMARY: Token vectors plus position vectors, with your two functions.
        ### HINT: The module owns the two tables, and you have already written both steps: first turn the ids into token vectors with the token table, then add the position vectors, telling that second step where the sequence begins so that generation with a cache lines up.
        ### API: embed_lookup and add_positions are your functions; the tables are the parameters self.token_table and self.position_table. The two steps on a 2-row table and a 2-row position table: `torch.tensor([[1., 2.], [3., 4.]])[torch.tensor([[1, 0]])] + torch.tensor([[10., 20.], [30., 40.]])[0:2]` gives `[[[13., 24.], [31., 42.]]]`
        ### LINE: x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)
        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)
        ### END SOLUTION
        return self.drop(x)
