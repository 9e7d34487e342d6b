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
    ### BEGIN SOLUTION
    ### HINT: The last axis holds the H heads side by side, each K wide. First cut that axis into H pieces of K, leaving the positions where they are, then move the head axis in front of the positions. Reshaping straight to the final shape would mix positions and heads.
    ### API: .view(B, T, H, K), .transpose(1, 2)
    ### LINE: return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)
    B, T, HK = x.shape
    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K): concatenate the heads' outputs, the inverse of split_heads."""
    ### BEGIN SOLUTION
    ### HINT: Undo split_heads: move the positions back in front of the heads, then lay the H heads side by side again along one axis of width H times K.
    ### API: .transpose(1, 2), .reshape(B, T, H * K) (after a transpose the memory is not contiguous, so .view refuses)
    ### LINE: return x.transpose(1, 2).reshape(B, T, H * K)
    B, H, T, K = x.shape
    return x.transpose(1, 2).reshape(B, T, H * K)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: One projection makes queries for H heads but keys and values for only G heads: cut it into those three parts and split each into heads. A cache, when given, stores the G key and value heads and hands back every position so far. Then each key/value head serves H / G query heads, attention runs over all heads at once, and the merged heads go through the output projection.
        ### API: self.qkv(x).split([H * K, G * K, G * K], dim=-1), split_heads, cache.update(k, v), repeat_kv(t, H // G), self.attention(q, k, v), merge_heads, self.proj
        ### LINE: q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1); split each; if cache is not None: k, v = cache.update(k, v); k, v = repeat_kv(k, H // G), repeat_kv(v, H // G); return self.proj(merge_heads(self.attention(q, k, v)))
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2
        q, k, v = split_heads(q, H), split_heads(k, G), split_heads(v, G)  # (B, H|G, T, K)
        if cache is not None:
            k, v = cache.update(k, v)                                   # (B, G, S, K)
        k, v = repeat_kv(k, H // G), repeat_kv(v, H // G)              # (B, H, S, K)
        y = self.attention(q, k, v)                                     # (B, H, T, K)
        return self.proj(merge_heads(y))                               # (B, T, D)
        ### END SOLUTION
