# GENERATED from solutions/multihead.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
"""Activity 6 · Multi-head attention: D = H·K split into H heads that attend in parallel,
concatenated back to D and mixed by W_O.

With grouped key/value heads (activity 7) only G <= H key/value heads are computed and
each serves H/G query heads.
"""
import torch
import torch.nn as nn
from andrea_course.model import KVCache, repeat_kv   # given: the engine's (andrea_course/model.py)

from .attention import attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, H·K) -> (B, H, T, K): give every head its own slice of the features.

    First view the last axis as (H, K), *then* move H in front of T. Reshaping straight to
    (B, H, T, K) would mix positions and heads.
    """
    # Hint: The last axis holds the H heads side by side, each K wide. First cut that axis into
    #       H pieces of K, leaving the positions where they are, then move the head axis in
    #       front of the positions. Reshaping straight to the final shape would mix positions
    #       and heads.
    # More help: hint("multihead.split_heads") in the notebook, one level at a time.
    raise NotImplementedError('multihead.split_heads: not implemented yet. Hint: The last axis holds the H heads side by side, each K wide. First cut that axis into H pieces of K, leaving the positions where they are, then move the head axis in front of the positions. Reshaping straight to the final shape would mix positions and heads.')


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K): concatenate the heads' outputs, the inverse of split_heads."""
    # Hint: Undo split_heads: move the positions back in front of the heads, then lay the H
    #       heads side by side again along one axis of width H times K.
    # More help: hint("multihead.merge_heads") in the notebook, one level at a time.
    raise NotImplementedError('multihead.merge_heads: not implemented yet. Hint: Undo split_heads: move the positions back in front of the heads, then lay the H heads side by side again along one axis of width H times K.')


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention.  x: (B, T, D) -> (B, T, D).

    qkv: one fused projection D -> (H + 2G)·K giving q (H heads), k and v (G heads each).
    proj: W_O, D -> D, mixes the concatenated heads.
    self.attention(q, k, v) is scaled dot-product attention with the causal mask (activity 5);
    the course may swap in a fused or Triton version that computes the same thing.
    """

    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = cfg.n_heads, cfg.kv_heads, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, (self.n_heads + 2 * self.n_kv_heads) * self.d_head, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)   # W_O
        self.attention = attention

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Project to q, k, v; split into heads; (append k, v to the cache); attend; merge; W_O."""
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        # Hint: One projection makes queries for H heads but keys and values for only G
        #       heads: cut it into those three parts and split each into heads. A cache,
        #       when given, stores the G key and value heads and hands back every position
        #       so far. Then each key/value head serves H / G query heads, attention runs
        #       over all heads at once, and the merged heads go through the output
        #       projection.
        # More help: hint("multihead.MultiHeadAttention") in the notebook, one level at a time.
        raise NotImplementedError('multihead.MultiHeadAttention.forward: not implemented yet. Hint: One projection makes queries for H heads but keys and values for only G heads: cut it into those three parts and split each into heads. A cache, when given, stores the G key and value heads and hands back every position so far. Then each key/value head serves H / G query heads, attention runs over all heads at once, and the merged heads go through the output projection.')
