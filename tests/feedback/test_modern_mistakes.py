"""Mutation tests of the modern block's graded tests (andrea_course/activity_tests/test_modern.py): each
typical mistake, written as a small wrong implementation, must fail its graded test with a
Mismatch that names it."""
import pytest
import torch
import torch.nn.functional as F

from andrea_course import pieces
from andrea_course.activity_tests import test_modern as graded

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


def _rope_attention(turn_v=False, offset=True, after=False, turn_cache=False, turn_q=True):
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


MUTANTS = [   # (graded test, (activity, piece), the typical mistake, words its failure must name)
    (graded.test_rope_frequencies, ("modern", "rope_frequencies"), _freqs(exponent=1.0), "exponent i/K"),
    (graded.test_rope_frequencies, ("modern", "rope_frequencies"), _freqs(swap=True), "cos table holds the sines"),
    (graded.test_apply_rope_turns_each_pair_of_features, ("modern", "apply_rope"), _rope_neighbours,
     "paired neighbouring features"),
    (graded.test_apply_rope_turns_each_pair_of_features, ("modern", "apply_rope"),
     lambda x, cos, sin, start=0: _mod.apply_rope(x, cos, -sin, start), "turned the wrong way"),
    (graded.test_apply_rope_after_cached_positions, ("modern", "apply_rope"),
     lambda x, cos, sin, start=0: _mod.apply_rope(x, cos, sin, 0), "`start` ignored"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention(turn_v=True),
     "turned v as well"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention(offset=False),
     "not offset by the cache"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"), _rope_attention(after=True),
     "after the scores"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"),
     _rope_attention(turn_cache=True), "turned the cached keys again"),
    (graded.test_rope_attention_with_and_without_a_cache, ("modern", "rope_attention"),
     _rope_attention(turn_q=False), "turned only k"),
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

    for test, key, mutant, words in MUTANTS:
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
