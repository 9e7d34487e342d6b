"""RMSNorm over the last axis (D) as Triton kernels, fp32 inside whatever the input dtype:
y = x·rstd·gamma, rstd = 1/sqrt(mean(x²) + eps); no centring, no bias.

Backward, with g = dy·gamma:  dx = rstd·(g - x·rstd²·mean(g·x)),  dgamma = Σ dy·x·rstd
(per-program partial rows, added by torch, as in layernorm.py).
"""
import torch
import triton
import triton.language as tl

from ._common import n_programs, rows_of


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_x, stride_y, D, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_backward_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, rstd_ptr, dw_ptr,
                             stride_x, stride_dy, stride_dx, rows, D, rows_per_program,
                             BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in range(0, rows_per_program):
        row = pid * rows_per_program + i
        if row < rows:
            x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.load(rstd_ptr + row)
            g = dy * w
            dx = rstd * (g - x * (rstd * rstd) * (tl.sum(g * x, axis=0) / D))
            tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * x * rstd
    tl.store(dw_ptr + pid * D + cols, dw, mask=mask)


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        D = x.shape[-1]
        x2 = rows_of(x)
        rows = x2.shape[0]
        y = torch.empty((rows, D), dtype=x.dtype, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        rms_norm_kernel[(rows,)](x2, weight, y, rstd, x2.stride(0), y.stride(0), D, eps,
                                 BLOCK_D=triton.next_power_of_2(D))
        ctx.save_for_backward(x2, weight, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, rstd = ctx.saved_tensors
        rows, D = x2.shape
        dy2 = rows_of(dy)
        programs = n_programs(rows, x2.device)
        dx = torch.empty_like(x2)
        dw = torch.empty(programs, D, dtype=torch.float32, device=x2.device)
        rms_norm_backward_kernel[(programs,)](
            x2, weight, dy2, dx, rstd, dw, x2.stride(0), dy2.stride(0), dx.stride(0), rows, D,
            triton.cdiv(rows, programs), BLOCK_D=triton.next_power_of_2(D))
        return dx.view(dy.shape), dw.sum(0).to(weight.dtype), None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm of x (..., D) with gain `weight` (D,), in Triton; the output has x's dtype."""
    return RMSNormFunction.apply(x, weight, eps)


def rms_norm_reference(x, weight, eps: float = 1e-5):
    """The same in plain PyTorch (fp32 inside)."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
