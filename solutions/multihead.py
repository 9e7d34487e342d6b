"""Activity 6 · Multi-head attention: D = H·K split into H heads that attend in parallel,
concatenated back to D and mixed by W_O.

The KV cache (notebook 06) and grouped key/value heads (notebook 07: only G <= H key/value
heads, each serving H/G query heads) live in one given method, MultiHeadAttention.cache_and_share.
Last, head_entropy measures how spread out each head's attention is.
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
        ### BEGIN SOLUTION
        ### HINT: One projection gives the queries of H heads and the keys and values of G heads: cut it into those three parts and split each into heads. Hand k and v to the given cache_and_share (one line), let attention run over all heads at once, merge the heads and mix them with the output projection.
        ### API: self.qkv(x).split([H * K, G * K, G * K], dim=-1), split_heads(t, n), self.cache_and_share(k, v, cache), self.attention(q, k, v), merge_heads, self.proj
        ### LINE: q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1); q, k, v = split_heads(q, H), split_heads(k, G), split_heads(v, G); k, v = self.cache_and_share(k, v, cache); return self.proj(merge_heads(self.attention(q, k, v)))
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2
        q, k, v = split_heads(q, H), split_heads(k, G), split_heads(v, G)  # (B, H|G, T, K)
        k, v = self.cache_and_share(k, v, cache)                        # (B, H, S, K)
        y = self.attention(q, k, v)                                     # (B, H, T, K)
        return self.proj(merge_heads(y))                               # (B, T, D)
        ### END SOLUTION


def head_entropy(weights: torch.Tensor) -> torch.Tensor:
    """How spread out each head's attention is: (B, H, T, S) weights -> (H,) entropies in nats.

    Row (b, h, t) is a distribution over the S keys; its entropy is -sum_s w·log w, with
    0·log 0 taken as 0 (masked future keys have weight exactly 0). Average it over the batch
    and the queries, one number per head: 0 for a head that puts all its weight on one key,
    log(i + 1) at row i for a head that spreads its weight evenly over the past.
    """
    ### BEGIN SOLUTION
    ### HINT: Each query's row of weights is a distribution over the keys; its entropy is minus the sum, over those keys, of each weight times its natural logarithm. A masked key has weight exactly zero and must add nothing, yet the logarithm of zero is minus infinity and zero times that is NaN: reach for an operation that treats that product as zero. Then average over the batch and the queries, keeping one number per head.
    ### API: torch.xlogy(w, w) is w·log w with 0 where w = 0 (or torch.special.entr(w), which is -w·log w); .sum(dim=-1) over the keys; .mean(dim=(0, 2)) over batch and queries
    ### LINE: return -torch.xlogy(weights, weights).sum(dim=-1).mean(dim=(0, 2))
    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)
    return per_query.mean(dim=(0, 2))                                  # (H,)
    ### END SOLUTION
