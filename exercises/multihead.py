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
    # Hint: x.view(B, T, H, K) first, then .transpose(1, 2); never reshape straight to (B, H, T, K).
    raise NotImplementedError('multihead.split_heads: not implemented yet. Hint: x.view(B, T, H, K) first, then .transpose(1, 2); never reshape straight to (B, H, T, K).')


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K): concatenate the heads' outputs, the inverse of split_heads."""
    # Hint: transpose(1, 2) back to (B, T, H, K), then reshape to (B, T, H*K).
    raise NotImplementedError('multihead.merge_heads: not implemented yet. Hint: transpose(1, 2) back to (B, T, H, K), then reshape to (B, T, H*K).')


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
        # Hint: split self.qkv(x) into sizes [H*K, G*K, G*K]; split_heads each; cache.update(k, v) if a cache is given; repeat_kv by H // G; self.attention(q, k, v); merge_heads; then W_O (self.proj).
        raise NotImplementedError('multihead.MultiHeadAttention.forward: not implemented yet. Hint: split self.qkv(x) into sizes [H*K, G*K, G*K]; split_heads each; cache.update(k, v) if a cache is given; repeat_kv by H // G; self.attention(q, k, v); merge_heads; then W_O (self.proj).')
