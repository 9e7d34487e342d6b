"""Activity 4 · Embeddings, as the engine computes them."""
import torch
import torch.nn.functional as F

from ..engine.model import Embeddings
from ..lessons import lesson

__all__ = list(lesson("embeddings").pieces)     # the pieces the learner writes (lessons.py)


def embed_lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """table (V, D), ids (B, T) -> (B, T, D); ids of any shape (..., ) -> (..., D)."""
    return F.embedding(ids, table)


def embed_onehot(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The same rows (the one-hot product computes exactly the lookup)."""
    return F.embedding(ids, table)


def add_positions(tok: torch.Tensor, position_table: torch.Tensor, start: int = 0) -> torch.Tensor:
    """tok (B, T, D) + position_table[start:start + T]."""
    return tok + position_table.narrow(0, start, tok.shape[1])


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(..., D), (..., D) -> (...)."""
    return F.cosine_similarity(u, v, dim=-1, eps=eps)


def nearest_tokens(table: torch.Tensor, query: torch.Tensor, k: int) -> torch.Tensor:
    """table (V, D), query (D,) -> the ids (k,) of the k rows of largest cosine with query, largest first."""
    scores = F.cosine_similarity(table, query.unsqueeze(0), dim=-1)     # (V,)
    return scores.topk(k).indices                                       # (k,)
