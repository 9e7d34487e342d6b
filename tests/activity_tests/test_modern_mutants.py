"""Mutation tests of andrea_course/activity_tests/test_modern.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
GAPS: mistakes that once went unnamed (issue 15), the same rows.
MODERN_MUTANTS: (graded test, (activity, piece), mutant, words): one test goes through them all;
RMS_MUTANTS: an rms_norm mistake fails only the graded tests of what it gets wrong.
The tests over MUTANTS and GAPS are written once, in mutant_checks.py (README.md)."""
import math

import pytest
import torch
import torch.nn.functional as F

from andrea_course import pieces
from andrea_course.activity_tests import test_modern as graded

from mutant_checks import the_graded_test_names_the_mistake, the_gaps_are_named
from test_multihead_mutants import MHASharingBeforeTheSplit, MHASkippingCacheAndShare

mh = pieces.module("multihead")
blk = pieces.module("block")
mdl = pieces.module("model")


# ----- the mutants: what a learner typically writes instead -----

class MHARepeatingBeforeTheCache(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        k, v = mh.repeat_kv(k, H // G), mh.repeat_kv(v, H // G)
        if cache is not None:
            k, v = cache.update(k, v)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class MHAKeysInHHeads(mh.MultiHeadAttention):
    """k and v split into H heads (of width G·K/H), like the queries."""
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, H), mh.split_heads(v, H)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class ModelAlwaysLayerNorm(mdl.ANDREA):
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.ln_f = blk.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


class SwiGLUCallingSiluItself(pieces.module("modern").SwiGLU):
    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


def _rope_reflected(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c + x2 * s, x1 * s - x2 * c], dim=-1)


def _kv_bytes_ignoring_seq_len(cfg, batch=1, seq_len=None, bytes_per_value=2):
    return 2 * cfg.n_layers * batch * cfg.kv_heads * cfg.context_length * cfg.d_head * bytes_per_value


# ----- the twelfth fresh set's mutants -----

def _rms_by_mean_abs(x, weight, eps=1e-5):
    xw = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xw / (xw.abs().mean(dim=-1, keepdim=True) + eps) * weight).to(x.dtype)


def _rms_gamma_after_the_cast(x, weight, eps=1e-5):
    wide = torch.promote_types(x.dtype, torch.float32)
    xw = x.to(wide)
    return (xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rope_frequencies_over_half_k(d_head, T, theta=10000.0):
    inv = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / (d_head // 2))
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def _rope_cos_sin_swapped(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    s, c = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _rope_sliced_start_to_T(x, cos, sin, start=0):
    """apply_rope with the tables cut at row T: cos[start:T]."""
    T, half = x.shape[-2], x.shape[-1] // 2
    x1, x2, c, s = x[..., :half], x[..., half:], cos[start:T], sin[start:T]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _rope_written_interleaved(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2).to(x.dtype)


def _rope_attention(q_from_zero=False, cat_dim=-2, new_only=False):
    def rope_attention(q, k, v, cos, sin, past_k, past_v):
        from andrea_course.engine import ops
        rope, start = pieces.get("modern", "apply_rope"), past_k.shape[-2]
        q, k = rope(q, cos, sin, 0 if q_from_zero else start), rope(k, cos, sin, start)
        k_all, v_all = torch.cat([past_k, k], dim=cat_dim), torch.cat([past_v, v], dim=cat_dim)
        return ops.attention(q, *((k, v) if new_only else (k_all, v_all))), k_all, v_all
    return rope_attention


def _rope_attention_turning_all_keys(q, k, v, cos, sin, past_k, past_v):
    """Every key turned inside the attention call, the cache's again; the new keys kept unturned."""
    from andrea_course.engine import ops
    rope, start = pieces.get("modern", "apply_rope"), past_k.shape[-2]
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
    return ops.attention(rope(q, cos, sin, start), rope(k_all, cos, sin, 0), v_all), k_all, v_all


def _rope_attention_from_the_batch(q, k, v, cos, sin, past_k, past_v):
    from andrea_course.engine import ops
    rope, start = pieces.get("modern", "apply_rope"), past_k.shape[0]
    q, k = rope(q, cos, sin, start), rope(k, cos, sin, start)
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
    return ops.attention(q, k_all, v_all), k_all, v_all


# ----- the twentieth fresh set's mutants -----

def _rope_frequencies_by_linspace(d_head, T, theta=10000.0):
    inv_freq = theta ** (-torch.linspace(0, d_head, d_head // 2) / d_head)
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


# ----- the sixteenth fresh set's mutants -----

def _rms_one_plus_gamma(x, weight, eps=1e-5):
    wide = torch.promote_types(x.dtype, torch.float32)
    y = x.to(wide) * torch.rsqrt(x.to(wide).pow(2).mean(-1, keepdim=True) + eps)
    return (y * (1 + weight.to(wide))).to(x.dtype)


def _rope_frequencies_doubled(spread):
    def rope_frequencies(d_head, T, theta=10000.0):
        inv = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
        angles = spread(torch.outer(torch.arange(T, dtype=torch.float32), inv))
        return angles.cos(), angles.sin()
    return rope_frequencies


def _rope_frequencies_kept_by_width():
    """rope_frequencies whose tables are kept per d_head: a later T or theta gets the first tables."""
    kept = {}

    def rope_frequencies(d_head, T, theta=10000.0):
        if d_head not in kept:
            kept[d_head] = pieces.get("modern", "rope_frequencies")(d_head, T, theta)
        return kept[d_head]
    return rope_frequencies


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_modern.py", "test_rope_frequencies_keeps_nothing_between_calls",
     {("modern", "rope_frequencies"): _rope_frequencies_kept_by_width()}, "an answer kept from an earlier call"),
    # issue 13's eight mistakes that once got full marks
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHARepeatingBeforeTheCache}, "repeat_kv before the cache"),
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHAKeysInHHeads}, "split into H heads (of width G·K/H)"),
    ("test_modern.py", "test_the_modern_model_ends_on_its_own_norm", {("model", "ANDREA"): ModelAlwaysLayerNorm},
     "always a LayerNorm"),
    ("test_modern.py", "test_kv_cache_bytes_for_every_G", {("modern", "kv_cache_bytes"): _kv_bytes_ignoring_seq_len},
     "seq_len ignored"),
    # issue 15, notebook 03: the cache and grouped heads in one given call; head_entropy
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare}, "not what cache_and_share returns"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_modern.py", "test_swiglu_module_calls_its_swiglu_slot", {("modern", "SwiGLU"): SwiGLUCallingSiluItself},
     "self.swiglu never called"),
    # the twelfth fresh set's classes
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASharingBeforeTheSplit}, "called before split_heads"),
    ("test_modern.py", "test_rmsnorm_produces_unit_rms", {("modern", "rms_norm"): _rms_by_mean_abs},
     "the mean absolute value"),
    ("test_modern.py", "test_rmsnorm_eps_inside_the_sqrt", {("modern", "rms_norm"): _rms_by_mean_abs},
     "the mean absolute value"),
    ("test_modern.py", "test_rmsnorm_computes_in_fp32", {("modern", "rms_norm"): _rms_gamma_after_the_cast},
     "gamma multiplied after the cast back"),
    ("test_modern.py", "test_swiglu_ffn_dim_is_8D_over_3",
     {("modern", "swiglu_hidden_dim"): lambda d, multiple_of=256: -(-8 * d / 3 // multiple_of) * multiple_of},
     "the right width as a float"),
    ("test_modern.py", "test_swiglu_matches_reference", {("modern", "swiglu"): lambda gate, up: F.silu(gate) + up},
     "added instead of multiplied, Swish(gate) + up"),
    ("test_modern.py", "test_kv_cache_bytes_for_every_G",
     {("modern", "kv_cache_bytes"): lambda cfg, batch=1, seq_len=None, bytes_per_value=2:
      2 * cfg.n_layers * batch * cfg.kv_heads * (seq_len or cfg.context_length) * cfg.d_head * 2},
     "bytes_per_value ignored"),
    ("test_modern.py", "test_rope_frequencies", {("modern", "rope_frequencies"): _rope_frequencies_over_half_k},
     "the exponent divided by K/2"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_cos_sin_swapped},
     "the cos and sin tables swapped"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_written_interleaved},
     "wrote the turned pairs interleaved"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(q_from_zero=True)}, "the queries turned from position 0"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(cat_dim=-1)}, "joined along the feature axis"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(new_only=True)}, "attended to the new keys and values alone"),
    # the eleventh fresh set's classes
    ("test_modern.py", "test_swiglu_ffn_dim_is_8D_over_3",
     {("modern", "swiglu_hidden_dim"): lambda d, multiple_of=256: multiple_of * math.ceil(4 * d / 3 / multiple_of)},
     "half of 8D/3"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_reflected},
     "a sign of the turn wrong"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention_from_the_batch}, "past_k.shape[0], the batch size"),
    # the sixteenth fresh set's classes
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention_turning_all_keys}, "k as it came in, not turned"),
    *(("test_modern.py", test, {("modern", "rms_norm"): _rms_one_plus_gamma}, "scaled by (1 + weight)")
      for test in ("test_rmsnorm_produces_unit_rms", "test_rmsnorm_scales_with_gamma", "test_rmsnorm_eps_inside_the_sqrt")),
    ("test_modern.py", "test_rope_frequencies",
     {("modern", "rope_frequencies"): _rope_frequencies_doubled(lambda a: torch.cat([a, a], dim=-1))},
     "the angles duplicated to (T, K)"),
    ("test_modern.py", "test_rope_frequencies",
     {("modern", "rope_frequencies"): _rope_frequencies_doubled(lambda a: a.repeat_interleave(2, dim=-1))},
     "each angle repeated twice"),
    # the nineteenth fresh set's classes
    ("test_modern.py", "test_apply_rope_after_cached_positions", {("modern", "apply_rope"): _rope_sliced_start_to_T},
     "the tables sliced cos[start:T]"),
    # the twentieth fresh set's classes
    ("test_modern.py", "test_rope_frequencies", {("modern", "rope_frequencies"): _rope_frequencies_by_linspace},
     "torch.linspace(0, K, K/2)"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)


# ----- issue 15's gaps: mistakes that were never named -----

GAPS = [
    ("test_modern.py", "test_rmsnorm_keeps_one_statistic_per_token",
     {("modern", "rms_norm"): lambda x, w, eps=1e-5: x * torch.rsqrt(x.pow(2).mean(dim=-1) + eps) * w},
     "keepdim forgotten"),
]


test_the_gaps_are_named = the_gaps_are_named(GAPS)


# ----- the modern block's first mutants, each row its graded test function -----

swiglu_hidden_dim = pieces.module("modern").swiglu_hidden_dim
(_bf16_norm, _centred, _ms, _rms_over, _swish, ref_rms_norm) = (
    graded._bf16_norm, graded._centred, graded._ms, graded._rms_over, graded._swish, graded.ref_rms_norm)


def _fp32(fn):
    """A mutant computed in fp32 and cast back, so that only its own mistake shows."""
    return lambda x, w, eps=1e-5: fn(x.double(), w.double(), eps).to(x.dtype)


_Ref = pieces.module("modern").SwiGLU
_RefBlock = pieces.module("block").Block


class _SwappedSwiGLU(_Ref):
    def forward(self, x):
        return self.w_down(F.silu(self.w_up(x)) * self.w_gate(x))


class _NormalisedStreamBlock(_RefBlock):
    def forward(self, x, cache=None):
        x = self.ln1(x)
        x = x + self.attn(x, cache)
        x = self.ln2(x)
        return x + self.mlp(x)


_mod = pieces.module("modern")


def _freqs(exponent=2.0, swap=False):
    def rope_frequencies(d_head, T, theta=10000.0):
        inv = theta ** (-exponent * torch.arange(d_head // 2, dtype=torch.float32) / d_head)
        a = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        return (a.sin(), a.cos()) if swap else (a.cos(), a.sin())
    return rope_frequencies


def _rope_neighbours(x, cos, sin, start=0):
    T = x.shape[-2]
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)


def _rope_attention_turning(turn_v=False, offset=True, after=False, turn_cache=False, turn_q=True):
    def rope_attention(q, k, v, cos, sin, past_k, past_v):
        start = past_k.shape[-2] if offset else 0
        rope = lambda x: _mod.apply_rope(x, cos, sin, start)
        if after:
            k_all, v_all = torch.cat([past_k, k], -2), torch.cat([past_v, v], -2)
            return rope(F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=_allowed(q, k_all))), k_all, v_all
        k_all = torch.cat([past_k, k], -2)
        k_all = _mod.apply_rope(k_all, cos, sin, 0) if turn_cache else torch.cat([past_k, rope(k)], -2)
        v_all = torch.cat([past_v, rope(v) if turn_v else v], -2)
        q_turned = rope(q) if turn_q else q
        return F.scaled_dot_product_attention(q_turned, k_all, v_all, attn_mask=_allowed(q, k_all)), k_all, v_all
    return rope_attention


def _allowed(q, k):
    T, S = q.shape[-2], k.shape[-2]
    return torch.ones(T, S, dtype=torch.bool).tril(S - T)


MODERN_MUTANTS = [   # (graded test, (activity, piece), the typical mistake, words its failure must name)
    (graded.test_rope_frequencies, ("modern", "rope_frequencies"), _freqs(exponent=1.0), "exponent i/K"),
    (graded.test_rope_frequencies, ("modern", "rope_frequencies"), _freqs(swap=True), "cos table holds the sines"),
    (graded.test_apply_rope_turns_each_pair_of_features, ("modern", "apply_rope"), _rope_neighbours,
     "paired neighbouring features"),
    (graded.test_apply_rope_turns_each_pair_of_features, ("modern", "apply_rope"),
     lambda x, cos, sin, start=0: _mod.apply_rope(x, cos, -sin, start), "turned the wrong way"),
    (graded.test_apply_rope_after_cached_positions, ("modern", "apply_rope"),
     lambda x, cos, sin, start=0: _mod.apply_rope(x, cos, sin, 0), "`start` ignored"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention_turning(turn_v=True),
     "turned v as well"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention_turning(offset=False),
     "not offset by the cache"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention_turning(after=True),
     "after the scores"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"),
     _rope_attention_turning(turn_cache=True), "turned the cached keys again"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"),
     _rope_attention_turning(turn_q=False), "turned only k"),
    (graded.test_rmsnorm_does_not_center, ("modern", "rms_norm"), _fp32(_centred), "subtracted the mean"),
    (graded.test_rmsnorm_produces_unit_rms, ("modern", "rms_norm"), _fp32(lambda x, w, eps: _rms_over(x, w, eps, dim=-2)),
     "wrong axis"),
    (graded.test_rmsnorm_produces_unit_rms, ("modern", "rms_norm"),
     _fp32(lambda x, w, eps: x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w), "sqrt(sum(x²))"),
    (graded.test_rmsnorm_scales_with_gamma, ("modern", "rms_norm"),
     _fp32(lambda x, w, eps: _rms_over(x, torch.ones_like(w), eps)), "forgot gamma"),
    (graded.test_rmsnorm_eps_inside_the_sqrt, ("modern", "rms_norm"),
     _fp32(lambda x, w, eps: x / (_ms(x).sqrt() + eps) * w), "eps outside"),
    (graded.test_rmsnorm_computes_in_fp32, ("modern", "rms_norm"), _bf16_norm, "computed in bf16"),
    (graded.test_rmsnorm_computes_in_fp32, ("modern", "rms_norm"),
     lambda x, w, eps=1e-5: ref_rms_norm(x.float(), w.float(), eps), "returned fp32"),
    (graded.test_swiglu_worked_example, ("modern", "swiglu"), lambda gate, up: _swish(up) * gate, "Swish applied to the value"),
    (graded.test_swiglu_matches_reference, ("modern", "swiglu"), lambda gate, up: torch.sigmoid(gate) * up, "sigmoid instead"),
    (graded.test_swiglu_module_matches_reference, ("modern", "SwiGLU"), _SwappedSwiGLU, "w_gate and w_up swapped"),
    (graded.test_rmsnorm_block_adds_to_the_raw_stream, ("block", "Block"), _NormalisedStreamBlock, "normalised x"),
]


def test_every_typical_mistake_is_caught_and_named():
    from andrea_course.grading import Mismatch
    from andrea_course.grading.student import InProcessStudent

    for test, key, mutant, words in MODERN_MUTANTS:
        student = InProcessStudent("solutions", overrides={key: mutant})
        try:
            test(student)
        except Mismatch as exc:
            assert words in str(exc.mistake), (test.__name__, words, str(exc))
        else:
            raise AssertionError(f"{test.__name__} passes a learner who made the mistake {words!r}")


def test_typical_mistakes_are_caught_and_named():
    from andrea_course.grading import Mismatch
    from andrea_course.grading.student import InProcessStudent

    mutants = [(lambda D, multiple_of=256: 4 * D, "1.5x the parameters"),
               (lambda D, multiple_of=256: multiple_of * (8 * D // 3 // multiple_of), "rounded 8D/3 down"),
               (lambda D, multiple_of=256: float(swiglu_hidden_dim(D, multiple_of)), "must be an int")]
    for mutant, words in mutants:
        with pytest.raises(Mismatch) as caught:
            graded.test_swiglu_ffn_dim_is_8D_over_3(InProcessStudent("solutions", overrides={("modern", "swiglu_hidden_dim"): mutant}))
        assert words in str(caught.value), (words, str(caught.value))


RMS_MUTANTS = {  # a typical rms_norm mistake: the only graded tests it may fail (and the words they name)
    "eps outside the square root": (_fp32(lambda x, w, eps: x / (_ms(x).sqrt() + eps) * w),
                                    {"test_rmsnorm_eps_inside_the_sqrt": "eps outside"}),
    "forgot eps": (_fp32(lambda x, w, eps: x * torch.rsqrt(_ms(x)) * w), {"test_rmsnorm_eps_inside_the_sqrt": "forgot eps"}),
    "centred": (_fp32(_centred), {"test_rmsnorm_does_not_center": "subtracted the mean"}),
    "forgot gamma": (_fp32(lambda x, w, eps: _rms_over(x, torch.ones_like(w), eps)),
                     {"test_rmsnorm_scales_with_gamma": "forgot gamma", "test_rmsnorm_eps_inside_the_sqrt": "forgot gamma"}),
    "computed in bf16": (_bf16_norm, {"test_rmsnorm_computes_in_fp32": "computed in"}),
}


@pytest.mark.parametrize("mutant", list(RMS_MUTANTS))
def test_an_rms_norm_mistake_costs_where_it_is(mutant):
    """One mistake costs in the tests of what it gets wrong: eps outside the square root fails the
    eps test alone, never test_rmsnorm_does_not_center, whose name would say the learner centred."""
    from andrea_course.grading import Mismatch
    from andrea_course.grading.student import InProcessStudent

    fn, expected = RMS_MUTANTS[mutant]
    failed = {}
    for name, test in vars(graded).items():
        if name.startswith("test_rmsnorm"):
            try:
                test(InProcessStudent("solutions", overrides={("modern", "rms_norm"): fn}))
            except Mismatch as exc:
                failed[name] = exc.mistake or ""
    assert set(failed) == set(expected), f"{mutant}: fails {sorted(failed)}, expected {sorted(expected)}"
    for name, words in expected.items():
        assert words in failed[name], (name, failed[name])
