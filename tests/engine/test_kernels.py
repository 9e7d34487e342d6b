"""The package's Triton kernels (andrea_course.engine.kernels) against their PyTorch references: forward
and every gradient, at small awkward shapes (D = 769, T = 17 and 100, V = 8,449), in fp32 and
fp16, and in bf16 where a GPU compiles them (the interpreter gets bf16 wrong); and a training
step of a tiny ANDREA with kernels="triton" against kernels="torch". (The learner's kernels have
their graded tests in andrea_course/activity_tests/test_kernels.py.)

Without a GPU the kernels run in Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET),
which costs about 3 ms per program: the shapes keep the number of programs small.
"""
import math

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl                             # noqa: E402

from andrea_course import ANDREA, ModelConfig  # noqa: E402
from andrea_course.engine import backends     # noqa: E402
from andrea_course.engine import kernels as K  # noqa: E402
from andrea_course.grading import Mismatch, expect_close, expect_equal, expect_true, graded  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# The interpreter's sigmoid computes 1/(1 + exp(-x)) in numpy: exp overflows to inf for
# large |x| and the result is the right 0; numpy warns all the same.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")


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


@triton.jit
def _zeros_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    """A kernel with gelu_kernel's arguments that writes zeros: shows which kernel a launcher ran."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n_elements)


def test_the_launchers_launch_the_forward_kernel_they_are_given():
    """gelu_tanh, layer_norm and softmax take the forward kernel to launch (a learner's, with
    kernels="triton", overlay.py) and keep the package's backward: another correct kernel gives
    the reference's output and gradients, a kernel that computes something else its own output."""
    from softmax_kernels import _Switched
    x = torch.randn(3, 100)
    check_fwd_bwd(lambda t: K.softmax(t, kernel=_Switched(EXP2=True, RECIPROCAL=True)), K.softmax_reference,
                  [x], torch.float32)
    assert not torch.allclose(K.softmax(x, kernel=_Switched(NORMALISE=False)), K.softmax(x))
    assert not K.gelu_tanh(x, kernel=_zeros_kernel).any() and K.gelu_tanh(x).any()
    from andrea_course.engine.kernels.layernorm import layer_norm_kernel
    w, b = torch.randn(100), torch.randn(100)
    check_fwd_bwd(lambda t, w, b: K.layer_norm(t, w, b, 1e-5, kernel=layer_norm_kernel),
                  lambda t, w, b: K.layer_norm_reference(t, w, b, 1e-5), [torch.randn(3, 100), w, b], torch.float32)


def test_every_op_slot_has_a_triton_kernel():
    """backends.TABLE names a Triton function for every op slot, and each imports."""
    from andrea_course.engine import backends
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
    assert set(ref.slots.values()) == {"engine"}
    assert {tri.slots[s] for s in tri.slots if "triton" in backends.TABLE.get(s, {})} == {"Triton kernel"}
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


@pytest.mark.skipif(CUDA, reason="the interpreter is chosen only without a GPU")
def test_the_interpreter_is_chosen_before_anything_imports_triton():
    """In a fresh process without TRITON_INTERPRET: a meta-device model first (torch imports
    Triton then, for its own use), the Triton path after it still runs in the interpreter."""
    import subprocess
    import sys
    from andrea_course.paths import ROOT
    code = ("import torch\nfrom andrea_course import ANDREA, ModelConfig, count_parameters\n"
            "cfg = ModelConfig(vocab_size=17, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)\n"
            "count_parameters(cfg)\n"
            "print(tuple(ANDREA(cfg, kernels='triton')(torch.zeros(1, 3, dtype=torch.long)).shape))\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "(1, 3, 17)", run.stderr[-1500:]
