"""Row-softmax kernels written the typical wrong ways (for tests/activity_tests/test_kernels_mutants.py)
and other right ways (for tests/feedback/test_variants.py), as one Triton kernel with switches, launched
through the exercise's own launcher `softmax(x, kernel=...)`. Imported only where Triton is installed."""
import functools

import triton
import triton.language as tl

from andrea_course.grading.student import InProcessStudent


@triton.jit
def softmax_kernel_with(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr,
                        SHIFT: tl.constexpr, PAD_NEG_INF: tl.constexpr, NORMALISE: tl.constexpr,
                        X_STRIDE_IS_N: tl.constexpr, STORE_MASK: tl.constexpr, EXP2: tl.constexpr,
                        RECIPROCAL: tl.constexpr, EXP2_FACTOR: tl.constexpr, SUM_OF: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    step = n_cols if X_STRIDE_IS_N else x_row_stride
    if PAD_NEG_INF:
        x = tl.load(x_ptr + row * step + cols, mask=mask, other=float("-inf")).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * step + cols, mask=mask, other=0.0).to(tl.float32)
    raw = x
    if SHIFT:
        x = x - tl.max(x, axis=0)
    if EXP2:
        e = tl.exp2(x * EXP2_FACTOR)                      # exp(x) = 2^(x·log2 e), with the right factor
    else:
        e = tl.exp(x)
    if NORMALISE:
        if RECIPROCAL:
            e = e * (1.0 / tl.sum(e, axis=0))
        elif SUM_OF == 1:                                 # 1: the raw row x's sum, 2: x - max's
            e = e / tl.sum(raw, axis=0)
        elif SUM_OF == 2:
            e = e / tl.sum(x, axis=0)
        else:
            e = e / tl.sum(e, axis=0)
    if STORE_MASK:
        tl.store(y_ptr + row * y_row_stride + cols, e.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(y_ptr + row * y_row_stride + cols, e.to(y_ptr.dtype.element_ty))


RIGHT = dict(SHIFT=True, PAD_NEG_INF=True, NORMALISE=True, X_STRIDE_IS_N=False, STORE_MASK=True, EXP2=False,
             RECIPROCAL=False, EXP2_FACTOR=1.4426950408889634, SUM_OF=0)


class _Switched:
    """softmax_kernel_with as a kernel the launcher can launch: kernel[grid](...) with the switches added."""

    def __init__(self, **switches):
        self.switches = {**RIGHT, **switches}

    def __getitem__(self, grid):
        return functools.partial(softmax_kernel_with[grid], **self.switches)


@functools.cache
def launcher():
    """The exercise's own launcher, softmax(x, kernel=...), from the answer key."""
    return InProcessStudent("solutions").piece("kernels", "softmax")


def softmax_with(**switches):
    """The exercise's softmax(x), launching softmax_kernel_with with these switches."""
    kernel = _Switched(**switches)
    return lambda x: launcher()(x, kernel=kernel)


@triton.jit
def softmax_kernel_in_16_bits(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """The row never converted to fp32: right in Triton 3.9, whose tl.max promotes it, and on fp32
    input; a compile error wherever a 16-bit value reaches tl.exp."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_kernel_storing_one_past(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """mask = cols <= n_cols: every row loads and stores one element past its end."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols <= n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def launching(kernel):
    """The exercise's softmax(x), launching `kernel`."""
    return lambda x: launcher()(x, kernel=kernel)
