"""Activity 9 · Triton kernels: the GELU, LayerNorm and row-softmax forward passes as GPU kernels.

A kernel is one program written for one block of data; the launch runs it once per block,
`grid` times, in parallel. Each program finds its block from `tl.program_id(0)`, loads it
with a mask (the last block is usually ragged), computes, and stores its result.

    GELU(x) = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))          elementwise
    LN(x)   = (x - mean)/sqrt(var + eps)·gamma + beta                   per row of D
    softmax(x) = exp(x - max) / Σ exp(x - max)                          per row

Without a GPU this file sets TRITON_INTERPRET=1 before any kernel is defined: the same kernels
then run, slowly, in Triton's interpreter on CPU tensors. andrea_course/engine/kernels/ holds the
package's own copies of these kernels, with their backward passes (docs/kernels.md).

The launchers below are written for you. They take the kernel as a default argument, bound
when this file is loaded, so they always launch the kernel defined in this file.
"""
import os

import torch

if not torch.cuda.is_available():          # no GPU: kernels defined below run in the interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")
try:
    import triton
    import triton.language as tl
except ImportError:                        # Triton ships for Linux only: this file still imports

    class _NoTriton:
        constexpr = None

        def jit(self, fn):
            return fn

        def __getattr__(self, name):
            raise ImportError("Triton is not installed: pip install 'andrea-course[kernels]' (Linux)")

    triton = tl = _NoTriton()


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """y = GELU(x) (tanh form) for the BLOCK elements of this program.

    x_ptr, y_ptr: flat arrays of n_elements. Program p handles elements p·BLOCK ... p·BLOCK + BLOCK - 1;
    the last block runs past n_elements, so loads and stores take a mask. Compute in fp32
    (upcast right after loading) and store in y's dtype. Triton has no tl.tanh here:
    tanh(z) = 2·sigmoid(2z) - 1.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: GELU (tanh form) of one block of BLOCK elements, masked at the end.
    ### HINT: Write the program for one block only: its number tells it which BLOCK consecutive elements are its own. The last block usually hangs over the end of the array, so every load and every store needs a guard that switches off the lanes past the end. Do the arithmetic in fp32, write the tanh through a sigmoid (tanh of z is twice the sigmoid of 2z, minus one), and store in the output's own type.
    ### API: tl.program_id(axis=0) is this program's number; tl.arange(start, end) the lane offsets; offsets compared with the length give the mask; tl.load(ptr + offs, mask=mask, other=0.0), .to(tl.float32), tl.sigmoid, tl.store(ptr + offs, value.to(ptr.dtype.element_ty), mask=mask). The same index arithmetic in PyTorch, program 2 of blocks of 4 over 10 elements: `(2 * 4 + torch.arange(0, 4)) < 10` gives `[True, True, False, False]`; the tanh identity: `2 * torch.sigmoid(torch.tensor([2 * 0.5])) - 1` gives `[0.4621]`
    ### LINE: offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK); mask = offs < n_elements; x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32); z = 0.7978845608028654 * (x + 0.044715 * x * x * x); y = 0.5 * x * (2 * tl.sigmoid(2 * z)); tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)                 # this program's element indices
    mask = offs < n_elements                                 # the ragged tail of the last block
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)      # sqrt(2/pi)·(x + 0.044715·x³)
    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0
    y = 0.5 * x * (1.0 + tanh_z)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def gelu(x: torch.Tensor, kernel=gelu_kernel, block: int = 1024) -> torch.Tensor:
    """Launch `kernel` (your gelu_kernel) over x, any shape: one program per `block` elements.

    A checking launcher, for learning: x is copied into a buffer with a block of zeros after
    its end (an unmasked load reads those, not someone else's memory), and y gets a block of
    NaN after its end; a kernel that stores without a mask writes there, and this launcher
    says so. The package launches gelu_kernel directly, without the copies.
    """
    x = x.contiguous()
    n = x.numel()
    grid = (triton.cdiv(n, block),)
    x_pad = torch.zeros(grid[0] * block + block, dtype=x.dtype, device=x.device)
    x_pad[:n] = x.reshape(-1)
    y_pad = torch.full_like(x_pad, float("nan"))
    kernel[grid](x_pad, y_pad, n, BLOCK=block)
    past = int((~torch.isnan(y_pad[n:])).sum())
    if past:
        raise RuntimeError(f"gelu_kernel wrote {past} element{'s' * (past != 1)} past the end of y: the last block "
                           f"is ragged, so tl.store (and tl.load) need mask=offs < n_elements")
    return y_pad[:n].view_as(x)


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                      HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr):
    """LayerNorm of one row of x (program r handles row r), saving mean and 1/std for the backward.

    x_ptr: rows of D values, row r starting at x_ptr + r·stride (y_ptr likewise);
    w_ptr, b_ptr: gamma and beta, D values each (b_ptr unused unless HAS_BIAS);
    mean_ptr, rstd_ptr: one fp32 value per row. BLOCK_D >= D is a power of two, so the
    lanes D ... BLOCK_D - 1 are padding: mask them, and keep them out of every sum.
    The variance is the biased one (divide by D) and eps goes inside the square root.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: LayerNorm of one row, padding kept out; store mean, 1/std and the row.
    ### HINT: One program owns one row. The block is wider than the row (a power of two), and its extra lanes are loaded as zeros under a mask: zeros leave the sum, and so the mean, right, but after centring every padding lane would hold minus the mean, and its square would inflate the variance, so zero those lanes again before squaring. Divide the sums by the real width, not the block's. Save the row's mean and reciprocal standard deviation for the backward pass, then store the scaled and shifted row.
    ### API: tl.sum(t, axis=0) reduces a block; tl.where(mask, a, b) picks lane by lane; tl.sqrt; tl.store(ptr + row, value) writes one number per row; row r starts at ptr + r * stride. The padding trap in PyTorch, a row (1, 3) padded to 4 lanes: `torch.where(torch.tensor([True, True, False, False]), torch.tensor([1., 3., 0., 0.]) - 2., 0.).pow(2).sum() / 2` gives `1.0`, the true variance, where the same sum without the where gives 5.0
    ### LINE: row, cols = tl.program_id(0), tl.arange(0, BLOCK_D); mask = cols < D; x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32); mean = tl.sum(x, axis=0) / D; xc = tl.where(mask, x - mean, 0.0); var = tl.sum(xc * xc, axis=0) / D; rstd = 1.0 / tl.sqrt(var + eps); y = xc * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32), plus b's row when HAS_BIAS
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)                       # padding lanes would add mean² each
    var = tl.sum(xc * xc, axis=0) / D                        # biased variance
    rstd = 1.0 / tl.sqrt(var + eps)
    y = xc * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5,
               kernel=layer_norm_kernel):
    """Launch `kernel` (your layer_norm_kernel) once per row of x (..., D).

    Returns (y (..., D) in x's dtype, mean (rows,) fp32, rstd (rows,) fp32). They start as NaN:
    what the kernel never stores stays NaN.
    """
    D = x.shape[-1]
    x2 = x.reshape(-1, D).contiguous()                       # (rows, D)
    rows = x2.shape[0]
    y = torch.full_like(x2, float("nan"))
    mean = torch.full((rows,), float("nan"), dtype=torch.float32, device=x.device)
    rstd = torch.full((rows,), float("nan"), dtype=torch.float32, device=x.device)
    kernel[(rows,)](x2, weight, bias if bias is not None else weight, y, mean, rstd,
                    x2.stride(0), D, eps, HAS_BIAS=bias is not None,
                    BLOCK_D=triton.next_power_of_2(D))
    return y.view_as(x), mean, rstd


@triton.jit
def softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """The softmax of one row of x (program r handles row r): y = exp(x - max) / Σ exp(x - max).

    x_ptr: rows of n_cols values, row r starting at x_ptr + r·x_row_stride; y_ptr likewise with
    y_row_stride. The two strides differ when x's rows are a slice of a wider matrix: step each
    tensor by its own. BLOCK >= n_cols is a power of two, so the lanes n_cols ... BLOCK - 1 are
    padding: mask them, and load them as a value that neither wins the max nor adds to the sum.
    Subtract the row's maximum before exp (exp of 89 already overflows fp32); compute in fp32,
    store in y's dtype.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Softmax of one row, read and written through each tensor's own row stride.
    ### HINT: One program owns one row and finds it at its row number times that tensor's own row stride, the input's for loading and the output's for storing. Lanes past the row's end must neither win the maximum nor add to the sum: loaded as minus infinity they do neither, since their exponential is zero. Upcast to fp32, subtract the row's largest value, exponentiate, divide by the sum, and store in the output's type under the same mask.
    ### API: tl.load(ptr, mask=mask, other=float('-inf')) fills masked lanes; tl.max(t, axis=0), tl.exp, tl.sum(t, axis=0); row r of a tensor starts at ptr + r * its row stride. In PyTorch, a row of 3 padded to 4 lanes with minus infinity: `torch.softmax(torch.tensor([1., 2., 3., float('-inf')]), dim=0)` gives `[0.0900, 0.2447, 0.6652, 0.]`; a slice's row stride is not its width: `torch.zeros(4, 10)[:, :3].stride(0)` gives `10`
    ### LINE: row, cols = tl.program_id(0), tl.arange(0, BLOCK); x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32); e = tl.exp(x - tl.max(x, axis=0)); y = e / tl.sum(e, axis=0)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols                                     # the padding lanes of the block
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))                        # each <= 1; padding: exp(-inf) = 0
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def softmax(x: torch.Tensor, kernel=softmax_kernel) -> torch.Tensor:
    """Launch `kernel` (your softmax_kernel) once per row of x (..., n_cols): softmax over the last axis.

    x's rows may be strided (x = logits[:, :V], a slice of a wider matrix): they go to the kernel
    as they are, with their row stride; only a last axis that is not contiguous is copied. A
    checking launcher, for learning: y starts as NaN, so a row the kernel never writes shows, and
    it has NaN after its end, a block and as far as x's rows reach; a kernel that stores past the
    last row writes there, and this launcher says so.
    """
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)                               # (rows, n_cols): a view whenever x's rows allow
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    rows, block = x2.shape[0], triton.next_power_of_2(n_cols)
    reach = rows * max(n_cols, x2.stride(0)) + block         # y's rows stepped by x's stride still land in it
    y_pad = torch.full((reach,), float("nan"), dtype=x.dtype, device=x.device)
    y = y_pad[:rows * n_cols].view(rows, n_cols)             # (rows, n_cols), row stride n_cols
    kernel[(rows,)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=block)
    past = int((~torch.isnan(y_pad[rows * n_cols:])).sum())
    if past:
        raise RuntimeError(f"softmax_kernel wrote {past} element{'s' * (past != 1)} past the last row of y: its "
                           f"stores need mask=cols < n_cols, and y's rows are y_row_stride apart")
    return y.view(x.shape)


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, T, S, K, start, sm_scale,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Causal attention for BLOCK_M queries of one head (program (m, bh)), the keys walked BLOCK_N at a time.

    q_ptr, o_ptr: (BH, T, K) contiguous, query i of head bh at q_ptr + bh·T·K + i·K; k_ptr, v_ptr:
    (BH, S, K) likewise; lse_ptr: (BH, T) fp32. Query i sits at position start + i and sees keys
    j <= start + i (keys 0 .. start - 1 come from a cache). BLOCK_K >= K is a power of two.
    No (T, S) score matrix: per query row keep the running max m, the running sum l of
    exp(s - m) and the unnormalised output acc; when the max grows to m', what was summed
    so far is multiplied by exp(m - m'). Stop after the tile holding the block's last query
    position: later keys are above the diagonal. Store o = acc / l and lse = m + log(l), the
    logsumexp of the scaled scores s = q·k·sm_scale, from which the backward rebuilds p.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Online softmax over key tiles up to the diagonal; store the output and the logsumexp.
    ### HINT: One program owns a block of queries of one head and starts with a running max of minus infinity, a running sum of zero and an output accumulator of zeros. It walks the keys a tile at a time, up to the tile that holds its last query's position and no further. For each tile: scores scaled by sm_scale, minus infinity where the key lies past the end or after the query's position (which is start plus its row), the new max, the exponential of the old max minus the new one applied to the sum and the accumulator before adding this tile's exponentials and their product with the values. At the end divide by the sum; the logsumexp of the scaled scores is the max plus the log of the sum. Every load and store is masked by rows < T, keys < S and dims < K.
    ### API: rows[:, None] and dims[None, :] make a (BLOCK_M, BLOCK_K) grid of offsets; tl.load(ptr + offs, mask=..., other=0.0); tl.dot(a, b, input_precision="ieee") for exact fp32; tl.trans(k); tl.where(mask, a, float("-inf")); tl.max(t, axis=1), tl.sum(t, axis=1), tl.exp, tl.log, tl.maximum, tl.minimum; a Python loop over tiles, range(0, n, step), works inside a kernel. The rescale in PyTorch, one row of scores [1, 0] then [3], summed against max 1 and rescaled to max 3: `torch.exp(torch.tensor([0., -1.])).sum() * torch.exp(torch.tensor(1. - 3.)) + 1.` gives `1.1851`, as `torch.exp(torch.tensor([1., 0., 3.]) - 3.).sum()` does
    ### LINE: for each key tile: s = tl.where(visible, tl.dot(q, tl.trans(k)) * sm_scale, -inf); m_new = tl.maximum(m, tl.max(s, axis=1)); alpha = tl.exp(m - m_new); p = tl.exp(s - m_new[:, None]); l = l * alpha + tl.sum(p, axis=1); acc = acc * alpha[:, None] + tl.dot(p, v); m = m_new
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
    ### END SOLUTION


def _guarded(t: torch.Tensor, fill: float, after: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, view): t's values, contiguous, at the start of a buffer with `after` `fill` values after them."""
    buf = torch.full((t.numel() + after,), fill, dtype=t.dtype, device=t.device)
    buf[:t.numel()] = t.reshape(-1)
    return buf, buf[:t.numel()].view(t.shape)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int | None = None,
                    kernel=flash_attention_kernel, block_m: int = 16, block_n: int = 16):
    """Launch `kernel` (your flash_attention_kernel): causal attention, q (B, H, T, K), k, v (B, H, S, K).

    Query i sits at position start + i (default S - T: the queries are the last T positions).
    Returns (o (B, H, T, K) in q's dtype, lse (B, H, T) fp32). A checking launcher, for learning:
    q, k and v are copied into buffers with a whole tile of NaN after their end (an unmasked load
    past the end reads NaN, and the output shows it), o and lse start as NaN with a tile of NaN
    after their end (what the kernel never stores stays NaN), and a kernel that stores past the
    end is refused with a count of what it wrote there.
    """
    B, H, T, K = q.shape
    S = k.shape[2]
    start = S - T if start is None else start
    if k.shape != (B, H, S, K) or v.shape != k.shape:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: expected (B, H, T, K) "
                         f"and two (B, H, S, K)")
    if not 0 <= start <= S - T:
        raise ValueError(f"start={start}: queries at start .. start + T - 1 must lie in 0 .. S - 1 (T={T}, S={S})")
    block_k = max(16, triton.next_power_of_2(K))
    tile = max(block_m, block_n) * block_k                   # the farthest a ragged tile reaches past the end
    (_, q_), (_, k_), (_, v_) = (_guarded(t, float("nan"), tile) for t in (q, k, v))
    o_buf, o = _guarded(torch.full_like(q, float("nan")), float("nan"), tile)     # NaN where nothing is stored
    lse_buf, lse = _guarded(torch.full((B, H, T), float("nan"), device=q.device), float("nan"), tile)
    grid = (triton.cdiv(T, block_m), B * H)
    kernel[grid](q_, k_, v_, o, lse, T, S, K, start, 1.0 / K ** 0.5,
                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    past = int((~torch.isnan(o_buf[o.numel():])).sum() + (~torch.isnan(lse_buf[lse.numel():])).sum())
    if past:
        raise RuntimeError(f"flash_attention_kernel wrote {past} element{'s' * (past != 1)} past the end of o or "
                           f"lse: the last query block is ragged, so its stores need mask=rows < T (and dims < K)")
    return o, lse
