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

from andrea_course.grading import Mismatch, expect_close, expect_equal, expect_true, graded  # noqa: E402

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
    "tanh(z) written as 2·sigmoid(z) - 1, which is tanh(z/2): use 2·sigmoid(2z) - 1":
        gelu_with(tanh=lambda z: 2 * torch.sigmoid(z) - 1),
    "the exact (erf) GELU instead of the tanh form": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
}


def call_gelu(gelu, x):
    """Run the learner's kernel; its launcher refuses a kernel that stores past the last element."""
    try:
        return gelu(x)
    except RuntimeError as exc:
        if "past the end" not in str(exc):
            raise
        raise Mismatch("gelu(x)", "the kernel wrote past the last element of y",
                       "the last block is ragged: pass mask=offs < n_elements to tl.store (and tl.load)",
                       mistake="missing mask on the ragged tail") from None


def check_gelu(student, x, what):
    gelu = student.piece("kernels", "gelu")
    x64 = x.double()
    want = gelu_with()(x64).to(x.dtype)
    mistakes = {name: f(x64).to(x.dtype) for name, f in GELU_MISTAKES.items()}
    got = call_gelu(gelu, x)
    expect_equal(getattr(got, "dtype", None), x.dtype, f"{what}.dtype", "store y.to(y_ptr.dtype.element_ty)")
    expect_close(got, want, what, mistakes=mistakes)


def gelu_inputs(n, dtype):
    torch.manual_seed(0)
    return (torch.linspace(-6, 6, n) + 0.01 * torch.randn(n)).to(DEVICE, dtype)


@graded("kernels.gelu_kernel", points=2)
def test_gelu_kernel_matches_formula(student):
    """3,000 values in [-6, 6]: three programs of 1,024, the last one ragged."""
    check_gelu(student, gelu_inputs(3000, torch.float32), "gelu(x) for x of 3,000 values")


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_any_shape_and_one_element(student):
    torch.manual_seed(1)
    check_gelu(student, (torch.randn(2, 17, 100) * 3).to(DEVICE), "gelu(x) for x of shape (2, 17, 100)")
    check_gelu(student, torch.tensor([0.5], device=DEVICE), "gelu(x) for a single element")


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_half_precision(student):
    """fp16 in, fp16 out, computed in fp32 inside."""
    check_gelu(student, gelu_inputs(1500, torch.float16), "gelu(x) for fp16 x")


# ----- LayerNorm ------------------------------------------------------------------------

def ln_with(x, w, b, eps, divisor=None, padding=0, ddof=0, eps_outside=False):
    """LayerNorm per row in float64 with the given slips: the reference and its mistakes.
    divisor: what the sums are divided by (D, or BLOCK_D by mistake); padding: lanes that add
    mean² each to the variance sum (not zeroed by tl.where); ddof 1: the unbiased variance."""
    D = x.shape[-1]
    n = divisor or D
    mean = x.sum(-1, keepdim=True) / n
    sq = ((x - mean) ** 2).sum(-1, keepdim=True) + padding * mean ** 2
    var = sq / (n - ddof)
    y = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / (var + eps).sqrt()
    y = y * w
    return (y + b if b is not None else y), mean.squeeze(-1), 1 / (var + eps).sqrt().squeeze(-1)


def ln_mistakes(x, w, b, eps):
    D = x.shape[-1]
    block = 1 << (D - 1).bit_length()
    return {
        "padding lanes in the variance: x - mean is -mean on the masked lanes; zero them with "
        "tl.where(mask, x - mean, 0.) before squaring": ln_with(x, w, b, eps, padding=block - D),
        "divided by BLOCK_D instead of D: only D lanes hold data":
            ln_with(x, w, b, eps, divisor=block, padding=0),
        "unbiased variance (D - 1): LayerNorm divides by D": ln_with(x, w, b, eps, ddof=1),
        "eps outside the square root: use 1 / tl.sqrt(var + eps)": ln_with(x, w, b, eps, eps_outside=True),
        "forgot beta (the bias)": ln_with(x, w, None, eps),
        "forgot gamma (the weight)": ln_with(x, torch.ones_like(w), b, eps),
    }


def check_layer_norm(student, x, w, b, eps, what):
    layer_norm = student.piece("kernels", "layer_norm")
    args64 = (x.double(), w.double(), None if b is None else b.double())
    want_y, want_mean, want_rstd = ln_with(*args64, eps)
    want_rstd = want_rstd.reshape(-1)
    mistakes = ln_mistakes(*args64, eps)
    out = layer_norm(x, w, b, eps)
    expect_true(isinstance(out, (tuple, list)) and len(out) == 3, what,
                f"expected (y, mean, rstd), got {type(out).__name__}", "keep the launcher as given")
    y, mean, rstd = out
    expect_close(y, want_y.to(x.dtype), f"{what}: y",
                 mistakes={k: v[0].to(x.dtype) for k, v in mistakes.items()})
    expect_close(mean, want_mean.reshape(-1).float(), f"{what}: the saved mean",
                 hint="store tl.sum(x, axis=0) / D at mean_ptr + row")
    expect_close(rstd, want_rstd.float(), f"{what}: the saved rstd",
                 mistakes={k: v[2].reshape(-1).float() for k, v in mistakes.items()},
                 hint="store 1 / tl.sqrt(var + eps) at rstd_ptr + row")


def ln_inputs(rows, D, dtype=torch.float32, scale=2.0, shift=3.0, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(rows, D) * scale + shift           # a mean far from 0 shows padding mistakes
    w, b = torch.randn(D) * 0.5 + 1, torch.randn(D) * 0.1
    return x.to(DEVICE, dtype), w.to(DEVICE, dtype), b.to(DEVICE, dtype)


@graded("kernels.layer_norm_kernel", points=2)
def test_layer_norm_kernel_ragged_width(student):
    """D = 769 in a block of 1,024: 255 padding lanes that must stay out of the sums."""
    x, w, b = ln_inputs(6, 769)
    check_layer_norm(student, x, w, b, 1e-5, "layer_norm(x) with D = 769")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_eps_inside_sqrt(student):
    """eps = 0.1 on rows of variance about 1 shows where eps goes."""
    x, w, b = ln_inputs(4, 768, scale=1.0)
    check_layer_norm(student, x, w, b, 0.1, "layer_norm(x) with eps = 0.1")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_without_bias_and_batched(student):
    x, w, _ = ln_inputs(2 * 17, 100, seed=1)
    check_layer_norm(student, x.reshape(2, 17, 100), w, None, 1e-5, "layer_norm(x) of shape (2, 17, 100), no bias")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_half_precision(student):
    """fp16 rows of ANDREA's width: y in fp16, statistics in fp32."""
    x, w, b = ln_inputs(4, 768, dtype=torch.float16, seed=2)
    check_layer_norm(student, x, w, b, 1e-5, "layer_norm(x) in fp16")


# ----- row softmax ----------------------------------------------------------------------

SOFTMAX_HINT = ("one program per row: load the row through its row stride, padding lanes masked so that they "
                "count in neither the max nor the sum; subtract the max, exponentiate, divide by the row's sum")
NO_MAX = ("no max subtraction: exp of a large score overflows to inf, and inf / inf is NaN; subtract the row's "
          "maximum before exp (the softmax does not change)")
PAD_ZERO = ("padding loaded as 0.0 instead of -inf: each padding lane adds exp(0 - max) to the row's sum (and 0 "
            "can win the max); load it as -inf, whose exp is 0")
NOT_NORMALISED = "not normalised: divide exp(x - max) by its sum over the row"
ROW_STRIDE = ("x's rows stepped by n_cols instead of x_row_stride: x's rows are x_row_stride elements apart, "
              "more than n_cols when x is a slice of a wider matrix")


def call_softmax(softmax, x, store_mistake):
    """Run the learner's kernel; its launcher refuses a kernel that stores past the last row of y."""
    try:
        return softmax(x)
    except RuntimeError as exc:
        if "past the last row" not in str(exc):
            raise
        raise Mismatch("softmax(x)", "the kernel wrote past the last row of y",
                       "stores take the same mask as loads, and step through y by y's own row stride",
                       mistake=store_mistake) from None


def softmax_mistakes(x):
    """{typical mistake: the output it gives} for x (..., n_cols), in x's dtype."""
    n = x.shape[-1]
    x64 = x.double()
    e32 = x.float().exp()                                  # fp32, as the kernel computes: overflows above 88.7
    return {NO_MAX: (e32 / e32.sum(-1, keepdim=True)).to(x.dtype),
            PAD_ZERO: torch.softmax(F.pad(x64, (0, triton.next_power_of_2(n) - n)), -1)[..., :n].to(x.dtype),
            NOT_NORMALISED: (x64 - x64.amax(-1, keepdim=True)).exp().to(x.dtype)}


def check_softmax(student, x, what, extra_mistakes=None):
    softmax = student.piece("kernels", "softmax")
    got = call_softmax(softmax, x, None if not x.is_contiguous() else
                       "missing mask on the store: the padding lanes of each row write past its end")
    expect_equal(getattr(got, "dtype", None), x.dtype, f"{what}.dtype", "store y.to(y_ptr.dtype.element_ty)")
    expect_close(got, torch.softmax(x.double(), -1).to(x.dtype), what, hint=SOFTMAX_HINT,
                 mistakes={**softmax_mistakes(x), **(extra_mistakes or {})})


def softmax_inputs(*shape, scale=3.0, shift=0.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale + shift).to(DEVICE, dtype)


@graded("kernels.softmax_kernel", points=2)
def test_softmax_kernel_matches_torch(student):
    """Rows of 256 (a power of two: no padding), fp32 and fp16, 2-D and 3-D."""
    check_softmax(student, softmax_inputs(8, 256), "softmax(x) for x of shape (8, 256)")
    check_softmax(student, softmax_inputs(2, 3, 256, seed=1, dtype=torch.float16),
                  "softmax(x) for fp16 x of shape (2, 3, 256)")


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_ragged_row(student):
    """n_cols = 300 in a block of 512: 212 padding lanes per row that must stay out of the max and the sum."""
    check_softmax(student, softmax_inputs(6, 300, scale=2.0, shift=-1.0, seed=2), "softmax(x) for rows of 300")


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_large_scores(student):
    """Scores near +10,000 and -10,000: exp overflows to inf (or underflows to 0) unless the max goes first."""
    x = softmax_inputs(4, 256, seed=3)
    x[:2] += 1e4
    x[2:] -= 1e4
    check_softmax(student, x, "softmax(x) for rows of scores near +10,000 and -10,000")


@graded("kernels.softmax_kernel", points=1)
def test_softmax_kernel_strided_rows(student):
    """x = wide[:, :256], the first 256 columns of a (6, 320) matrix, as logits over a vocabulary
    padded to a multiple of 64 are: row r starts 320 elements after row r - 1, not 256. (256, a
    power of two, leaves no padding lanes: a padding mistake costs in the ragged test alone.)"""
    wide = softmax_inputs(6, 320, seed=4)
    x = wide[:, :256]                                      # (6, 256), row stride 320
    read_by_n = wide.reshape(-1)[:6 * 256].view(6, 256)    # what row * n_cols reads
    check_softmax(student, x, "softmax(x) for x = wide[:, :256], rows 320 apart",
                  extra_mistakes={ROW_STRIDE: torch.softmax(read_by_n.double(), -1).to(x.dtype)})
