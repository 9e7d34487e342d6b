"""Row softmax as Triton kernels: y = exp(x - max) / Σ exp(x - max) over the last axis.

One program per row, the whole row in one block (N up to a few thousand). Backward:
dx = y·(dy - Σ dy·y).
"""
import torch
import triton
import triton.language as tl

from ._common import rows_of


@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))                          # padding: exp(-inf) = 0
    tl.store(y_ptr + row * stride_y + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_backward_kernel(y_ptr, dy_ptr, dx_ptr, stride_y, stride_dy, stride_dx, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x2 = rows_of(x)
        rows, N = x2.shape
        y = torch.empty((rows, N), dtype=x.dtype, device=x.device)
        softmax_kernel[(rows,)](x2, y, x2.stride(0), y.stride(0), N, BLOCK_N=triton.next_power_of_2(N))
        ctx.save_for_backward(y)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        rows, N = y.shape
        dy2 = rows_of(dy)
        dx = torch.empty_like(y)
        softmax_backward_kernel[(rows,)](y, dy2, dx, y.stride(0), dy2.stride(0), dx.stride(0), N,
                                         BLOCK_N=triton.next_power_of_2(N))
        return dx.view(dy.shape)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax of x (..., N) over its last axis, in Triton."""
    return SoftmaxFunction.apply(x)


def softmax_reference(x):
    """The same in plain PyTorch (fp32 inside)."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
