"""GELU, LayerNorm, row-softmax and FlashAttention kernels written the wrong ways a learner writes
them (for tests/activity_tests/test_kernels_mutants.py: memory read or written that is not the tensors',
rows stepped by their width, offsets or constants slipped, a slip chosen by a SLIP constant where one
kernel holds several) and other right ways (for tests/feedback/test_variants.py). Imported only where
Triton is installed."""
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
def gelu_kernel_slipping(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr, SLIP: tl.constexpr):
    """The learner's GELU kernel with one slip, chosen by SLIP: 1, every program computes the first
    block (the offsets forget the program id); 2, program p starts at element p, not p·BLOCK (the
    blocks overlap); 3, the cube's coefficient typed 0.04715."""
    if SLIP == 1:
        offs = tl.arange(0, BLOCK)
    elif SLIP == 2:
        offs = tl.program_id(0) + tl.arange(0, BLOCK)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n_elements, other=0.0).to(tl.float32)
    cubic = 0.04715 if SLIP == 3 else 0.044715
    z = 0.7978845608028654 * (x + cubic * x * x * x)
    y = 0.5 * x * (1.0 + 2.0 * tl.sigmoid(2.0 * z) - 1.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_elements)


class GeluSlip:
    """gelu_kernel_slipping with SLIP bound, launched as the learner's kernel is."""

    def __init__(self, slip):
        self.slip = slip

    def __getitem__(self, grid):
        return lambda *args, **consts: gelu_kernel_slipping[grid](*args, SLIP=self.slip, **consts)


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


@triton.jit
def flash_attention_kernel_slipping(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, T, S, K, start, sm_scale,
                                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                    SLIP: tl.constexpr):
    """The learner's causal FlashAttention forward with one typical slip, chosen by SLIP (0: none)."""
    first = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    if SLIP == 22:                                           # 22: the grid's two axes read the other way round
        first = tl.program_id(1) * BLOCK_M
        bh = tl.program_id(0)
    rows = first + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_K)
    q_mask = (rows[:, None] < T) & (dims[None, :] < K)
    q = tl.load(q_ptr + bh * T * K + rows[:, None] * K + dims[None, :], mask=q_mask, other=0.0).to(tl.float32)
    scale = sm_scale
    if SLIP == 6:                                            # 1/sqrt(K) on the output
        scale = 1.0
    if SLIP == 7:                                            # 1/sqrt(BLOCK_K)
        scale = 1.0 / tl.sqrt(BLOCK_K * 1.0)
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    if SLIP == 13:                                           # 13: the running max starts at 0
        m = tl.full((BLOCK_M,), 0.0, dtype=tl.float32)
    l = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    kv_head = bh * S * K
    if SLIP == 15:                                           # 15: each head's keys and values at bh * T * K
        kv_head = bh * T * K
    k_head, v_head = kv_head, kv_head
    if SLIP == 18:                                           # 18: the keys alone at bh * T * K
        k_head = bh * T * K
    if SLIP == 19:                                           # 19: the values alone at bh * T * K
        v_head = bh * T * K
    hi = tl.minimum(S, start + first + BLOCK_M)
    if SLIP == 17:                                           # 17: the loop's end without the cache offset
        hi = tl.minimum(S, first + BLOCK_M)
    if SLIP == 3:                                            # the diagonal tile skipped
        hi = tl.minimum(S, start + first)
    offset = start
    if SLIP == 2:                                            # the mask without the cache offset
        offset = 0
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        if SLIP == 24:                                       # 24: the key indices never advance
            cols = offs_n
        kv_mask = (cols[:, None] < S) & (dims[None, :] < K)
        if SLIP == 8:                                        # the tail tile's loads unmasked
            kv_mask = dims[None, :] < K
        k = tl.load(k_ptr + k_head + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + v_head + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        if SLIP != 5:                                        # 5: the max kept on the unscaled scores
            s = s * scale
        visible = (cols[None, :] < S) & (cols[None, :] <= offset + rows[:, None])
        if SLIP == 4:                                        # the diagonal masked
            visible = (cols[None, :] < S) & (cols[None, :] < offset + rows[:, None])
        if SLIP == 23:                                       # 23: the mask from the first tile's indices
            visible = (offs_n[None, :] < S) & (offs_n[None, :] <= offset + rows[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        if SLIP == 26:                                       # 26: the max over the queries of each key column
            m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        if SLIP == 1:                                        # no rescale
            alpha = tl.full((BLOCK_M,), 1.0, dtype=tl.float32)
        if SLIP == 12:                                       # 12: the rescale factor inverted
            alpha = tl.exp(m_new - m)
        if SLIP == 5:
            alpha = tl.exp((m - m_new) * scale)
            p = tl.exp((s - m_new[:, None]) * scale)
        else:
            p = tl.exp(s - m_new[:, None])
        if SLIP == 25:                                       # 25: base 2 where e is meant
            alpha = tl.exp2(m - m_new)
            p = tl.exp2(s - m_new[:, None])
        if SLIP == 9:                                        # 9: acc rescaled, l not
            l = l + tl.sum(p, axis=1)
        else:
            l = l * alpha + tl.sum(p, axis=1)
        if SLIP == 10:                                       # 10: l rescaled, acc not
            acc = acc + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        if SLIP != 16:                                       # 16: the running max never kept
            m = m_new
    out = acc / l[:, None]
    if SLIP == 14:                                           # 14: acc stored without dividing by l
        out = acc
    if SLIP == 6:
        out = out * sm_scale
    if SLIP == 11:                                           # 11: the logsumexp without the max
        m = m * 0.0
    o_mask = q_mask
    if SLIP == 20:                                           # 20: o's store masked by the rows alone
        o_mask = (rows[:, None] < T) & (dims[None, :] < BLOCK_K)
    if SLIP == 21:                                           # 21: o and lse stored without any mask
        tl.store(lse_ptr + bh * T + rows, m + tl.log(l))
        tl.store(o_ptr + bh * T * K + rows[:, None] * K + dims[None, :], out.to(o_ptr.dtype.element_ty))
    else:
        tl.store(lse_ptr + bh * T + rows, m + tl.log(l), mask=rows < T)
        tl.store(o_ptr + bh * T * K + rows[:, None] * K + dims[None, :], out.to(o_ptr.dtype.element_ty), mask=o_mask)


class FlashSlip:
    """flash_attention_kernel_slipping with SLIP bound, launched as the learner's kernel is."""

    def __init__(self, slip):
        self.slip = slip

    def __getitem__(self, grid):
        return lambda *args, **consts: flash_attention_kernel_slipping[grid](*args, SLIP=self.slip, **consts)


# ----- the twelfth fresh set's kernels -----

@triton.jit
def gelu_kernel_storing_in_x(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """The result stored through x_ptr: x overwritten, y never written."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + 2.0 * tl.sigmoid(2.0 * z) - 1.0)
    tl.store(x_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gelu_kernel_masked_by_block(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """The mask compares the offsets with BLOCK, not n_elements."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < BLOCK
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + 2.0 * tl.sigmoid(2.0 * z) - 1.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_kernel_slipping(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, D, eps,
                               HAS_BIAS: tl.constexpr, BLOCK_D: tl.constexpr, SLIP: tl.constexpr):
    """LayerNorm with one slip, chosen by SLIP: 1, gamma loaded at w_ptr + row * stride + cols; 2, the mean
    and rstd stored at row * stride; 3, the raw x scaled (x * rstd), not the centred xc; 4, rstd as the
    standard deviation, not its reciprocal; 5, the mean never stored; 6, the saved mean taken over the
    centred row; 7, the variance taken over the raw row, not the centred one; 8, beta added before the
    multiplication by gamma; 9, y stored at y_ptr + cols, every row at row 0; 10, the variance divided by
    BLOCK_D, not D."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / D + eps)
    if SLIP == 10:
        rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / BLOCK_D + eps)
    if SLIP == 4:
        rstd = tl.sqrt(tl.sum(xc * xc, axis=0) / D + eps)
    if SLIP == 7:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    w_at = w_ptr + cols
    if SLIP == 1:
        w_at = w_ptr + row * stride + cols
    scaled = xc
    if SLIP == 3:
        scaled = x
    if SLIP == 8:
        y = scaled * rstd
        if HAS_BIAS:
            y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = y * tl.load(w_at, mask=mask, other=0.0).to(tl.float32)
    else:
        y = scaled * rstd * tl.load(w_at, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if SLIP == 6:
        mean = tl.sum(xc, axis=0) / D
    stat = row
    if SLIP == 2:
        stat = row * stride
    if SLIP != 5:                                            # 5: the mean never stored
        tl.store(mean_ptr + stat, mean)
    tl.store(rstd_ptr + stat, rstd)
    y_row = row * stride
    if SLIP == 9:
        y_row = 0
    tl.store(y_ptr + y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class LayerNormSlip:
    """layer_norm_kernel_slipping with SLIP bound, launched as the learner's kernel is."""

    def __init__(self, slip):
        self.slip = slip

    def __getitem__(self, grid):
        return lambda *args, **consts: layer_norm_kernel_slipping[grid](*args, SLIP=self.slip, **consts)
