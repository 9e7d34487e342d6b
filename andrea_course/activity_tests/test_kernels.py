"""Graded tests, activity 9 · Triton kernels: the GELU, LayerNorm and row-softmax forward kernels a
learner writes in exercises/kernels.py, run through their given launchers `gelu(x)`,
`layer_norm(x, w, b, eps)` and `softmax(x)`, against PyTorch's GELU, LayerNorm and softmax.
Without a GPU the kernels run in Triton's interpreter (solutions/kernels.py and
exercises/kernels.py set TRITON_INTERPRET).
"""
import math
import os

import pytest
import torch

if not torch.cuda.is_available():          # Triton reads it when it is first imported: before importorskip
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")
import torch.nn.functional as F                                                                 # noqa: E402

from andrea_course.activity_tests import add_fitted_gelu  # noqa: E402
from andrea_course.grading import (Case, Mismatch, expect_cases, expect_close, expect_equal, expect_true,  # noqa: E402
                                   graded)
from andrea_course.grading.expect import _first_differences  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# The interpreter's sigmoid computes 1/(1 + exp(-x)) in numpy: exp overflows to inf for
# large |x| and the result is the right 0; numpy warns all the same.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")

# ----- GELU -----------------------------------------------------------------------------

def gelu_with(c: float = math.sqrt(2 / math.pi), cubic: float = 0.044715, tanh=torch.tanh):
    """The tanh-form GELU with its constants and tanh as given: the reference and its mistakes."""
    return lambda x: 0.5 * x * (1.0 + tanh(c * (x + cubic * x ** 3)))


GELU_MISTAKES = {
    "wrong tanh constant: sqrt(pi/2) instead of sqrt(2/pi) = 0.7978845608": gelu_with(c=math.sqrt(math.pi / 2)),
    "wrong tanh constant: 2/pi without the square root": gelu_with(c=2 / math.pi),
    "wrong cubic constant: 0.44715 instead of 0.044715": gelu_with(cubic=0.44715),
    "the tanh's argument halved, tanh(z/2) where tanh(z) belongs: tanh(z) written as 2·sigmoid(z) - 1 (which is "
    "tanh(z/2); use 2·sigmoid(2z) - 1), or the constant 1/sqrt(2π) = 0.3989, the normal density's, where sqrt(2/π) = "
    "0.7979 belongs (half of it)": gelu_with(tanh=lambda z: 2 * torch.sigmoid(z) - 1),
    "the exact (erf) GELU instead of the tanh form": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    "tanh never applied: 0.5·x·(1 + z) with z = sqrt(2/pi)·(x + 0.044715·x³), the tanh's argument, where tanh(z) "
    "belongs": gelu_with(tanh=lambda z: z),
}


def written_past(exc: Exception, where: str) -> int | None:
    """How many elements the learner's kernel wrote past the end, as its checking launcher counted
    them (RuntimeError "... wrote N elements past the end ..."); None when it is another error."""
    import re
    found = re.search(rf"wrote (\d+) elements? past {where}", str(exc))
    return int(found.group(1)) if found else None


def call_gelu(gelu, x, block=1024, first_block=None):
    """Run the learner's kernel; its launcher refuses a kernel that stores past the last element
    and says how many elements it wrote there. first_block: a function of no argument that says
    whether the mask compares the offsets with BLOCK (_first_block_only), asked when the whole tail
    of a single block was stored."""
    try:
        return gelu(x)
    except RuntimeError as exc:
        past = written_past(exc, "the end")
        if past is None:
            raise
        n = x.numel()
        tail = -n % block
        if past == 1:
            mistake = ("one element past the end: the store's mask let the lane at offs == n_elements through "
                       "(offs <= n_elements?); the elements are 0 .. n_elements - 1, so mask = offs < n_elements")
        elif past == tail:
            mistake = "missing mask on the ragged tail: every lane of the last block stored, the padding too"
            if n <= block and first_block is not None and first_block() == "block":
                mistake = MASK_BY_BLOCK
        else:
            mistake = None
        raise Mismatch("gelu(x)", f"the kernel wrote {past} element{'s' * (past != 1)} past the last element of y "
                                  f"(x has {n:,} elements, in blocks of {block})",
                       "the last block is ragged: pass mask=offs < n_elements to tl.store (and tl.load)",
                       mistake=mistake) from None


Y_UNWRITTEN = ("nothing reached y: every element of y is still the NaN the launcher filled it with, so no tl.store "
               "wrote through y_ptr (a store through x_ptr writes over the input instead, and y is never written); "
               "store the result with tl.store(y_ptr + offs, y, mask=mask)")
MASK_BY_BLOCK = ("the mask compares the offsets with BLOCK instead of n_elements (offs < BLOCK): every lane of the first "
                 "block is on, so a single ragged block stores past the end, and every block after the first is "
                 "masked off entirely; mask = offs < n_elements")
SAME_FIRST_BLOCK = ("every program wrote the same first block: the offsets do not depend on pid = tl.program_id(0); "
                    "offs = pid * BLOCK + tl.arange(0, BLOCK), so that program p covers its own block")


def _first_block_only(gelu, block=1024):
    """What the learner's gelu does on a single ragged block (35 values) and on three blocks (3,000),
    which tells apart the two ways of writing the first block alone: "block" (the mask is offs < BLOCK:
    the single block stores past the end, later blocks store nothing), "pid" (the offsets forget the
    program id: the single block is right), None (neither)."""
    small, large = gelu_inputs(35, torch.float32, seed=9), gelu_inputs(3000, torch.float32, seed=9)
    want_small, want_large = gelu_with()(small.double()).float(), gelu_with()(large.double()).float()
    try:
        out = gelu(large)
    except Exception:                                   # noqa: BLE001 - another failure: neither
        return None
    first = torch.allclose(out[:block], want_large[:block], atol=1e-5, rtol=1e-4) and bool(out[block:].isnan().all())
    if not first:
        return None
    try:
        single = gelu(small)
    except Exception as exc:                            # noqa: BLE001
        return "block" if written_past(exc, "the end") == block - 35 else None
    return "pid" if torch.allclose(single, want_small, atol=1e-5, rtol=1e-4) else None


FLOOR_GRID = ("the last, ragged block never launched: the grid n // BLOCK rounds down, so the elements after the last "
              "full block were never computed; launch triton.cdiv(n, BLOCK) programs, the last one masked")


def _blocks_unwritten(want: torch.Tensor, block: int, got=None, first_block=None) -> dict:
    """{mistake: the output when the programs' offsets do not advance by BLOCK}: the elements no
    program reached stay NaN, as the checking launcher leaves them. first_block: what wrote the first
    block alone (_first_block_only, a function of no argument), asked only when `got` is the first
    block alone."""
    n = want.numel()
    programs = -(-n // block)
    if programs < 2:
        return {}
    cut = lambda k: want.reshape(-1).clone().index_fill_(0, torch.arange(min(k, n), n), float("nan")).view_as(want)
    alone = isinstance(got, torch.Tensor) and got.shape == want.shape and bool(
        torch.allclose(got.double(), cut(block).double(), atol=1e-5, rtol=1e-4, equal_nan=True))
    first = {"block": MASK_BY_BLOCK, "pid": SAME_FIRST_BLOCK}.get(first_block() if first_block and alone else "pid")
    return {**({first: cut(block)} if first else {}),
            **({FLOOR_GRID: cut(n // block * block)} if n % block else {}),
            "the block starts at pid, not pid * BLOCK: program p covered p .. p + BLOCK - 1, so the programs "
            "overlap and the elements past BLOCK + programs - 1 were never written; offs = pid * BLOCK "
            "+ tl.arange(0, BLOCK)": cut(block + programs - 1),
            "each program handled one element (offs = pid, as a CUDA thread would): a Triton program handles a "
            "block of BLOCK elements, offs = pid * BLOCK + tl.arange(0, BLOCK)": cut(programs)}


def _gelu_case(gelu, x, what, blocks=False, first_block=None):
    x64 = x.double()
    got = call_gelu(gelu, x, first_block=first_block)
    mistakes = {name: f(x64).to(x.dtype) for name, f in GELU_MISTAKES.items()}
    mistakes[Y_UNWRITTEN] = torch.full_like(x, float("nan"))
    if blocks:                                 # cases of several programs each
        mistakes.update(_blocks_unwritten(gelu_with()(x64).to(x.dtype), 1024, got, first_block))
    add_fitted_gelu(mistakes, x, got, gelu_with)
    return Case(what, lambda: got, gelu_with()(x64).to(x.dtype), mistakes)


def check_gelu(student, cases, atol=None, rtol=None, blocks=False):
    """cases: [(x, what)], two or more: each gelu(x) in x's dtype and close to the formula (within
    atol and rtol where given); a named mistake confirmed on another case. blocks: every case
    runs several programs, so offsets that do not advance by BLOCK are named."""
    gelu = student.piece("kernels", "gelu")
    probe = {}

    def first_block():                         # run once, when a failure asks for it
        if "found" not in probe:
            probe["found"] = _first_block_only(gelu)
        return probe["found"]
    x, what = cases[0]
    got = call_gelu(gelu, x, first_block=first_block)
    expect_equal(getattr(got, "dtype", None), x.dtype, f"{what}.dtype", "store y.to(y_ptr.dtype.element_ty)")
    expect_cases(*(_gelu_case(gelu, x_, what_, blocks, first_block) for x_, what_ in cases), atol=atol, rtol=rtol)


def gelu_inputs(n, dtype, seed=0):
    torch.manual_seed(seed)
    return (torch.linspace(-6, 6, n) + 0.01 * torch.randn(n)).to(DEVICE, dtype)


@graded("kernels.gelu_kernel", points=2)
def test_gelu_kernel_matches_formula(student):
    """3,000 values in [-6, 6]: three programs of 1,024, the last one ragged. Held to a few fp32
    roundings (atol 1e-6, rtol 2e-6), where a constant typed short (0.0447) already shows."""
    check_gelu(student, [(gelu_inputs(3000, torch.float32), "gelu(x) for x of 3,000 values"),
                         (gelu_inputs(1300, torch.float32, seed=1), "gelu(x) for x of 1,300 values")],
               atol=1e-6, rtol=2e-6, blocks=True)


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_any_shape_and_one_element(student):
    torch.manual_seed(1)
    check_gelu(student, [((torch.randn(2, 17, 100) * 3).to(DEVICE), "gelu(x) for x of shape (2, 17, 100)"),
                         ((torch.randn(5, 7) * 3).to(DEVICE), "gelu(x) for x of shape (5, 7)")])
    check_gelu(student, [(torch.tensor([1.5], device=DEVICE), "gelu(x) for a single element"),
                         (torch.tensor([-2.2], device=DEVICE), "gelu(x) for a single element")])


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_half_precision(student):
    """fp16 in, fp16 out, computed in fp32 inside."""
    check_gelu(student, [(gelu_inputs(1500, torch.float16), "gelu(x) for fp16 x"),
                         (gelu_inputs(700, torch.float16, seed=2), "gelu(x) for fp16 x of 700 values")])


# ----- LayerNorm ------------------------------------------------------------------------

def ln_with(x, w, b, eps, divisor=None, padding=0, ddof=0, eps_outside=False, mean_divisor=None, centred=True,
            times_std=False, var_of_raw=False, bias_first=False):
    """LayerNorm per row in float64 with the given slips: the reference and its mistakes.
    divisor: what the sums are divided by (D, or BLOCK_D by mistake; mean_divisor: the mean's
    alone); padding: lanes that add mean² each to the variance sum (not zeroed by tl.where);
    ddof 1: the unbiased variance; not centred: the raw x scaled, x·rstd (the statistics right);
    times_std: rstd computed as sqrt(var + eps), so xc is multiplied by the spread (and stored so);
    var_of_raw: the variance summed over x², not xc² (used for y and stored so); bias_first: beta
    added before the multiplication by gamma, (x̂ + β)·γ."""
    D = x.shape[-1]
    n = divisor or D
    mean = x.sum(-1, keepdim=True) / (mean_divisor or n)
    sq = ((x if var_of_raw else x - mean) ** 2).sum(-1, keepdim=True) + padding * mean ** 2
    var = sq / (n - ddof)
    xc = x - mean if centred else x
    y = xc / (var.sqrt() + eps) if eps_outside else xc * (var + eps).sqrt() if times_std else xc / (var + eps).sqrt()
    if bias_first and b is not None:
        y, b = y + b, None
    y = y * w
    rstd = (var + eps).sqrt() if times_std else 1 / (var + eps).sqrt()
    return (y + b if b is not None else y), mean.squeeze(-1), rstd.squeeze(-1)


KERNEL_EPS = ("a constant eps of {:g} in place of the eps the launcher passes (Keras' LayerNormalization defaults to "
              "1e-3): use the kernel's eps argument")


def ln_mistakes(x, w, b, eps):
    D = x.shape[-1]
    block = 1 << (D - 1).bit_length()
    return {
        "padding lanes in the variance: x - mean is -mean on the masked lanes; zero them with "
        "tl.where(mask, x - mean, 0.) before squaring": ln_with(x, w, b, eps, padding=block - D),
        "divided by BLOCK_D instead of D: only D lanes hold data":
            ln_with(x, w, b, eps, divisor=block, padding=0),
        "the mean divided by BLOCK_D, the block's width, instead of D: only D lanes hold data, so the mean is "
        "tl.sum(x, axis=0) / D": ln_with(x, w, b, eps, mean_divisor=block),
        **({"the variance divided by BLOCK_D, the block's width, instead of D (the mean by D): only D lanes hold "
            "data, so var = tl.sum(xc * xc, axis=0) / D": ln_with(x, w, b, eps, divisor=block, mean_divisor=D)}
           if block != D else {}),
        "unbiased variance (D - 1): LayerNorm divides by D": ln_with(x, w, b, eps, ddof=1),
        **{KERNEL_EPS.format(typed): ln_with(x, w, b, typed) for typed in (1e-3, 1e-5) if typed != eps},
        "eps outside the square root: use 1 / tl.sqrt(var + eps)": ln_with(x, w, b, eps, eps_outside=True),
        "forgot beta (the bias)": ln_with(x, w, None, eps),
        "the raw x scaled (x * rstd) instead of the centred xc: the mean was never subtracted from the output; "
        "y = xc * rstd * gamma (+ beta)": ln_with(x, w, b, eps, centred=False),
        "forgot gamma (the weight)": ln_with(x, torch.ones_like(w), b, eps),
        RSTD_AS_STD: ln_with(x, w, b, eps, times_std=True),
        VAR_OF_RAW: ln_with(x, w, b, eps, var_of_raw=True),
        **({BIAS_FIRST: ln_with(x, w, b, eps, bias_first=True)} if b is not None else {}),
        **({"the shift loaded from w_ptr instead of b_ptr: gamma was added where beta belongs, y = x̂·γ + γ; load "
            "the bias from b_ptr + cols": ln_with(x, w, w, eps)} if b is not None else {}),
        **({"the bias added although HAS_BIAS is False: without a bias the launcher passes the weight as b_ptr, "
            "so gamma was added; load and add b only under `if HAS_BIAS:`": ln_with(x, w, w, eps)} if b is None else {}),
    }


RSTD_AS_STD = ("the standard deviation, tl.sqrt(var + eps), used as rstd: rstd is its reciprocal, 1 / tl.sqrt(var + eps), "
               "both for scaling xc (xc * rstd) and for the value saved at rstd_ptr")
NOT_STORED = ("{0} never stored: every entry is still the NaN the launcher starts it with; store each row's {0} "
              "with tl.store({0}_ptr + ...)")
VAR_AS_RSTD = ("the variance stored at rstd_ptr (the neighbouring variable, var, where rstd belongs): y is right, but "
               "the backward pass reads 1 / sqrt(var + eps) there; store rstd")
STATS_SWAPPED = ("the mean and rstd stored at each other's pointers: the mean goes to mean_ptr + row, 1 / sqrt(var + eps) "
                 "to rstd_ptr + row")
VAR_OF_RAW = ("the variance taken over the raw row, tl.sum(x * x) / D, instead of over the centred one: that is the "
              "mean square, the variance plus mean², so rstd (used for y, and saved) is too small wherever the row's "
              "mean is not 0; square the centred row, var = tl.sum(xc * xc, axis=0) / D with xc = x - mean, its "
              "padding lanes zeroed")
BIAS_FIRST = ("beta added before multiplying by gamma, so beta gets scaled too: (x̂ + β)·γ = x̂·γ + β·γ; multiply by "
              "gamma first, then add beta: y = xc * rstd * gamma + beta")
MEAN_OF_CENTRED = ("the saved mean is about 0: it is the mean of the centred row xc = x - mean, which is 0 by "
                   "construction, not the row's own mean; store the mean you subtracted, tl.sum(x, axis=0) / D, at "
                   "mean_ptr + row")
MEAN_OF_CENTRED_PADDED = ("the saved mean is the mean of the centred row x - mean, summed with its padding lanes "
                          "(each -mean, since they were loaded as 0), not the row's own mean; store the mean you "
                          "subtracted, tl.sum(x, axis=0) / D, at mean_ptr + row")


def _ln_cases(layer_norm, x, w, b, eps, what):
    """(the launcher's output, Cases for y, mean and rstd) of layer_norm(x, w, b, eps)."""
    args64 = (x.double(), w.double(), None if b is None else b.double())
    want_y, want_mean, want_rstd = ln_with(*args64, eps)
    mistakes = ln_mistakes(*args64, eps)
    cache = {}

    def part(i):
        def got():
            if "out" not in cache:
                cache["out"] = layer_norm(x, w, b, eps)
            out = cache["out"]
            return out[i] if isinstance(out, (tuple, list)) and len(out) == 3 else out
        return got
    mean, rstd = want_mean.reshape(-1).float(), want_rstd.reshape(-1).float()
    unstored = lambda t: torch.full_like(t, float("nan"))                  # noqa: E731 (the launcher's start)
    return (Case(f"{what}: y", part(0), want_y.to(x.dtype),
                 {**{k: v[0].to(x.dtype) for k, v in mistakes.items()}, NOT_STORED.format("y"): unstored(want_y)}),
            Case(f"{what}: the saved mean", part(1), mean, {STATS_SWAPPED: rstd, NOT_STORED.format("mean"): unstored(mean),
                                                            **_mean_of_centred(mean, x.shape[-1])}),
            Case(f"{what}: the saved rstd", part(2), rstd,
                 {**{k: v[2].reshape(-1).float() for k, v in mistakes.items()}, STATS_SWAPPED: mean, RSTD_AS_STD: 1 / rstd,
                  NOT_STORED.format("rstd"): unstored(rstd), VAR_AS_RSTD: 1 / rstd ** 2 - eps}))


def _mean_of_centred(mean, D):
    """{mistake: the saved mean} when the mean of the centred row x - mean was saved: 0, or with the
    BLOCK_D - D padding lanes (each 0 - mean) in its sum, -(BLOCK_D - D)·mean / D."""
    pad = (1 << (D - 1).bit_length()) - D
    return {MEAN_OF_CENTRED: torch.zeros_like(mean), **({MEAN_OF_CENTRED_PADDED: -pad * mean / D} if pad else {})}


def check_layer_norm(student, first, second):
    """first, second: (x, w, b, eps, what). y, the saved mean and rstd of each against float64
    LayerNorm; a named mistake confirmed on the other."""
    layer_norm = student.piece("kernels", "layer_norm")
    out = layer_norm(*first[:4])
    expect_true(isinstance(out, (tuple, list)) and len(out) == 3, first[4],
                f"expected (y, mean, rstd), got {type(out).__name__}", "keep the launcher as given")
    cases, cases2 = _ln_cases(layer_norm, *first), _ln_cases(layer_norm, *second)
    hints = ("", "store tl.sum(x, axis=0) / D at mean_ptr + row", "store 1 / tl.sqrt(var + eps) at rstd_ptr + row")
    for case, case2, hint in zip(cases, cases2, hints):
        expect_cases(case, case2, hint=hint)


def ln_inputs(rows, D, dtype=torch.float32, scale=2.0, shift=3.0, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(rows, D) * scale + shift           # a mean far from 0 shows padding mistakes
    w, b = torch.randn(D) * 0.5 + 1, torch.randn(D) * 0.1
    return x.to(DEVICE, dtype), w.to(DEVICE, dtype), b.to(DEVICE, dtype)


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_steps_by_the_row_stride(student):
    """layer_norm_kernel launched directly on x = wide[:, :D], rows `stride` elements apart (NaN in the
    gaps and around every tensor), as rows sliced out of a wider matrix are: with and without bias.
    It runs first of the LayerNorm tests: here every tensor has guards, so a store past the end of
    mean or rstd is seen and named, where the launcher's tensors have none and such a store lands in
    memory that is not theirs."""
    check_layer_norm_memory(student, 3, 60, 96, False, 12, "layer_norm_kernel on 3 rows of 60, 96 apart, no bias")
    check_layer_norm_memory(student, 4, 100, 160, True, 11, "layer_norm_kernel on 4 rows of 100, 160 apart")


@graded("kernels.layer_norm_kernel", points=2)
def test_layer_norm_kernel_ragged_width(student):
    """D = 769 in a block of 1,024: 255 padding lanes that must stay out of the sums."""
    check_layer_norm(student, (*ln_inputs(6, 769), 1e-5, "layer_norm(x) with D = 769"),
                     (*ln_inputs(3, 300, seed=5), 1e-5, "layer_norm(x) with D = 300"))


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_eps_inside_sqrt(student):
    """eps = 0.1 on rows of variance about 1 shows where eps goes."""
    check_layer_norm(student, (*ln_inputs(4, 768, scale=1.0), 0.1, "layer_norm(x) with eps = 0.1"),
                     (*ln_inputs(3, 200, scale=0.8, seed=6), 0.3, "layer_norm(x) with D = 200, eps = 0.3"))


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_without_bias_and_batched(student):
    x, w, _ = ln_inputs(2 * 17, 100, seed=1)
    x2, w2, _ = ln_inputs(3 * 4, 60, seed=7)
    check_layer_norm(student, (x.reshape(2, 17, 100), w, None, 1e-5, "layer_norm(x) of shape (2, 17, 100), no bias"),
                     (x2.reshape(3, 4, 60), w2, None, 1e-5, "layer_norm(x) of shape (3, 4, 60), no bias"))


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_half_precision(student):
    """fp16 rows of ANDREA's width: y in fp16, statistics in fp32."""
    check_layer_norm(student, (*ln_inputs(4, 768, dtype=torch.float16, seed=2), 1e-5, "layer_norm(x) in fp16"),
                     (*ln_inputs(3, 500, dtype=torch.float16, seed=8), 1e-5, "layer_norm(x) in fp16 with D = 500"))


# ----- row softmax ----------------------------------------------------------------------

SOFTMAX_HINT = ("one program per row: load the row through its row stride, padding lanes masked so that they "
                "count in neither the max nor the sum; subtract the max, exponentiate, divide by the row's sum")
NO_MAX = ("no max subtraction: exp of a large score overflows to inf, and inf / inf is NaN; subtract the row's "
          "maximum before exp (the softmax does not change)")
PAD_ZERO = ("padding loaded as 0.0 instead of -inf: each padding lane adds exp(0 - max) to the row's sum (and 0 "
            "can win the max); load it as -inf, whose exp is 0")
NOT_NORMALISED = "not normalised: divide exp(x - max) by its sum over the row"
BY_SUM_OF_X = ("divided by the sum of the row's x instead of the sum of its exponentials: y = e / tl.sum(e, axis=0) "
               "with e = exp(x - max)")
BY_SUM_OF_Z = ("divided by the sum of the row's x - max instead of the sum of its exponentials: y = e / tl.sum(e, "
               "axis=0) with e = exp(x - max)")
ROW_STRIDE = ("x's rows stepped by n_cols instead of x_row_stride: x's rows are x_row_stride elements apart, "
              "more than n_cols when x is a slice of a wider matrix")


ROW_STRIDE_ONE = ("row r read from x_ptr + r, one element after row r - 1's start: the row stride given to the kernel "
                  "is 1 (x.stride(1), the distance between columns) instead of x.stride(0), the distance between rows")


ONE_PAST = ("one element past the end of each row: the store's mask let lane n_cols through (cols <= n_cols?), so "
            "each row also wrote into the next row's first element, and the last row past the end of y; the row's "
            "lanes are 0 .. n_cols - 1: mask = cols < n_cols")
NO_STORE_MASK = "missing mask on the store: the padding lanes of each row write past its end"
EXP2_NO_LOG2E = ("tl.exp2 without the factor log2(e): 2^(x - max) is a softmax in base 2, the natural softmax of "
                 "x·ln(2), flatter than the one asked for; exp(z) = tl.exp2(z * log2(e)) with log2(e) = "
                 "1.4426950408889634, or plain tl.exp(z)")
EXP2_LOG2E_TWICE = ("the factor log2(e) used once too often: tl.exp(z * log2(e)), or tl.exp2 with z multiplied by "
                    "log2(e) twice, is exp(z·log2(e)), the softmax of x·log2(e), sharper than the one asked for; "
                    "the factor belongs with tl.exp2 alone, once: tl.exp2(z * log2(e)), or plain tl.exp(z)")
EXP2_LOG2E_INVERTED = ("tl.exp2 with z divided by log2(e) (or multiplied by ln(2)) instead of multiplied by "
                       "log2(e): 2^(z·ln 2) is the softmax of x·ln(2)², flatter than the one asked for; "
                       "exp(z) = tl.exp2(z * log2(e)) with log2(e) = 1.4426950408889634")


def call_softmax(softmax, x):
    """Run the learner's kernel; its launcher refuses a kernel that stores past the last row of y
    and says how many elements it wrote there."""
    try:
        return softmax(x)
    except RuntimeError as exc:
        past = written_past(exc, "the last row")
        if past is None:
            raise
        n = x.shape[-1]
        padding = triton.next_power_of_2(n) - n
        mistake = ONE_PAST if past == 1 else NO_STORE_MASK if past == padding and x.is_contiguous() else None
        raise Mismatch("softmax(x)", f"the kernel wrote {past} element{'s' * (past != 1)} past the last row of y "
                                     f"(rows of {n}, blocks of {n + padding})",
                       "stores take the same mask as loads, and step through y by y's own row stride",
                       mistake=mistake) from None



def softmax_mistakes(x):
    """{typical mistake: the output it gives} for x (..., n_cols), in x's dtype."""
    n = x.shape[-1]
    x64 = x.double()
    e32 = x.float().exp()                                  # fp32, as the kernel computes: overflows above 88.7
    out = {NO_MAX: (e32 / e32.sum(-1, keepdim=True)).to(x.dtype),
           NOT_NORMALISED: (x64 - x64.amax(-1, keepdim=True)).exp().to(x.dtype),
           **{name: ((x64 - x64.amax(-1, keepdim=True)).exp() / z.sum(-1, keepdim=True).double()).to(x.dtype)
              for name, z in ((BY_SUM_OF_X, x.float()), (BY_SUM_OF_Z, x.float() - x.float().amax(-1, keepdim=True)))
              if triton.next_power_of_2(n) == n},                 # padding: -inf in either sum, y = 0
           **{name: torch.softmax(x64 * c, -1).to(x.dtype)           # exp2 with its factor log2(e) slipped
              for name, c in ((EXP2_NO_LOG2E, math.log(2)), (EXP2_LOG2E_TWICE, math.log2(math.e)),
                              (EXP2_LOG2E_INVERTED, math.log(2) ** 2))}}
    if triton.next_power_of_2(n) != n:
        out[PAD_ZERO] = torch.softmax(F.pad(x64, (0, triton.next_power_of_2(n) - n)), -1)[..., :n].to(x.dtype)
    rows = x.numel() // n
    if rows > 1:                                           # row r read at x_ptr + r: its memory, as the kernel sees it
        shifted = torch.as_strided(x.reshape(-1, n) if x.stride(-1) != 1 else x, (rows, n), (1, 1))
        out[ROW_STRIDE_ONE] = torch.softmax(shifted.double(), -1).to(x.dtype).view(x.shape)
    return out


def _softmax_case(softmax, x, what, extra=None):
    want = torch.softmax(x.double(), -1).to(x.dtype)
    mistakes = {**softmax_mistakes(x), **(extra or {})}
    mistakes = {k: v for k, v in mistakes.items() if not torch.allclose(v.double(), want.double(), atol=1e-6, rtol=1e-5,
                                                                        equal_nan=True)}
    return Case(what, lambda: call_softmax(softmax, x), want, mistakes)


def check_softmax(student, first, second, extra=None, extra2=None):
    """first, second: (x, what); the softmax of each, in x's dtype; a mistake named is confirmed on the other."""
    softmax = student.piece("kernels", "softmax")
    x, what = first
    got = call_softmax(softmax, x)
    expect_equal(getattr(got, "dtype", None), x.dtype, f"{what}.dtype", "store y.to(y_ptr.dtype.element_ty)")
    expect_cases(_softmax_case(softmax, x, what, extra), _softmax_case(softmax, *second, extra2), hint=SOFTMAX_HINT)


def softmax_inputs(*shape, scale=3.0, shift=0.0, seed=0, dtype=torch.float32):
    """Random scores of `shape`, contiguous, at the start of a buffer with a block of zeros after them,
    so that a kernel reading one row past the end reads a zero, not whatever memory follows (then its
    result, and the mistake it is named, are the same on every run)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g) * scale + shift).to(DEVICE, dtype)
    buf = torch.zeros(x.numel() + triton.next_power_of_2(shape[-1]), dtype=dtype, device=DEVICE)
    buf[:x.numel()] = x.reshape(-1)
    return buf[:x.numel()].view(x.shape)


@graded("kernels.softmax_kernel", points=2)
def test_softmax_kernel_matches_torch(student):
    """Rows of 256 (a power of two: no padding), fp32 and fp16, 2-D and 3-D."""
    check_softmax(student, (softmax_inputs(8, 256), "softmax(x) for x of shape (8, 256)"),
                  (softmax_inputs(3, 128, seed=5), "softmax(x) for x of shape (3, 128)"))
    check_softmax(student, (softmax_inputs(2, 3, 256, seed=1, dtype=torch.float16), "softmax(x) for fp16 x of shape (2, 3, 256)"),
                  (softmax_inputs(4, 64, seed=6, dtype=torch.float16), "softmax(x) for fp16 x of shape (4, 64)"))


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_ragged_row(student):
    """n_cols = 300 in a block of 512: 212 padding lanes per row that must stay out of the max and the sum."""
    check_softmax(student, (softmax_inputs(6, 300, scale=2.0, shift=-1.0, seed=2), "softmax(x) for rows of 300"),
                  (softmax_inputs(3, 100, scale=2.0, shift=-2.0, seed=7), "softmax(x) for rows of 100"))


def _large(rows, n, seed):
    x = softmax_inputs(rows, n, seed=seed)
    x[:rows // 2] += 1e4
    x[rows // 2:] -= 1e4
    return x


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_large_scores(student):
    """Scores near +10,000 and -10,000: exp overflows to inf (or underflows to 0) unless the max goes first."""
    check_softmax(student, (_large(4, 256, 3), "softmax(x) for rows of scores near +10,000 and -10,000"),
                  (_large(2, 64, 8), "softmax(x) for rows of 64 scores near +10,000 and -10,000"))


def _strided(rows, n, wide_n, seed):
    wide = softmax_inputs(rows, wide_n, seed=seed)
    x = wide[:, :n]                                        # (rows, n), row stride wide_n
    read_by_n = wide.reshape(-1)[:rows * n].view(rows, n)  # what row * n_cols reads
    return x, {ROW_STRIDE: torch.softmax(read_by_n.double(), -1).to(x.dtype)}


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_strided_rows(student):
    """x = wide[:, :256], the first 256 columns of a (6, 320) matrix, as logits over a vocabulary
    padded to a multiple of 64 are: row r starts 320 elements after row r - 1, not 256. (256, a
    power of two, leaves no padding lanes: a padding mistake costs in the ragged test alone.)"""
    (x, extra), (x2, extra2) = _strided(6, 256, 320, 4), _strided(4, 128, 192, 9)
    check_softmax(student, (x, "softmax(x) for x = wide[:, :256], rows 320 apart"),
                  (x2, "softmax(x) for x = wide[:, :128], rows 192 apart"), extra, extra2)


# ----- the row softmax computes in fp32 -----

NO_UPCAST = ("the row is never converted to fp32: with fp16 (or bf16) input the kernel then works in 16 bits wherever "
             "no operation promotes it for you. Triton's tl.exp accepts only fp32 and fp64 ('Expected dtype "
             "['fp32', 'fp64'] but got fp16'), so such a kernel fails to compile on a GPU as soon as a 16-bit value "
             "reaches it (whether tl.max promotes its input to fp32 depends on the Triton version: a kernel that "
             "relies on it breaks on another); convert right after loading: tl.load(...).to(tl.float32)")


def _math_before_upcast(source: str) -> bool:
    """Whether the kernel's source calls an exponential or logarithm without converting anything
    to tl.float32 first (read in order, line by line: the static part of the check)."""
    import ast
    import textwrap
    tree = ast.parse(textwrap.dedent(source))
    upcasts, maths = [], []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        names_fp32 = any(isinstance(a, ast.Attribute) and a.attr == "float32" or isinstance(a, ast.Name) and a.id == "float32"
                         for a in [*node.args, *(k.value for k in node.keywords)])
        if name in ("to", "cast") and names_fp32:
            upcasts.append(node.lineno)
        if name in ("exp", "exp2", "log", "log2"):
            maths.append(node.lineno)
    return bool(maths) and (not upcasts or min(upcasts) > min(maths))


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_computes_in_fp32(student):
    """An fp16 input: the kernel converts the row to fp32 before any exponential (read from its
    source, since Triton's interpreter on a CPU lets 16-bit math through where a GPU's compiler may
    not), and its output is the fp32 softmax rounded once to fp16."""
    source = student.source("kernels", "softmax_kernel")
    expect_true(not _math_before_upcast(source), "softmax_kernel, read from its source",
                "an exponential is taken before anything is converted to tl.float32",
                "load, then .to(tl.float32) at once; exp, sum and divide in fp32; store in y's dtype", mistake=NO_UPCAST)
    check_softmax(student, (softmax_inputs(4, 1000, scale=4.0, seed=10, dtype=torch.float16), "softmax(fp16 x of shape (4, 1000))"),
                  (softmax_inputs(2, 600, scale=4.0, seed=11, dtype=torch.float16), "softmax(fp16 x of shape (2, 600))"))


# ----- memory: a kernel reads and writes its own tensors' elements and nothing else -----
#
# The given launchers are lenient, for learning: gelu(x) pads x with a block of zeros, so an unmasked
# load there reads the padding. On a GPU a kernel gets its tensors as they are, and a load or store
# past the end touches memory that belongs to someone else. The tests below launch the kernel
# directly, each tensor in the middle of a larger buffer: GUARD elements of NaN before and after it
# and, for strided rows, NaN in the gaps between rows. A write there changes a NaN (seen in every
# runner); every tl.load must take a mask (read from the kernel's source); where Triton's
# interpreter runs in this process it also sees every address, which names what went wrong.

GUARD = 256                      # NaN elements before and after every buffer (at least one block)


class Guarded:
    """values copied into a NaN-filled buffer with `guard` elements on each side; given row_stride,
    the rows of values (rows, n) lie row_stride elements apart with NaN in the gaps.
    .view holds the values; .arg, what the kernel gets, starts where the view starts and reaches the
    buffer's end (a kernel sees a pointer only: the same addresses, and in a worker process the
    guards after it and the gaps between rows travel with it, and what the kernel wrote there comes
    back); .outside() the buffer's elements that are not the view's."""

    def __init__(self, values: torch.Tensor, row_stride: int | None = None, guard: int = GUARD):
        rows, n = (values.shape[0], values.shape[-1]) if row_stride else (1, values.numel())
        stride, self.guard = row_stride or n, guard
        self.buf = torch.full((rows * stride + 2 * guard,), float("nan"), dtype=values.dtype, device=values.device)
        index = torch.arange(self.buf.numel(), device=values.device)
        body = slice(guard, guard + rows * stride)
        self.view = self.buf[body].view(rows, stride)[:, :n] if row_stride else self.buf[body]
        self.view.copy_(values if row_stride else values.reshape(-1))
        inside = index[body].view(rows, stride)[:, :n] if row_stride else index[body]
        self.inside = torch.zeros(self.buf.numel(), dtype=torch.bool, device=values.device)
        self.inside[inside.reshape(-1)] = True
        self.size = self.buf.element_size()
        self.arg = self.buf[guard:]          # what the kernel gets: its first element, up to the buffer's end

    def outside(self) -> torch.Tensor:
        return self.buf[~self.inside]

    def where(self, address: int) -> str | None:
        """Where in this buffer an address lies: 'before', 'after', 'between' (rows), or None."""
        start = self.buf.data_ptr()
        k, r = divmod(address - start, self.size)
        if r or not 0 <= k < self.buf.numel():
            return None
        if self.inside[k]:
            return "inside"
        return "before" if k < self.guard else "after" if k >= self.buf.numel() - self.guard else "between"


class Watch:
    """Every address a kernel loads and stores with its lane switched on, while Triton's interpreter
    runs it (on a GPU it records nothing: .active is False)."""

    def __init__(self):
        self.loads, self.stores, self.active = [], [], False

    def __enter__(self):
        try:
            from triton.runtime.interpreter import interpreter_builder as builder
        except ImportError:
            return self
        self.builder, self.active = builder, bool(os.environ.get("TRITON_INTERPRET"))
        if not self.active:
            return self
        load, store = builder.create_masked_load, builder.create_masked_store

        def masked_load(ptrs, mask, other, *args):
            self.loads.append(ptrs.data[mask.data.astype(bool)].reshape(-1).copy())
            return load(ptrs, mask, other, *args)

        def masked_store(ptrs, value, mask, *args):
            self.stores.append(ptrs.data[mask.data.astype(bool)].reshape(-1).copy())
            return store(ptrs, value, mask, *args)
        builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
        return self

    def __exit__(self, *exc):
        if self.active:
            del self.builder.create_masked_load, self.builder.create_masked_store   # the class's again
        return False

    def addresses(self, kind: str):
        import numpy as np
        found = self.loads if kind == "load" else self.stores
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.uint64)


def _strays(watch: Watch, kind: str, tensors: dict) -> dict:
    """{(tensor name, 'before' | 'after' | 'between' | 'elsewhere'): how many elements} the kernel
    loaded (kind 'load') or stored ('store') outside its tensors' own elements."""
    out = {}
    for address in watch.addresses(kind).tolist():
        places = [(name, g.where(address)) for name, g in tensors.items()]
        if any(p == "inside" for _, p in places):
            continue
        key = next(((name, p) for name, p in places if p), ("", "elsewhere"))
        out[key] = out.get(key, 0) + 1
    if kind == "store":                       # seen on any device: a NaN of a guard that changed
        for name, g in tensors.items():
            changed = int((~torch.isnan(g.outside())).sum())
            if changed and not any(k[0] == name for k in out):
                out[(name, "around")] = changed
    return out


def _said(strays: dict, verb: str) -> str:
    words = {"before": "before the start of", "after": "past the end of", "between": "between the rows of",
             "around": "outside", "elsewhere": "outside every tensor it was given"}
    parts = [f"{n:,} element{'s' * (n != 1)} {words[where]}{f' {name}' if name else ''}"
             for (name, where), n in sorted(strays.items())]
    return f"the kernel {verb} " + ", ".join(parts)


def launch_watched(kernel, grid, args: list, what: str, hint: str, name_mistake=None, **consts) -> Watch:
    """kernel[grid](*args, **consts), each Guarded argument as its .arg; a Mismatch when the kernel
    wrote an element of a guard or of a gap between rows (seen by the values there, in every runner;
    where Triton's interpreter runs in this process, the addresses say where and name the mistake).
    args: [(name, Guarded | value)]; name_mistake(kind, strays, watch, tensors) -> the typical mistake
    those addresses show, or None. Returns the watch, which names a read on a failure that follows."""
    tensors = {name: a for name, a in args if isinstance(a, Guarded)}
    with Watch() as watch:
        kernel[grid](*(a.arg if isinstance(a, Guarded) else a for _, a in args), **consts)
    changed = {(name, "around"): int((~torch.isnan(g.outside())).sum()) for name, g in tensors.items()}
    changed = {k: n for k, n in changed.items() if n}
    if changed:
        strays = _strays(watch, "store", tensors) or changed
        mistake = name_mistake("store", strays, watch, tensors) if name_mistake else None
        raise Mismatch(what, _said(strays, "wrote"), hint, mistake=mistake)
    return watch


def expect_kernel_output(got, want, what, hint, watch, tensors: dict, name_mistake=None):
    """expect_close(got, want); on a failure, the addresses the kernel read outside its tensors (where
    the interpreter ran in this process) are said, and the mistake they show is named."""
    try:
        expect_close(got, want, what, hint=hint)
    except Mismatch as exc:
        reads = _strays(watch, "load", tensors)
        mistake = name_mistake("load", reads, watch, tensors) if reads and name_mistake else None
        if not reads:
            raise
        raise Mismatch(what, f"{exc.problem}; {_said(reads, 'read')}", hint, mistake=mistake,
                       differences=exc.differences, max_error=exc.max_error) from None


def unmasked_loads(source: str) -> int:
    """How many tl.load calls in a kernel's source pass no mask (neither mask= nor a second argument):
    every load of these kernels reads a block whose last lanes may run past the data."""
    import ast
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return 0
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "load" and len(node.args) < 2 and not any(k.arg == "mask" for k in node.keywords))


def expect_masked_loads(student, piece: str, mistake: str) -> None:
    n = unmasked_loads(student.source("kernels", piece))
    expect_true(not n, f"{piece}, read from its source", f"{n} tl.load call{'s' * (n != 1)} without a mask",
                "every tl.load of a block takes the mask its tl.store takes", mistake=mistake)


UNMASKED_LOAD = ("tl.load without a mask: the lanes of the last block past n_elements read memory that is not x's "
                 "(the checking launcher's padding hid it; on a GPU it is someone else's, or a crash); pass "
                 "mask=offs < n_elements to tl.load as to tl.store")
LN_UNMASKED_LOAD = ("tl.load without a mask: the lanes D .. BLOCK_D - 1 of every load (x's row, w, b) read past the "
                    "data; pass mask=cols < D to every tl.load")
SOFTMAX_UNMASKED_LOAD = ("tl.load without a mask: the lanes n_cols .. BLOCK - 1 read past the row; pass "
                         "mask=cols < n_cols and other=float('-inf')")
UNMASKED_STORE = "missing mask on the ragged tail: every lane of the last block stored, the padding too"
STORED_IN_X = ("the result stored through x_ptr instead of y_ptr: x now holds GELU(x), and y was never written; "
               "tl.store(y_ptr + offs, y, mask=mask)")


def _gelu_memory_mistake(kind, strays, watch, tensors):
    if set(strays) == {("x", "after")}:
        return UNMASKED_LOAD
    if set(strays) <= {("y", "after")}:
        return UNMASKED_STORE
    return None


def check_gelu_memory(student, n, block, dtype, seed, what):
    kernel = student.piece("kernels", "gelu_kernel")
    x = gelu_inputs(n, dtype, seed=seed)
    gx, gy = Guarded(x, guard=block), Guarded(torch.zeros_like(x), guard=block)   # a whole block past the end
    hint = "mask every tl.load and tl.store with offs < n_elements"
    watch = launch_watched(kernel, (triton.cdiv(n, block),), [("x", gx), ("y", gy), ("n_elements", n)], what, hint,
                           _gelu_memory_mistake, BLOCK=block)
    expect_masked_loads(student, "gelu_kernel", UNMASKED_LOAD)
    want = gelu_with()(x.double()).to(dtype)
    if not torch.equal(gx.view, x):
        stored_in_x = bool(torch.allclose(gx.view.double(), want.double(), atol=1e-3, rtol=1e-3)) and \
            not bool(gy.view.any())
        raise Mismatch(f"{what}: x", "after the kernel, x no longer holds the values it was given: the kernel wrote "
                       "into its input", "store the result through y_ptr; x is only read",
                       mistake=STORED_IN_X if stored_in_x else None, differences=_first_differences(gx.view, x))
    expect_kernel_output(gy.view, want, f"{what}: y", hint, watch, {"x": gx, "y": gy}, _gelu_memory_mistake)


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_reads_and_writes_only_its_own_elements(student):
    """gelu_kernel launched directly, as the package launches it, on x and y with NaN on both sides:
    1,300 values in blocks of 1,024, then 700 fp16 values in blocks of 256."""
    check_gelu_memory(student, 1300, 1024, torch.float32, 3, "gelu_kernel on 1,300 values, BLOCK = 1,024")
    check_gelu_memory(student, 700, 256, torch.float16, 4, "gelu_kernel on 700 fp16 values, BLOCK = 256")


LN_ROW_STRIDE = ("rows stepped by D instead of the row stride: row r starts at x_ptr + r * stride, which is more "
                 "than r * D when x's rows are a slice of a wider matrix")
LN_UNMASKED = ("a tl.load or tl.store without mask=cols < D: the lanes D .. BLOCK_D - 1 reach past the end of a "
               "row (into the gap before the next one), of w or of b")


W_BY_ROW = ("gamma read at an offset that grows with the row (w_ptr + row * stride + cols, as if the weight had a row "
            "per token): row 0 came out right, and from row 1 on gamma was read past its end. It is one (D,) vector "
            "shared by all rows: load it at w_ptr + cols")
STATS_BY_STRIDE = ("the mean and rstd stored at row * stride, as if they were rows of D values: they are (rows,) "
                   "vectors, one number per row, so store them at mean_ptr + row and rstd_ptr + row")


def _ln_memory_mistake(rows, D, stride=None):
    """The mistake the stray addresses of layer_norm_kernel on `rows` rows of D (`stride` apart) show, or None."""
    def at(watch, kind, g, step):              # rows 1 .. rows - 1 of g's view, `step` elements apart, all touched
        found = set(watch.addresses(kind).tolist())
        wanted = _rows_at(g, rows, D if g.view.numel() >= D else 1, step) - _rows_at(g, 1, D, step)
        return bool(wanted) and wanted <= found

    def name(kind, strays, watch, tensors):
        if watch.active and _touched(watch, "load", tensors["x"]) == _rows_at(tensors["x"], rows, D, D):
            return LN_ROW_STRIDE                                                # row r read at x_ptr + r * D
        if watch.active and stride and kind == "load" and at(watch, "load", tensors["w"], stride):
            return W_BY_ROW                                                     # gamma read at w + r * stride
        if stride and kind == "store" and all(
                _written_at(tensors[t], rows, 1, stride) or watch.active and at(watch, "store", tensors[t], stride)
                for t in ("mean", "rstd")):
            return STATS_BY_STRIDE                                              # mean stored at mean + r * stride
        if all(where in ("between", "after") for _, where in strays):
            return LN_UNMASKED
        return None
    return name


def check_layer_norm_memory(student, rows, D, stride, bias, seed, what):
    kernel = student.piece("kernels", "layer_norm_kernel")
    x, w, b = ln_inputs(rows, D, seed=seed)
    b = b if bias else None
    gx, gy = Guarded(x, stride), Guarded(torch.zeros_like(x), stride)
    gw, gb = Guarded(w), Guarded(b if bias else w)
    gmean, grstd = Guarded(torch.zeros(rows, device=DEVICE)), Guarded(torch.zeros(rows, device=DEVICE))
    hint = "row r starts at x_ptr + r * stride (y_ptr likewise); mask every lane past D"
    args = [("x", gx), ("w", gw), ("b", gb), ("y", gy), ("mean", gmean), ("rstd", grstd), ("stride", stride), ("D", D),
            ("eps", 1e-5)]
    name = _ln_memory_mistake(rows, D, stride)
    watch = launch_watched(kernel, (rows,), args, what, hint, name, HAS_BIAS=bias, BLOCK_D=triton.next_power_of_2(D))
    expect_masked_loads(student, "layer_norm_kernel", LN_UNMASKED_LOAD)
    want_y, want_mean, want_rstd = ln_with(x.double(), w.double(), None if b is None else b.double(), 1e-5)
    tensors = {n: a for n, a in args if isinstance(a, Guarded)}
    for got, want, part in ((gy.view, want_y, "y"), (gmean.view, want_mean, "the saved mean"),
                            (grstd.view, want_rstd, "the saved rstd")):
        try:
            expect_kernel_output(got, want.float(), f"{what}: {part}", hint, watch, tensors, name)
        except Mismatch as exc:
            stats_right = all(bool(torch.allclose(g.view.double(), w.double(), atol=1e-4, rtol=1e-4))
                              for g, w in ((gmean, want_mean), (grstd, want_rstd)))
            if not exc.mistake and part == "y" and b is None and stats_right and _rows_from_the_gaps(got, want) \
                    and bool(got[1:].isnan().all()):     # x read right, no bias: gamma read past its end from row 1 on
                raise Mismatch(exc.what, exc.problem, hint, mistake=W_BY_ROW, differences=exc.differences,
                               max_error=exc.max_error) from None
            row = _all_at_row_zero(got, want) if not exc.mistake and part == "y" else None
            if row is not None:
                raise Mismatch(exc.what, exc.problem, hint, differences=exc.differences, max_error=exc.max_error,
                               mistake=f"every program stored its row at row 0 (y_ptr + cols, without the row's "
                                       f"offset): row 0 holds row {row}'s result and rows 1 .. {got.shape[0] - 1} were "
                                       f"never written; store at y_ptr + row * stride + cols") from None
            if exc.mistake or not _rows_from_the_gaps(got, want) or stats_right:   # right statistics: x read right
                raise
            raise Mismatch(exc.what, exc.problem, hint, mistake=LN_ROW_STRIDE, differences=exc.differences,
                           max_error=exc.max_error) from None


def _all_at_row_zero(got, want) -> int | None:
    """The row whose result row 0 of y holds, when every other row of y was never written (still 0
    or NaN, as the checking launcher starts y) and row 0 holds some row's result; else None."""
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    if got.dim() != 2 or got.shape[0] < 2:
        return None
    rest = got[1:]
    if not (bool(rest.isnan().all()) or bool((rest == 0).all())):
        return None
    return next((r for r in reversed(range(want.shape[0]))
                 if bool(torch.allclose(got[0], want[r], atol=1e-4, rtol=1e-4))), None)


def _rows_from_the_gaps(got, want) -> bool:
    """Row 0 right and a later row holding NaN: rows read (or written) in the NaN-filled gaps between
    the rows (seen by values, where no address was watched)."""
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    return (got.dim() == 2 and got.shape[0] > 1 and bool(torch.allclose(got[0], want[0], atol=1e-4, rtol=1e-4))
            and bool(got[1:].isnan().any()))


Y_BY_X_STRIDE = ("y's rows stepped by x_row_stride: each tensor has its own row stride, and y's row r starts at "
                 "y_ptr + r * y_row_stride")


def _rows_at(g: Guarded, rows: int, n: int, stride: int) -> set:
    """The addresses of `rows` rows of n elements, `stride` elements apart, from the start of g's view."""
    return {g.view.data_ptr() + g.size * (r * stride + c) for r in range(rows) for c in range(n)}


def _written_at(g: Guarded, rows: int, n: int, stride: int) -> bool:
    """Whether the elements of g's buffer written outside its view (no longer NaN) are those that
    `rows` rows of n, `stride` elements apart from the view's start, cover: seen by values alone,
    where no address was watched."""
    start = g.view.data_ptr() // g.size - g.buf.data_ptr() // g.size
    index = torch.tensor([start + r * stride + c for r in range(rows) for c in range(n)])
    index = index[index < g.buf.numel()]
    covered = torch.zeros_like(g.inside)
    covered[index] = True
    written = ~torch.isnan(g.buf) & ~g.inside
    return bool(written.any()) and torch.equal(written, covered & ~g.inside)


def _touched(watch: Watch, kind: str, g: Guarded) -> set:
    return {a for a in watch.addresses(kind).tolist() if g.where(a)}


def _softmax_memory_mistake(rows, n, x_stride, y_stride):
    """The mistake the stray addresses of softmax_kernel on `rows` rows of n show, or None."""
    def name(kind, strays, watch, tensors):
        gx, gy = tensors["x"], tensors["y"]
        stored = _touched(watch, "store", gy)       # empty where the kernel ran in another process
        if kind == "store" and (stored == _rows_at(gy, rows, n, x_stride) if stored
                                else _written_at(gy, rows, n, x_stride)):
            return Y_BY_X_STRIDE
        if kind == "load" and _touched(watch, "load", gx) == _rows_at(gx, rows, n, n):
            return ROW_STRIDE
        if kind == "load" and _touched(watch, "load", gx) == _rows_at(gx, rows, n + 1, x_stride):
            return ONE_PAST
        stored = _touched(watch, "store", gy)
        if kind == "store" and watch.active and stored == _rows_at(gy, rows, n + 1, y_stride):
            return ONE_PAST
        if kind == "store" and watch.active and stored == _rows_at(gy, rows, triton.next_power_of_2(n), y_stride):
            return NO_STORE_MASK
        return None
    return name


def check_softmax_memory(student, rows, n, x_stride, y_stride, seed, what):
    kernel = student.piece("kernels", "softmax_kernel")
    x = softmax_inputs(rows, n, seed=seed)
    gx, gy = Guarded(x, x_stride), Guarded(torch.zeros_like(x), y_stride)
    hint = ("load row r at x_ptr + r * x_row_stride and store it at y_ptr + r * y_row_stride, lanes past n_cols "
            "masked")
    name = _softmax_memory_mistake(rows, n, x_stride, y_stride)
    watch = launch_watched(kernel, (rows,), [("x", gx), ("y", gy), ("x_row_stride", x_stride), ("y_row_stride", y_stride),
                                             ("n_cols", n)], what, hint, name, BLOCK=triton.next_power_of_2(n))
    expect_masked_loads(student, "softmax_kernel", SOFTMAX_UNMASKED_LOAD)
    expect_kernel_output(gy.view, torch.softmax(x.double(), -1).float(), f"{what}: y", hint, watch, {"x": gx, "y": gy},
                         name)


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_reads_and_writes_only_its_own_rows(student):
    """softmax_kernel launched directly on rows of x and y with different row strides, NaN in the
    gaps between rows and around both tensors."""
    check_softmax_memory(student, 4, 100, 130, 112, 13, "softmax_kernel on 4 rows of 100 (x rows 130 apart, y 112)")
    check_softmax_memory(student, 3, 40, 64, 50, 14, "softmax_kernel on 3 rows of 40 (x rows 64 apart, y 50)")


# ----- causal FlashAttention, forward -------------------------------------------------------

FA_HINT = ("per query row keep the running max m, the sum l of exp(s - m) and acc; when the max grows, multiply l "
           "and acc by exp(m - m_new) before adding the tile; mask keys j > start + i and j >= S; o = acc / l, "
           "lse = m + log(l)")
NO_RESCALE = ("no rescale when the max grows: l and acc were summed against the old max; multiply both by "
              "alpha = exp(m - m_new) before adding this tile's terms")
ACC_ONLY_RESCALED = ("only acc rescaled when the max grows, not l: the running sum l was summed against the old max "
                     "too; multiply it by alpha = exp(m - m_new) as well")
L_ONLY_RESCALED = ("only l rescaled when the max grows, not acc: the output accumulated so far was summed against the "
                   "old max too; multiply it by alpha = exp(m - m_new) as well")
MASK_OFFSET = ("the causal mask ignores the cache offset: query i sits at position start + i and sees keys "
               "j <= start + i, not j <= i")
DIAGONAL_SKIPPED = ("the diagonal tile skipped: the loop stopped at the block's first query position (start + "
                    "first) instead of after its last (start + first + BLOCK_M)")
DIAGONAL_MASKED = "the diagonal masked: a query sees its own key, j <= start + i, not j < start + i"
LSE_NO_MAX = ("the logsumexp stored as log(l) alone: l was summed as exp(s - m), so the logsumexp of the row is "
              "m + log(l); add the running max back")
LSE_UNSCALED = ("the logsumexp of the unscaled scores: the running max was kept on q·k and the scale folded into "
                "exp; the backward needs the logsumexp of s = q·k·sm_scale, m·sm_scale + log(l)")
SCALE_ON_OUTPUT = ("1/sqrt(K) applied to the output instead of the scores: the softmax must see q·k/sqrt(K)")
SCALE_BLOCK_K = "scaled by 1/sqrt(BLOCK_K), the padded width: the scale is 1/sqrt(K), as sm_scale gives it"
NO_SCALE = "the scores not scaled: multiply q·k by sm_scale = 1/sqrt(K)"
TAIL_UNMASKED = ("a tail tile without its mask: the last key tile runs past S, and its unmasked load read the NaN "
                 "after the end of v; load k and v with mask=cols < S")
V_FROM_K = "the values loaded from k_ptr: acc sums p @ k, the keys; load the value tile from v_ptr"
FA_PAST = "the last query block stored past T: its stores need mask=rows < T"
FA_PAST_DIMS = ("o stored with mask=rows < T alone, without dims < K: K is narrower than the tile's BLOCK_K columns, so "
                "each row's padding columns K .. BLOCK_K - 1 were written over the start of the next row of o, and the "
                "last row's past the end of o; mask the store as the load of q is, "
                "(rows[:, None] < T) & (dims[None, :] < K)")
ALL_NAN = ("every row NaN from the first key tile on, where the running max m is still -inf: there the rescale factor "
           "must be alpha = exp(m - m_new) = exp(-inf) = 0; written the other way round, exp(m_new - m), it is inf, and "
           "inf·0 = NaN (likewise p = exp(s - m_new) takes the new max: exp(s - m) with m = -inf is inf)")
SCALE_BY_K = "the scores scaled by 1/K instead of 1/sqrt(K): sm_scale = 1 / sqrt(K), K the head width"
BOUND_WITHOUT_START = ("the key loop's end without the cache offset: it stops at first + BLOCK_M, but query i sits at "
                       "position start + i, so run it to start + first + BLOCK_M (or S) to reach the block's last keys")
LOOP_SHORT = ("the key loop stopped a tile early, before the block's last keys: at start + first (the diagonal tile "
              "skipped) or at first + BLOCK_M (the cache offset left out); run it to start + first + BLOCK_M")
MAX_NOT_KEPT = ("the running max never kept: m_new is computed but not assigned back (m = m_new), so m stays -inf, "
                "alpha = exp(m - m_new) is 0 at every tile, and each tile wipes out what the earlier ones summed")
ACC_NOT_DIVIDED = ("acc stored without dividing by l: the output is the sum of exp(s - m)·v, not its weighted mean; "
                  "store o = acc / l")
KV_HEADS_BY_T = ("each head's keys and values found at bh·T·K, the queries' head stride: the keys and values hold S "
                 "positions per head, so with a cache (S > T) every head after the first (bh counts the heads of "
                 "every sequence) read another one's keys and values; offset them by bh·S·K")
K_HEADS_BY_T = ("each head's keys found at bh·T·K, the queries' head stride (the values at bh·S·K, rightly): the keys "
                "hold S positions per head, so with a cache (S > T) every head after the first (bh counts the heads of "
                "every sequence) scored its queries against another one's keys; offset k by bh·S·K, as v")
V_HEADS_BY_T = ("each head's values found at bh·T·K, the queries' head stride (the keys at bh·S·K, rightly): the "
                "values hold S positions per head, so with a cache (S > T) every head after the first (bh counts the "
                "heads of every sequence) averaged another one's values; offset v by bh·S·K, as k")
MASK_OF_FIRST_TILE = ("the visibility mask built from the first key tile's indices (offs_n, or a mask made once before "
                      "the loop): every later tile is masked as if its keys were 0 .. BLOCK_N - 1, so future keys, and "
                      "keys past S, get through; build it inside the loop from cols = start_n + offs_n")
FIRST_TILE_EVERY_STEP = ("the key indices never advance (cols = offs_n instead of start_n + offs_n): every step loads "
                         "and masks the first key tile again, and the later keys are never seen; "
                         "cols = start_n + offs_n")
FIRST_SEQUENCE_ONLY = ("only the first sequence of the batch computed: its o and lse are right and the others' were "
                       "never stored (still NaN), as when the launch grid's second axis is H instead of B * H (one "
                       "program per query block of each head of each sequence): grid = (triton.cdiv(T, BLOCK_M), B * H)")
MAX_OVER_QUERIES = ("the running max taken over the wrong axis: tl.max(s, axis=0) is each key column's max over the "
                    "tile's query rows (rows past T included, whose scores are 0), not each query row's max over its "
                    "keys; with BLOCK_M = BLOCK_N it broadcasts without an error and ordinary scores come out right "
                    "(any shift cancels), but a row whose scores lie far below that column max gets exp(s - m) = 0 "
                    "in fp32, l = 0 and o = 0/0 = NaN; take tl.max(s, axis=1)")
M_FROM_ZERO = ("the running max started at 0 instead of -inf: a row whose scores all lie far below 0 keeps m = 0, so "
               "every exp(s - m) underflows to 0 in fp32, l = 0, and o = 0/0 is NaN; start m at float('-inf'), so "
               "that the first tile's max is the row's own")


def flash_tiled(q, k, v, start, block_m=16, block_n=16, *, rescale=("l", "acc"), offset=True, diagonal=True,
                strict=False, lse_scaled=True, scale=None, scale_output=False, tail_masked=True, lse_max=True,
                alpha_inverted=False, m_start=-math.inf, normalised=True, kv_head_rows=None, max_kept=True,
                bound_offset=True, head_rows_of=("k", "v"), tile_index="moving", base2=False, max_over=-1):
    """The tiled online softmax of the kernel in float64, each typical slip switchable: the reference
    and its mistakes. q (B, H, T, K), k, v (B, H, S, K) -> (o (B, H, T, K), lse (B, H, T)).
    alpha_inverted: alpha = exp(m_new - m); m_start: the running max's first value (0 by mistake: then
    the exponentials are rounded to fp32, as the kernel computes them, so that those far below 0 underflow);
    bound_offset: the key loop runs to start + first + BLOCK_M (else first + BLOCK_M); normalised: o = acc / l
    (else acc); max_kept: m = m_new after each tile (else m keeps its start); kv_head_rows: head h's keys and values read from row h·kv_head_rows
    of the flat (B·H·S, K) tensors (the kernel's bh·T·K for bh·S·K when it is T); head_rows_of: which of the two
    ("k", "v") are read so (the other at its own head's rows); tile_index: "moving" (key indices
    start_n + j), "mask" (the visibility mask from the first tile's indices j, the loads right), or "fixed"
    (the first tile's indices for the loads and the mask at every step); base2: the exponentials of base 2
    (tl.exp2) where e is meant, the scores not multiplied by log2(e); max_over: the axis of the tile's max (-2:
    each key column's max over the tile's query rows, read as the rows' max, as tl.max(s, axis=0) is when
    BLOCK_M = BLOCK_N; the exponentials then rounded to fp32)."""
    B, H, T, K = q.shape
    S = k.shape[2]
    sm_scale = 1 / math.sqrt(K) if scale is None else scale
    q, k, v = (t.double().reshape(B * H, -1, K) for t in (q, k, v))
    if kv_head_rows is not None:
        k, v = (torch.stack([t.reshape(-1, K)[h * kv_head_rows:h * kv_head_rows + S] for h in range(B * H)])
                if name in head_rows_of else t for name, t in (("k", k), ("v", v)))
    o, lse = torch.empty_like(q), torch.empty(B * H, T, dtype=torch.float64)
    for first in range(0, T, block_m):
        rows = torch.arange(first, min(T, first + block_m))
        m = torch.full((B * H, len(rows)), m_start, dtype=torch.float64)
        fp32 = (lambda t: t.float().double()) if m_start != -math.inf or max_over != -1 else (lambda t: t)
        l, acc = torch.zeros_like(m), torch.zeros(B * H, len(rows), K, dtype=torch.float64)
        for start_n in range(0, min(S, start * bound_offset + first + block_m * diagonal), block_n):
            cols = torch.arange(start_n, min(S, start_n + block_n))
            pos = rows[:, None] + start * offset
            if tile_index != "moving":
                cols, s = _tile_scores(q[:, rows], k, v, start_n, block_n, pos, tile_index, sm_scale)
            else:
                s = q[:, rows] @ k[:, cols].transpose(1, 2) * (1.0 if scale_output else sm_scale)
                s = s.masked_fill(~((cols[None, :] < pos) if strict else (cols[None, :] <= pos)), -math.inf)
            tile_max = s.amax(-1) if max_over == -1 else _column_max(q, k, first, start_n, block_m, block_n,
                                                                      start * offset, sm_scale)[:, :len(rows)]
            m_new = torch.maximum(m, tile_max)
            ex = torch.exp2 if base2 else torch.exp
            alpha = fp32(ex(m_new - m if alpha_inverted else m - m_new))
            l_alpha, acc_alpha = ((alpha if name in rescale else torch.ones_like(m)) for name in ("l", "acc"))
            p = fp32(ex(s - m_new[..., None]))
            vals = v[:, cols] if tile_index == "moving" else F.pad(v, (0, 0, 0, block_n))[:, cols]
            l, acc, m = l * l_alpha + p.sum(-1), acc * acc_alpha[..., None] + p @ vals, m_new if max_kept else m
            if not tail_masked and start_n + block_n > S:
                acc[-1] = math.nan                            # the last head's tile read the NaN after v
        o[:, rows] = (acc / l[..., None] if normalised else acc) * (sm_scale if scale_output else 1.0)
        lse[:, rows] = (m / sm_scale if not lse_scaled else m) * lse_max + l.log()
    return o.reshape(B, H, T, K), lse.reshape(B, H, T)


def _column_max(q, k, first, start_n, block_m, block_n, shift, sm_scale):
    """tl.max(s, axis=0) of a whole (BLOCK_M, BLOCK_N) tile: each key column's max over the tile's query rows,
    rows past T included (their q loads as 0, so their visible scores are 0). q (BH, T, K), k (BH, S, K) ->
    (BH, BLOCK_N)."""
    S, i, j = k.shape[1], first + torch.arange(block_m), start_n + torch.arange(block_n)
    s = F.pad(q, (0, 0, 0, block_m))[:, i] @ F.pad(k, (0, 0, 0, block_n))[:, j].transpose(1, 2) * sm_scale
    return s.masked_fill(~((j[None, :] < S) & (j[None, :] <= i[:, None] + shift)), -math.inf).amax(-2)


def _tile_scores(q, k, v, start_n, block_n, pos, tile_index, sm_scale):
    """A key tile's (indices loaded, scores) when its indices slip: "mask", the mask built from the first
    tile's indices 0 .. block_n - 1; "fixed", the first tile's keys loaded and masked at every step. Keys
    past S load as 0, as a masked tl.load(other=0.0) gives them."""
    S, j = k.shape[1], torch.arange(block_n)
    cols = j if tile_index == "fixed" else start_n + j
    s = q @ F.pad(k, (0, 0, 0, block_n))[:, cols].transpose(1, 2) * sm_scale
    return cols, s.masked_fill(~((j[None, :] < S) & (j[None, :] <= pos)), -math.inf)


BASE_2 = ("the exponentials taken in base 2 (tl.exp2) on scores in base e: 2^(s - m) is e^((s - m)·ln 2), a flatter "
          "softmax; tl.exp(x) is tl.exp2(x · log2(e)): multiply the scores (and m) by log2(e) = 1.4427 first, or use "
          "tl.exp")


def flash_mistakes(q, k, v, start):
    K = q.shape[-1]
    return {NO_RESCALE: dict(rescale=()), ACC_ONLY_RESCALED: dict(rescale=("acc",)),
            L_ONLY_RESCALED: dict(rescale=("l",)), MASK_OFFSET: dict(offset=False), DIAGONAL_SKIPPED: dict(diagonal=False),
            DIAGONAL_MASKED: dict(strict=True), LSE_UNSCALED: dict(lse_scaled=False), LSE_NO_MAX: dict(lse_max=False),
            SCALE_ON_OUTPUT: dict(scale_output=True), SCALE_BLOCK_K: dict(scale=max(16, 1 << (K - 1).bit_length()) ** -0.5),
            NO_SCALE: dict(scale=1.0), TAIL_UNMASKED: dict(tail_masked=False), ALL_NAN: dict(alpha_inverted=True),
            M_FROM_ZERO: dict(m_start=0.0), MAX_OVER_QUERIES: dict(max_over=-2),
            ACC_NOT_DIVIDED: dict(normalised=False), MAX_NOT_KEPT: dict(max_kept=False),
            SCALE_BY_K: dict(scale=1.0 / K), BASE_2: dict(base2=True), **({BOUND_WITHOUT_START: dict(bound_offset=False)} if start else {}),
            MASK_OF_FIRST_TILE: dict(tile_index="mask"), FIRST_TILE_EVERY_STEP: dict(tile_index="fixed"),
            **({name: dict(kv_head_rows=q.shape[2], head_rows_of=which)
                for name, which in ((KV_HEADS_BY_T, ("k", "v")), (K_HEADS_BY_T, ("k",)), (V_HEADS_BY_T, ("v",)))}
               if k.shape[2] != q.shape[2] else {})}


def fa_guard(K: int, block_m: int = 16, block_n: int = 16) -> int:
    """The checking launcher's NaN after o and after lse: a whole tile, the most it counts past each."""
    return max(block_m, block_n) * max(16, triton.next_power_of_2(K))


def _store_mask_mistake(past: int, T: int, K: int, block_m: int = 16) -> str | None:
    """The store mask the launcher's count of elements written past the end of o and lse shows missing:
    the rows mask (o's store or lse's; o's dims mask may be missing as well) or o's dims mask alone;
    None when neither gives that count. The count is where the last head's last query block lands: its
    rows T .. past the last full block, or its last row's padding columns K .. BLOCK_K - 1."""
    block_k = max(16, triton.next_power_of_2(K))
    extra = -T % block_m                                  # the last query block's rows past T
    o = [(FA_PAST, 0), (FA_PAST, extra * K)]              # o's rows masked or not ...
    if block_k != K:                                      # ... and where K leaves padding columns, its dims
        o += [(FA_PAST_DIMS, block_k - K), (FA_PAST, (extra - 1) * K + block_k if extra else 0)]
    found = {FA_PAST if n_lse else name for name, n_o in o for n_lse in (0, extra)
             if (n_o or n_lse) and min(n_o, fa_guard(K)) + min(n_lse, fa_guard(K)) == past}
    return found.pop() if len(found) == 1 else None


def call_flash(flash_attention, q, k, v, start):
    try:
        return flash_attention(q, k, v, start)
    except RuntimeError as exc:
        past = written_past(exc, "the end of o")
        if past is None:
            raise
        raise Mismatch("flash_attention(q, k, v)", f"the kernel wrote {past} element{'s' * (past != 1)} past the "
                       f"end of o or lse (T = {q.shape[2]})", "mask every store with rows < T (and dims < K)",
                       mistake=_store_mask_mistake(past, q.shape[2], q.shape[3])) from None


def _short_alike(outs) -> bool:
    """Whether the two loops that stop a tile early give the same o and lse here (either absent: True)."""
    short = [outs.get(DIAGONAL_SKIPPED), outs.get(BOUND_WITHOUT_START)]
    return None in short or all(torch.allclose(a, b, equal_nan=True) for a, b in zip(*short))


def _flash_outs(q, k, v, start):
    outs = {name: flash_tiled(q, k, v, start, **slip) for name, slip in flash_mistakes(q, k, v, start).items()}
    outs[V_FROM_K] = flash_tiled(q, k, k, start)
    return outs


def _flash_cases(flash_attention, q, k, v, start, what, outs, merged):
    """merged: no input of the check tells the two short loops apart, so one text names both."""
    want_o, want_lse = flash_tiled(q, k, v, start)
    if merged and DIAGONAL_SKIPPED in outs:
        outs[LOOP_SHORT] = outs.pop(DIAGONAL_SKIPPED)
        outs.pop(BOUND_WITHOUT_START, None)
    cache = {}

    def part(i):
        def got():
            if "out" not in cache:
                cache["out"] = call_flash(flash_attention, q, k, v, start)
                _first_sequence_only(cache["out"], want_o, want_lse, what)
                _last_rows_never_stored(cache["out"], want_o, want_lse, what)
                _grid_axes_swapped(cache["out"], want_o, want_lse, what)
            out = cache["out"]
            return out[i] if isinstance(out, (tuple, list)) and len(out) == 2 else out
        return got

    def differing(i, want):     # in lse, the scale on o is the unscaled one, acc alone rescaled is no rescale, and
        return {n: o[i].float() for n, o in outs.items()    # the keys alone at bh·T·K are the keys and values there
                if not (i == 1 and n in (SCALE_ON_OUTPUT, ACC_ONLY_RESCALED, K_HEADS_BY_T))
                and not torch.allclose(o[i], want, atol=1e-6, rtol=1e-5, equal_nan=True)}
    return (Case(f"{what}: o", part(0), want_o.float(), differing(0, want_o)),
            Case(f"{what}: lse", part(1), want_lse.float(), differing(1, want_lse)))


def _stored_only(out, want_o, want_lse, ran):
    """`ran` (the (B, H, T) rows whose programs ran, or a function of the rows stored giving them) when
    out is (o, lse) of the expected shapes, right in those rows and never stored (NaN, as the checking
    launcher starts them) in the others, and some but not all ran; else None."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        return None
    o, lse = out
    if o.shape != want_o.shape or lse.shape != want_lse.shape:
        return None
    o, lse = o.double().cpu(), lse.double().cpu()
    ran = ran(~lse.isnan()) if callable(ran) else ran
    if bool(ran.all()) or not bool(ran.any()) or not torch.equal(~lse.isnan(), ran) or not bool(o[~ran].isnan().all()):
        return None
    right = (torch.allclose(o[ran], want_o.double().cpu()[ran], atol=1e-4, rtol=1e-4)
             and torch.allclose(lse[ran], want_lse.double().cpu()[ran], atol=1e-4, rtol=1e-4))
    return ran if right else None


def _first_sequence_only(out, want_o, want_lse, what):
    """A Mismatch naming FIRST_SEQUENCE_ONLY when only the batch's first sequence was stored, right."""
    B = want_o.shape[0]
    if _stored_only(out, want_o, want_lse, (torch.arange(B) == 0)[:, None, None].expand(want_lse.shape)) is not None:
        raise Mismatch(f"{what}: o", f"sequence 0 of {B} is right; the other {B - 1} were never stored (NaN)",
                       "one program per query block and per (sequence, head): B * H of them", mistake=FIRST_SEQUENCE_ONLY)


def _last_rows_never_stored(out, want_o, want_lse, what, block_m: int = 16):
    """A Mismatch when the rows up to some r0 were stored in every head, right, and none from r0 on: the
    last query blocks' programs never ran."""
    T = want_o.shape[2]

    def before_first_gap(stored):                    # the rows before the first one no head stored
        rows = stored.any(dim=0).any(dim=0)
        r0 = int(rows.logical_not().nonzero()[0]) if not bool(rows.all()) else T
        return (torch.arange(T) < r0).expand(stored.shape)
    ran = _stored_only(out, want_o, want_lse, before_first_gap)
    if ran is None:
        return
    r0, n = int(ran[0, 0].sum()), T // block_m
    why = (f": the launch grid has T // {block_m} = {n} query block{'s' * (n != 1)}, which drops the ragged last one; "
           f"launch triton.cdiv(T, block_m) of them" if r0 == T // block_m * block_m else "")
    raise Mismatch(f"{what}: o", f"rows {r0} .. {T - 1} of every head were never stored (NaN); rows 0 .. {r0 - 1} are "
                   f"right", "grid = (triton.cdiv(T, block_m), B * H)", mistake=f"the last query rows never computed{why}")


GRID_AXES_SWAPPED = ("the launch grid's two axes read the other way round: program_id(0) taken as the (sequence, head) "
                     "and program_id(1) as the query block, while the launcher lays the query blocks along axis 0 "
                     "and the B * H heads along axis 1; so only the heads numbered below the count of query blocks "
                     "were computed: first = tl.program_id(0) * BLOCK_M, bh = tl.program_id(1)")


def _grid_axes_swapped(out, want_o, want_lse, what, block_m: int = 16):
    """A Mismatch naming GRID_AXES_SWAPPED when exactly the (head bh, query block b) pairs with bh below
    the number of query blocks and b below B * H were stored, each right, and the rest never (NaN)."""
    B, H, T, K = want_o.shape
    block_of = torch.arange(T) // block_m                                                   # (T,)
    ran = (torch.arange(B * H)[:, None] < triton.cdiv(T, block_m)) & (block_of[None, :] < B * H)   # (B·H, T)
    if _stored_only(out, want_o, want_lse, ran.reshape(B, H, T)) is not None:
        raise Mismatch(f"{what}: o", f"{int(ran.sum())} of {B * H * T} query rows (of {B * H} heads) were stored, "
                       f"each right; the others never (NaN)", "grid = (triton.cdiv(T, BLOCK_M), B * H): axis 0 the "
                       "query block, axis 1 the head", mistake=GRID_AXES_SWAPPED)


def flash_inputs(T, S, K, seed=0, far_below=False):
    """q, k, v of two sequences of one head (a launch grid without the batch shows), or with far_below one
    sequence of two heads, head 0's scores all far below 0 (about -200: q near +7, k near -7, small
    integers, whose products and sums fp32 holds exactly, with K = 16 so that sm_scale = 1/4 is exact too)."""
    B, H = (1, 2) if far_below else (2, 1)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, K, generator=g) * 1.5 for n in (T, S, S))
    if far_below:
        q[:, 0] = 7.0 + torch.randint(-1, 2, (B, T, K), generator=g)
        k[:, 0] = -7.0 + torch.randint(-1, 2, (B, S, K), generator=g)
    return q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)


def check_flash(student, *inputs):
    """inputs: two or more (T, S, K, start, seed); o and lse of each against the float64 tiled online
    softmax (itself equal to softmax(mask(q·kᵀ/sqrt(K)))·v); a named mistake confirmed on another."""
    flash_attention = student.piece("kernels", "flash_attention")
    runs = []
    for T, S, K, start, seed, *far in inputs:
        what = f"flash_attention for T={T}, S={S}, K={K}, start={start}" + (", head 0's scores near -200" if far else "")
        q, k, v = flash_inputs(T, S, K, seed=seed, far_below=bool(far))
        runs.append((q, k, v, start, what, _flash_outs(q, k, v, start)))
    merged = all(_short_alike(outs) for *_, outs in runs)
    cases = [_flash_cases(flash_attention, *run, merged) for run in runs]
    for parts in zip(*cases):
        expect_cases(*parts, hint=FA_HINT, atol=1e-5, rtol=1e-5)


def test_flash_tiled_equals_softmax_attention():
    """The tiled reference the mistakes vary is the attention itself, for any tiling."""
    q, k, v = (t.double() for t in flash_inputs(21, 45, 12, seed=3))
    s = q @ k.transpose(-1, -2) / math.sqrt(12)
    s = s.masked_fill(torch.arange(45)[None, :] > torch.arange(21)[:, None] + 24, -math.inf)
    for bm, bn in ((16, 16), (8, 32)):
        o, lse = flash_tiled(q, k, v, 24, bm, bn)
        assert torch.allclose(o, torch.softmax(s, -1) @ v, atol=1e-12)
        assert torch.allclose(lse, torch.logsumexp(s, -1), atol=1e-12)


@graded("kernels.flash_attention_kernel", points=2)
def test_flash_attention_kernel_with_a_cache(student):
    """T, S, K not multiples of the tiles of 16; keys 0 .. start - 1 from a cache."""
    check_flash(student, (21, 45, 12, 24, 0), (19, 37, 20, 18, 1))


@graded("kernels.flash_attention_kernel", points=1)
def test_flash_attention_kernel_scores_far_below_zero(student):
    """Head 0's scores all near -200 (softmax does not care: only their differences count), head 1's
    ordinary: exp(s - m) must be taken against the row's own max, never against a max of 0."""
    check_flash(student, (20, 26, 16, 6, 5, True), (9, 25, 16, 16, 6, True))


@graded("kernels.flash_attention_kernel", points=1)
def test_flash_attention_kernel_queries_inside_the_keys(student):
    """No cache (start = 0, S = T); queries at 10 .. 28 of 50 keys (later keys never seen); a cache of 18."""
    check_flash(student, (37, 37, 20, 0, 2), (19, 50, 12, 10, 3), (23, 41, 20, 18, 4))
