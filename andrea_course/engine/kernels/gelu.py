"""GELU, tanh form, as Triton kernels: y = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³))).

Forward: gelu_kernel (the learner writes the same kernel in exercises/kernels.py; the graded
tests hold theirs to F.gelu; gelu_tanh(x, kernel=theirs) launches it in the model, with this
file's backward). Backward: gelu_backward_kernel,
    dy/dx = 0.5·(1 + t) + 0.5·x·(1 - t²)·sqrt(2/pi)·(1 + 3·0.044715·x²),  t = tanh(z).
"""
import math

import torch
import triton
import triton.language as tl

from ._common import ELEMENTWISE_BLOCK


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """y = GELU(x) for elements p·BLOCK ... p·BLOCK + BLOCK - 1 (the last block masked), in fp32."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)      # sqrt(2/pi)·(x + 0.044715·x³)
    y = 0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * z) - 1.0))   # tanh(z) = 2·sigmoid(2z) - 1
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gelu_backward_kernel(x_ptr, dy_ptr, dx_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * z) - 1.0                        # tanh(z)
    dz = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x)
    dx = dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dz)
    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)


class GeluFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](x, y, n, BLOCK=ELEMENTWISE_BLOCK)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(x)
        n = x.numel()
        gelu_backward_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](x, dy, dx, n, BLOCK=ELEMENTWISE_BLOCK)
        return dx, None


def gelu_tanh(x: torch.Tensor, kernel=gelu_kernel) -> torch.Tensor:
    """GELU (tanh form) of x, any shape, forward and backward in Triton. kernel: the forward
    kernel to launch, with gelu_kernel's arguments (x_ptr, y_ptr, n_elements, BLOCK)."""
    return GeluFunction.apply(x, kernel)


def gelu_tanh_reference(x: torch.Tensor) -> torch.Tensor:
    """The same in plain PyTorch, computed in fp32."""
    x32 = x.float()
    return (0.5 * x32 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x32 + 0.044715 * x32 ** 3)))).to(x.dtype)
