"""Causal flash attention as Triton kernels (FlashAttention-2's schedule), forward and backward.

    out = softmax(mask(q·kᵀ/sqrt(K)))·v,  q: (B, H, T, K),  k, v: (B, H, S, K)

Query i sits at position i + S - T (S > T: earlier keys come from a cache), so the causal rule
is j <= i + S - T. No (T, S) score matrix is ever stored: a program owns BLOCK_M queries,
walks the keys BLOCK_N at a time and keeps, per query row, the running max m, the running
sum l of exp(score - m) and the unnormalised output acc (the online softmax). Blocks wholly
above the diagonal are never visited. The forward saves one number per query row, the
logsumexp, from which the backward recomputes each probability tile:
    p = exp(s - lse),  dv = pᵀ·do,  dp = do·vᵀ,  ds = p·(dp - delta),  delta_i = do_i·o_i,
    dq = ds·k/sqrt(K),  dk = dsᵀ·q/sqrt(K).
One kernel walks the queries for a block of keys (dk, dv), another walks the keys for a block
of queries (dq), so no two programs write the same gradient and no atomics are needed.
Scores are kept in base 2 (exp2 is the GPU's native exponential): s2 = s·log2(e).
"""
import math

import torch
import triton
import triton.language as tl

from ._common import INTERPRET

LOG2E = 1.4426950408889634


@triton.jit
def visible_keys(rows, cols, T, S, CAUSAL: tl.constexpr):
    """Mask over (query rows i, key cols j): key j exists and, when causal, query i may see it.
    With S - T keys cached, query i sits at position i + S - T: it sees j <= i + S - T."""
    visible = cols[None, :] < S
    if CAUSAL:
        visible = visible & (cols[None, :] <= rows[:, None] + S - T)
    return visible


@triton.jit
def attention_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                             sqb, sqh, sqt, skb, skh, sks, svb, svh, svs, sob, soh, sot,
                             H, T, S, KD, qk_scale,
                             CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    rows = start_m + tl.arange(0, BLOCK_M)                  # query indices i
    offs_n = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_K)
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqt + dims[None, :],
                mask=(rows[:, None] < T) & (dims[None, :] < KD), other=0.0)
    if UPCAST:                                              # the interpreter's bf16 is wrong: use fp32
        q = q.to(tl.float32)
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    hi = S
    if CAUSAL:                                              # keys past the block's last query: skip
        hi = tl.minimum(S, start_m + BLOCK_M + S - T)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n                             # key indices j
        kt = tl.load(k_ptr + b * skb + h * skh + cols[None, :] * sks + dims[:, None],
                     mask=(cols[None, :] < S) & (dims[:, None] < KD), other=0.0)   # (BLOCK_K, BLOCK_N)
        v = tl.load(v_ptr + b * svb + h * svh + cols[:, None] * svs + dims[None, :],
                    mask=(cols[:, None] < S) & (dims[None, :] < KD), other=0.0)    # (BLOCK_N, BLOCK_K)
        if UPCAST:
            kt, v = kt.to(tl.float32), v.to(tl.float32)
        s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale                   # (BLOCK_M, BLOCK_N)
        s = tl.where(visible_keys(rows, cols, T, S, CAUSAL), s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))            # finite: key 0 is allowed for every row
        alpha = tl.exp2(m - m_new)                          # rescales what was summed so far
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new
    acc = acc / l[:, None]
    tl.store(lse_ptr + bh * T + rows, m + tl.log2(l), mask=rows < T)
    tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sot + dims[None, :],
             acc.to(o_ptr.dtype.element_ty), mask=(rows[:, None] < T) & (dims[None, :] < KD))


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, T, S, K, start, sm_scale,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The learner's kernel (notebook 08), the package's copy: the forward over (BH, T, K) contiguous
    tensors, queries at positions start + i, lse in natural log (attention_forward_kernel keeps base 2)."""
    first = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    rows = first + tl.arange(0, BLOCK_M)                     # query indices i
    offs_n = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_K)
    q_mask = (rows[:, None] < T) & (dims[None, :] < K)
    q = tl.load(q_ptr + bh * T * K + rows[:, None] * K + dims[None, :], mask=q_mask, other=0.0).to(tl.float32)
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    hi = tl.minimum(S, start + first + BLOCK_M)              # keys after the block's last position: skipped
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n                              # key indices j
        kv_mask = (cols[:, None] < S) & (dims[None, :] < K)
        k = tl.load(k_ptr + bh * S * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + bh * S * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale             # (BLOCK_M, BLOCK_N)
        visible = (cols[None, :] < S) & (cols[None, :] <= start + rows[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))             # finite: key 0 is visible to every row
        alpha = tl.exp(m - m_new)                            # rescales what was summed so far
        p = tl.exp(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
    tl.store(lse_ptr + bh * T + rows, m + tl.log(l), mask=rows < T)
    tl.store(o_ptr + bh * T * K + rows[:, None] * K + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=q_mask)


@triton.jit
def attention_backward_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                                   sqb, sqh, sqt, skb, skh, sks, svb, svh, svs, sdb, sdh, sdt,
                                   H, T, S, KD, qk_scale, sm_scale,
                                   CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                   BLOCK_K: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    cols = start_n + tl.arange(0, BLOCK_N)                  # this program's keys j
    offs_m = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_K)
    kv_mask = (cols[:, None] < S) & (dims[None, :] < KD)
    k = tl.load(k_ptr + b * skb + h * skh + cols[:, None] * sks + dims[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + b * svb + h * svh + cols[:, None] * svs + dims[None, :], mask=kv_mask, other=0.0)
    if UPCAST:
        k, v = k.to(tl.float32), v.to(tl.float32)
    dk = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    lo = 0
    if CAUSAL:                                              # queries before the first that sees key start_n
        lo = tl.maximum(0, start_n - (S - T)) // BLOCK_M * BLOCK_M
    for start_m in range(lo, T, BLOCK_M):
        rows = start_m + offs_m
        q_mask = (rows[:, None] < T) & (dims[None, :] < KD)
        q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqt + dims[None, :], mask=q_mask, other=0.0)
        do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sdt + dims[None, :], mask=q_mask, other=0.0)
        if UPCAST:
            q, do = q.to(tl.float32), do.to(tl.float32)
        lse = tl.load(lse_ptr + bh * T + rows, mask=rows < T, other=0.0)
        delta = tl.load(delta_ptr + bh * T + rows, mask=rows < T, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale           # (BLOCK_M, BLOCK_N)
        allowed = (rows[:, None] < T) & visible_keys(rows, cols, T, S, CAUSAL)
        p = tl.where(allowed, tl.exp2(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PRECISION)
    tl.store(dk_ptr + bh * S * KD + cols[:, None] * KD + dims[None, :], (dk * sm_scale).to(dk_ptr.dtype.element_ty),
             mask=kv_mask)
    tl.store(dv_ptr + bh * S * KD + cols[:, None] * KD + dims[None, :], dv.to(dv_ptr.dtype.element_ty), mask=kv_mask)


@triton.jit
def attention_backward_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                                 sqb, sqh, sqt, skb, skh, sks, svb, svh, svs, sdb, sdh, sdt,
                                 H, T, S, KD, qk_scale, sm_scale,
                                 CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_K)
    q_mask = (rows[:, None] < T) & (dims[None, :] < KD)
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqt + dims[None, :], mask=q_mask, other=0.0)
    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sdt + dims[None, :], mask=q_mask, other=0.0)
    if UPCAST:
        q, do = q.to(tl.float32), do.to(tl.float32)
    lse = tl.load(lse_ptr + bh * T + rows, mask=rows < T, other=0.0)
    delta = tl.load(delta_ptr + bh * T + rows, mask=rows < T, other=0.0)
    dq = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, start_m + BLOCK_M + S - T)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < S) & (dims[None, :] < KD)
        k = tl.load(k_ptr + b * skb + h * skh + cols[:, None] * sks + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + cols[:, None] * svs + dims[None, :], mask=kv_mask, other=0.0)
        if UPCAST:
            k, v = k.to(tl.float32), v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        allowed = (rows[:, None] < T) & visible_keys(rows, cols, T, S, CAUSAL)
        p = tl.where(allowed, tl.exp2(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    tl.store(dq_ptr + bh * T * KD + rows[:, None] * KD + dims[None, :], (dq * sm_scale).to(dq_ptr.dtype.element_ty),
             mask=q_mask)


def _settings(q: torch.Tensor):
    """Block sizes, the bf16 upcast for the interpreter, and exact fp32 dots (no TF32)."""
    KD = q.shape[-1]
    block_k = max(16, triton.next_power_of_2(KD))
    block = 64 if (INTERPRET or block_k > 64) else 128
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    return dict(BLOCK_M=block, BLOCK_N=64, BLOCK_K=block_k, UPCAST=INTERPRET, PRECISION=precision)


def _strides(t):
    return t.stride(0), t.stride(1), t.stride(2)


class FlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        B, H, T, KD = q.shape
        S = k.shape[2]
        if k.shape != (B, H, S, KD) or v.shape != k.shape:
            raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: expected "
                             f"(B, H, T, K) and two (B, H, S, K)")
        if causal and S < T:
            raise ValueError(f"causal attention needs S >= T (queries are the last T of S positions), got T={T}, S={S}")
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        o = torch.empty_like(q)
        lse = torch.empty(B * H, T, dtype=torch.float32, device=q.device)
        cfg = _settings(q)
        sm_scale = 1.0 / math.sqrt(KD)
        grid = (triton.cdiv(T, cfg["BLOCK_M"]), B * H)
        attention_forward_kernel[grid](q, k, v, o, lse, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
                                       H, T, S, KD, sm_scale * LOG2E, CAUSAL=causal, **cfg)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        B, H, T, KD = q.shape
        S = k.shape[2]
        do = do if do.stride(-1) == 1 else do.contiguous()
        delta = (do.float() * o.float()).sum(-1).reshape(B * H, T)         # delta_i = do_i·o_i
        dq = torch.empty(B, H, T, KD, dtype=q.dtype, device=q.device)
        dk = torch.empty(B, H, S, KD, dtype=k.dtype, device=k.device)
        dv = torch.empty(B, H, S, KD, dtype=v.dtype, device=v.device)
        cfg = _settings(q)
        sm_scale = 1.0 / math.sqrt(KD)
        args = (*_strides(q), *_strides(k), *_strides(v), *_strides(do), H, T, S, KD, sm_scale * LOG2E, sm_scale)
        attention_backward_dkdv_kernel[(triton.cdiv(S, cfg["BLOCK_N"]), B * H)](
            q, k, v, do, lse, delta, dk, dv, *args, CAUSAL=ctx.causal, **cfg)
        attention_backward_dq_kernel[(triton.cdiv(T, cfg["BLOCK_M"]), B * H)](
            q, k, v, do, lse, delta, dq, *args, CAUSAL=ctx.causal, **cfg)
        return dq, dk, dv, None


class KernelForwardFunction(FlashAttentionFunction):
    """Causal attention whose forward is a kernel of flash_attention_kernel's signature (a learner's),
    the backward this file's: the kernel's natural-log lse is turned to base 2 for it."""

    @staticmethod
    def forward(ctx, q, k, v, kernel):
        B, H, T, KD = q.shape
        S = k.shape[2]
        q, k, v = (t.contiguous() for t in (q, k, v))
        o = torch.empty_like(q)
        lse = torch.empty(B * H, T, dtype=torch.float32, device=q.device)
        block_k = max(16, triton.next_power_of_2(KD))
        kernel[(triton.cdiv(T, 16), B * H)](q, k, v, o, lse, T, S, KD, S - T, 1.0 / math.sqrt(KD),
                                            BLOCK_M=16, BLOCK_N=16, BLOCK_K=block_k)
        ctx.save_for_backward(q, k, v, o, lse * LOG2E)
        ctx.causal = True
        return o


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True, kernel=None) -> torch.Tensor:
    """Scaled dot-product attention in Triton.  q: (B, H, T, K), k, v: (B, H, S, K) -> (B, H, T, K).
    kernel: a forward kernel of flash_attention_kernel's signature to run instead (causal only)."""
    if kernel is not None and causal and q.shape[2] <= k.shape[2]:
        return KernelForwardFunction.apply(q, k, v, kernel)
    return FlashAttentionFunction.apply(q, k, v, causal)


def attention_reference(q, k, v, causal: bool = True):
    """The same in plain PyTorch, the (T, S) scores materialised (fp32 inside)."""
    T, S = q.shape[-2], k.shape[-2]
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.arange(S, device=q.device)[None, :] <= torch.arange(T, device=q.device)[:, None] + (S - T)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)
