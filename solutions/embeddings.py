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
    ### HINT: Each id names one row of the table: the embedding of a token is the row at its id, taken for every id at once.
    ### API: indexing a tensor with a tensor of integer ids (advanced indexing)
    ### LINE: return table[ids]
    return table[ids]
    ### END SOLUTION


def embed_onehot(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The same lookup written as a matrix product: one_hot(ids) · table.

    table: (V, D), ids: (B, T)  ->  (B, T, D).  Slow and memory-hungry, but it shows that an
    embedding is a linear layer whose input is a one-hot vector.
    """
    ### BEGIN SOLUTION
    ### HINT: A one-hot vector with its 1 at position id, multiplied by the table, picks out row id: the lookup written as a matrix product. The one-hot vectors must be as long as the vocabulary, not as the largest id that happens to appear, and of the table's dtype.
    ### API: F.one_hot(ids, num_classes=V), .to(table.dtype), the @ operator
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
    ### HINT: The T new tokens sit at positions start, start + 1, and so on up to start + T - 1: take those rows of the position table and add them to every sequence of the batch.
    ### API: slicing rows a to b of a tensor, broadcasting a (T, D) tensor over (B, T, D)
    ### LINE: return tok + position_table[start:start + tok.shape[1]]
    T = tok.shape[1]
    return tok + position_table[start:start + T]    # (T, D) broadcasts over B
    ### END SOLUTION


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(theta) = u·v / (||u|| ||v||) over the last axis.

    u: (..., D), v: (..., D)  ->  (...)
    """
    ### BEGIN SOLUTION
    ### HINT: Cosine similarity is the dot product of the two vectors after each is scaled to length 1: one number per pair of vectors, so the sum and both norms run over the last axis only, never over the whole tensor; keep the division away from a zero length.
    ### API: elementwise product and .sum(dim=-1), .norm(dim=-1), .clamp_min(eps)
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
    ### HINT: Score every row of the table against the query with the cosine, one number per row (V of them), so that a row's length does not count, only its direction; then keep the k largest scores and return where they are, the most similar first.
    ### API: your cosine_similarity(table, query) broadcasts the (D,) query over the V rows; torch.topk(scores, k) returns .values and .indices, largest first
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
        ### HINT: The module only wires your two functions together: look each id up in the token table, then add the position vectors, counting positions from start.
        ### API: embed_lookup, add_positions, self.token_table, self.position_table
        ### LINE: x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)
        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)
        ### END SOLUTION
        return self.drop(x)
