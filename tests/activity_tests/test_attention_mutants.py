"""Mutation tests of andrea_course/activity_tests/test_attention.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
GAPS: mistakes that once went unnamed (issue 15), the same rows.
UNKNOWN: wrong pieces no catalogue knows; the failure shows where the values differ.
WRONG: wrong pieces no name fits; each must still fail its graded test.
The tests over each table are written once, in mutant_checks.py (README.md)."""
import math

import numpy as np
import torch

from andrea_course import pieces

from mutant_checks import (the_graded_test_names_the_mistake, the_gaps_are_named,
                           an_unknown_mistake_shows_where_the_values_differ, a_wrong_piece_fails_its_graded_test)

att = pieces.module("attention")
NEG_INF = float("-inf")


# ----- the mutants: what a learner typically writes instead -----

def _masked_with(allowed_fn):
    def attention(q, k, v, causal=True):
        scores = att.scale_scores(att.attention_scores(q, k), q.shape[-1])
        T, S = scores.shape[-2:]
        return att.weighted_sum(att.softmax(scores.masked_fill(~allowed_fn(T, S), NEG_INF)), v)
    return attention


def attention_unscaled(q, k, v, causal=True):
    return att.weighted_sum(att.softmax(att.apply_causal_mask(att.attention_scores(q, k))), v)


def attention_scaled_by_axis_1(q, k, v, causal=True):
    """Scaled by q.size(1), as if q were (B, T, K): the heads' count for (B, H, T, K)."""
    return att.weighted_sum(att.softmax(att.apply_causal_mask(att.scale_scores(att.attention_scores(q, k), q.size(1)))), v)


def attention_mask_after_softmax(q, k, v, causal=True):
    w = att.softmax(att.scale_scores(att.attention_scores(q, k), q.shape[-1]))
    return att.weighted_sum(w * att.causal_mask(*w.shape[-2:]), v)


def attention_softmax_dim0(q, k, v, causal=True):
    scores = att.apply_causal_mask(att.scale_scores(att.attention_scores(q, k), q.shape[-1]))
    return att.weighted_sum(torch.softmax(scores, dim=-2), v)


class HeadWithoutMask(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=False)


def _upper(T, S):
    return torch.ones(T, S, dtype=torch.bool).triu(S - T)


def _strict_lower(T, S):
    return torch.ones(T, S, dtype=torch.bool).tril(S - T - 1)


def _rows(w):
    return w / w.sum(dim=-1, keepdim=True)


def _softmax_of_zeros(fill=NEG_INF, hide=lambda T: torch.ones(T, T, dtype=torch.bool).triu(1), dim=-1):
    return lambda T: torch.softmax(torch.zeros(T, T).masked_fill(hide(T), fill), dim=dim)


# ----- the twelfth fresh set's mutants -----

def _average_past_by_cat(x):
    return torch.cat([x[..., :i + 1, :].mean(dim=-2) for i in range(x.shape[-2])], dim=-2)


def _mask_offset_subtracted(T, S=None, device=None):
    S = T if S is None else S
    return torch.arange(S, device=device)[None, :] <= torch.arange(T, device=device)[:, None] - (S - T)


def _softmax_shifted_by(stat):
    """softmax with each row's `stat` (a function of the scores) subtracted instead of its maximum."""
    def softmax(s):
        e = (s - stat(s)).exp()
        return e / e.sum(dim=-1, keepdim=True)
    return softmax


def _average_past_aliased(x):
    """average_past whose running sum is one tensor changed in place and appended itself: every row
    is the final total over i + 1."""
    total, rows = torch.zeros_like(x[..., 0, :]), []
    for i in range(x.shape[-2]):
        total += x[..., i, :]
        rows.append(total)
    return torch.stack([r / (i + 1) for i, r in enumerate(rows)], dim=-2)


def _softmax_divided_by(divisor):
    """softmax whose exponentials e (the row maximum subtracted) are divided by divisor(z, e)."""
    def softmax(s):
        z = s - s.amax(dim=-1, keepdim=True)
        return z.exp() / divisor(z, z.exp())
    return softmax


def _attention_with(scale=lambda K: K, mix="v"):
    """attention from the engine's steps, scale_scores given scale(K), the weights mixing q, k or v (mix)."""
    def attention(q, k, v, causal=True):
        scores = att.scale_scores(att.attention_scores(q, k), scale(q.shape[-1]))
        if causal:
            scores = att.apply_causal_mask(scores)
        return att.weighted_sum(att.softmax(scores), {"q": q, "k": k, "v": v}[mix])
    return attention


class HeadCausalOnlyInTraining(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=self.training)


class HeadWithRawValues(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), x, causal=True)


# ----- the twentieth fresh set's mutants -----

def _attention_softmax_without_dim(q, k, v, causal=True):
    """attention with F.softmax given no dim: PyTorch's legacy choice, axis 0 or 1, not the keys."""
    T, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=0 if scores.dim() in (0, 1, 3) else 1) @ v


# ----- the twenty-first fresh set's mutants -----

class _HeadWithoutBiases(att.AttentionHead):
    def forward(self, x):
        w = lambda layer: x @ layer.weight.T                     # noqa: E731 (a Keras kernel's x @ W)
        return att.attention(w(self.w_q), w(self.w_k), w(self.w_v), causal=True)


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)

# ----- fresh set 22's slips, named since -----
def _scores_of_q_twice(q, k):
    return q @ q.transpose(-2, -1)


MUTANTS = [
    ("test_attention.py", "test_scale_scores_divides_by_sqrt_head_width",
     {("attention", "scale_scores"): lambda s, d: s / d}, "divided by K instead of sqrt(K)"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: torch.ones(T, T, dtype=torch.bool).triu()},
     "wrong triangle"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: torch.ones(T, T, dtype=torch.bool).tril(-1)},
     "strict lower"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~_upper(*s.shape[-2:]), -1e9)}, "wrong triangle"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~att.causal_mask(*s.shape[-2:]), 0.0)},
     "instead of -inf"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=-2, keepdim=True)}, "wrong axis"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True)}, "maximum is not subtracted"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_unscaled},
     "not divided by sqrt(K)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_scaled_by_axis_1},
     "scores divided by sqrt(H), the number of heads"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _masked_with(_upper)},
     "wrong triangle (upper)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _masked_with(_strict_lower)},
     "strict lower"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_mask_after_softmax},
     "after the softmax"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_softmax_dim0},
     "wrong axis"),
    ("test_attention.py", "test_attention_with_cached_keys",
     {("attention", "attention"): _masked_with(lambda T, S: torch.ones(T, S, dtype=torch.bool).tril())},
     "top-left corner"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadWithoutMask}, "no causal mask"),
    # issue 15 item 6: averaging the past, sampling the next token, the KV cache
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.mean(dim=-2, keepdim=True).expand_as(x)}, "the future included"),
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.cumsum(dim=-2) / x.shape[-2]}, "divided by T instead of i + 1"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: _rows(torch.ones(T, T).triu())}, "the upper triangle"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril() / T}, "each allowed weight is 1/T"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril()}, "rows not summing to 1"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(fill=0.0)}, "0 instead of -inf"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(hide=lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1))},
     "wrong triangle"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(dim=0)}, "wrong axis"),
    # issue 23: mistakes no test caught
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T, dtype=torch.float64).tril()
      / torch.arange(1, T + 1, dtype=torch.float64)[:, None]}, "the weights are float64"),
    # the twelfth fresh set's classes
    ("test_attention.py", "test_average_past", {("attention", "average_past"): _average_past_by_cat}, "torch.cat"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril() // torch.arange(1, T + 1.0)[:, None]},
     "floor division"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril().softmax(dim=-1)},
     "a softmax of the 0/1 triangle"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): lambda T: torch.zeros(T, T).masked_fill(
         torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF).exp()}, "exponentiated but not normalised"),
    ("test_attention.py", "test_attention_scores",
     {("attention", "attention_scores"): lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])},
     "divided by sqrt(K) already"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: att.causal_mask(T, S, device).int()},
     "made of integers (torch.int32)"),
    ("test_attention.py", "test_causal_mask_with_cached_keys",
     {("attention", "causal_mask"): lambda T, S=None, device=None: att.causal_mask(T, S)}, "device ignored"),
    ("test_attention.py", "test_causal_mask_with_cached_keys",
     {("attention", "causal_mask"): _mask_offset_subtracted}, "the cache offset subtracted"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~att.causal_mask(s.shape[-1]), NEG_INF)},
     "a square (S, S) mask"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_divided_by(lambda z, e: z.sum(dim=-1, keepdim=True).exp())},
     "the exponential of the row's summed"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_divided_by(lambda z, e: e.norm(dim=-1, keepdim=True))}, "Euclidean length"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.mean(dim=-1, keepdim=True))}, "each row's mean"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.amin(dim=-1, keepdim=True))}, "the row minimum"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: (w @ v) / w.sum(dim=-1, keepdim=True)},
     "divided by each row's sum of weights"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: torch.softmax(w, dim=-1) @ v}, "a softmax applied to the weights again"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: (w[..., :, :, None] * v[..., None, :, :]).sum(-3)},
     "summed over the queries instead of the keys"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_with(scale=math.sqrt)},
     "K^(1/4)"),
    ("test_attention.py", "test_attention_without_mask", {("attention", "attention"): _attention_with(scale=math.sqrt)},
     "K^(1/4)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_with(mix="k")},
     "the keys mixed instead of the values"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadCausalOnlyInTraining},
     "causal only while training"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadWithRawValues},
     "the input x itself passed as the values"),
    # the nineteenth fresh set's classes
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril(-1) / torch.arange(1, T + 1.0)[:, None]},
     "the diagonal left empty"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: (torch.ones(T, T).tril() / torch.arange(1, T + 1.0)[:, None])
      * (torch.arange(T) > 0)[:, None]}, "row 0 left at zero"),
    ("test_attention.py", "test_average_past", {("attention", "average_past"): _average_past_aliased},
     "the sum of ALL T positions divided by i + 1"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.amax(dim=-2, keepdim=True) if s.dim() > 1 else s.amax())},
     "each column's maximum over the queries"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s[..., :-1].amax(dim=-1, keepdim=True))},
     "the row maximum taken without the last key"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: w[..., :w.shape[-2]] @ v[..., :w.shape[-2], :]},
     "only the first T keys summed"),
    # the twentieth fresh set's classes
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.cumsum(-1) / torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]},
     "the running sum taken along the features"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_softmax_without_dim},
     "the softmax without dim="),
    # the twenty-first fresh set's classes
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): _HeadWithoutBiases},
     "the projections' biases left out"),
    ("test_attention.py", "test_attention_scores", {("attention", "attention_scores"): _scores_of_q_twice},
     "the queries against themselves"),
    ("test_attention.py", "test_scale_scores_divides_by_sqrt_head_width",
     {("attention", "scale_scores"): lambda scores, d_head: scores / 8}, "sqrt(64) = 8 whatever d_head is"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)


# ----- issue 15's gaps: mistakes that were never named -----

def _softmax_without_keepdim(s):
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1)                      # (..., T): raises when T != S, misaligned when T = S


def _softmax_without_keepdim_when_square(s):
    """Only when T = S (elsewhere right): the mistake as the square input alone shows it."""
    return _softmax_without_keepdim(s) if s.shape[-1] == s.shape[-2] else torch.softmax(s, dim=-1)


GAPS = [
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: torch.softmax(s, dim=0)}, "softmax over dim=0"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=0)}, "softmax over dim=0"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): _softmax_without_keepdim}, "keepdim forgotten in a row statistic"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: (s - s.amax(dim=-1)).exp() / (s - s.amax(dim=-1)).exp().sum(-1, keepdim=True)},
     "keepdim forgotten in a row statistic"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): _softmax_without_keepdim_when_square}, "keepdim forgotten in the row sum"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_without_keepdim}, "keepdim forgotten in the row sum"),
]


test_the_gaps_are_named = the_gaps_are_named(GAPS)


# ----- issue 23: a mistake no catalogue knows -----

UNKNOWN = [  # a wrong piece no catalogue knows: the failure shows where the values differ, with positions
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): type("Shifted", (att.AttentionHead,), {
        "forward": lambda self, x: att.AttentionHead.forward(self, x) + 0.5})}),
]


test_an_unknown_mistake_shows_where_the_values_differ = an_unknown_mistake_shows_where_the_values_differ(UNKNOWN)


# ----- issue 30 item 4: wrong pieces no name fits still fail -----

def _softmax_through_numpy(scores):
    e = np.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


WRONG = [  # (graded file, graded test, the wrong piece): it must fail, whatever the failure names
    ("test_attention.py", "test_softmax_over_the_keys", {("attention", "softmax"): _softmax_through_numpy}),
]


test_a_wrong_piece_fails_its_graded_test = a_wrong_piece_fails_its_graded_test(WRONG)
