"""Graded tests, activity 5 · Attention: scores, 1/sqrt(K), the causal mask, softmax, the
weighted sum of V, and one attention head.  Attention(Q, K, V) = softmax(mask(Q·Kᵀ/√K))·V."""
import math

import torch
import torch.nn.functional as F

from andrea_course.grading import expect_close, expect_equal, expect_runs, expect_true, graded
from andrea_course import pieces

NEG_INF = float("-inf")
USES_STEPS = "attention() runs your four steps: if one of their tests fails, fix that one first"


def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _qkv(T=6, S=None, K=8, seed=0):
    S = T if S is None else S
    return _randn(2, 2, T, K, seed=seed), _randn(2, 2, S, K, seed=seed + 1), _randn(2, 2, S, K, seed=seed + 2)


def _allowed(T, S, offset=True):
    """(T, S) True where query i may see key j: j <= i + (S - T) (offset=False: top-left j <= i)."""
    i, j = torch.arange(T)[:, None], torch.arange(S)[None, :]
    return j <= i + ((S - T) if offset else 0)


def _upper(T, S):
    """The wrong triangle: True where j >= i + (S - T)."""
    return torch.arange(S)[None, :] >= torch.arange(T)[:, None] + (S - T)


def _strict_lower(T, S):
    """The diagonal hidden too: True where j < i + (S - T)."""
    return torch.arange(S)[None, :] < torch.arange(T)[:, None] + (S - T)


def _attend(q, k, v, *, scale=None, allowed=None, mask_after_softmax=False, dim=-1):
    """Attention written out step by step, with switches for the typical mistakes."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if allowed is not None and not mask_after_softmax:
        scores = scores.masked_fill(~allowed, NEG_INF)
    w = torch.softmax(scores, dim=dim)
    if allowed is not None and mask_after_softmax:
        w = w.masked_fill(~allowed, 0.0)
    return w @ v


def _attention_mistakes(q, k, v):
    T, S = q.shape[-2], k.shape[-2]
    lower = _allowed(T, S)
    out = {
        "scores not divided by sqrt(K): scale Q·Kᵀ by 1/sqrt(head width) before the softmax":
            _attend(q, k, v, scale=1.0, allowed=lower),
        "scores divided by K instead of sqrt(K)": _attend(q, k, v, scale=1 / q.shape[-1], allowed=lower),
        "masked the wrong triangle (upper): query i may see keys j <= i, hide j > i":
            _attend(q, k, v, allowed=_upper(T, S)),
        "masked the diagonal too (strict lower triangle): query i may see itself, j <= i":
            _attend(q, k, v, allowed=_strict_lower(T, S)),
        "masked after the softmax: set future scores to -inf BEFORE the softmax so rows still sum to 1":
            _attend(q, k, v, allowed=lower, mask_after_softmax=True),
        "softmax over the wrong axis (queries, dim=-2): normalise over the keys, dim=-1":
            _attend(q, k, v, allowed=lower, dim=-2),
        "no causal mask: hide future keys (j > i) with -inf before the softmax": _attend(q, k, v),
    }
    if S != T:
        out["mask aligned to the top-left corner: with S - T cached keys query i sits at position "
            "i + S - T and may see keys j <= i + S - T"] = _attend(q, k, v, allowed=_allowed(T, S, offset=False))
    return out


# ----- averaging the past: attention before queries and keys -----

def _running_mean(x):
    """x (..., T, D) -> the mean of positions 0..i at every i, from torch.cumsum."""
    counts = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]    # (T, 1): i + 1
    return x.cumsum(dim=-2) / counts


def _averaging_mistakes(T, dtype=torch.float32):
    """The (T, T) weights of the typical mistakes: {description: weights}."""
    ones = torch.ones(T, T, dtype=dtype)
    rows = lambda w: w / w.sum(dim=-1, keepdim=True)
    return {"the upper triangle: row i averages positions i..T-1, the future; it must average 0..i (j <= i)":
                rows(ones.triu()),
            "divided by T instead of i + 1: row i averages i + 1 positions, so each weight is 1/(i + 1)":
                ones.tril() / T,
            "rows not summing to 1: divide each row of the triangle of ones by its own sum, i + 1":
                ones.tril(),
            "the future included: every row uniform over all T positions; position i may see only 0..i":
                ones / T,
            "the diagonal left out: position i averages itself too, j <= i":
                rows(ones.tril(-1))}


@graded("attention.average_past", points=2)
def test_average_past(student):
    fn = student.piece("attention", "average_past")
    for shape in ((2, 5, 3), (7, 4)):                                   # (B, T, D), and (T, D) alone
        x = _randn(*shape, seed=20)
        T = shape[-2]
        total = x.cumsum(dim=-2)
        expect_close(fn(x), _running_mean(x), f"average_past(x of shape {shape})",
                     hint="row i is the mean of rows 0..i along the position axis (-2), so any leading axes work",
                     mistakes={"the future included: every position got the mean of all T positions; "
                               "position i averages only 0..i": x.mean(dim=-2, keepdim=True).expand_as(x),
                               "divided by T instead of i + 1, the number of positions averaged at i": total / T,
                               "the future averaged instead of the past (positions i..T-1): average 0..i":
                               _running_mean(x.flip(-2)).flip(-2),
                               "position i itself left out: the mean of 0..i includes i": torch.cat(
                                   [torch.full_like(x[..., :1, :], float("nan")), _running_mean(x)[..., :-1, :]], dim=-2)})


@graded("attention.causal_average_weights", points=2)
def test_causal_average_weights(student):
    T = 6
    got = student.piece("attention", "causal_average_weights")(T)
    want = torch.ones(T, T).tril() / torch.arange(1, T + 1, dtype=torch.float32)[:, None]
    expect_close(got, want, f"causal_average_weights({T})", mistakes=_averaging_mistakes(T),
                 hint="a lower-triangular matrix of ones, each row divided by its sum: then W @ x = average_past(x)")
    x = _randn(T, 3, seed=21).float()
    expect_close(got.to(x.dtype) @ x, _running_mean(x), f"causal_average_weights({T}) @ x",
                 hint="W @ x must give average_past(x)")


@graded("attention.causal_softmax_weights", points=2)
def test_causal_softmax_weights(student):
    T = 6
    got = student.piece("attention", "causal_softmax_weights")(T)
    want = torch.ones(T, T).tril() / torch.arange(1, T + 1, dtype=torch.float32)[:, None]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    masked = torch.zeros(T, T).masked_fill(future, NEG_INF)
    expect_close(got, want, f"causal_softmax_weights({T})",
                 hint="zeros, the future (j > i) set to -inf, then softmax over each row (dim=-1)",
                 mistakes={"future scores set to 0 instead of -inf: exp(0) = 1 still gives them weight, "
                           "so every row is uniform over all T": torch.full((T, T), 1 / T),
                           "the wrong triangle set to -inf: hide j > i (the future), keep j <= i":
                           torch.softmax(torch.zeros(T, T).masked_fill(future.T, NEG_INF), dim=-1),
                           "softmax over the wrong axis (dim=0): each row, over the keys (dim=-1), sums to 1":
                           torch.softmax(masked, dim=0),
                           "no softmax: the masked scores are not weights yet; softmax each row": masked,
                           **_averaging_mistakes(T)})


# ----- the four steps -----

@graded("attention.attention_scores", points=1)
def test_attention_scores(student):
    q, k = _randn(2, 3, 5, 4, seed=1), _randn(2, 3, 7, 4, seed=2)   # T = 5 queries, S = 7 keys
    got = student.piece("attention", "attention_scores")(q, k)
    expect_close(got, torch.einsum("...tk,...sk->...ts", q, k), "attention_scores(q, k)",
                 mistakes={"keys against queries (k @ qᵀ): rows are queries, columns keys": k @ q.transpose(-2, -1)},
                 hint="every query against every key: turn only the last two axes of k, (..., T, K) times (..., K, S) gives (..., T, S)")


@graded("attention.scale_scores", points=1)
def test_scale_scores_divides_by_sqrt_head_width(student):
    scores = _randn(2, 5, 5, seed=3, scale=4)
    got = student.piece("attention", "scale_scores")(scores, 16)
    expect_close(got, scores / 4, "scale_scores(scores, d_head=16)",
                 mistakes={"scores not scaled: divide by sqrt(K)": scores,
                           "divided by K instead of sqrt(K)": scores / 16,
                           "multiplied by sqrt(K) instead of dividing": scores * 4})


@graded("attention.causal_mask", points=1)
def test_causal_mask_is_lower_triangular(student):
    got = student.piece("attention", "causal_mask")(5)
    want = torch.ones(5, 5, dtype=torch.bool).tril()
    expect_equal(got, want, "causal_mask(5)", hint="True where j <= i: the lower triangle with the diagonal",
                 mistakes={"the wrong triangle (upper): query i may see keys j <= i": want.T,
                           "strict lower triangle: query i may see itself (the diagonal is True)": want.tril(-1),
                           "mask inverted: True marks the keys a query MAY see": ~want})
    expect_true(got.dtype == torch.bool, "causal_mask(5).dtype", f"dtype {got.dtype}, expected torch.bool",
                "compare index tensors (j <= i) to get booleans")


@graded("attention.causal_mask", points=1)
def test_causal_mask_with_cached_keys(student):
    got = student.piece("attention", "causal_mask")(3, 6)
    expect_equal(got, _allowed(3, 6), "causal_mask(T=3, S=6)",
                 hint="with S - T = 3 cached keys, query i sits at position i + 3: allowed j <= i + S - T",
                 mistakes={"cached keys ignored (mask aligned to the top-left corner): allowed j <= i + S - T":
                           _allowed(3, 6, offset=False)})


def _masked(scores):
    return scores.masked_fill(~_allowed(*scores.shape[-2:]), NEG_INF)


@graded("attention.apply_causal_mask", points=2)
def test_apply_causal_mask(student):
    fn = student.piece("attention", "apply_causal_mask")
    for shape in ((2, 5, 5), (4, 7)):                                   # T = S, and S - T = 3 cached keys
        scores = _randn(*shape, seed=4)
        got = fn(scores)
        if isinstance(got, torch.Tensor) and got.is_floating_point():
            got = got.masked_fill(got <= -1e9, NEG_INF)                   # a huge negative number works like -inf
        T, S = shape[-2:]
        lower = _allowed(T, S)
        expect_close(got, _masked(scores), f"apply_causal_mask(scores of shape {shape})",
                     mistakes={"masked the wrong triangle (upper): hide keys j > i, keep j <= i":
                               scores.masked_fill(~_upper(T, S), NEG_INF),
                               "masked the diagonal too (strict lower triangle): query i may see itself":
                               scores.masked_fill(~_strict_lower(T, S), NEG_INF),
                               "future scores set to 0 instead of -inf: exp(0) = 1 still gives them weight":
                               scores.masked_fill(~lower, 0.0),
                               "mask aligned to the top-left corner: allowed j <= i + S - T":
                               scores.masked_fill(~_allowed(T, S, offset=False), NEG_INF)})


@graded("attention.softmax", points=2)
def test_softmax_over_the_keys(student):
    scores = _randn(2, 3, 4, 6, seed=5, scale=3)                        # T = 4 queries, S = 6 keys
    got = student.piece("attention", "softmax")(scores)
    expect_close(got, torch.softmax(scores, dim=-1), "softmax(scores)",
                 mistakes={"softmax over the wrong axis (dim=-2): each query's row of S keys must sum to 1":
                           torch.softmax(scores, dim=-2),
                           "not normalised: divide exp(scores) by its row sum": scores.exp(),
                           "normalised by the sum over the whole tensor: divide by each row's sum (dim=-1, keepdim=True)":
                           scores.exp() / scores.exp().sum()})


@graded("attention.softmax", points=1)
def test_softmax_is_stable_and_handles_masked_scores(student):
    scores = torch.tensor([[1000.0, 999.0, NEG_INF], [-1000.0, -1001.0, -999.0], [0.0, NEG_INF, NEG_INF]],
                          dtype=torch.float64)
    got = student.piece("attention", "softmax")(scores)
    expect_close(got, torch.softmax(scores, dim=-1), "softmax(very large, very small and -inf scores)",
                 hint="subtract each row's own maximum before exponentiating: the weights do not change and nothing overflows",
                 mistakes={"the row maximum is not subtracted: exp(1000) overflows to inf":
                           scores.exp() / scores.exp().sum(-1, keepdim=True),
                           KEEPDIM_SUM: _softmax_by_hand(scores, keep_sum=False)})


@graded("attention.weighted_sum", points=1)
def test_weighted_sum_of_values(student):
    w = torch.softmax(_randn(2, 4, 6, seed=6), dim=-1)                  # (B, T, S)
    v = _randn(2, 6, 3, seed=7)                                          # (B, S, K)
    got = student.piece("attention", "weighted_sum")(w, v)
    expect_close(got, torch.einsum("bts,bsk->btk", w, v), "weighted_sum(weights, v)",
                 hint="each query's output is its row of weights times the values: (..., T, S) times (..., S, K) gives (..., T, K)")


# ----- attention end to end -----

@graded("attention.attention", points=3)
def test_causal_attention(student):
    q, k, v = _qkv()
    got = student.piece("attention", "attention")(q, k, v)
    expect_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True), "attention(q, k, v)",
                 mistakes=_attention_mistakes(q, k, v), hint=USES_STEPS)


@graded("attention.attention", points=1)
def test_attention_without_mask(student):
    q, k, v = _qkv(seed=3)
    got = student.piece("attention", "attention")(q, k, v, causal=False)
    expect_close(got, F.scaled_dot_product_attention(q, k, v), "attention(q, k, v, causal=False)",
                 mistakes={"masked although causal=False: apply the mask only when causal is True":
                           F.scaled_dot_product_attention(q, k, v, is_causal=True),
                           "scores not divided by sqrt(K)": _attend(q, k, v, scale=1.0)})




@graded("attention.AttentionHead", points=2)
def test_attention_head(student):
    D, K = 12, 4
    ref = pieces.module("attention").AttentionHead(D, K).double()
    with torch.no_grad():
        for i, p in enumerate(ref.parameters()):
            p.copy_(_randn(*p.shape, seed=10 + i, scale=0.5))
    head = student.piece("attention", "AttentionHead")(D, K)
    head.double()
    head.load_state_dict(ref.state_dict())
    x = _randn(2, 5, D, seed=9)
    with torch.no_grad():
        q, k, v = ref.w_q(x), ref.w_k(x), ref.w_v(x)
    got = head(x)
    expect_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True), "AttentionHead(12, 4)(x)",
                 mistakes={"no causal mask: call attention(..., causal=True)": F.scaled_dot_product_attention(q, k, v),
                           "scaled by sqrt(D) instead of sqrt(K), the head width":
                               _attend(q, k, v, scale=1 / math.sqrt(D), allowed=_allowed(5, 5)),
                           "q, k, v projections mixed up: q from w_q, k from w_k, v from w_v":
                               F.scaled_dot_product_attention(k, q, v, is_causal=True)},
                 hint="AttentionHead runs your attention(): if its tests fail, fix those first")


# ----- softmax: the axis of the batch, and keepdim -----

def _softmax_by_hand(scores, keep_max=True, keep_sum=True):
    """softmax over the last axis written out, with keepdim=True switchable on the row maximum
    and on the row sum: without it a row statistic (..., T) broadcasts along the wrong axis (when
    T = S) or clashes with the scores' last axis (when T != S)."""
    z = scores - (scores.amax(dim=-1, keepdim=True) if keep_max else scores.amax(dim=-1))
    e = z.exp()
    return e / (e.sum(dim=-1, keepdim=True) if keep_sum else e.sum(dim=-1))


KEEPDIM_SUM = ("keepdim forgotten in the row sum: e.sum(dim=-1) has shape (..., T) and lines up with the "
               "wrong axis; keepdim=True keeps it (..., T, 1), one sum per row")
KEEPDIM_MAX = ("keepdim forgotten in the row maximum: scores.amax(dim=-1) has shape (..., T) and lines up with "
               "the wrong axis; keepdim=True keeps it (..., T, 1), one maximum per row")
KEEPDIM_BOTH = "keepdim forgotten in the row maximum and the row sum: keep both as (..., T, 1) with keepdim=True"
KEEPDIM_ROW = ("keepdim forgotten in a row statistic (the row maximum or the row sum): it has shape (..., T) and "
               "does not line up with the rows of the scores; keepdim=True keeps it (..., T, 1), one per row")


def _softmax_mistakes(scores):
    """{mistake: its output} on `scores`, those that run on this shape."""
    out = {}
    if scores.dim() > 2:
        out["softmax over dim=0, the batch: each query's row of keys, the last axis (dim=-1), must sum to 1"] = \
            torch.softmax(scores, dim=0)
    for name, keep in ((KEEPDIM_SUM, (True, False)), (KEEPDIM_MAX, (False, True)), (KEEPDIM_BOTH, (False, False))):
        try:
            out[name] = _softmax_by_hand(scores, *keep)
        except RuntimeError:                            # T != S: this mistake raises instead
            pass
    return out


@graded("attention.softmax", points=1)
def test_softmax_keeps_one_statistic_per_row(student):
    """(B, H, T, S) = (2, 3, 4, 6), where a row statistic without keepdim raises and a softmax over
    dim=0 (the batch) shows, then (T, S) = (5, 5), where a row statistic without keepdim silently
    lines up with the wrong axis."""
    softmax = student.piece("attention", "softmax")
    for shape in ((2, 3, 4, 6), (5, 5)):
        scores = _randn(*shape, seed=12, scale=2)
        what = f"softmax(scores of shape {shape})"
        got = expect_runs(lambda: softmax(scores), what,
                          mistakes={KEEPDIM_ROW: lambda: _softmax_by_hand(scores, keep_sum=False)},
            hint="each row's maximum and sum must keep a last axis of size 1, (..., T, 1), to line up with their row")
        expect_close(got, torch.softmax(scores, dim=-1), what, mistakes=_softmax_mistakes(scores),
                     hint="normalise over the last axis (the keys), one maximum and one sum per row")
