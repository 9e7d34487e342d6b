# Your work for notebooks/01_embeddings.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
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
    # Hint: Give every id its row of the table, for the whole batch at once.
    # More help: hint("embeddings.embed_lookup") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.embed_lookup: not implemented yet. Hint: Give every id its row of the table, for the whole batch at once.')


def embed_onehot(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The same lookup written as a matrix product: one_hot(ids) · table.

    table: (V, D), ids: (B, T)  ->  (B, T, D).  Slow and memory-hungry, but it shows that an
    embedding is a linear layer whose input is a one-hot vector.
    """
    # Hint: The same lookup, as a one-hot matrix times the table.
    # More help: hint("embeddings.embed_onehot") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.embed_onehot: not implemented yet. Hint: The same lookup, as a one-hot matrix times the table.')


def add_positions(tok: torch.Tensor, position_table: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Add the learned position vector of each position: x_t = tok_t + position_table[start + t].

    tok: (B, T, D), position_table: (T_max, D)  ->  (B, T, D).
    `start` is the position of the first token (non-zero when earlier tokens are cached).
    """
    # Hint: Add to each token the learned vector of its position, counting from start.
    # More help: hint("embeddings.add_positions") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.add_positions: not implemented yet. Hint: Add to each token the learned vector of its position, counting from start.')


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(theta) = u·v / (||u|| ||v||) over the last axis.

    u: (..., D), v: (..., D)  ->  (...)
    """
    # Hint: The cosine of the angle between u and v, one number per pair of vectors.
    # More help: hint("embeddings.cosine_similarity") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.cosine_similarity: not implemented yet. Hint: The cosine of the angle between u and v, one number per pair of vectors.')


def nearest_tokens(table: torch.Tensor, query: torch.Tensor, k: int) -> torch.Tensor:
    """The ids of the k rows of `table` most similar to `query` by cosine similarity, most
    similar first.

    table: (V, D), query: (D,)  ->  ids: (k,) integer, in [0, V)
    """
    # Hint: The ids of the k rows closest in direction to the query, best first.
    # More help: hint("embeddings.nearest_tokens") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.nearest_tokens: not implemented yet. Hint: The ids of the k rows closest in direction to the query, best first.')


class Embeddings(nn.Module):
    """Token table (V, D) and learned position table (T, D); forward adds them."""

    def __init__(self, cfg, dropout: float = 0.0):
        super().__init__()
        self.token_table = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))         # (V, D)
        self.position_table = nn.Parameter(torch.empty(cfg.context_length, cfg.d_model))  # (T, D)
        self.drop = nn.Dropout(dropout)      # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids: (B, T) -> x: (B, T, D), using embed_lookup and add_positions."""
        # Hint: Token vectors plus position vectors, with your two functions.
        # More help: hint("embeddings.Embeddings") in the notebook, one level at a time.
        raise NotImplementedError('embeddings.Embeddings.forward: not implemented yet. Hint: Token vectors plus position vectors, with your two functions.')
        return self.drop(x)
