# GENERATED from solutions/embeddings.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
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
    # Hint: Each id names one row of the table: the embedding of a token is the row at its id,
    #       taken for every id at once.
    # More help: hint("embeddings.embed_lookup") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.embed_lookup: not implemented yet. Hint: Each id names one row of the table: the embedding of a token is the row at its id, taken for every id at once.')


def embed_onehot(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The same lookup written as a matrix product: one_hot(ids) · table.

    table: (V, D), ids: (B, T)  ->  (B, T, D).  Slow and memory-hungry, but it shows that an
    embedding is a linear layer whose input is a one-hot vector.
    """
    # Hint: A one-hot vector with its 1 at position id, multiplied by the table, picks out row
    #       id: the lookup written as a matrix product. The one-hot vectors must be as long as
    #       the vocabulary, not as the largest id that happens to appear, and of the table's
    #       dtype.
    # More help: hint("embeddings.embed_onehot") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.embed_onehot: not implemented yet. Hint: A one-hot vector with its 1 at position id, multiplied by the table, picks out row id: the lookup written as a matrix product. The one-hot vectors must be as long as the vocabulary, not as the largest id that happens to appear, and of the table\'s dtype.')


def add_positions(tok: torch.Tensor, position_table: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Add the learned position vector of each position: x_t = tok_t + position_table[start + t].

    tok: (B, T, D), position_table: (T_max, D)  ->  (B, T, D).
    `start` is the position of the first token (non-zero when earlier tokens are cached).
    """
    # Hint: The T new tokens sit at positions start, start + 1, and so on up to start + T - 1:
    #       take those rows of the position table and add them to every sequence of the batch.
    # More help: hint("embeddings.add_positions") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.add_positions: not implemented yet. Hint: The T new tokens sit at positions start, start + 1, and so on up to start + T - 1: take those rows of the position table and add them to every sequence of the batch.')


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(theta) = u·v / (||u|| ||v||) over the last axis.

    u: (..., D), v: (..., D)  ->  (...)
    """
    # Hint: Cosine similarity is the dot product of the two vectors after each is scaled to
    #       length 1: one number per pair of vectors, so the sum and both norms run over the
    #       last axis only, never over the whole tensor; keep the division away from a zero
    #       length.
    # More help: hint("embeddings.cosine_similarity") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.cosine_similarity: not implemented yet. Hint: Cosine similarity is the dot product of the two vectors after each is scaled to length 1: one number per pair of vectors, so the sum and both norms run over the last axis only, never over the whole tensor; keep the division away from a zero length.')


def nearest_tokens(table: torch.Tensor, query: torch.Tensor, k: int) -> torch.Tensor:
    """The ids of the k rows of `table` most similar to `query` by cosine similarity, most
    similar first.

    table: (V, D), query: (D,)  ->  ids: (k,) integer, in [0, V)
    """
    # Hint: Score every row of the table against the query with the cosine, one number per row
    #       (V of them), so that a row's length does not count, only its direction; then keep
    #       the k largest scores and return where they are, the most similar first.
    # More help: hint("embeddings.nearest_tokens") in the notebook, one level at a time.
    raise NotImplementedError('embeddings.nearest_tokens: not implemented yet. Hint: Score every row of the table against the query with the cosine, one number per row (V of them), so that a row\'s length does not count, only its direction; then keep the k largest scores and return where they are, the most similar first.')


class Embeddings(nn.Module):
    """Token table (V, D) and learned position table (T, D); forward adds them."""

    def __init__(self, cfg, dropout: float = 0.0):
        super().__init__()
        self.token_table = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))         # (V, D)
        self.position_table = nn.Parameter(torch.empty(cfg.context_length, cfg.d_model))  # (T, D)
        self.drop = nn.Dropout(dropout)      # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids: (B, T) -> x: (B, T, D), using embed_lookup and add_positions."""
        # Hint: The module only wires your two functions together: look each id up in the
        #       token table, then add the position vectors, counting positions from start.
        # More help: hint("embeddings.Embeddings") in the notebook, one level at a time.
        raise NotImplementedError('embeddings.Embeddings.forward: not implemented yet. Hint: The module only wires your two functions together: look each id up in the token table, then add the position vectors, counting positions from start.')
        return self.drop(x)
