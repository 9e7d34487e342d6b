"""Graded tests, activity 6 · Multi-head attention: split D = H·K into heads, attend in
parallel, concatenate, mix with W_O."""
import math

import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import Mismatch, expect_close, expect_runs, graded
from andrea_course import pieces

B, T, H, K = 2, 5, 3, 4
D = H * K


def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


@graded("multihead.split_heads", points=2)
def test_split_heads(student):
    x = _randn(B, T, D, seed=1)
    got = student.piece("multihead", "split_heads")(x, H)
    expect_close(got, x.view(B, T, H, K).transpose(1, 2), "split_heads(x of shape (2, 5, 12), n_heads=3)",
                 mistakes={"reshaped straight to (B, H, T, K), which mixes positions and heads: "
                           "view as (B, T, H, K) first, then transpose(1, 2)": x.reshape(B, H, T, K),
                           "features split as (K, H) instead of (H, K): head h owns features h·K .. (h+1)·K - 1":
                           x.view(B, T, K, H).permute(0, 3, 1, 2)})


@graded("multihead.merge_heads", points=2)
def test_merge_heads(student):
    y = _randn(B, H, T, K, seed=2)
    got = student.piece("multihead", "merge_heads")(y)
    expect_close(got, y.transpose(1, 2).reshape(B, T, D), "merge_heads(y of shape (2, 3, 5, 4))",
                 mistakes={"reshaped straight to (B, T, H·K), which mixes positions and heads: "
                           "transpose(1, 2) back to (B, T, H, K) first": y.reshape(B, T, D)})


def _mha_case(cfg, seed=4):
    ref = pieces.module("multihead").MultiHeadAttention(cfg).double()
    with torch.no_grad():
        for i, p in enumerate(ref.parameters()):
            p.copy_(_randn(*p.shape, seed=seed + i, scale=0.4))
    x = _randn(B, T, cfg.d_model, seed=seed - 1)
    return ref, x


def _mha_outputs(ref, x, cfg):
    """The right output and the outputs of the typical mistakes, from torch's own attention."""
    Hq, G, Kh = cfg.n_heads, cfg.kv_heads, cfg.d_head
    with torch.no_grad():
        q, k, v = ref.qkv(x).split([Hq * Kh, G * Kh, G * Kh], dim=-1)
        heads = lambda t, n: t.view(B, T, n, Kh).transpose(1, 2)               # (B, n, T, K)
        mixed = lambda t, n: t.reshape(B, n, T, Kh)                             # the wrong split
        rep = lambda t, how: t.repeat_interleave(Hq // G, 1) if how == "interleave" else t.repeat(1, Hq // G, 1, 1)
        sdpa = lambda q_, k_, v_, causal=True: F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)
        merge = lambda y: y.transpose(1, 2).reshape(B, T, Hq * Kh)

        y = merge(sdpa(heads(q, Hq), rep(heads(k, G), "interleave"), rep(heads(v, G), "interleave")))
        want = ref.proj(y)
        mistakes = {
            "W_O forgotten: the concatenated heads go through self.proj": y,
            "split with a reshape straight to (B, H, T, K), which mixes positions and heads: "
            "view as (B, T, H, K), then transpose(1, 2)":
                ref.proj(merge(sdpa(mixed(q, Hq), rep(mixed(k, G), "interleave"), rep(mixed(v, G), "interleave")))),
            "split and merged with reshapes that mix positions and heads: view as (B, T, H, K), then transpose":
                ref.proj(sdpa(mixed(q, Hq), rep(mixed(k, G), "interleave"),
                              rep(mixed(v, G), "interleave")).reshape(B, T, Hq * Kh)),
            "no causal mask: self.attention(q, k, v) is causal attention":
                ref.proj(merge(sdpa(heads(q, Hq), rep(heads(k, G), "interleave"), rep(heads(v, G), "interleave"),
                                    causal=False))),
        }
        if G != Hq:
            mistakes["key/value heads tiled (repeat) instead of interleaved: query head h uses kv head "
                     "h // (H/G); use repeat_kv"] = ref.proj(merge(sdpa(heads(q, Hq), rep(heads(k, G), "tile"),
                                                                         rep(heads(v, G), "tile"))))
    return want, mistakes


def _check_mha(student, cfg, what):
    ref, x = _mha_case(cfg)
    want, mistakes = _mha_outputs(ref, x, cfg)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.double()
    m.load_state_dict(ref.state_dict())
    expect_close(m(x), want, what, mistakes=mistakes,
                 hint="MultiHeadAttention runs your split_heads, merge_heads and attention (activity 5): "
                      "if one of their tests fails, fix that one first")


CFG = ModelConfig(vocab_size=16, context_length=8, d_model=D, n_layers=1, n_heads=H, d_ff=4 * D)


@graded("multihead.MultiHeadAttention", points=3)
def test_multihead_attention(student):
    _check_mha(student, CFG, "MultiHeadAttention(D=12, H=3)(x)")


SKIPPED = ("the cache and shared heads skipped: call k, v = self.cache_and_share(k, v, cache) between "
           "split_heads and attention, with the cache forward was given; it appends k and v to the cache and "
           "gives each of the H query heads its key/value head")


def _skipping_the_call(ref, x):
    """The mistake: H query heads attend to k and v as split, without self.cache_and_share."""
    Hq, G, Kh = ref.n_heads, ref.n_kv_heads, ref.d_head
    q, k, v = ref.qkv(x).split([Hq * Kh, G * Kh, G * Kh], dim=-1)
    heads = lambda t, n: t.view(x.shape[0], x.shape[1], n, Kh).transpose(1, 2)     # (B, n, T, K)
    return ref.attention(heads(q, Hq), heads(k, G), heads(v, G))


def check_with_cache(student, cfg, what):
    """The sequence fed in two parts through a KV cache (3 positions, then 2) gives, for the last
    2 positions, what one pass over all 5 gives. Shared with the modern block's grouped heads."""
    ref, x = _mha_case(cfg, seed=30)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.double()
    m.load_state_dict(ref.state_dict())
    cache = student.piece("multihead", "KVCache")(B, cfg.kv_heads, T, cfg.d_head, torch.float64, "cpu")
    with torch.no_grad():
        want = ref(x)[:, 3:]
        fresh = ref(x[:, 3:])                    # the 2 new positions as if nothing came before
        try:
            expect_runs(lambda: m(x[:, :3], cache), what, mistakes={SKIPPED: lambda: _skipping_the_call(ref, x[:, :3])},
                        hint="split the keys and values into G heads, then hand them to self.cache_and_share")
            got = m(x[:, 3:], cache)
        except ValueError as exc:
            if "KV cache made for" not in str(exc):
                raise
            raise Mismatch(what, f"the cache refused what it was given: {exc}",
                           "the cache holds the G key/value heads as they come out of the projection",
                           mistake="repeat_kv before the cache: cache.update(k, v) first (G heads), "
                                   "then repeat what it returns to H heads") from None
    expect_close(got, want, what, hint="the cache appends the new keys and values and returns them with every "
                 "earlier one: attend to everything it returns", mistakes={SKIPPED: fresh})


@graded("multihead.MultiHeadAttention", points=2, taught="model")
def test_multihead_attention_with_a_kv_cache(student):
    check_with_cache(student, CFG, "MultiHeadAttention(D=12, H=3) fed 3 positions, then 2, through a KV cache")


# ----- grouped key/value heads -----

@graded("multihead.MultiHeadAttention", points=1, taught="modern")
def test_grouped_kv_heads(student):
    """H = 4 query heads, G = 2 key/value heads, no cache: query head h uses key/value head
    h // (H/G). Without self.cache_and_share the attention gets 4 and 2 heads and raises: the
    mistake is named here, in multi-head attention, not in attention()."""
    cfg = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=32)
    ref, x = _mha_case(cfg, seed=50)
    want, mistakes = _mha_outputs(ref, x, cfg)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.double()
    m.load_state_dict(ref.state_dict())
    what = "MultiHeadAttention(D=16, H=4, G=2)(x)"
    with torch.no_grad():
        got = expect_runs(lambda: m(x), what, mistakes={SKIPPED: lambda: _skipping_the_call(ref, x)},
                          hint="split the keys and values into G heads, then hand them to self.cache_and_share")
    expect_close(got, want, what, mistakes=mistakes)


# ----- how spread out each head's attention is: head_entropy -----

def _entropy_per_query(w):
    """(B, H, T, S) -> (B, H, T): PyTorch's entr(w) = -w·log w, 0 at w = 0, summed over the keys."""
    return torch.special.entr(w).sum(dim=-1)


def _entropy_mistakes(w):
    """{description: output} of head_entropy's typical mistakes on the weights w (B, H, T, S)."""
    per_query = _entropy_per_query(w)
    plogp = w * w.log()                                                    # NaN where w = 0
    return {
        "NaN from 0·log 0: a masked key has weight exactly 0, log(0) = -inf and 0 · -inf = NaN; "
        "torch.xlogy(w, w) or torch.special.entr(w) take 0·log 0 as 0": -plogp.sum(dim=-1).mean(dim=(0, 2)),
        "summed over the queries (dim=-2) instead of the keys: each query's row over the S keys "
        "(dim=-1) is one distribution": torch.special.entr(w).sum(dim=-2).mean(dim=(0, 2)),
        "averaged over the keys instead of summed: the entropy of a row is the sum of -w·log w "
        "over its keys": torch.special.entr(w).mean(dim=-1).mean(dim=(0, 2)),
        "the sign forgotten: entropy is MINUS the sum of w·log w (each log w <= 0), so it is >= 0":
            -per_query.mean(dim=(0, 2)),
        "log base 2 (bits) instead of the natural log (nats): use torch.log, not torch.log2":
            per_query.mean(dim=(0, 2)) / math.log(2),
        "averaged over the heads too: keep one number per head, the mean over batch (dim 0) and "
        "queries (dim 2) only": per_query.mean(),
    }


def _causal_weights(Bw, Hw, T_, S_, seed, dtype):
    """Softmax weights (Bw, Hw, T_, S_) of random scores, query t at position S_ - T_ + t (a
    cache holds the first S_ - T_), the future at weight exactly 0; head h's scores scaled by
    4^h / 4 so the heads range from spread out to sharp."""
    scores = _randn(Bw, Hw, T_, S_, seed=seed) * (4.0 ** torch.arange(Hw, dtype=torch.float64) / 4)[:, None, None]
    future = torch.ones(T_, S_, dtype=torch.bool).triu(S_ - T_ + 1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1).to(dtype)


@graded("multihead.head_entropy", points=2)
def test_head_entropy(student):
    head_entropy = student.piece("multihead", "head_entropy")
    for (Bw, Hw, T_, S_), dtype in (((2, 4, 6, 6), torch.float64), ((3, 3, 2, 5), torch.float32)):
        w = _causal_weights(Bw, Hw, T_, S_, seed=60 + S_, dtype=dtype)
        expect_close(head_entropy(w), _entropy_per_query(w).mean(dim=(0, 2)),
                     f"head_entropy(weights of shape {(Bw, Hw, T_, S_)}, {str(dtype)[6:]}, the future at weight 0)",
                     hint="-sum over the keys (dim=-1) of w·log w, 0·log 0 = 0, then the mean over batch and queries",
                     mistakes=_entropy_mistakes(w))


@graded("multihead.head_entropy", points=1)
def test_head_entropy_of_a_sharp_and_an_even_head(student):
    """Two heads on T = 8 positions: head 0 puts all its weight on the first key (entropy 0 in
    every row), head 1 spreads it evenly over the past (log(i + 1) in row i, mean log(8!)/8)."""
    T_ = 8
    sharp = torch.zeros(T_, T_, dtype=torch.float64)
    sharp[:, 0] = 1.0
    even = torch.ones(T_, T_, dtype=torch.float64).tril()
    even = even / even.sum(dim=-1, keepdim=True)
    w = torch.stack([sharp, even])[None]                                  # (1, 2, T, T)
    want = torch.tensor([0.0, math.lgamma(T_ + 1) / T_], dtype=torch.float64)
    expect_close(student.piece("multihead", "head_entropy")(w), want,
                 "head_entropy of [all weight on key 0, an even spread over the past] at T = 8",
                 hint="a head sure of one key has entropy 0; an even spread over i + 1 keys has log(i + 1)",
                 mistakes=_entropy_mistakes(w))
