"""Mean cross-entropy over a large vocabulary as Triton kernels, without a (rows, V)
probability matrix: each program walks its row's V logits in blocks with an online
logsumexp (running max m and running Σ exp(x - m)), so the forward reads the logits once
and writes one number per row.

    loss_r = logsumexp(x_r) - x_r[t_r]               (0 where t_r = -100, ignored)
    loss   = Σ loss_r / (number of rows not ignored)

The backward writes the gradient in one pass over the logits, (softmax(x_r) - onehot(t_r))·
dloss / n, from the logsumexp the forward saved; ignored rows get zeros.
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ._common import INTERPRET, rows_of

BLOCK_V = 4096 if INTERPRET else 1024
IGNORE_INDEX = -100


@triton.jit
def cross_entropy_forward_kernel(x_ptr, t_ptr, loss_ptr, lse_ptr, stride_x, V, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(t_ptr + row)
    cols = tl.arange(0, BLOCK_V)
    m = tl.full((BLOCK_V,), float("-inf"), dtype=tl.float32)   # running max, per lane
    s = tl.zeros((BLOCK_V,), dtype=tl.float32)                 # running Σ exp(x - m), per lane
    for start in range(0, V, BLOCK_V):
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=start + cols < V,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes still at -inf (padding) subtract 0 instead: exp(-inf - -inf) would be nan
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    valid = target != -100
    x_t = tl.load(x_ptr + row * stride_x + tl.where(valid, target, 0)).to(tl.float32)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))


@triton.jit
def cross_entropy_backward_kernel(x_ptr, t_ptr, lse_ptr, scale_ptr, dx_ptr, stride_x, stride_dx, V,
                                  BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(t_ptr + row)
    lse = tl.load(lse_ptr + row)
    scale = tl.where(target != -100, tl.load(scale_ptr), 0.0)   # dloss / n, or 0 for ignored rows
    cols = tl.arange(0, BLOCK_V)
    for start in range(0, V, BLOCK_V):
        idx = start + cols
        x = tl.load(x_ptr + row * stride_x + idx, mask=idx < V, other=0.0).to(tl.float32)
        dx = (tl.exp(x - lse) - tl.where(idx == target, 1.0, 0.0)) * scale
        tl.store(dx_ptr + row * stride_dx + idx, dx.to(dx_ptr.dtype.element_ty), mask=idx < V)


class CrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets):
        x2 = rows_of(logits)                                    # (B·T, V)
        t = targets.reshape(-1).contiguous()
        rows, V = x2.shape
        loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        cross_entropy_forward_kernel[(rows,)](x2, t, loss, lse, x2.stride(0), V, BLOCK_V=BLOCK_V)
        n = (t != IGNORE_INDEX).sum()
        ctx.save_for_backward(x2, t, lse, n)
        ctx.shape = logits.shape
        return loss.sum() / n                                   # no valid row: 0/0 = nan, as torch

    @staticmethod
    def backward(ctx, dloss):
        x2, t, lse, n = ctx.saved_tensors
        rows, V = x2.shape
        scale = (dloss.float() / n).reshape(1)
        dx = torch.empty_like(x2)
        cross_entropy_backward_kernel[(rows,)](x2, t, lse, scale, dx, x2.stride(0), dx.stride(0), V,
                                               BLOCK_V=BLOCK_V)
        return dx.view(ctx.shape), None


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss in Triton.  logits: (B, T, V), targets: (B, T), -100 ignored."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"targets {tuple(targets.shape)} must match logits {tuple(logits.shape)} without V")
    return CrossEntropyFunction.apply(logits, targets)


def cross_entropy_reference(logits, targets):
    """The same in plain PyTorch (fp32 inside)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX)
