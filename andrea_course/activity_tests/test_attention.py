"""Graded tests, activity 5 · Attention: scores, 1/sqrt(K), the causal mask, softmax, the
weighted sum of V, and one attention head.  Attention(Q, K, V) = softmax(mask(Q·Kᵀ/√K))·V."""
import math

import torch
import torch.nn.functional as F

from andrea_course.grading import (Case, Second, expect_cases, expect_close, expect_equal, expect_runs, expect_true,
                                   graded, load_weights)
from andrea_course import pieces
from andrea_course.activity_tests import expect_trainable, randn64, layer_mixups, parameter_shapes

NEG_INF = float("-inf")
ATTENTION_HINT = ("in this order: scores q·kᵀ, divided by sqrt(K); the future (j > i + S - T) set to -inf; a softmax "
                  "over the keys (dim=-1); the weights times v")


def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _strided_heads(*shape, seed):
    """(..., T, K) float32 made by a transpose of (..., K, T): strided, as heads split with
    view and transpose are."""
    return _randn(*shape[:-2], shape[-1], shape[-2], seed=seed).float().transpose(-2, -1)


def _qkv(T=6, S=None, K=8, seed=0, H=2):
    S = T if S is None else S
    return _randn(2, H, T, K, seed=seed), _randn(2, H, S, K, seed=seed + 1), _randn(2, H, S, K, seed=seed + 2)


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


def _attend(q, k, v, *, scale=None, allowed=None, mask_after_softmax=False, dim=-1, fill_after=0.0):
    """Attention written out step by step, with switches for the typical mistakes (mask_after_softmax:
    the weights of the future set to fill_after after the softmax)."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if allowed is not None and not mask_after_softmax:
        scores = scores.masked_fill(~allowed, NEG_INF)
    w = torch.softmax(scores, dim=dim)
    if allowed is not None and mask_after_softmax:
        w = w.masked_fill(~allowed, fill_after)
    return w @ v


SQRT_T = ("scores divided by sqrt(T), the number of queries (q.shape[-2]): divide by sqrt(K), the head width, "
          "q.shape[-1]")
SQRT_S = ("scores divided by sqrt(S), the number of keys (k.shape[-2]): divide by sqrt(K), the head width, "
          "q.shape[-1]")
SQRT_POSITIONS = ("scores divided by the square root of the number of positions, sqrt(T) of the queries or sqrt(S) of "
                  "the keys (q.shape[-2] or k.shape[-2], equal here): divide by sqrt(K), the head width, q.shape[-1]")


def _by_sqrt_positions(q, k, v, allowed=None):
    """{mistake: its output} for scores scaled by 1/sqrt(T) (the queries) or 1/sqrt(S) (the keys):
    one mistake where T = S (they agree there), two where T != S; None where the count is K (then
    it is the right answer)."""
    T, S, K = q.shape[-2], k.shape[-2], q.shape[-1]
    by = lambda n: _attend(q, k, v, scale=1 / math.sqrt(n), allowed=allowed) if n != K else None
    out = {SQRT_POSITIONS: by(T)} if T == S else {SQRT_T: by(T), SQRT_S: by(S)}
    H = q.shape[1] if q.dim() == 4 else 1             # q.size(1) read as the head width, as if q were (B, T, K)
    if H not in (T, S, K, 1) and H * H != K and H != K * K:   # else another mistake gives the same
        out[SQRT_HEADS] = by(H)
    return out


SQRT_HEADS = ("scores divided by sqrt(H), the number of heads, q.size(1) of (B, H, T, K) (or by the batch size, where "
              "it equals H), as if q were (B, T, K): divide by sqrt(K), the head width, q.shape[-1]")
FOURTH_ROOT = ("scores divided by K^(1/4), the fourth root of the head width: sqrt(K) was passed to scale_scores, which "
               "takes the square root itself; pass it the head width, scale_scores(scores, q.shape[-1])")
KEYS_MIXED = ("the keys mixed instead of the values, weighted_sum(weights, k): v is never used; the weights mix the "
              "values, weighted_sum(weights, v)")


def _fourth_root_and_keys(q, k, v, allowed=None):
    """{mistake: its output}: the scores divided by K^(1/4), and the keys mixed in place of the values."""
    return {FOURTH_ROOT: _attend(q, k, v, scale=q.shape[-1] ** -0.25, allowed=allowed),
            KEYS_MIXED: _attend(q, k, k, allowed=allowed)}


def _attention_mistakes(q, k, v):
    T, S = q.shape[-2], k.shape[-2]
    lower = _allowed(T, S)
    out = {
        **_fourth_root_and_keys(q, k, v, allowed=lower),
        "scores not divided by sqrt(K): scale Q·Kᵀ by 1/sqrt(head width) before the softmax":
            _attend(q, k, v, scale=1.0, allowed=lower),
        "scores divided by K instead of sqrt(K)": _attend(q, k, v, scale=1 / q.shape[-1], allowed=lower),
        "masked the wrong triangle (upper): query i may see keys j <= i, hide j > i":
            _attend(q, k, v, allowed=_upper(T, S)),
        "masked the diagonal too (strict lower triangle): query i may see itself, j <= i":
            _attend(q, k, v, allowed=_strict_lower(T, S)),
        "masked after the softmax: set future scores to -inf BEFORE the softmax so rows still sum to 1":
            _attend(q, k, v, allowed=lower, mask_after_softmax=True),
        "the mask applied to the weights after the softmax: the future's weights became -inf, and the output "
        "-inf or NaN; set the future's scores to -inf before the softmax, so that their weights come out 0":
            _attend(q, k, v, allowed=lower, mask_after_softmax=True, fill_after=NEG_INF),
        "softmax over the wrong axis (queries, dim=-2): normalise over the keys, dim=-1":
            _attend(q, k, v, allowed=lower, dim=-2),
        "no causal mask: hide future keys (j > i) with -inf before the softmax (apply_causal_mask returns a new "
        "tensor: scores = apply_causal_mask(scores))": _attend(q, k, v),
        **_by_sqrt_positions(q, k, v, allowed=lower),
        **_implicit_softmax_dim(q, k, v, allowed=lower),
    }
    if S != T:
        out["mask aligned to the top-left corner: with S - T cached keys query i sits at position "
            "i + S - T and may see keys j <= i + S - T"] = _attend(q, k, v, allowed=_allowed(T, S, offset=False))
    return out


IMPLICIT_SOFTMAX_DIM = ("the softmax without dim=: PyTorch then picks an axis by the scores' rank (axis 0, the batch, "
                        "of 3-D scores; axis 1, the heads, of 4-D ones), not the keys; give it dim=-1")


def _implicit_softmax_dim(q, k, v, allowed=None):
    """The softmax without dim=: PyTorch then picks axis 0 of a tensor of 0, 1 or 3 axes and axis 1 of
    any other (its legacy rule), not the keys."""
    n = q.dim()
    if n < 3:
        return {}                                           # (T, S) scores: axis 1 is the keys, right by chance
    return {IMPLICIT_SOFTMAX_DIM: _attend(q, k, v, allowed=allowed, dim=0 if n == 3 else 1)}


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
            "each allowed weight is 1/T: the row was spread over all T positions (a softmax over every position "
            "with the future zeroed after it, or a division by T), but row i averages its i + 1 positions, so hide "
            "the future with -inf before the softmax (or divide by i + 1)": ones.tril() / T,
            "rows not summing to 1: divide each row of the triangle of ones by its own sum, i + 1":
                ones.tril(),
            "the future included: every row uniform over all T positions; position i may see only 0..i":
                ones / T,
            "the diagonal left out: position i averages itself too, j <= i":
                rows(ones.tril(-1))}


CAT_NOT_STACK = ("the T means joined with torch.cat, which glues them along an existing axis, instead of "
                 "torch.stack, which puts them on a new position axis: a batch (B, T, D) comes out (B·T, D) and one "
                 "sequence (T, D) raises; torch.stack(means, dim=-2)")

ALIASED_TOTAL = ("every row i is the sum of ALL T positions divided by i + 1: the running sum was kept as one tensor, "
                 "changed in place (total += x[..., i, :]) and put in the list itself, so every entry is that one "
                 "tensor at its final value; append a new tensor each step (total = total + ..., or total.clone())")


def _average_case(fn, shape, dtype=torch.float64):
    x = _randn(*shape, seed=20 + len(shape)).to(dtype)
    T = shape[-2]
    total = x.cumsum(dim=-2)
    means = [x[..., :i + 1, :].mean(dim=-2) for i in range(T)]            # T means of shape (..., D)
    return Case(f"average_past(x of shape {shape}, {str(dtype)[6:]})", lambda: fn(x), _running_mean(x), {
        CAT_NOT_STACK: torch.cat(means, dim=-2) if x.dim() > 2 else None,    # (T, D): cat raises instead
        "the future included: every position got the mean of all T positions; position i averages only 0..i":
            x.mean(dim=-2, keepdim=True).expand_as(x),
        "divided by T instead of i + 1, the number of positions averaged at i": total / T,
        "summed the past instead of averaging it: divide the running sum at position i by i + 1, the number of "
        "positions 0..i": total,
        "the future averaged instead of the past (positions i..T-1): average 0..i": _running_mean(x.flip(-2)).flip(-2),
        ALIASED_TOTAL: total[..., -1:, :] / torch.arange(1, T + 1, dtype=x.dtype)[:, None],
        "the running sum taken along the features (dim=-1), not the positions: cumsum along dim=-2, then divide "
        "position i by i + 1": x.cumsum(dim=-1) / torch.arange(1, T + 1, dtype=x.dtype)[:, None],
        "position i itself left out: the mean of 0..i includes i": torch.cat(
            [torch.full_like(x[..., :1, :], float("nan")), _running_mean(x)[..., :-1, :]], dim=-2)})


@graded("attention.average_past", points=2)
def test_average_past(student):
    fn = student.piece("attention", "average_past")
    expect_cases(_average_case(fn, (2, 5, 3)), _average_case(fn, (7, 4)),           # (B, T, D), and (T, D) alone
                 _average_case(fn, (3, 4, 2), torch.float32),
                 hint="row i is the mean of rows 0..i along the position axis (-2), so any leading axes work")
    expect_trainable(fn, (randn64(2, 5, 3, seed=70),), "average_past(x of shape (2, 5, 3))")


def _causal_weights(T):
    return torch.ones(T, T).tril() / torch.arange(1, T + 1, dtype=torch.float32)[:, None]


FLOOR_DIVISION = ("floor division, // instead of /: every share 1/(i + 1) is rounded down to 0 and only row 0 keeps "
                  "its 1; divide with /")
SOFTMAX_OF_ONES = ("a softmax of the 0/1 triangle: the future's zeros become exp(0) = 1 too, so the future gets weight "
                   "and each past position less than 1/(i + 1); divide each row of ones by its own sum (a softmax "
                   "would need the future at -inf, not 0)")

DIAGONAL_EMPTY = ("the diagonal left empty: row i holds 1/(i + 1) at j < i only, so it sums to i/(i + 1) (row 0 to 0); "
                  "position i averages itself too, j <= i: a slice [:i + 1], or a lower triangle with its diagonal")
ROW_0_EMPTY = ("row 0 left at zero: position 0 averages itself alone, weight 1 at j = 0 (a loop over range(1, T) "
               "starts one row late); fill every row 0 .. T - 1")


def _average_weights_mistakes(T):
    """{description: weights} of the mistakes of causal_average_weights alone (not of the softmax weights)."""
    ones = torch.ones(T, T).tril()
    share = 1 / torch.arange(1, T + 1, dtype=torch.float32)[:, None]                 # (T, 1): 1/(i + 1)
    return {FLOOR_DIVISION: ones // ones.sum(dim=-1, keepdim=True), SOFTMAX_OF_ONES: ones.softmax(dim=-1),
            DIAGONAL_EMPTY: torch.ones(T, T).tril(-1) * share, ROW_0_EMPTY: torch.cat([torch.zeros(1, T),
                                                                                      _causal_weights(T)[1:]])}


FLOAT64_WEIGHTS = ("the weights are float64 (a count or a matrix made with dtype=torch.float64): W @ x then fails on "
                   "the float32 x of notebook 02 (a matrix product needs one dtype); build them in float32, "
                   "PyTorch's default")


@graded("attention.causal_average_weights", points=2)
def test_causal_average_weights(student):
    """The (T, T) float32 weights, and W @ x = average_past(x) for a float32 x, as the docstring promises."""
    weights = student.piece("attention", "causal_average_weights")
    case = lambda T: Case(f"causal_average_weights({T})", lambda: weights(T), _causal_weights(T),
                          _averaging_mistakes(T) | _average_weights_mistakes(T))
    hint = "a lower-triangular matrix of ones, each row divided by its sum: then W @ x = average_past(x)"
    expect_cases(case(6), case(4), hint=hint)
    T = 6
    got = weights(T)
    expect_true(got.dtype == torch.float32, f"causal_average_weights({T}).dtype", f"dtype {got.dtype}, expected "
                f"torch.float32", "make the ones (and anything you divide by) in PyTorch's default dtype",
                mistake=FLOAT64_WEIGHTS if got.dtype == torch.float64 else None)
    x = _randn(T, 3, seed=21).float()
    expect_close(expect_runs(lambda: got @ x, f"causal_average_weights({T}) @ x (x float32)"), _running_mean(x),
                 f"causal_average_weights({T}) @ x", hint="W @ x must give average_past(x)")


EXP_NOT_NORMALISED = ("the masked scores exponentiated but not normalised: exp(0) = 1 on every allowed position, a "
                      "triangle of ones whose rows do not sum to 1; a softmax also divides each row by its sum, "
                      "torch.softmax(scores, dim=-1)")


def _softmax_weights_case(fn, T):
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    masked = torch.zeros(T, T).masked_fill(future, NEG_INF)
    mistakes = {"future scores set to 0 instead of -inf: exp(0) = 1 still gives them weight, so every row is "
                "uniform over all T": torch.full((T, T), 1 / T),
                "the wrong triangle set to -inf: hide j > i (the future), keep j <= i":
                    torch.softmax(torch.zeros(T, T).masked_fill(future.T, NEG_INF), dim=-1),
                "softmax over the wrong axis (dim=0): each row, over the keys (dim=-1), sums to 1":
                    torch.softmax(masked, dim=0),
                "no softmax: the masked scores are not weights yet; softmax each row": masked,
                **_averaging_mistakes(T),
                EXP_NOT_NORMALISED: masked.exp()}
    mistakes = {k: v for k, v in mistakes.items()
                if not k.startswith(("the future included", "the upper triangle", "rows not summing to 1"))}
    return Case(f"causal_softmax_weights({T})", lambda: fn(T), _causal_weights(T), mistakes)


@graded("attention.causal_softmax_weights", points=2)
def test_causal_softmax_weights(student):
    fn = student.piece("attention", "causal_softmax_weights")
    expect_cases(_softmax_weights_case(fn, 6), _softmax_weights_case(fn, 5),
                 hint="zeros, the future (j > i) set to -inf, then softmax over each row (dim=-1)")


# ----- the four steps -----

ELEMENTWISE_SCORES = ("an elementwise product summed, (q * k).sum(-1): that pairs query i with key i only; every query "
                      "meets every key in q @ k.transpose(-2, -1), a (T, S) table")


SCALED_ALREADY = ("the scores divided by sqrt(K) already: attention_scores returns the raw dot products q·kᵀ, and "
                  "scale_scores divides them (attention calls both, so it would scale twice); return "
                  "q @ k.transpose(-2, -1) as it is")


def _scores_case(fn, q, k):
    what = f"attention_scores(q of shape {tuple(q.shape)}, k of shape {tuple(k.shape)})"
    T, S = q.shape[-2], k.shape[-2]
    return Case(what, lambda: fn(q, k), torch.einsum("...tk,...sk->...ts", q, k),
                {"keys against queries (k @ qᵀ): rows are queries, columns keys": k @ q.transpose(-2, -1),
                 "the queries against themselves (q @ qᵀ): k is never used; every query meets every key, "
                 "q @ k.transpose(-2, -1)": q @ q.transpose(-2, -1),
                 ELEMENTWISE_SCORES: (q * k).sum(dim=-1) if T == S else None,     # T != S: q * k raises
                 ELEMENTWISE_SCORES + " (keepdim=True keeps its (T, 1) shape)":
                     (q * k).sum(dim=-1, keepdim=True) if T == S else None,
                 "k reshaped to (..., K, S) instead of transposed: a reshape (or view) keeps the numbers in memory "
                 "order and only cuts them into new rows, so they land in the wrong places; turn the last two axes "
                 "with k.transpose(-2, -1)": q @ k.reshape(*k.shape[:-2], k.shape[-1], S),
                 SCALED_ALREADY: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])})


@graded("attention.attention_scores", points=1)
def test_attention_scores(student):
    fn = student.piece("attention", "attention_scores")
    # T = S first: there a piece that pairs q_i with k_i only runs, and its output is named
    expect_cases(_scores_case(fn, _randn(6, 4, seed=3).float(), _randn(6, 4, seed=4).float()),  # (T, K) alone, float32
                 _scores_case(fn, _strided_heads(2, 2, 5, 4, seed=5), _strided_heads(2, 2, 5, 4, seed=6)),  # as the model
                 _scores_case(fn, _randn(2, 3, 5, 4, seed=1), _randn(2, 3, 7, 4, seed=2)),   # T = 5 queries, S = 7 keys
                 hint="every query against every key: turn only the last two axes of k, (..., T, K) times "
                      "(..., K, S) gives (..., T, S)")
    expect_trainable(fn, (randn64(2, 3, 5, 4, seed=71), randn64(2, 3, 5, 4, seed=72)),
                     "attention_scores(q, k of shape (2, 3, 5, 4))")


def _scale_case(fn, scores, d_head):
    r = d_head ** 0.5
    return Case(f"scale_scores(scores of shape {tuple(scores.shape)}, d_head={d_head})", lambda: fn(scores, d_head),
                scores / r, {"scores not scaled: divide by sqrt(K)": scores,
                             "divided by K instead of sqrt(K)": scores / d_head,
                             "d_head ** 1 / 2 is (d_head ** 1) / 2 = K/2: ** binds tighter than /, so write "
                             "d_head ** 0.5 or math.sqrt(d_head)": scores / (d_head / 2),
                             "scores / d_head ** 1 / 2 is (scores / d_head) / 2: ** binds tighter than /, and / goes "
                             "left to right; write scores / d_head ** 0.5 or scores / math.sqrt(d_head)":
                                 scores / d_head / 2,
                             "multiplied by sqrt(K) instead of dividing": scores * r,
                             "divided by sqrt(64) = 8 whatever d_head is (a head width fixed in the code): divide by "
                             "the d_head passed in": scores / 8 if 8 not in (d_head ** 0.5, 2 * d_head) else None,
                             "sqrt(K) rounded to a whole number: K = 12 has sqrt(K) = 3.46, not 3":
                                 scores / int(r) if r != int(r) else None,
                             "divided by the square root of the number of keys (scores.shape[-1]): divide by "
                             "sqrt(d_head), the head width K, which the scores' shape does not give":
                                 scores / scores.shape[-1] ** 0.5 if scores.dim() and scores.shape[-1] != d_head
                                 else None})


@graded("attention.scale_scores", points=1)
def test_scale_scores_divides_by_sqrt_head_width(student):
    fn = student.piece("attention", "scale_scores")
    expect_cases(_scale_case(fn, _randn(2, 5, 5, seed=3, scale=4), 16), _scale_case(fn, _randn(4, 6, seed=5).float(), 9),
                 _scale_case(fn, torch.tensor(6.0), 4),                         # one score, a 0-d tensor
                 _scale_case(fn, _randn(2, 2, 4, 4, seed=8, scale=3).float(), 4),  # (B, H, T, S) float32, as the model
                 _scale_case(fn, _randn(3, 4, seed=9), 12), _scale_case(fn, _randn(2, 3, 3, seed=10), 20))  # K not a square
    expect_trainable(fn, (randn64(2, 5, 5, seed=73), 16), "scale_scores(scores of shape (2, 5, 5), d_head=16)")


def _mask_case(fn, T, S=None):
    S_ = T if S is None else S
    want = _allowed(T, S_)
    mistakes = {"mask inverted: True marks the keys a query MAY see": ~want}
    if S is None:
        mistakes.update({"the wrong triangle (upper): query i may see keys j <= i": want.T,
                         "strict lower triangle: query i may see itself (the diagonal is True)": want.tril(-1)})
    else:
        mistakes["cached keys ignored (mask aligned to the top-left corner): allowed j <= i + S - T"] = \
            _allowed(T, S_, offset=False)
        mistakes[OFFSET_SUBTRACTED] = torch.arange(S_)[None, :] <= torch.arange(T)[:, None] - (S_ - T)
    call = (lambda: fn(T)) if S is None else (lambda: fn(T, S))
    return Case(f"causal_mask({T})" if S is None else f"causal_mask(T={T}, S={S})", call, want, mistakes)


OFFSET_SUBTRACTED = ("the cache offset subtracted, j <= i - (S - T), instead of added: query i sits at position "
                     "i + (S - T), after the S - T cached keys, so it may see keys j <= i + (S - T)")
INTEGER_MASK = ("the mask made of integers ({dtype}) instead of booleans: ~ on an integer tensor is a bitwise not "
                "(~1 = -2, ~0 = -1), and masked_fill refuses a mask that is not bool; return the comparison "
                "(j <= i + S - T) itself, without .int() or .long()")
FLOAT_MASK = ("the mask made of floating-point numbers ({dtype}) instead of booleans: ~ refuses a float tensor and "
              "masked_fill a mask that is not bool; return the comparison (j <= i + S - T) itself")
DEVICE_IGNORED = ("device ignored: the mask is built on the CPU whatever device it is asked for; on a GPU the scores "
                  "are CUDA tensors and masked_fill then fails on a mask of another device; make the index tensors "
                  "there, torch.arange(T, device=device)")


def _wrong_dtype(dtype):
    """The mistake a mask of this dtype shows (None for bool, or a dtype no mistake explains)."""
    if dtype == torch.bool:
        return None
    if dtype.is_floating_point:
        return FLOAT_MASK.format(dtype=dtype)
    return INTEGER_MASK.format(dtype=dtype) if not dtype.is_complex else None


NO_DEFAULT_S = ("no default for S: causal_mask(T), as attention without a cache calls it, raises; write S=None "
                "and use S = T when S is None")


def _without_default_S(T):
    """causal_mask(T) on a causal_mask(T, S, device=None) written without S's default: it raises."""
    def causal_mask(T, S, device=None):
        return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)
    causal_mask.__qualname__ = "causal_mask"                 # the learner's is module-level: the same message
    return lambda: causal_mask(T)


@graded("attention.causal_mask", points=1)
def test_causal_mask_is_lower_triangular(student):
    fn = student.piece("attention", "causal_mask")
    # causal_mask(T) alone, as attention without a cache calls it: S defaults to T
    expect_runs(lambda: fn(5), "causal_mask(5)", mistakes={NO_DEFAULT_S: _without_default_S(5)},
                second=Second(lambda: fn(4), None, {NO_DEFAULT_S: _without_default_S(4)}),
                hint="give S the default None and use S = T when it is None")
    expect_cases(_mask_case(fn, 5), _mask_case(fn, 4), exact=True,
                 hint="True where j <= i: the lower triangle with the diagonal")
    got = fn(5)
    expect_true(got.dtype == torch.bool, "causal_mask(5).dtype", f"dtype {got.dtype}, expected torch.bool",
                "compare index tensors (j <= i) to get booleans", mistake=_wrong_dtype(got.dtype))


@graded("attention.causal_mask", points=1)
def test_causal_mask_with_cached_keys(student):
    fn = student.piece("attention", "causal_mask")
    expect_cases(_mask_case(fn, 3, 6), _mask_case(fn, 2, 5), exact=True,
                 hint="with S - T cached keys, query i sits at position i + S - T: allowed j <= i + S - T")
    # As the model calls it: on the device of its scores.
    expect_equal(fn(3, 5, device=torch.device("cpu")), _allowed(3, 5), "causal_mask(3, 5, device=torch.device('cpu'))",
                 hint="take the device keyword (default None) and build the mask's index tensors there")
    # A GPU stands in as PyTorch's meta device (shapes only, no values): a mask asked for it must land there.
    try:
        on_meta = fn(3, 5, device=torch.device("meta"))
    except Exception:                                   # noqa: BLE001 - an op without a meta kernel tells nothing
        on_meta = None
    if isinstance(on_meta, torch.Tensor):
        expect_true(on_meta.device.type == "meta", "causal_mask(3, 5, device=torch.device('meta'))",
                    f"the mask is on the device {on_meta.device}, not on the one asked for (meta: PyTorch's device "
                    f"without values, standing in here for a GPU)",
                    "build the mask on the device it is given: torch.arange(..., device=device)",
                    mistake=DEVICE_IGNORED if on_meta.device.type == "cpu" else None)


def _masked(scores):
    return scores.masked_fill(~_allowed(*scores.shape[-2:]), NEG_INF)


def _apply_mask_case(fn, scores):
    T, S = scores.shape[-2:]
    lower = _allowed(T, S)

    def got():
        out = fn(scores)
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            out = out.masked_fill(out <= -1e9, NEG_INF)                   # a huge negative number works like -inf
        return out
    mistakes = {"masked the wrong triangle (upper): hide keys j > i, keep j <= i": scores.masked_fill(~_upper(T, S), NEG_INF),
                "masked the diagonal too (strict lower triangle): query i may see itself":
                    scores.masked_fill(~_strict_lower(T, S), NEG_INF),
                "future scores set to 0 instead of -inf: exp(0) = 1 still gives them weight": scores.masked_fill(~lower, 0.0)}
    added = scores + (~lower) * -1e9                                   # an additive mask, as some libraries build it
    mistakes["-1e9 added to the future's scores instead of setting them to -inf: a masked score is then "
             "score - 1e9, which still depends on the score; masked_fill(~allowed, float('-inf'))"] = \
        added.masked_fill(added <= -1e9, NEG_INF)
    if S != T:
        mistakes["mask aligned to the top-left corner: allowed j <= i + S - T"] = \
            scores.masked_fill(~_allowed(T, S, offset=False), NEG_INF)
    return Case(f"apply_causal_mask(scores of shape {tuple(scores.shape)})", got, _masked(scores), mistakes)


SQUARE_MASK = ("a mask of another shape than the scores' (T, S): built from the number of queries alone, (T, T), or with "
               "its two sizes swapped, causal_mask(S, T); with S - T cached keys the scores are (T, S), so take "
               "T, S = scores.shape[-2:] and build causal_mask(T, S) in that order")
SQUARE_KEYS = ("a square (S, S) mask from the number of keys alone (T = S = scores.shape[-1], or causal_mask(S)): with "
               "S - T cached keys the scores have T rows, not S, so the mask does not fit them; take "
               "T, S = scores.shape[-2:] and build causal_mask(T, S)")
FIRST_AXES = ("T and S taken from the first two axes (scores.shape[0], scores.shape[1]): the scores may carry batch "
              "and head axes in front, so take the last two, T, S = scores.shape[-2:]")


def _raising_mask_mistakes(scores):
    """{mistake: a function that makes it on `scores`}, those that raise there (a (T, S) mask that does
    not line up with the scores' last two axes)."""
    T, S = scores.shape[-2:]
    wrong = {SQUARE_MASK: lambda: scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF),
             SQUARE_KEYS: lambda: scores.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), NEG_INF),
             FIRST_AXES: lambda: scores.masked_fill(~_allowed(*scores.shape[:2]), NEG_INF)}

    def raises(f):
        try:
            f()
        except RuntimeError:
            return True
        return False
    return {name: f for name, f in wrong.items() if raises(f)}


@graded("attention.apply_causal_mask", points=2)
def test_apply_causal_mask(student):
    fn = student.piece("attention", "apply_causal_mask")
    inputs = [_randn(2, 5, 5, seed=4),              # T = S
              _randn(4, 7, seed=4),                 # S - T = 3 cached keys
              _randn(2, 3, 6, seed=6).float(),      # S - T = 3, float32, (B, T, S)
              _randn(5, 5, seed=7).float(),         # (T, T) float32
              _randn(2, 2, 3, 5, seed=9).float()]   # (B, H, T, S) float32, as the model
    # a mask that does not line up with the scores raises: named when it raises the same way on a next input
    for i, scores in enumerate(inputs):
        raising = _raising_mask_mistakes(scores)
        after = next(s for s in inputs[i + 1:] + inputs[:i] if raising.keys() <= _raising_mask_mistakes(s).keys())
        expect_runs(lambda: fn(scores), f"apply_causal_mask(scores of shape {tuple(scores.shape)})", mistakes=raising,
                    second=Second(lambda: fn(after), None, _raising_mask_mistakes(after)),
                    hint="the mask is (T, S), from the last two axes of the scores: T, S = scores.shape[-2:]")
    expect_cases(*(_apply_mask_case(fn, scores) for scores in inputs))
    expect_trainable(fn, (randn64(2, 2, 3, 5, seed=74),), "apply_causal_mask(scores of shape (2, 2, 3, 5))")


WHOLE_SUM = "normalised by the sum over the whole tensor: divide by each row's sum (dim=-1, keepdim=True)"
WHOLE_SUM_AFTER_MAX = ("each row's maximum subtracted, then divided by the sum over the whole tensor, e.sum(): divide "
                       "by each row's own sum, e.sum(dim=-1, keepdim=True)")
ROW_MINIMUM = ("the row minimum subtracted instead of the maximum: score - min can be huge (exp overflows to inf) "
               "and a masked -inf gives -inf - (-inf) = NaN; subtract scores.amax(dim=-1, keepdim=True)")


MEAN_SHIFT = ("each row's mean subtracted instead of its maximum: the shift cancels for a row of finite scores, but a "
              "masked -inf makes the mean -inf, and -inf - (-inf) = NaN, and a score far above its row's mean still "
              "overflows exp; subtract scores.amax(dim=-1, keepdim=True)")
EXP_OF_SUM = ("divided by the exponential of the row's summed (shifted) scores, exp(z.sum(dim=-1)), instead of the sum "
              "of the exponentials, e.sum(dim=-1): exp of a sum is a product of exponentials, not their sum, so the "
              "rows do not sum to 1; divide e by e.sum(dim=-1, keepdim=True)")
L2_NORM = ("divided by the Euclidean length (L2 norm) of each row's exponentials, e.norm(dim=-1), instead of their "
           "sum: then the squares of a row sum to 1, not its weights; divide by e.sum(dim=-1, keepdim=True)")


def _normalising_mistakes(scores):
    """{description: output} of a row of exponentials (each row's maximum subtracted) divided by
    something else than its sum."""
    z = scores - scores.amax(dim=-1, keepdim=True)
    e = z.exp()
    return {EXP_OF_SUM: e / z.sum(dim=-1, keepdim=True).exp(), L2_NORM: e / e.norm(dim=-1, keepdim=True)}


def _row_mean_softmax(scores):
    e = (scores - scores.mean(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _whole_sum_after_max(scores):
    """Stable exponentials, each row's maximum subtracted, over the sum of the whole tensor; None
    where there is one row only (then it is the right answer)."""
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum() if scores.shape[:-1].numel() > 1 else None


def _row_minimum_softmax(scores):
    e = (scores - scores.amin(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


COLUMN_MAX = ("each column's maximum over the queries (axis -2) subtracted instead of each row's over the keys: a "
              "constant shifts a softmax harmlessly only when it is the same along the row; subtract "
              "scores.amax(dim=-1, keepdim=True)")
MAX_WITHOUT_LAST = ("the row maximum taken without the last key (a loop over range(S - 1), or [..., :-1]): where the "
                    "last score is the largest, exp overflows to inf and the row is NaN; take the max over the whole "
                    "row, scores.amax(dim=-1, keepdim=True)")


def _shifted_softmax(scores, shift):
    e = (scores - shift).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _softmax_case(fn, scores):
    mistakes = {"not normalised: divide exp(scores) by its row sum": scores.exp(),
                WHOLE_SUM: scores.exp() / scores.exp().sum(),
                WHOLE_SUM_AFTER_MAX: _whole_sum_after_max(scores), **_normalising_mistakes(scores)}
    if scores.dim() > 1:
        mistakes["softmax over the wrong axis (dim=-2): each query's row of S keys must sum to 1"] = \
            torch.softmax(scores, dim=-2)
        mistakes[COLUMN_MAX] = _shifted_softmax(scores, scores.amax(dim=-2, keepdim=True))
    return Case(f"softmax(scores of shape {tuple(scores.shape)}, {str(scores.dtype)[6:]})", lambda: fn(scores),
                torch.softmax(scores, dim=-1), mistakes)


@graded("attention.softmax", points=2)
def test_softmax_over_the_keys(student):
    fn = student.piece("attention", "softmax")
    expect_trainable(fn, (_randn(2, 3, 4, 6, seed=5, scale=3),), "softmax(scores of shape (2, 3, 4, 6))")
    expect_cases(_softmax_case(fn, _randn(2, 3, 4, 6, seed=5, scale=3)),         # T = 4 queries, S = 6 keys
                 _softmax_case(fn, _randn(5, 7, seed=6, scale=2).float()),       # (T, S) alone, float32
                 _softmax_case(fn, _randn(6, seed=7, scale=2).float()),          # one row (S,), float32
                 _softmax_case(fn, _randn(2, 2, 3, 5, seed=8, scale=2).float()))  # (B, H, T, S) float32, as the model


def _global_max_softmax(scores):
    """The maximum of the whole tensor subtracted, not each row's: a row far below it underflows to 0 / 0."""
    e = (scores - scores.amax()).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _stable_case(fn, scores, mean_shift=True):
    """mean_shift: list the row mean subtracted (on an input where it and the row minimum give the same
    NaN, only one of the two inputs that confirm it lists it)."""
    return Case(f"softmax({scores.tolist()})", lambda: fn(scores), torch.softmax(scores, dim=-1),
                {"the row maximum is not subtracted: exp(1000) overflows to inf": scores.exp() / scores.exp().sum(-1, keepdim=True),
                 KEEPDIM_SUM: _softmax_by_hand(scores, keep_sum=False),
                 "subtracted the maximum of the whole tensor, not each row's: a row far below it becomes exp(...) = 0 "
                 "everywhere and 0 / 0; subtract scores.amax(dim=-1, keepdim=True)": _global_max_softmax(scores),
                 WHOLE_SUM: scores.exp() / scores.exp().sum(),
                 WHOLE_SUM_AFTER_MAX: _whole_sum_after_max(scores),
                 ROW_MINIMUM: _row_minimum_softmax(scores),
                 MEAN_SHIFT: _row_mean_softmax(scores) if mean_shift else None,
                 MAX_WITHOUT_LAST: _shifted_softmax(scores, scores[..., :-1].amax(dim=-1, keepdim=True)),
                 **_normalising_mistakes(scores)})


@graded("attention.softmax", points=1)
def test_softmax_is_stable_and_handles_masked_scores(student):
    fn = student.piece("attention", "softmax")
    # rows far below one another: a maximum over the whole tensor, not the row's, leaves 0 / 0 there
    first = torch.tensor([[1000.0, 999.0, NEG_INF], [-1000.0, -1001.0, -999.0], [0.0, NEG_INF, NEG_INF]], dtype=torch.float64)
    second = torch.tensor([[NEG_INF, 800.0, 799.0], [-750.0, NEG_INF, -753.0], [3.0, 0.5, NEG_INF]], dtype=torch.float64)
    # a score 740 above the row's minimum (exp overflows past 709.8) but about 490 above its mean: the
    # row minimum subtracted overflows there, the mean does not; first and second give both the same NaN
    apart = torch.tensor([[740.0, 0.0, 0.0], [NEG_INF, 740.0, 739.0], [-800.0, -801.0, -799.0]], dtype=torch.float64)
    # rows whose largest score, far above the others, is the last one (or the first: there the maximum left
    # out tells itself from no maximum at all)
    last = torch.tensor([[0.0, 1.0, 800.0], [800.0, 0.0, 1.0], [NEG_INF, -5.0, 750.0]], dtype=torch.float64)
    last2 = torch.tensor([[3.0, -2.0, 900.0], [760.0, 0.5, -1.0], [1.0, 2.0, 0.0]], dtype=torch.float64)
    expect_cases(_stable_case(fn, apart), _stable_case(fn, first), _stable_case(fn, second, mean_shift=False),
                 _stable_case(fn, last, mean_shift=False), _stable_case(fn, last2, mean_shift=False),
                 hint="subtract each row's own maximum before exponentiating: the weights do not change and nothing overflows")


ROW_SUMS_TIMES_V = ("v multiplied elementwise by each row's sum of weights: the rows sum to 1, so that gives v back "
                    "unmixed; mix the values by the weights with a matrix product, weights @ v")

COLUMN_SUMS_TIMES_V = ("summed over the queries instead of the keys: each value v_j came out times its column's sum of "
                       "weights, (Σ_i weights[i, j])·v_j (the broadcast product weights[..., :, :, None] * "
                       "v[..., None, :, :] summed over axis -3 gives it); query i's output sums over the keys j, "
                       "Σ_j weights[i, j]·v_j: weights @ v")

FIRST_T_KEYS = ("only the first T keys summed, as many as there are queries (a loop over range(weights.shape[-2]), "
                "the queries' axis): with a cache there are S > T keys; sum over all S, weights @ v")


def _weighted_sum_case(fn, w, v):
    """weights (..., T, S) whose rows sum to 1, v (..., S, K). v @ weights runs only where K = T, and
    weightsᵀ @ v and v times the row sums only where T = S: elsewhere they raise, and list no output."""
    T, S, K = w.shape[-2], w.shape[-1], v.shape[-1]
    return Case(f"weighted_sum(weights of shape {tuple(w.shape)}, v of shape {tuple(v.shape)}, {str(v.dtype)[6:]})",
                lambda: fn(w, v), torch.einsum("...ts,...sk->...tk", w, v), {
                    "multiplied in the wrong order, v @ weights: the weights come first, weights @ v, so that row i of "
                    "the weights mixes the values for query i": v @ w if K == T else None,
                    "the weights transposed, weightsᵀ @ v: query i's output mixes the values by row i of the weights "
                    "(its own weights), not by column i": w.transpose(-2, -1) @ v if T == S else None,
                    "divided by S, the number of keys: each row of weights already sums to 1, so weights @ v is already the "
                    "average; drop the division": (w @ v) / S,
                    ROW_SUMS_TIMES_V: v * w.sum(dim=-1, keepdim=True) if T == S else None,
                    COLUMN_SUMS_TIMES_V: v * w.sum(dim=-2).unsqueeze(-1) if T == S else None,
                    FIRST_T_KEYS: w[..., :T] @ v[..., :T, :] if T < S else None,
                    "v transposed, weights @ vᵀ: v is (S, K) and already lies the right way (only the keys are turned, "
                    "in the scores); weights @ v": w @ v.transpose(-2, -1) if S == K else None,
                    SOFTMAX_AGAIN: torch.softmax(w, dim=-1) @ v})


SOFTMAX_AGAIN = ("a softmax applied to the weights again: they are weights already (the softmax came before), and a "
                 "second one flattens each row towards uniform and gives the masked keys (weight 0) a share again; "
                 "weights @ v as they are")
RENORMALISED = ("divided by each row's sum of weights: weighted_sum is the plain sum Σ_j weights[i, j]·v_j, "
                "whatever the weights add up to (after dropout, say, a row does not sum to 1), so leave the division "
                "out; weights @ v")


def _any_weights_case(fn, w, v):
    """weights (..., T, S) whose rows do not sum to 1, v (..., S, K): the plain weighted sum."""
    return Case(f"weighted_sum(weights of shape {tuple(w.shape)} whose rows do not sum to 1, v of shape "
                f"{tuple(v.shape)}, {str(v.dtype)[6:]})", lambda: fn(w, v), torch.einsum("...ts,...sk->...tk", w, v),
                {RENORMALISED: (w @ v) / w.sum(dim=-1, keepdim=True)})


def _dropped_out(w, seed, p=0.25):
    """Attention weights after dropout: some set to 0, the rest scaled by 1/(1 - p); the diagonal kept, so that
    no row is all 0."""
    keep = torch.rand(w.shape, generator=torch.Generator().manual_seed(seed)) >= p
    keep |= torch.eye(w.shape[-2], w.shape[-1], dtype=torch.bool)
    return w * keep / (1 - p)


@graded("attention.weighted_sum", points=1)
def test_weighted_sum_of_values(student):
    fn = student.piece("attention", "weighted_sum")
    # T = S = K first: there the products in the wrong order or with the weights transposed run, and are named
    expect_cases(_weighted_sum_case(fn, torch.softmax(_randn(2, 4, 4, seed=12), dim=-1), _randn(2, 4, 4, seed=13)),
                 _weighted_sum_case(fn, torch.softmax(_randn(5, 5, seed=14), dim=-1).float(), _randn(5, 5, seed=15).float()),
                 _weighted_sum_case(fn, torch.softmax(_randn(2, 4, 6, seed=6), dim=-1), _randn(2, 6, 3, seed=7)),  # (B, T, S), (B, S, K)
                 _weighted_sum_case(fn, torch.softmax(_randn(3, 5, seed=21), dim=-1), _randn(5, 2, seed=22)),  # T < S
                 _weighted_sum_case(fn, torch.softmax(_randn(5, 5, seed=8), dim=-1).float(), _randn(5, 3, seed=9).float()),  # (T, S), (S, K)
                 _weighted_sum_case(fn, torch.softmax(_randn(2, 2, 4, 4, seed=10), dim=-1).float(),
                                    _strided_heads(2, 2, 4, 3, seed=11)),                    # (B, H, T, S), strided v
                 hint="each query's output is its row of weights times the values: (..., T, S) times (..., S, K) "
                      "gives (..., T, K)")
    # out_i = sum_j weights[i, j]·v_j for any weights: attention weights after dropout, and plain positive numbers
    causal = torch.softmax(_randn(2, 5, 5, seed=16).masked_fill(~_allowed(5, 5), NEG_INF), dim=-1)
    expect_cases(_any_weights_case(fn, _dropped_out(causal, seed=17), _randn(2, 5, 3, seed=18)),
                 _any_weights_case(fn, _randn(4, 6, seed=19).abs().float(), _randn(6, 2, seed=20).float()),
                 hint="out_i = Σ_j weights[i, j]·v_j, the plain sum: the weights need not sum to 1")
    expect_trainable(fn, (torch.softmax(randn64(2, 4, 6, seed=75), dim=-1), randn64(2, 6, 3, seed=76)),
                     "weighted_sum(weights (2, 4, 6), v (2, 6, 3))")


# ----- attention end to end -----

def _attention_case(fn, q, k, v, **kwargs):
    T, S = q.shape[-2], k.shape[-2]
    what = (f"attention(q of shape {tuple(q.shape)}, k and v of {S} positions"
            + "".join(f", {k_}={v_}" for k_, v_ in kwargs.items()) + ")")
    causal = kwargs.get("causal", True)
    if causal:
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(T, S))
        mistakes = _attention_mistakes(q, k, v)
    else:
        want = F.scaled_dot_product_attention(q, k, v)
        mistakes = {"masked although causal=False: apply the mask only when causal is True":
                        F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(T, S)),
                    "scores not divided by sqrt(K)": _attend(q, k, v, scale=1.0),
                    **_by_sqrt_positions(q, k, v), **_fourth_root_and_keys(q, k, v), **_implicit_softmax_dim(q, k, v)}
    return Case(what, lambda: fn(q, k, v, **kwargs), want, mistakes)


@graded("attention.attention", points=3)
def test_causal_attention(student):
    fn = student.piece("attention", "attention")
    expect_cases(_attention_case(fn, *_qkv()), _attention_case(fn, *_qkv(T=4, K=4, seed=7)),
                 _attention_case(fn, *_qkv(T=5, K=4, seed=11, H=3)),   # T != K: sqrt(T) and sqrt(K) differ here too
                 hint=ATTENTION_HINT)


@graded("attention.attention", points=1)
def test_attention_of_heads_as_the_model_gives_them(student):
    """float32 heads that are strided views, (B, H, T, K) and (H, T, K) alone, causal given by
    keyword or not: as multi-head attention and the model hand them over."""
    fn = student.piece("attention", "attention")
    qkv = lambda *shape, seed: tuple(_strided_heads(*shape, seed=seed + i) for i in range(3))
    cached = (_strided_heads(3, 3, 8, seed=44), _strided_heads(3, 7, 8, seed=45), _strided_heads(3, 7, 8, seed=46))
    expect_cases(_attention_case(fn, *qkv(2, 3, 5, 4, seed=40), causal=True), _attention_case(fn, *cached),
                 _attention_case(fn, *qkv(1, 2, 6, 4, seed=50)), _attention_case(fn, *_qkv(T=3, S=6, seed=48)),
                 hint=ATTENTION_HINT)
    expect_trainable(fn, tuple(_randn(2, 3, 5, 4, seed=40 + i) for i in range(3)),
                     "attention(q, k, v of shape (2, 3, 5, 4))")


@graded("attention.attention", points=1)
def test_attention_without_mask(student):
    fn = student.piece("attention", "attention")
    expect_cases(_attention_case(fn, *_qkv(seed=3), causal=False), _attention_case(fn, *_qkv(T=4, seed=9), causal=False),
                 hint=ATTENTION_HINT)


RAW_VALUES = ("the input x itself passed as the values instead of self.w_v(x): the output is D wide instead of K, "
              "and w_v is never used; v = self.w_v(x)")
CAUSAL_ONLY_TRAINING = ("causal only while training (causal=self.training, or a mask under `if self.training`): in eval "
                        "mode, as the model is evaluated and generates text, the head sees the future; the mask is "
                        "always on, causal=True")


def _head_case(head, ref, x, D, K, eval_mode=False):
    """eval_mode: the head in eval mode (head.eval()), where a mask that depends on self.training is gone."""
    with torch.no_grad():
        q, k, v = ref.w_q(x), ref.w_k(x), ref.w_v(x)
    T = x.shape[-2]
    if eval_mode:
        return Case(f"AttentionHead({D}, {K}) in eval mode (x of shape {tuple(x.shape)})", lambda: head(x),
                    F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    {CAUSAL_ONLY_TRAINING: F.scaled_dot_product_attention(q, k, v)})
    return Case(f"AttentionHead({D}, {K})(x of shape {tuple(x.shape)})", lambda: head(x),
                F.scaled_dot_product_attention(q, k, v, is_causal=True),
                {"no causal mask: call attention(..., causal=True)": F.scaled_dot_product_attention(q, k, v),
                 RAW_VALUES: F.scaled_dot_product_attention(q, k, x, is_causal=True),
                 "scaled by sqrt(D) instead of sqrt(K), the head width":
                     _attend(q, k, v, scale=1 / math.sqrt(D), allowed=_allowed(T, T)),
                 **layer_mixups({"w_q": q, "w_k": k, "w_v": v}, {"q": "w_q", "k": "w_k", "v": "w_v"},
                                lambda *qkv: F.scaled_dot_product_attention(*qkv, is_causal=True)),
                 **_biases_left_out(ref, x)})


HEAD_BIASES_LEFT_OUT = ("the projections' biases left out: x @ self.w_q.weight.T (a Keras Dense kernel's habit) "
                        "multiplies by the weight alone, where calling the layer, self.w_q(x), adds its bias too")


def _biases_left_out(ref, x):
    """{mistake: output} of a head whose q, k and v are x times the weights alone (where it has biases)."""
    if ref.w_q.bias is None:
        return {}
    with torch.no_grad():
        q, k, v = (x @ layer.weight.T for layer in (ref.w_q, ref.w_k, ref.w_v))
    return {HEAD_BIASES_LEFT_OUT: F.scaled_dot_product_attention(q, k, v, is_causal=True)}


def _head_shapes_case(student, D, K, bias):
    want = parameter_shapes(pieces.module("attention").AttentionHead(D, K, bias=bias))
    mistakes = {f"bias=False ignored by {layer}: pass bias=bias to its nn.Linear": {**want, f"{layer}.bias": (K,)}
                for layer in ("w_q", "w_k", "w_v")} if not bias else {}
    return Case(f"AttentionHead({D}, {K}, bias={bias}).state_dict(): names and shapes",
                lambda: parameter_shapes(student.piece("attention", "AttentionHead")(D, K, bias=bias)), want, mistakes)


@graded("attention.AttentionHead", points=2)
def test_attention_head(student):
    expect_cases(_head_shapes_case(student, 12, 4, True), _head_shapes_case(student, 12, 4, False),
                 _head_shapes_case(student, 8, 2, False), exact=True,
                 hint="w_q, w_k, w_v: nn.Linear(d_model, d_head, bias=bias) each")
    D, K = 12, 4
    ref = pieces.module("attention").AttentionHead(D, K).double()
    with torch.no_grad():
        for i, p in enumerate(ref.parameters()):
            p.copy_(_randn(*p.shape, seed=10 + i, scale=0.5))
    head = student.piece("attention", "AttentionHead")(D, K)
    head.double()
    load_weights(head, ref.state_dict(), f"AttentionHead({D}, {K})")
    expect_cases(_head_case(head, ref, _randn(2, 5, D, seed=9), D, K), _head_case(head, ref, _randn(3, 4, D, seed=8), D, K),
                 hint="project x to q, k and v with their own layers, then causal attention of one head")
    head.eval()                                          # as the model is evaluated and generates
    expect_cases(_head_case(head, ref, _randn(2, 5, D, seed=7), D, K, eval_mode=True),
                 _head_case(head, ref, _randn(3, 4, D, seed=6), D, K, eval_mode=True),
                 hint="the head is causal in eval mode too: causal=True whatever self.training says")


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
    out[WHOLE_SUM] = scores.exp() / scores.exp().sum()
    out[WHOLE_SUM_AFTER_MAX] = _whole_sum_after_max(scores)
    out.update(_normalising_mistakes(scores))
    for name, keep in ((KEEPDIM_SUM, (True, False)), (KEEPDIM_MAX, (False, True)), (KEEPDIM_BOTH, (False, False))):
        try:
            out[name] = _softmax_by_hand(scores, *keep)
        except RuntimeError:                            # T != S: this mistake raises instead
            pass
    return out


@graded("attention.softmax", points=1)
def test_softmax_keeps_one_statistic_per_row(student):
    """(B, H, T, S) = (2, 3, 4, 6) and (3, 4, 7), where a row statistic without keepdim raises and a
    softmax over dim=0 (the batch) shows, then (T, S) = (5, 5) and (6, 6), where a row statistic
    without keepdim silently lines up with the wrong axis."""
    softmax = student.piece("attention", "softmax")
    hint = "each row's maximum and sum must keep a last axis of size 1, (..., T, 1), to line up with their row"
    for shape, other in (((2, 3, 4, 6), (3, 4, 7)), ((5, 5), (6, 6))):
        scores, scores2 = _randn(*shape, seed=12, scale=2), _randn(*other, seed=13, scale=2)
        what = f"softmax(scores of shape {shape})"
        raising = lambda s: {KEEPDIM_ROW: lambda: _softmax_by_hand(s, keep_sum=False)}
        got = expect_runs(lambda: softmax(scores), what, mistakes=raising(scores),
                          second=Second(lambda: softmax(scores2), None, raising(scores2)), hint=hint)
        expect_close(got, torch.softmax(scores, dim=-1), what, mistakes=_softmax_mistakes(scores),
                     second=Second(lambda: softmax(scores2), torch.softmax(scores2, dim=-1), _softmax_mistakes(scores2)),
                     hint="normalise over the last axis (the keys), one maximum and one sum per row")
