"""SwiGLU's gate as Triton kernels: y = silu(gate)·up = gate·sigmoid(gate)·up, elementwise.

Backward, with s = sigmoid(gate):  dgate = dy·up·s·(1 + gate·(1 - s)),  dup = dy·gate·s.
"""
import torch
import triton
import triton.language as tl

from ._common import ELEMENTWISE_BLOCK



@triton.jit
def swiglu_kernel(g_ptr, u_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (g * tl.sigmoid(g) * u).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_backward_kernel(g_ptr, u_ptr, dy_ptr, dg_ptr, du_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(g)
    tl.store(dg_ptr + offs, (dy * u * s * (1.0 + g * (1.0 - s))).to(dg_ptr.dtype.element_ty), mask=mask)
    tl.store(du_ptr + offs, (dy * g * s).to(du_ptr.dtype.element_ty), mask=mask)


class SwiGLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        gate, up = gate.contiguous(), up.contiguous()
        y = torch.empty_like(gate)
        n = gate.numel()
        swiglu_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](gate, up, y, n, BLOCK=ELEMENTWISE_BLOCK)
        ctx.save_for_backward(gate, up)
        return y

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        dy = dy.contiguous()
        dgate, dup = torch.empty_like(gate), torch.empty_like(up)
        n = gate.numel()
        swiglu_backward_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](gate, up, dy, dgate, dup, n,
                                                                    BLOCK=ELEMENTWISE_BLOCK)
        return dgate, dup


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate)·up for two tensors of one shape (..., F), in Triton."""
    if gate.shape != up.shape:
        raise ValueError(f"gate and up must have one shape, got {tuple(gate.shape)} and {tuple(up.shape)}")
    return SwiGLUFunction.apply(gate, up)


def swiglu_reference(gate, up):
    """The same in plain PyTorch."""
    return torch.nn.functional.silu(gate) * up
