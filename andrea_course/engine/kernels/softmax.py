"""Row softmax as Triton kernels: y = exp(x - max) / Σ exp(x - max) over the last axis.

One program per row, the whole row in one block of BLOCK = next_power_of_2(n_cols) lanes (n_cols
up to a few thousand). Forward: softmax_kernel (the learner writes the same kernel, with the same
arguments, in exercises/kernels.py; softmax(x, kernel=theirs) launches it, with this file's
backward). Backward: dx = y·(dy - Σ dy·y).
"""
import torch
import triton
import triton.language as tl

from ._common import rows_of


@triton.jit
def softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))                          # padding: exp(-inf) = 0
    tl.store(y_ptr + row * y_row_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_backward_kernel(y_ptr, dy_ptr, dx_ptr, y_row_stride, dy_row_stride, dx_row_stride, n_cols,
                            BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel):
        x2 = rows_of(x)                                            # (rows, n_cols)
        rows, n_cols = x2.shape
        y = torch.empty((rows, n_cols), dtype=x.dtype, device=x.device)
        kernel[(rows,)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(y)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        rows, n_cols = y.shape
        dy2 = rows_of(dy)
        dx = torch.empty_like(y)
        softmax_backward_kernel[(rows,)](y, dy2, dx, y.stride(0), dy2.stride(0), dx.stride(0), n_cols,
                                         BLOCK=triton.next_power_of_2(n_cols))
        return dx.view(dy.shape), None


def softmax(x: torch.Tensor, kernel=softmax_kernel) -> torch.Tensor:
    """Softmax of x (..., n_cols) over its last axis, in Triton. kernel: the forward kernel to
    launch, with softmax_kernel's arguments (x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK)."""
    return SoftmaxFunction.apply(x, kernel)


def softmax_reference(x):
    """The same in plain PyTorch (fp32 inside)."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
