"""Activity 8 · Triton kernels.

1. Graded tests of the exercises in solutions/kernels.py: the GELU and LayerNorm forward
   kernels, run through their launchers `gelu(x)` and `layer_norm(x, w, b, eps)`. They live
   in test_kernels.py because check("kernels.<piece>") in a notebook runs test_<activity>.py.
2. The package's kernels (andrea_course.kernels) against their PyTorch references: forward and
   every gradient, at small awkward shapes (D = 769, T = 17 and 100, V = 8,449), in fp32 and
   fp16, and in bf16 where a GPU compiles them (the interpreter gets bf16 wrong); and a training
   step of a tiny ANDREA with kernels="triton" against kernels="torch".

Without a GPU the kernels run in Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET),
which costs about 3 ms per program: the shapes keep the number of programs small.
"""
import math

import pytest
import torch

pytest.importorskip("triton")

from andrea_course import ANDREA, ModelConfig, backends  # noqa: E402
from andrea_course import kernels as K                   # noqa: E402
from andrea_course.grading import Mismatch, expect_close, expect_equal, expect_true, graded  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# The interpreter's sigmoid computes 1/(1 + exp(-x)) in numpy: exp overflows to inf for
# large |x| and the result is the right 0; numpy warns all the same.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")

# ===== 1. Graded: the learner's kernels ==================================

# ----- GELU -----------------------------------------------------------------------------

def gelu_with(c: float = math.sqrt(2 / math.pi), cubic: float = 0.044715, tanh=torch.tanh):
    """The tanh-form GELU with its constants and tanh as given: the reference and its mistakes."""
    return lambda x: 0.5 * x * (1.0 + tanh(c * (x + cubic * x ** 3)))


GELU_MISTAKES = {
    "wrong tanh constant: sqrt(pi/2) instead of sqrt(2/pi) = 0.7978845608": gelu_with(c=math.sqrt(math.pi / 2)),
    "wrong tanh constant: 2/pi without the square root": gelu_with(c=2 / math.pi),
    "wrong cubic constant: 0.44715 instead of 0.044715": gelu_with(cubic=0.44715),
    "tanh(z) written as 2·sigmoid(z) - 1, which is tanh(z/2): use 2·sigmoid(2z) - 1":
        gelu_with(tanh=lambda z: 2 * torch.sigmoid(z) - 1),
    "the exact (erf) GELU instead of the tanh form": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
}


def call_gelu(gelu, x):
    """Run the learner's kernel; its launcher refuses a kernel that stores past the last element."""
    try:
        return gelu(x)
    except RuntimeError as exc:
        if "past the end" not in str(exc):
            raise
        raise Mismatch("gelu(x)", "the kernel wrote past the last element of y",
                       "the last block is ragged: pass mask=offs < n_elements to tl.store (and tl.load)",
                       mistake="missing mask on the ragged tail") from None


def check_gelu(student, x, what):
    gelu = student.piece("kernels", "gelu")
    x64 = x.double()
    want = gelu_with()(x64).to(x.dtype)
    mistakes = {name: f(x64).to(x.dtype) for name, f in GELU_MISTAKES.items()}
    got = call_gelu(gelu, x)
    expect_equal(getattr(got, "dtype", None), x.dtype, f"{what}.dtype", "store y.to(y_ptr.dtype.element_ty)")
    expect_close(got, want, what, mistakes=mistakes)


def gelu_inputs(n, dtype):
    torch.manual_seed(0)
    return (torch.linspace(-6, 6, n) + 0.01 * torch.randn(n)).to(DEVICE, dtype)


@graded("kernels.gelu_kernel", points=2)
def test_gelu_kernel_matches_formula(student):
    """3,000 values in [-6, 6]: three programs of 1,024, the last one ragged."""
    check_gelu(student, gelu_inputs(3000, torch.float32), "gelu(x) for x of 3,000 values")


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_any_shape_and_one_element(student):
    torch.manual_seed(1)
    check_gelu(student, (torch.randn(2, 17, 100) * 3).to(DEVICE), "gelu(x) for x of shape (2, 17, 100)")
    check_gelu(student, torch.tensor([0.5], device=DEVICE), "gelu(x) for a single element")


@graded("kernels.gelu_kernel", points=1)
def test_gelu_kernel_half_precision(student):
    """fp16 in, fp16 out, computed in fp32 inside."""
    check_gelu(student, gelu_inputs(1500, torch.float16), "gelu(x) for fp16 x")


@graded("kernels.gelu_kernel", points=1, visibility="after_due_date")
def test_gelu_kernel_exact_block_multiple(student):
    """4,096 values: four full blocks, no ragged tail."""
    check_gelu(student, gelu_inputs(4096, torch.float32), "gelu(x) for x of 4,096 values")


# ----- LayerNorm ------------------------------------------------------------------------

def ln_with(x, w, b, eps, divisor=None, padding=0, ddof=0, eps_outside=False):
    """LayerNorm per row in float64 with the given slips: the reference and its mistakes.
    divisor: what the sums are divided by (D, or BLOCK_D by mistake); padding: lanes that add
    mean² each to the variance sum (not zeroed by tl.where); ddof 1: the unbiased variance."""
    D = x.shape[-1]
    n = divisor or D
    mean = x.sum(-1, keepdim=True) / n
    sq = ((x - mean) ** 2).sum(-1, keepdim=True) + padding * mean ** 2
    var = sq / (n - ddof)
    y = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / (var + eps).sqrt()
    y = y * w
    return (y + b if b is not None else y), mean.squeeze(-1), 1 / (var + eps).sqrt().squeeze(-1)


def ln_mistakes(x, w, b, eps):
    D = x.shape[-1]
    block = 1 << (D - 1).bit_length()
    return {
        "padding lanes in the variance: x - mean is -mean on the masked lanes; zero them with "
        "tl.where(mask, x - mean, 0.) before squaring": ln_with(x, w, b, eps, padding=block - D),
        "divided by BLOCK_D instead of D: only D lanes hold data":
            ln_with(x, w, b, eps, divisor=block, padding=0),
        "unbiased variance (D - 1): LayerNorm divides by D": ln_with(x, w, b, eps, ddof=1),
        "eps outside the square root: use 1 / tl.sqrt(var + eps)": ln_with(x, w, b, eps, eps_outside=True),
        "forgot beta (the bias)": ln_with(x, w, None, eps),
        "forgot gamma (the weight)": ln_with(x, torch.ones_like(w), b, eps),
    }


def check_layer_norm(student, x, w, b, eps, what):
    layer_norm = student.piece("kernels", "layer_norm")
    args64 = (x.double(), w.double(), None if b is None else b.double())
    want_y, want_mean, want_rstd = ln_with(*args64, eps)
    want_rstd = want_rstd.reshape(-1)
    mistakes = ln_mistakes(*args64, eps)
    out = layer_norm(x, w, b, eps)
    expect_true(isinstance(out, (tuple, list)) and len(out) == 3, what,
                f"expected (y, mean, rstd), got {type(out).__name__}", "keep the launcher as given")
    y, mean, rstd = out
    expect_close(y, want_y.to(x.dtype), f"{what}: y",
                 mistakes={k: v[0].to(x.dtype) for k, v in mistakes.items()})
    expect_close(mean, want_mean.reshape(-1).float(), f"{what}: the saved mean",
                 hint="store tl.sum(x, axis=0) / D at mean_ptr + row")
    expect_close(rstd, want_rstd.float(), f"{what}: the saved rstd",
                 mistakes={k: v[2].reshape(-1).float() for k, v in mistakes.items()},
                 hint="store 1 / tl.sqrt(var + eps) at rstd_ptr + row")


def ln_inputs(rows, D, dtype=torch.float32, scale=2.0, shift=3.0, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(rows, D) * scale + shift           # a mean far from 0 shows padding mistakes
    w, b = torch.randn(D) * 0.5 + 1, torch.randn(D) * 0.1
    return x.to(DEVICE, dtype), w.to(DEVICE, dtype), b.to(DEVICE, dtype)


@graded("kernels.layer_norm_kernel", points=2)
def test_layer_norm_kernel_ragged_width(student):
    """D = 769 in a block of 1,024: 255 padding lanes that must stay out of the sums."""
    x, w, b = ln_inputs(6, 769)
    check_layer_norm(student, x, w, b, 1e-5, "layer_norm(x) with D = 769")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_eps_inside_sqrt(student):
    """eps = 0.1 on rows of variance about 1 shows where eps goes."""
    x, w, b = ln_inputs(4, 768, scale=1.0)
    check_layer_norm(student, x, w, b, 0.1, "layer_norm(x) with eps = 0.1")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_without_bias_and_batched(student):
    x, w, _ = ln_inputs(2 * 17, 100, seed=1)
    check_layer_norm(student, x.reshape(2, 17, 100), w, None, 1e-5, "layer_norm(x) of shape (2, 17, 100), no bias")


@graded("kernels.layer_norm_kernel", points=1)
def test_layer_norm_kernel_half_precision(student):
    """fp16 rows of ANDREA's width: y in fp16, statistics in fp32."""
    x, w, b = ln_inputs(4, 768, dtype=torch.float16, seed=2)
    check_layer_norm(student, x, w, b, 1e-5, "layer_norm(x) in fp16")


# ===== 2. The package's kernels ============================================

# (atol, rtol) of a low-precision kernel against the fp32 reference, by the kernel's dtype.
TOL = {torch.float32: (2e-5, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (3e-2, 3e-2)}
DTYPES = [torch.float32, torch.float16,
          pytest.param(torch.bfloat16, marks=pytest.mark.skipif(not CUDA, reason="bf16 needs a GPU: the interpreter's bf16 is wrong"))]


def check_fwd_bwd(fn, ref, inputs, dtype, grad_scale=1.0, tol=None):
    """fn(*inputs in dtype) against ref(*inputs in fp32): the output and the gradient of every
    floating input, for one random upstream gradient."""
    torch.manual_seed(1)
    low = [x.to(DEVICE, dtype).requires_grad_() if x.is_floating_point() else x.to(DEVICE) for x in inputs]
    high = [x.detach().float().requires_grad_() if x.is_floating_point() else x for x in low]
    y, y_ref = fn(*low), ref(*high)
    assert y.shape == y_ref.shape
    assert y.dtype == (torch.float32 if y_ref.dim() == 0 else dtype)
    dy = torch.randn_like(y_ref) * grad_scale
    (y.float() * dy).sum().backward()
    (y_ref * dy).sum().backward()
    atol, rtol = tol or TOL[dtype]
    torch.testing.assert_close(y.float(), y_ref.detach(), atol=atol, rtol=rtol)
    for i, (a, b) in enumerate(zip(low, high)):
        if a.is_floating_point():
            assert a.grad is not None and a.grad.dtype == dtype, f"input {i} got no gradient of its dtype"
            torch.testing.assert_close(a.grad.float(), b.grad, atol=atol, rtol=rtol, msg=lambda m: f"grad of input {i}: {m}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 769), (2, 17, 100)])
def test_gelu(shape, dtype):
    check_fwd_bwd(K.gelu_tanh, K.gelu_tanh_reference, [torch.randn(shape) * 3], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu(dtype):
    check_fwd_bwd(K.swiglu, K.swiglu_reference, [torch.randn(2, 17, 769) * 3, torch.randn(2, 17, 769)], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 17, 769), (5, 100)])
def test_softmax(shape, dtype):
    check_fwd_bwd(K.softmax, K.softmax_reference, [torch.randn(shape) * 4], dtype)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype, bias):
    D = 769
    x = torch.randn(2, 17, D) * 2 + 0.5
    w, b = torch.randn(D), torch.randn(D)
    if bias:
        check_fwd_bwd(lambda x, w, b: K.layer_norm(x, w, b, 1e-5),
                      lambda x, w, b: K.layer_norm_reference(x, w, b, 1e-5), [x, w, b], dtype)
    else:
        check_fwd_bwd(lambda x, w: K.layer_norm(x, w, None, 1e-5),
                      lambda x, w: K.layer_norm_reference(x, w, None, 1e-5), [x, w], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm(dtype):
    D = 769
    check_fwd_bwd(lambda x, w: K.rms_norm(x, w, 1e-5), lambda x, w: K.rms_norm_reference(x, w, 1e-5),
                  [torch.randn(2, 17, D) * 2 + 0.5, torch.randn(D)], dtype)


def test_rms_norm_is_fp32_inside():
    """fp16 inputs whose squares overflow fp16 (300² > 65,504) still normalise correctly."""
    x = (torch.randn(4, 769) * 300).to(DEVICE, torch.float16)
    w = torch.ones(769, device=DEVICE, dtype=torch.float16)
    y = K.rms_norm(x, w, 1e-5)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), K.rms_norm_reference(x.float(), w.float()), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy(dtype):
    """V = 8,449 over 2×5 rows, two of them ignored; the gradient scale is 1/n of the valid rows."""
    V = 8449
    logits = torch.randn(2, 5, V) * 3
    targets = torch.randint(0, V, (2, 5))
    targets[0, 1] = targets[1, 4] = -100
    targets[1, 0] = V - 1                                  # the last column, in the ragged last block
    check_fwd_bwd(K.cross_entropy, K.cross_entropy_reference, [logits, targets], dtype, grad_scale=50.0)


def test_cross_entropy_large_logits():
    """The online logsumexp stays finite where a naive exp would overflow."""
    logits = torch.randn(1, 3, 8449) * 5 + 1000.0
    targets = torch.tensor([[0, 8448, -100]])
    got = K.cross_entropy(logits.to(DEVICE), targets.to(DEVICE))
    torch.testing.assert_close(got.cpu(), K.cross_entropy_reference(logits, targets), atol=1e-4, rtol=1e-5)


ATTENTION_SHAPES = [  # (B, H, T, S, K)
    (1, 2, 17, 17, 64),       # ragged T, shorter than one block
    (2, 1, 100, 100, 64),     # ragged T over two blocks
    (1, 2, 17, 100, 64),      # S > T: 83 keys cached, beyond the first key block
    (1, 1, 128, 128, 16),     # the smallest head width
    (1, 1, 33, 33, 128),      # the largest head width
    (1, 2, 20, 20, 48),       # a head width that is not a power of two
]


@pytest.mark.parametrize("B,H,T,S,KD", ATTENTION_SHAPES)
def test_attention_fp32(B, H, T, S, KD):
    q, k, v = torch.randn(B, H, T, KD), torch.randn(B, H, S, KD), torch.randn(B, H, S, KD)
    check_fwd_bwd(K.attention, K.attention_reference, [q, k, v], torch.float32, tol=(5e-5, 1e-4))


@pytest.mark.parametrize("dtype", DTYPES[1:])
def test_attention_low_precision(dtype):
    B, H, T, KD = 1, 2, 100, 64
    q, k, v = torch.randn(B, H, T, KD), torch.randn(B, H, T, KD), torch.randn(B, H, T, KD)
    check_fwd_bwd(K.attention, K.attention_reference, [q, k, v], dtype)


def test_attention_not_causal_and_strided():
    """causal=False, and q, k, v as transposed views of a (B, T, 3, H, K) tensor (as split_heads makes)."""
    B, T, H, KD = 1, 40, 2, 32
    qkv = torch.randn(B, T, 3, H, KD, device=DEVICE)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    torch.testing.assert_close(K.attention(q, k, v, causal=False),
                               K.attention_reference(q, k, v, causal=False), atol=5e-5, rtol=1e-4)


def test_attention_is_causal():
    """Changing a later key or value changes no earlier output."""
    q, k, v = (torch.randn(1, 1, 17, 64, device=DEVICE) for _ in range(3))
    out = K.attention(q, k, v)
    k2, v2 = k.clone(), v.clone()
    k2[..., 9:, :] += 5.0
    v2[..., 9:, :] -= 5.0
    out2 = K.attention(q, k2, v2)
    torch.testing.assert_close(out[..., :9, :], out2[..., :9, :], atol=0, rtol=0)
    assert not torch.allclose(out[..., 9:, :], out2[..., 9:, :])


def test_every_op_slot_has_a_triton_kernel():
    """backends.TABLE names a Triton function for every op slot, and each imports."""
    from andrea_course import backends
    for slot in backends.TABLE:
        assert callable(backends.op(slot, "triton")), slot


TINY = dict(vocab_size=300, context_length=32, d_model=64, n_layers=2, n_heads=2, d_ff=256)


@pytest.mark.parametrize("variant", [
    dict(),                                                                  # LayerNorm, GELU
    dict(norm="rmsnorm", mlp="swiglu", d_ff=192, n_kv_heads=1, tie_embeddings=True, bias=False),
], ids=["classic", "modern"])
def test_training_step_matches_torch_path(variant):
    """One training step of a tiny ANDREA (fp32, T = 17, one target ignored): the loss and
    every parameter's gradient agree between kernels="triton" and kernels="torch"."""
    cfg = ModelConfig(**{**TINY, **variant})
    torch.manual_seed(0)
    ref = ANDREA(cfg, kernels="torch").to(DEVICE)
    tri = ANDREA(cfg, kernels="triton").to(DEVICE)
    tri.load_state_dict(ref.state_dict())
    swapped = {getattr(m, a) for m in tri.modules() for a in backends.TABLE if a in m.__dict__}
    wanted = {K.attention, K.cross_entropy} | ({K.rms_norm, K.swiglu} if variant else {K.layer_norm, K.gelu_tanh})
    assert wanted <= swapped, f"not moved onto Triton: {wanted - swapped}"
    ids = torch.randint(0, cfg.vocab_size, (2, 17), device=DEVICE)
    targets = torch.randint(0, cfg.vocab_size, (2, 17), device=DEVICE)
    targets[1, 3] = -100
    losses = []
    for model in (ref, tri):
        _, loss = model(ids, targets)
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[1], losses[0], atol=1e-5, rtol=1e-5)
    grads = dict(ref.named_parameters())
    for name, p in tri.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_cached_generation_matches_torch_path():
    """Greedy generation with the KV cache (each step attends 1 query to S > T cached keys)
    picks the same tokens with kernels="triton" as with kernels="torch"."""
    cfg = ModelConfig(**TINY)
    torch.manual_seed(0)
    ref = ANDREA(cfg, kernels="torch").to(DEVICE).eval()
    tri = ANDREA(cfg, kernels="triton").to(DEVICE).eval()
    tri.load_state_dict(ref.state_dict())
    prompt = torch.randint(0, cfg.vocab_size, (1, 5), device=DEVICE)
    out_ref = ref.generate(prompt, max_new_tokens=4, temperature=0)
    out_tri = tri.generate(prompt, max_new_tokens=4, temperature=0)
    expect_equal(out_tri, out_ref, "greedy tokens with the KV cache")
