"""LayerNorm over the last axis (D) as Triton kernels: y = (x - mean)·rstd·gamma + beta.

Forward: one program per row, saving mean and rstd = 1/sqrt(var + eps) (the learner writes the
same kernel in exercises/kernels.py; the graded tests hold theirs to F.layer_norm;
layer_norm(..., kernel=theirs) launches it in the model, with this file's backward).
Backward: each program walks a stripe of rows, with xhat = (x - mean)·rstd, g = dy·gamma,
    dx = rstd·(g - mean(g) - xhat·mean(g·xhat))      (means over D)
and sums dgamma = Σ dy·xhat, dbeta = Σ dy over its rows into one fp32 partial row; torch adds
the partial rows (llm.c's layernorm_backward does the same with a shared-memory scratch).
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ._common import n_programs, rows_of


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                      HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Row r = program r of x (D values from x_ptr + r·stride); padding lanes D..BLOCK_D-1 masked."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / D + eps)     # biased variance
    y = xc * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_backward_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr,
                               stride_x, stride_dy, stride_dx, rows, D, rows_per_program,
                               BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_D,), dtype=tl.float32)
    db = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in range(0, rows_per_program):
        row = pid * rows_per_program + i
        if row < rows:
            x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
            mean = tl.load(mean_ptr + row)
            rstd = tl.load(rstd_ptr + row)
            xhat = tl.where(mask, (x - mean) * rstd, 0.0)
            g = dy * w
            dx = rstd * (g - tl.sum(g, axis=0) / D - xhat * (tl.sum(g * xhat, axis=0) / D))
            tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * xhat
            db += dy
    tl.store(dw_ptr + pid * D + cols, dw, mask=mask)
    tl.store(db_ptr + pid * D + cols, db, mask=mask)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, kernel):
        D = x.shape[-1]
        x2 = x.reshape(-1, D).contiguous()                   # (rows, D)
        rows = x2.shape[0]
        y = torch.empty_like(x2)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        kernel[(rows,)](x2, weight, bias if bias is not None else weight, y, mean, rstd,
                        x2.stride(0), D, eps, HAS_BIAS=bias is not None, BLOCK_D=triton.next_power_of_2(D))
        y = y.view_as(x)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        D = x.shape[-1]
        x2, dy2 = rows_of(x), rows_of(dy)
        rows = x2.shape[0]
        programs = n_programs(rows, x.device)
        dx = torch.empty_like(x2)
        dw = torch.empty(programs, D, dtype=torch.float32, device=x.device)
        db = torch.empty(programs, D, dtype=torch.float32, device=x.device)
        layer_norm_backward_kernel[(programs,)](
            x2, weight, dy2, dx, mean, rstd, dw, db, x2.stride(0), dy2.stride(0), dx.stride(0),
            rows, D, triton.cdiv(rows, programs), BLOCK_D=triton.next_power_of_2(D))
        dbias = db.sum(0).to(weight.dtype) if ctx.has_bias else None
        return dx.view_as(x), dw.sum(0).to(weight.dtype), dbias, None, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5,
               kernel=layer_norm_kernel) -> torch.Tensor:
    """LayerNorm of x (..., D) with gamma `weight` and beta `bias` (or None), in Triton. kernel: the
    forward kernel to launch, with layer_norm_kernel's arguments (it saves each row's mean and rstd)."""
    return LayerNormFunction.apply(x, weight, bias, eps, kernel)


def layer_norm_reference(x, weight, bias, eps: float = 1e-5):
    """The same in plain PyTorch."""
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
