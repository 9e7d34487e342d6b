"""Graded tests, activity 6 · Multi-head attention: split D = H·K into heads, attend in
parallel, concatenate, mix with W_O."""
import copy
import re
import math

import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import Case, Mismatch, Second, expect_cases, expect_close, expect_runs, graded, load_weights
from andrea_course import pieces
from andrea_course.engine import ops
from andrea_course.activity_tests import expect_slot_called, expect_trainable, randn64, layer_mixups

B, T, H, K = 2, 5, 3, 4
D = H * K


def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _split_case(fn, shape, n_heads, strided=False):
    B_, T_, D_ = shape
    K_ = D_ // n_heads
    x = _randn(*shape, seed=1 + n_heads)
    if strided:                                         # a float32 slice of a wider (B, T, 3D) projection
        x = torch.cat([x, x, x], dim=-1).float()[..., D_:2 * D_]
    return Case(f"split_heads(x of shape {shape}{', a float32 slice' if strided else ''}, n_heads={n_heads})",
                lambda: fn(x, n_heads),
                x.view(B_, T_, n_heads, K_).transpose(1, 2),
                {"reshaped straight to (B, H, T, K), which mixes positions and heads: view as (B, T, H, K) first, "
                 "then transpose(1, 2)": x.reshape(B_, n_heads, T_, K_),
                 "features split as (K, H) instead of (H, K): head h owns features h·K .. (h+1)·K - 1":
                     x.view(B_, T_, K_, n_heads).permute(0, 3, 1, 2),
                 "the features viewed as (K, H), K pieces of width H, instead of (H, K), H pieces of width K: "
                 "view(B, T, K, H), or x.split(n_heads, dim=-1), whose argument is the size of each piece, not their "
                 "number (chunk(n_heads) would cut n_heads pieces); the result is (B, K, T, H); head h owns features "
                 "h·K .. (h+1)·K - 1, so view(B, T, H, K) and then transpose(1, 2)":
                     x.view(B_, T_, K_, n_heads).transpose(1, 2),
                 SLICES_OF_WIDTH_H: torch.stack([x[..., h * n_heads:(h + 1) * n_heads] for h in range(n_heads)], dim=1)
                 if n_heads != K_ and n_heads * n_heads <= D_ else None})


SLICES_OF_WIDTH_H = ("each head cut as a slice of width H, the number of heads (x[..., h·H:(h+1)·H]), instead of K = "
                     "D // H, the head width: head h owns features h·K .. (h+1)·K - 1")


@graded("multihead.split_heads", points=2)
def test_split_heads(student):
    fn = student.piece("multihead", "split_heads")
    expect_cases(_split_case(fn, (B, T, D), H), _split_case(fn, (3, 4, 8), 2), _split_case(fn, (2, 3, 12), 4, strided=True))
    expect_trainable(fn, (randn64(B, T, D, seed=83), H), f"split_heads(x of shape {(B, T, D)}, {H})")


UNPACKED_AS_BTHK = ("y.shape unpacked as B, T, H, K = y.shape, but y is (B, H, T, K): T and H swap names, so the "
                    "reshape asks for (B, H, T·K); unpack B, H, T, K = y.shape, then transpose(1, 2) and reshape "
                    "to (B, T, H·K)")
HEADS_SUMMED = ("the heads' outputs added up (a sum over the head axis) instead of concatenated: (B, T, K) instead of "
                "(B, T, H·K); the heads sit side by side, y.transpose(1, 2).reshape(B, T, H·K)")


def _merge_case(fn, shape, dtype=torch.float64, strided=False):
    B_, H_, T_, K_ = shape
    y = _randn(*shape, seed=2 + H_).to(dtype)
    if strided:                                         # attention's output as a transposed view
        y = y.transpose(-2, -1).contiguous().transpose(-2, -1)
    return Case(f"merge_heads(y of shape {shape}, {str(dtype)[6:]}{', strided' if strided else ''})", lambda: fn(y),
                y.transpose(1, 2).reshape(B_, T_, H_ * K_),
                {"reshaped straight to (B, T, H·K), which mixes positions and heads: transpose(1, 2) back to "
                 "(B, T, H, K) first": y.reshape(B_, T_, H_ * K_),
                 "transpose(2, 3) swaps the positions with the width K: the heads must go back behind the positions, "
                 "transpose(1, 2), before the reshape to (B, T, H·K)": y.transpose(2, 3).reshape(B_, T_, H_ * K_),
                 "the head axis moved last, (B, T, K, H), before merging: the heads' features come out interleaved "
                 "(feature 0 of every head, then feature 1, ...); each head's K features must stay side by side, "
                 "so merge from (B, T, H, K), y.transpose(1, 2)": y.permute(0, 2, 3, 1).reshape(B_, T_, H_ * K_),
                 UNPACKED_AS_BTHK: y.transpose(1, 2).reshape(B_, H_, T_ * K_) if H_ != T_ else None,
                 HEADS_SUMMED: y.sum(dim=1),
                 HEADS_ALONG_POSITIONS: y.reshape(B_, H_ * T_, K_)})


HEADS_ALONG_POSITIONS = ("the heads joined along the positions, torch.cat(heads, dim=1) on (B, T, K) pieces, "
                         "giving (B, H·T, K): they sit side by side along the features, torch.cat(heads, dim=-1), "
                         "(B, T, H·K)")


@graded("multihead.merge_heads", points=2)
def test_merge_heads(student):
    fn = student.piece("multihead", "merge_heads")
    expect_cases(_merge_case(fn, (B, H, T, K)), _merge_case(fn, (1, 2, 3, 5)),
                 _merge_case(fn, (2, 2, 4, 3), torch.float32, strided=True),
                 hint="transpose(1, 2) back to (B, T, H, K), then merge the last two axes: after a transpose the "
                      "memory is not in that order, so use .reshape (or .contiguous().view)")
    expect_trainable(fn, (randn64(B, H, T, K, seed=82),), f"merge_heads(x of shape {(B, H, T, K)})")


def _mha_case(cfg, seed=4, T_=T):
    ref = pieces.module("multihead").MultiHeadAttention(cfg).double()
    with torch.no_grad():
        for i, p in enumerate(ref.parameters()):
            p.copy_(_randn(*p.shape, seed=seed + i, scale=0.4))
    x = _randn(B, T_, cfg.d_model, seed=seed - 1)
    return ref, x


def _mha_outputs(ref, x, cfg):
    """The right output and the outputs of the typical mistakes, from torch's own attention."""
    Hq, G, Kh = cfg.n_heads, cfg.kv_heads, cfg.d_head
    B_, T_ = x.shape[:2]
    with torch.no_grad():
        q, k, v = ref.qkv(x).split([Hq * Kh, G * Kh, G * Kh], dim=-1)
        heads = lambda t, n: t.view(B_, T_, n, Kh).transpose(1, 2)             # (B, n, T, K)
        mixed = lambda t, n: t.reshape(B_, n, T_, Kh)                           # the wrong split
        rep = lambda t, how: t.repeat_interleave(Hq // G, 1) if how == "interleave" else t.repeat(1, Hq // G, 1, 1)
        sdpa = lambda q_, k_, v_, causal=True: F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)
        merge = lambda y: y.transpose(1, 2).reshape(B_, T_, Hq * Kh)

        y = merge(sdpa(heads(q, Hq), rep(heads(k, G), "interleave"), rep(heads(v, G), "interleave")))
        want = ref.proj(y)
        mistakes = {
            "W_O forgotten: the concatenated heads go through self.proj": y,
            "split with a reshape straight to (B, H, T, K), which mixes positions and heads: "
            "view as (B, T, H, K), then transpose(1, 2)":
                ref.proj(merge(sdpa(mixed(q, Hq), rep(mixed(k, G), "interleave"), rep(mixed(v, G), "interleave")))),
            "split and merged with reshapes that mix positions and heads: view as (B, T, H, K), then transpose":
                ref.proj(sdpa(mixed(q, Hq), rep(mixed(k, G), "interleave"),
                              rep(mixed(v, G), "interleave")).reshape(B_, T_, Hq * Kh)),
            RESIDUAL_INSIDE: want + x,
            "no causal mask: self.attention(q, k, v) is causal attention":
                ref.proj(merge(sdpa(heads(q, Hq), rep(heads(k, G), "interleave"), rep(heads(v, G), "interleave"),
                                    causal=False))),
        }
        if G == Hq:                          # the three parts alike: any of them unpacked into any role
            mistakes.update(layer_mixups(
                {"q": q, "k": k, "v": v}, {"q": "q", "k": "k", "v": "v"},
                lambda q_, k_, v_: ref.proj(merge(sdpa(heads(q_, Hq), heads(k_, Hq), heads(v_, Hq)))),
                {("k", "q", "v"): "q and k swapped: the projection gives q first, then k, then v, split at "
                                  "[H·K, G·K, G·K]"},
                source=lambda part: f"the {'first second third'.split()['qkv'.index(part)]} part of the split",
                why_unused="",
                fix="the projection gives q first, then k, then v: q, k, v = self.qkv(x).split([H·K, G·K, G·K], -1)"))
            per_head = ref.qkv(x).view(B_, T_, Hq, 3 * Kh).transpose(1, 2).split(Kh, dim=-1)   # (B, H, T, K) x3
            mistakes[PER_HEAD_TRIPLES] = ref.proj(merge(sdpa(*per_head)))
        if G != Hq:
            mistakes["key/value heads tiled (repeat) instead of interleaved: query head h uses kv head "
                     "h // (H/G); use repeat_kv"] = ref.proj(merge(sdpa(heads(q, Hq), rep(heads(k, G), "tile"),
                                                                         rep(heads(v, G), "tile"))))
    return want, mistakes


PER_HEAD_TRIPLES = ("the fused projection read as one [q | k | v] triple per head (Megatron's layout): self.qkv "
                    "gives all the queries first, then all the keys, then all the values, so split it at "
                    "[H·K, G·K, G·K] before splitting each part into heads")
RESIDUAL_INSIDE = ("x added to the output, a residual connection inside the attention: the block adds the residual, "
                   "x + attn(ln1(x)), so here it would count twice; MultiHeadAttention returns self.proj(...) alone")
MHA_HINT = ("split q, k and v into heads with view and transpose, causal attention in every head, merge the "
            "heads back, then W_O (self.proj)")


def _mha_call_case(m, ref, x, cfg, what, cache=False):
    want, mistakes = _mha_outputs(ref, x, cfg)
    call = (lambda: m(x, None)) if cache else (lambda: m(x))
    return Case(f"{what}(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]}{', cache=None' if cache else ''})", call,
                want, mistakes)


def _check_mha(student, cfg, what):
    ref, x = _mha_case(cfg)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.double()
    load_weights(m, ref.state_dict(), what)
    x2 = _randn(3, T - 2, cfg.d_model, seed=40)
    expect_cases(_mha_call_case(m, ref, x, cfg, what), _mha_call_case(m, ref, x2, cfg, what), hint=MHA_HINT)
    m.float()                                            # float32, the cache given as None: as the block calls it
    ref32 = copy.deepcopy(ref).float()
    expect_cases(_mha_call_case(m, ref32, x.float(), cfg, what, cache=True),
                 _mha_call_case(m, ref32, x2.float(), cfg, what, cache=True), hint=MHA_HINT)


CFG = ModelConfig(vocab_size=16, context_length=8, d_model=D, n_layers=1, n_heads=H, d_ff=4 * D)


@graded("multihead.MultiHeadAttention", points=3)
def test_multihead_attention(student):
    _check_mha(student, CFG, "MultiHeadAttention(D=12, H=3)")


@graded("multihead.MultiHeadAttention", points=1)
def test_multihead_attention_calls_its_attention_slot(student):
    """self.attention is a slot: the package puts its fused attention (or the learner's, written
    step by step) there; forward's heads attend through it."""
    m = student.piece("multihead", "MultiHeadAttention")(CFG)
    x = _randn(B, T, D, seed=50).float()
    expect_slot_called(student, "multihead", "MultiHeadAttention", "attention", "its attention", lambda: m(x))


NO_MASK_WITH_CACHE = ("no causal mask when a cache is given: with one new token that is harmless, but several new "
                      "positions at once (a prompt after cached tokens) then see each other's future; mask always, "
                      "with the cache's positions counted in")
SKIPPED = ("attention got only the new keys and values, not what cache_and_share returns (the call skipped, given "
           "None instead of forward's cache, or its result not assigned back to k, v): write "
           "k, v = self.cache_and_share(k, v, cache) between "
           "split_heads and attention, with the cache forward was given; it appends k and v to the cache and "
           "gives each of the H query heads its key/value head")


SKIPPED_OR_FLAT = ("attention got k and v with G heads, not what cache_and_share returns for the H query heads: the "
                   "call skipped (or its result not assigned back to k, v), or made before split_heads, on the flat "
                   "(B, T, G·K) tensors, where its repeat of each key/value head runs along the positions instead; "
                   "write k, v = self.cache_and_share(k, v, cache) between split_heads and attention: it gives each "
                   "of the H query heads its key/value head")
BEFORE_SPLIT = ("self.cache_and_share called before split_heads, on the flat (B, T, G·K) keys and values: the cache "
                "holds heads, (B, G, T, K), so it cannot take them (and with G < H the repeat of the key/value heads "
                "would run along the positions); split first, then k, v = self.cache_and_share(k, v, cache)")


def _sharing_before_the_split(ref, x, cache):
    """The mistake: cache_and_share given k and v as the projection cuts them, (B, T, G·K), before split_heads."""
    Hq, G, Kh = ref.n_heads, ref.n_kv_heads, ref.d_head
    q, k, v = ref.qkv(x).split([Hq * Kh, G * Kh, G * Kh], dim=-1)
    return ref.cache_and_share(k, v, cache)


def _skipping_the_call(ref, x):
    """The mistake: H query heads attend to k and v as split, without self.cache_and_share."""
    Hq, G, Kh = ref.n_heads, ref.n_kv_heads, ref.d_head
    q, k, v = ref.qkv(x).split([Hq * Kh, G * Kh, G * Kh], dim=-1)
    heads = lambda t, n: t.view(x.shape[0], x.shape[1], n, Kh).transpose(1, 2)     # (B, n, T, K)
    return ref.attention(heads(q, Hq), heads(k, G), heads(v, G))


CHUNKED = ("the projection cut into three equal parts (chunk(3)): with G < H key/value heads the queries take "
           "H·K features and the keys and values G·K each; split at those sizes, "
           ".split([H * K, G * K, G * K], dim=-1)")


def _chunking(ref, x):
    """The mistake: qkv's output cut into three equal parts, each split into heads by the engine's split_heads,
    which the learner's module calls when it is graded on its own (G < H: it raises)."""
    Hq, G = ref.n_heads, ref.n_kv_heads
    split = pieces.module("multihead").split_heads
    q, k, v = ref.qkv(x).chunk(3, dim=-1)
    q, k, v = split(q, Hq), split(k, G), split(v, G)
    k, v = ref.cache_and_share(k, v, None)
    return ref.attention(q, k, v)


Q_IN_G_HEADS = ("the queries split into G heads, as the keys and values are: the queries keep all H heads, "
                "split_heads(q, H); only the keys and values have G, which self.cache_and_share repeats to H")


def _queries_in_g_heads(ref, x):
    """The mistake: the queries split into G heads, like the keys and values (G < H: it raises)."""
    G, Kh = ref.n_kv_heads, ref.d_head
    q, k, v = ref.qkv(x).split([ref.n_heads * Kh, G * Kh, G * Kh], dim=-1)
    q = q.view(x.shape[0], x.shape[1], G, -1).transpose(1, 2)                      # (B, G, T, H/G·K)
    heads = lambda t: t.view(x.shape[0], x.shape[1], G, Kh).transpose(1, 2)       # noqa: E731 (B, G, T, K)
    k, v = ref.cache_and_share(heads(k), heads(v), None)
    return ref.attention(q, k, v)


CACHE_HINT = ("the cache appends the new keys and values and returns them with every earlier one: attend to "
              "everything it returns")
REPEATED_FIRST = ("repeat_kv before the cache: cache.update(k, v) first (G heads), then repeat what it returns to "
                  "H heads")


SPLIT_IN_H = ("the keys and values split into H heads (of width G·K/H) like the queries: they come out of the "
              "projection as G = n_kv_heads heads of width K, view them as (B, T, G, K)")


def _refused_by_the_cache(message: str, cfg) -> str | None:
    """The mistake a KV cache's refusal shows, read from the shape of k it was given: G heads
    repeated to H before the cache, or k split into H heads of width G·K/H; else None."""
    found = re.search(r"got k of shape \((\d+), (\d+), (\d+), (\d+)\)", message)
    if found is None or cfg.kv_heads == cfg.n_heads:
        return None
    heads, width = int(found.group(2)), int(found.group(4))
    if heads == cfg.n_heads and width == cfg.d_head:
        return REPEATED_FIRST
    if heads == cfg.n_heads and width * cfg.n_heads == cfg.kv_heads * cfg.d_head:
        return SPLIT_IN_H
    return None


def _two_parts(student, m, ref, x, cfg, first: int):
    """(the learner's module fed x[:, :first] then the rest through a fresh cache: the calls, the
    right output for the rest, and the output if the cache is skipped)."""
    cache = student.piece("multihead", "KVCache")(x.shape[0], cfg.kv_heads, x.shape[1], cfg.d_head, x.dtype,
                                                  torch.device("cpu"))
    unmasked = copy.deepcopy(ref)
    unmasked.attention = lambda q, k, v: ops.attention(q, k, v, causal=False)
    with torch.no_grad():
        want = ref(x)[:, first:]
        fresh = {SKIPPED: ref(x[:, first:]),         # the new positions as if nothing came before
                 NO_MASK_WITH_CACHE: unmasked(x)[:, first:],
                 RESIDUAL_INSIDE: want + x[:, first:]}
    return (lambda: m(x[:, :first], cache)), (lambda: m(x[:, first:], cache)), want, fresh


def check_with_cache(student, cfg, what, dtype=torch.float64):
    """The sequence fed in two parts through a KV cache (3 positions, then 2) gives, for the last
    2 positions, what one pass over all 5 gives. Shared with the modern block's grouped heads."""
    ref, x = _mha_case(cfg, seed=30)
    x2 = _randn(B, T + 1, cfg.d_model, seed=31)
    ref, x, x2 = ref.to(dtype), x.to(dtype), x2.to(dtype)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.to(dtype)
    load_weights(m, ref.state_dict(), what)
    prefill, rest, want, fresh = _two_parts(student, m, ref, x, cfg, 3)
    prefill2, rest2, want2, fresh2 = _two_parts(student, m, ref, x2, cfg, 2)
    KVCache = pieces.module("multihead").KVCache
    cache_for = lambda t: KVCache(t.shape[0], cfg.kv_heads, t.shape[1], cfg.d_head, t.dtype, torch.device("cpu"))
    with torch.no_grad():
        try:
            expect_runs(prefill, what, mistakes={SKIPPED: lambda: _skipping_the_call(ref, x[:, :3]),
                                                 CHUNKED: lambda: _chunking(ref, x[:, :3]),
                                                 BEFORE_SPLIT: lambda: _sharing_before_the_split(ref, x[:, :3],
                                                                                                 cache_for(x))},
                        second=Second(prefill2, None, {SKIPPED: lambda: _skipping_the_call(ref, x2[:, :2]),
                                                       CHUNKED: lambda: _chunking(ref, x2[:, :2]),
                                                       BEFORE_SPLIT: lambda: _sharing_before_the_split(
                                                           ref, x2[:, :2], cache_for(x2))}),
                        hint="split the keys and values into G heads, then hand them to self.cache_and_share")
            got = rest()
        except ValueError as exc:
            if "KV cache made for" not in str(exc):
                raise
            raise Mismatch(what, f"the cache refused what it was given: {exc}",
                           "the cache holds the G key/value heads as they come out of the projection",
                           mistake=_refused_by_the_cache(str(exc), cfg)) from None

        def second():
            prefill2()
            return rest2()
        expect_close(got, want, what, hint=CACHE_HINT, mistakes=fresh, second=Second(second, want2, fresh2))


@graded("multihead.MultiHeadAttention", points=2, taught="model")
def test_multihead_attention_with_a_kv_cache(student):
    check_with_cache(student, CFG, "MultiHeadAttention(D=12, H=3) fed 3 positions, then 2, through a KV cache")
    check_with_cache(student, CFG, "MultiHeadAttention(D=12, H=3) in float32 fed 3 positions, then 2, through a KV cache",
                     torch.float32)


# ----- grouped key/value heads -----

@graded("multihead.MultiHeadAttention", points=1, taught="modern")
def test_grouped_kv_heads(student):
    """H = 4 query heads, G = 2 key/value heads, no cache: query head h uses key/value head
    h // (H/G). Without self.cache_and_share the attention gets 4 and 2 heads and raises: the
    mistake is named here, in multi-head attention, not in attention()."""
    for bias in (True, False):                          # the classic block's biases, and the modern block's none
        _check_grouped(student, ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4,
                                            n_kv_heads=2, d_ff=32, bias=bias))
    # A RoPE model's config builds the same weights (the positions are turned elsewhere).
    rope = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=32,
                       bias=False, position="rope")
    load_weights(student.piece("multihead", "MultiHeadAttention")(rope),
                 pieces.module("multihead").MultiHeadAttention(rope).state_dict(),
                 "MultiHeadAttention(D=16, H=4, G=2, no biases, position='rope')")


def _check_grouped(student, cfg):
    ref, x = _mha_case(cfg, seed=50)
    x2 = _randn(3, T - 1, cfg.d_model, seed=51)
    m = student.piece("multihead", "MultiHeadAttention")(cfg)
    m.double()
    what = f"MultiHeadAttention(D=16, H=4, G=2{'' if cfg.bias else ', no biases'})"
    load_weights(m, ref.state_dict(), what)
    with torch.no_grad():
        # skipping cache_and_share and calling it before split_heads raise the same error here: one text says both
        expect_runs(lambda: m(x), f"{what}(x)", mistakes={SKIPPED_OR_FLAT: lambda: _skipping_the_call(ref, x),
                                                          CHUNKED: lambda: _chunking(ref, x),
                                                          Q_IN_G_HEADS: lambda: _queries_in_g_heads(ref, x)},
                    second=Second(lambda: m(x2), None, {SKIPPED_OR_FLAT: lambda: _skipping_the_call(ref, x2),
                                                        CHUNKED: lambda: _chunking(ref, x2),
                                                        Q_IN_G_HEADS: lambda: _queries_in_g_heads(ref, x2)}),
                    hint="split the keys and values into G heads, then hand them to self.cache_and_share")
        expect_cases(_mha_call_case(m, ref, x, cfg, what), _mha_call_case(m, ref, x2, cfg, what), hint=MHA_HINT)


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
        "(dim=-1) is one distribution": torch.special.entr(w).sum(dim=-2).mean(dim=(0, 2))
        if w.shape[-2] != w.shape[-1] else None,          # T = S: the same number, no mistake there
        "averaged over the keys instead of summed: the entropy of a row is the sum of -w·log w "
        "over its keys": torch.special.entr(w).mean(dim=-1).mean(dim=(0, 2)),
        "the sign forgotten: entropy is MINUS the sum of w·log w (each log w <= 0), so it is >= 0":
            -per_query.mean(dim=(0, 2)),
        "log base 2 (bits) instead of the natural log (nats): use torch.log, not torch.log2":
            per_query.mean(dim=(0, 2)) / math.log(2),
        "averaged over the heads too: keep one number per head, the mean over batch (dim 0) and "
        "queries (dim 2) only": per_query.mean(),
        "averaged over the batch and the heads (dim=(0, 1)), which keeps one number per query: average over "
        "the batch and the queries, dim=(0, 2), to keep one per head": per_query.mean(dim=(0, 1)),
    }


def _causal_weights(Bw, Hw, T_, S_, seed, dtype):
    """Softmax weights (Bw, Hw, T_, S_) of random scores, query t at position S_ - T_ + t (a
    cache holds the first S_ - T_), the future at weight exactly 0; head h's scores scaled by
    4^h / 4 so the heads range from spread out to sharp."""
    scores = _randn(Bw, Hw, T_, S_, seed=seed) * (4.0 ** torch.arange(Hw, dtype=torch.float64) / 4)[:, None, None]
    future = torch.ones(T_, S_, dtype=torch.bool).triu(S_ - T_ + 1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1).to(dtype)


ENTROPY_HINT = "-sum over the keys (dim=-1) of w·log w, 0·log 0 = 0, then the mean over batch and queries"


def _entropy_case(fn, w, what):
    return Case(what, lambda: fn(w), _entropy_per_query(w).mean(dim=(0, 2)), _entropy_mistakes(w))


@graded("multihead.head_entropy", points=2)
def test_head_entropy(student):
    head_entropy = student.piece("multihead", "head_entropy")
    cases = []
    for (Bw, Hw, T_, S_), dtype in (((2, 4, 6, 6), torch.float64), ((3, 3, 2, 5), torch.float32),
                                    ((2, 2, 3, 7), torch.float64)):
        w = _causal_weights(Bw, Hw, T_, S_, seed=60 + S_, dtype=dtype)
        cases.append(_entropy_case(head_entropy, w, f"head_entropy(weights of shape {(Bw, Hw, T_, S_)}, "
                                                    f"{str(dtype)[6:]}, the future at weight 0)"))
    expect_cases(*cases, hint=ENTROPY_HINT)
    expect_trainable(head_entropy, (torch.softmax(randn64(2, 4, 6, 6, seed=66), dim=-1),),
                     "head_entropy(weights of shape (2, 4, 6, 6))")


def _sharp_and_even(T_, sharp_key):
    """(1, 2, T, T): head 0 puts all its weight on one key (entropy 0), head 1 spreads it evenly
    over the past (log(i + 1) in row i)."""
    sharp = torch.zeros(T_, T_, dtype=torch.float64)
    sharp[torch.arange(T_), sharp_key(torch.arange(T_))] = 1.0
    even = torch.ones(T_, T_, dtype=torch.float64).tril()
    return torch.stack([sharp, even / even.sum(dim=-1, keepdim=True)])[None]


@graded("multihead.head_entropy", points=1)
def test_head_entropy_of_a_sharp_and_an_even_head(student):
    """Two heads on T = 8 positions: head 0 puts all its weight on the first key (entropy 0 in
    every row), head 1 spreads it evenly over the past (log(i + 1) in row i, mean log(8!)/8); then
    T = 5 with head 0 on each query's own key."""
    head_entropy = student.piece("multihead", "head_entropy")
    cases = [_entropy_case(head_entropy, _sharp_and_even(T_, key), f"head_entropy of [all weight on {name}, an even "
                                                                   f"spread over the past] at T = {T_}")
             for T_, key, name in ((8, torch.zeros_like, "key 0"), (5, lambda i: i, "the query's own key"))]
    expect_cases(*cases, hint="a head sure of one key has entropy 0; an even spread over i + 1 keys has log(i + 1)")
