"""GELU, LayerNorm and row-softmax kernels written the wrong ways a checking launcher hides (for
tests/test_mistakes.py) and other right ways (for tests/test_variants.py): each reads or writes
memory that is not its tensors', or steps rows by their width. Imported only where Triton is installed."""
import triton
import triton.language as tl


@triton.jit
def gelu_kernel_unmasked_load(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """The store masked, the load not: the last block reads past the end of x."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + 2.0 * tl.sigmoid(2.0 * z) - 1.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_elements)


@triton.jit
def gelu_kernel_by_where(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """Right: the mask without `other`, tanh from exp, the ragged lanes zeroed by tl.where."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    e = tl.exp(-2.0 * tl.abs(z))                            # tanh|z| = (1 - e) / (1 + e), no overflow
    t = (1.0 - e) / (1.0 + e)
    y = tl.where(mask, 0.5 * x * (1.0 + tl.where(z < 0, -t, t)), 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ln_row(x, w_ptr, b_ptr, cols, mask, D, eps, HAS_BIAS: tl.constexpr):
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / D + eps)
    y = xc * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    return y, mean, rstd


@triton.jit
def layer_norm_kernel_stepping_by_d(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                                    HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rows found at row * D: right while the rows are contiguous (stride == D), as the launcher makes them."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
    y, mean, rstd = _ln_row(x, w_ptr, b_ptr, cols, mask, D, eps, HAS_BIAS)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * D + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_kernel_unmasked_weight(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                                      HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr):
    """gamma loaded without a mask: BLOCK_D - D lanes read past the end of w (their products are never stored)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / D + eps)
    y = xc * rstd * tl.load(w_ptr + cols).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_kernel_by_pointers(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                                  HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Right: x_ptr and y_ptr moved to the row first, then indexed by the lanes alone."""
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y, mean, rstd = _ln_row(x, w_ptr, b_ptr, cols, mask, D, eps, HAS_BIAS)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_kernel_storing_by_the_x_stride(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """y's rows stepped by x's row stride: right while the two strides are equal."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * x_row_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)
