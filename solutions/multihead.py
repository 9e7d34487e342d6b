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
    ### BEGIN SOLUTION
    ### SUMMARY: Cut the features into H heads of width K and put the heads before the positions.
    ### HINT: Along the feature axis the heads sit one after another, K features each. Reading that axis as two axes, heads by width, keeps every number where it is in memory; only then exchange the head axis and the position axis. Going straight to the final shape in one step would fill it in memory order and slice positions across heads.
    ### API: .view(sizes) reads the same memory with new sizes (one axis becomes two); .transpose(a, b) swaps two axes. `torch.arange(12).view(2, 3, 2).transpose(0, 1).shape` gives `(3, 2, 2)`; `torch.arange(6).view(2, 3).transpose(0, 1)` gives `[[0, 3], [1, 4], [2, 5]]`
    ### LINE: B, T, HK = x.shape; return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)
    B, T, HK = x.shape
    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, K) -> (B, T, H·K): concatenate the heads' outputs, the inverse of split_heads."""
    ### BEGIN SOLUTION
    ### SUMMARY: Undo split_heads: the heads side by side again, one axis of width H times K.
    ### HINT: Walk split_heads backwards: first bring the positions back in front of the heads, then fuse the head axis and the width axis into one. The swap leaves the memory in the old order, so the fusing step needs an operation that is willing to copy, or an explicit copy first.
    ### API: .transpose(1, 2) swaps heads and positions; .reshape(sizes) copies when it must, while .view refuses a tensor that a transpose left non-contiguous (.contiguous() first would make it possible). `torch.arange(6).view(2, 3).transpose(0, 1).is_contiguous()` gives `False`; `torch.arange(6).view(2, 3).transpose(0, 1).reshape(6)` gives `[0, 3, 1, 4, 2, 5]`
    ### LINE: B, H, T, K = x.shape; return x.transpose(1, 2).reshape(B, T, H * K)
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
        ### SUMMARY: q, k, v from one projection; attend with every head; merge; mix with W_O.
        ### HINT: The fused projection's output is three blocks laid end to end along the features: H heads' worth of queries, then G heads' worth of keys, then G of values. Cut it at those two boundaries, give each block its head axis, let the given cache-and-share method deal with the cache and with sharing key/value heads, run attention on all heads together, put the heads back side by side and mix them with the output projection.
        ### API: t.split([a, b, c], dim=-1) cuts the last axis into pieces of those sizes; split_heads and merge_heads are yours; self.cache_and_share, self.attention and self.proj are the module's. `[p.tolist() for p in torch.arange(7).split([3, 2, 2], dim=-1)]` gives `[[0, 1, 2], [3, 4], [5, 6]]`
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
    ### SUMMARY: One entropy per head, in nats, averaged over the batch and the queries.
    ### HINT: Treat each query's weights as a probability distribution over the keys and measure how spread it is: the sum over keys of weight times log weight, negated. Zero weights are the trap: the logarithm of zero is minus infinity and zero times that is not a number, while such a key should add nothing, so use an operation defined to give zero there. Then average away the batch axis and the query axis, keeping the head axis.
    ### API: torch.xlogy(a, b) computes a·log(b) and gives 0 wherever a is 0 (torch.special.entr(w) gives -w·log w directly); .sum(dim=-1); .mean(dim=(0, 2)) averages over two axes at once. `torch.xlogy(torch.tensor([0., 0.5]), torch.tensor([0., 0.5]))` gives `[0., -0.3466]`; `torch.ones(2, 3, 4).mean(dim=(0, 2)).shape` gives `(3,)`
    ### LINE: return -torch.xlogy(weights, weights).sum(dim=-1).mean(dim=(0, 2))
    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)
    return per_query.mean(dim=(0, 2))                                  # (H,)
    ### END SOLUTION
