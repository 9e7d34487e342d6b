# Your work for notebooks/03_multihead.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 6 · Multi-head attention: D = H·K split into H heads that attend in parallel,
concatenated back to D and mixed by W_O.

The KV cache (notebook 06) and grouped key/value heads (notebook 07: only G <= H key/value
heads, each serving H/G query heads) live in one given method, MultiHeadAttention.cache_and_share.
Last, head_entropy measures how spread out each head's attention is.
"""
import torch
import torch.nn as nn
from andrea_course.engine.model import KVCache, repeat_kv   # given: the engine's (andrea_course/engine/model.py)

from .attention import attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, H·K) -> (B, H, T, K): give every head its own slice of the features.

    First view the last axis as (H, K), *then* move H in front of T. Reshaping straight to
    (B, H, T, K) would mix positions and heads.
    """
    # Hint: Cut the features into H heads of width K and put the heads before the positions.
    # More help: hint("multihead.split_heads") in the notebook, one level at a time.
    raise NotImplementedError('multihead.split_heads: not implemented yet. Hint: Cut the features into H heads of width K and put the heads before the positions.')


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K): concatenate the heads' outputs, the inverse of split_heads."""
    # Hint: Undo split_heads: the heads side by side again, one axis of width H times K.
    # More help: hint("multihead.merge_heads") in the notebook, one level at a time.
    raise NotImplementedError('multihead.merge_heads: not implemented yet. Hint: Undo split_heads: the heads side by side again, one axis of width H times K.')


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention.  x: (B, T, D) -> (B, T, D).

    qkv: one fused projection D -> (H + 2G)·K giving q (H heads), k and v (G heads each);
    G = H in this notebook, so qkv is D -> 3D.
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

    def cache_and_share(self, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None):
        """Given (notebook 06 opens up the cache, notebook 07 the grouped heads).

        k, v (B, G, T, K) -> (B, H, S, K) each: appended to the KV cache, when generation passes
        one, which hands back all S positions so far; then each of the G key/value heads repeated
        for the H/G query heads it serves. With no cache and G = H it returns k and v as they came.
        """
        if cache is not None:
            k, v = cache.update(k, v)                                   # (B, G, S, K)
        n_rep = self.n_heads // self.n_kv_heads
        return repeat_kv(k, n_rep), repeat_kv(v, n_rep)                 # (B, H, S, K)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Project to q, k, v; split into heads; self.cache_and_share(k, v, cache); attend; merge; W_O."""
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        # Hint: q, k, v from one projection; attend with every head; merge; mix with W_O.
        # More help: hint("multihead.MultiHeadAttention") in the notebook, one level at a time.
        raise NotImplementedError('multihead.MultiHeadAttention.forward: not implemented yet. Hint: q, k, v from one projection; attend with every head; merge; mix with W_O.')


def head_entropy(weights: torch.Tensor) -> torch.Tensor:
    """How spread out each head's attention is: (B, H, T, S) weights -> (H,) entropies in nats.

    Row (b, h, t) is a distribution over the S keys; its entropy is -sum_s w·log w, with
    0·log 0 taken as 0 (masked future keys have weight exactly 0). Average it over the batch
    and the queries, one number per head: 0 for a head that puts all its weight on one key,
    log(i + 1) at row i for a head that spreads its weight evenly over the past.
    """
    # Hint: One entropy per head, in nats, averaged over the batch and the queries.
    # More help: hint("multihead.head_entropy") in the notebook, one level at a time.
    raise NotImplementedError('multihead.head_entropy: not implemented yet. Hint: One entropy per head, in nats, averaged over the batch and the queries.')
