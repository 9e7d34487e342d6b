"""Graded tests, activity 8 · the modern block: RMSNorm, SwiGLU, its width F = 8D/3, the block
with RMSNorm, the KV cache's memory with grouped key/value heads, and RoPE.

    RMSNorm(x) = x / sqrt(mean(x²) + eps) ⊙ gamma                 over D, in fp32, no centring
    SwiGLU(x)  = (x·w_up ⊙ Swish(x·w_gate))·w_down,  Swish(z) = z·sigmoid(z)

Run them from a terminal:  ANDREA_IMPL=exercises .venv/bin/pytest andrea_course/activity_tests/test_modern.py -k "rmsnorm or swiglu" -v
"""
import torch
import torch.nn.functional as F

from andrea_course import ANDREA, ModelConfig
from andrea_course.grading import (type_name, Case, Second, expect_cases, expect_close, expect_equal, expect_fresh_calls,
                                   expect_runs, expect_true,
                                   graded, load_weights)
from andrea_course import pieces
from andrea_course.activity_tests import expect_trainable, randn64, expect_slot_called, layer_mixups

ref_rms_norm = pieces.module("modern").rms_norm


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- RMSNorm's mistakes
def _ms(x, dim=-1):
    return x.pow(2).mean(dim=dim, keepdim=True)


def _centred(x, w, eps=1e-5):
    """LayerNorm without its bias: the mean subtracted 'by habit'."""
    c = x - x.mean(dim=-1, keepdim=True)
    return c * torch.rsqrt(_ms(c) + eps) * w


def _rms_over(x, w, eps=1e-5, dim=-1):
    return x * torch.rsqrt(_ms(x, dim) + eps) * w


ABS_MEAN = ("divided by the mean absolute value, mean(|x|), instead of the root mean square: square the features, "
            "average, then take the square root, x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)")
MULTIPLIED_BY_RMS = ("multiplied by the root mean square instead of dividing by it (torch.sqrt where torch.rsqrt "
                     "belongs): x / sqrt(mean(x²) + eps), that is x * torch.rsqrt(mean(x²) + eps)")
ONE_PLUS_GAMMA = ("scaled by (1 + weight), Gemma's convention, where its weight starts at zeros: this RMSNorm's "
                  "weight starts at ones and multiplies the normalised x as it is, y * weight")


def _rms_norm_mistakes(x, w, eps=1e-5):
    return {
        "subtracted the mean (that is LayerNorm without its bias): RMSNorm divides the raw x by "
        "its root mean square and never centres it": _centred(x, w, eps),
        "normalised over the wrong axis (dim=-2, the positions): take mean(x²) over the last axis, "
        "D, of every token": _rms_over(x, w, eps, dim=-2),
        "normalised over the wrong axis (dim=0, the batch): take mean(x²) over the last axis, D": _rms_over(x, w, eps, dim=0),
        "one root mean square for the whole tensor: take mean(x²) over dim=-1 with keepdim=True, "
        "one value per token": x * torch.rsqrt(x.pow(2).mean() + eps) * w,
        "divided by sqrt(sum(x²)) instead of sqrt(mean(x²)): the output's root mean square must be 1, "
        "not 1/sqrt(D)": x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps) * w,
        "forgot gamma (weight): multiply the normalised x by weight": _rms_over(x, torch.ones_like(w), eps),
        "added gamma instead of multiplying by it: y * weight, RMSNorm has no bias": _rms_over(x, torch.ones_like(w), eps) + w,
        "applied gamma before normalising: normalise x first, then multiply by weight": _rms_over(x * w, torch.ones_like(w), eps),
        ONE_PLUS_GAMMA: _rms_over(x, 1 + w, eps),
        "eps outside the square root: x / sqrt(mean(x²) + eps)": x / (_ms(x).sqrt() + eps) * w,
        "forgot eps: x / sqrt(mean(x²) + eps)": x * torch.rsqrt(_ms(x)) * w,
        MULTIPLIED_BY_RMS: x * torch.sqrt(_ms(x) + eps) * w,
        "divided by the mean square, not its square root: x / sqrt(mean(x²) + eps), that is "
        "x * torch.rsqrt(mean(x²) + eps)": x / (_ms(x) + eps) * w,
        ABS_MEAN: x / (x.abs().mean(dim=-1, keepdim=True) + eps) * w,
    }


def _differing(mistakes: dict, want) -> dict:
    """The mistakes that give a wrong answer on this input (the others are no mistake here)."""
    return {name: wrong for name, wrong in mistakes.items()
            if not (wrong.shape == want.shape and torch.allclose(wrong.double(), want.double(), atol=1e-7, rtol=1e-6))}


def _zero_mean(x):
    """x with every token's mean over D removed: centring it changes nothing."""
    return x - x.mean(dim=-1, keepdim=True)


def _normalises(rms_norm):
    """The precondition of the RMSNorm tests that compare the learner's norm with itself: it does
    normalise (a token of root mean square 5 does not come back as it was)."""
    x = 5.0 * torch.ones(1, 8, dtype=torch.float64)
    y = rms_norm(x, torch.ones(8, dtype=torch.float64), 1e-5)
    expect_true(isinstance(y, torch.Tensor) and y.shape == x.shape and not torch.allclose(y.double(), x),
                "rms_norm(tokens of root mean square 5, ones)", "x came back unchanged (or not as a tensor of x's shape)",
                "divide each token by the square root of the mean of its squares")


# The RMSNorm tests each check one property, with a tolerance loose enough (1e-4) that only their
# own mistake fails them: where eps sits changes the values by about eps/rms (1e-5 relative here),
# and only test_rmsnorm_eps_inside_the_sqrt, on small activations and a large eps, looks at that.
LOOSE = dict(atol=1e-4, rtol=1e-4)
CENTRED = ("subtracted the mean (that is LayerNorm without its bias): RMSNorm divides the raw x by its root mean "
           "square and never centres it")


def _unscaled(y, x):
    """y divided, token by token, by the positive number s that best explains it as s·x (NaN where
    that number is not positive): x itself when y is x scaled per token."""
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        return y
    s = (y * x).sum(-1, keepdim=True) / (x * x).sum(-1, keepdim=True)              # (..., 1)
    return torch.where(s > 0, y / s, torch.full_like(y, float("nan")))


def _direction_case(rms_norm, x):
    """RMSNorm with gamma = 1 scales each token by one positive number: y / s = x."""
    ones = torch.ones(x.shape[-1], dtype=x.dtype)
    return Case(f"rms_norm(x of shape {tuple(x.shape)}, ones), each token divided by the one positive number that "
                f"scales x to it", lambda: _unscaled(rms_norm(x, ones, 1e-5), x), x,
                {CENTRED: _unscaled(_centred(x, ones), x)})


@graded("modern.rms_norm", points=2)
def test_rmsnorm_does_not_center(student):
    """RMSNorm keeps every token's direction: with gamma = 1 each output is the token times one
    positive number. The worked example of notebook 07: [3, 4] has root mean square sqrt(12.5) ≈ 3.54, so
    RMSNorm gives about [0.85, 1.13]; LayerNorm would subtract the mean 3.5 and give [-1, 1]."""
    rms_norm = student.piece("modern", "rms_norm")
    _normalises(rms_norm)
    expect_cases(_direction_case(rms_norm, torch.tensor([[3.0, 4.0]], dtype=torch.float64)),
                 _direction_case(rms_norm, 5.0 + _randn(3, 7, 16, seed=1)),       # a large common offset
                 hint="RMSNorm keeps the direction of x; only the scale changes", **LOOSE)
    expect_trainable(rms_norm, (randn64(3, 7, 16, seed=80), 1 + randn64(16, seed=81), 1e-5),
                     "rms_norm(x of shape (3, 7, 16), weight)")


def _rms_case(rms_norm, x, eps_given=True):
    """The root mean square of every token's output, gamma = 1: 1 whatever the token's scale (eps
    passed, or left at its default)."""
    ones = torch.ones(x.shape[-1], dtype=x.dtype)

    def rms():
        y = rms_norm(x, ones, 1e-5) if eps_given else rms_norm(x, ones)
        return y.pow(2).mean(dim=-1).sqrt() if isinstance(y, torch.Tensor) and y.shape == x.shape else y
    of = lambda y: y.pow(2).mean(dim=-1).sqrt()
    axes = lambda dim: of(_rms_over(x, ones, dim=dim)) if x.dim() >= 3 else None
    mistakes = {"normalised over the wrong axis (dim=-2, the positions): take mean(x²) over the last axis, D, of "
                "every token": axes(-2),
                "normalised over the wrong axis (dim=0, the batch): take mean(x²) over the last axis, D": axes(0),
                "one root mean square for the whole tensor: take mean(x²) over dim=-1 with keepdim=True, one value "
                "per token": of(x * torch.rsqrt(x.pow(2).mean() + 1e-5)),
                "divided by sqrt(sum(x²)) instead of sqrt(mean(x²)): the output's root mean square must be 1, not "
                "1/sqrt(D)": of(x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + 1e-5)),
                MULTIPLIED_BY_RMS: of(x * torch.sqrt(_ms(x) + 1e-5)),
                ABS_MEAN: of(x / (x.abs().mean(dim=-1, keepdim=True) + 1e-5)),
                ONE_PLUS_GAMMA: of(_rms_over(x, 2 * ones)),
                "divided by the standard deviation (the mean taken away before squaring, as LayerNorm does): "
                "RMSNorm divides x by sqrt(mean(x²)), with no mean subtracted anywhere":
                    of(x * torch.rsqrt(x.var(dim=-1, unbiased=False, keepdim=True) + 1e-5))}
    mistakes = {k: v for k, v in mistakes.items() if v is not None}   # (D,): no other axis to go wrong with
    want = torch.ones(x.shape[:-1], dtype=x.dtype)
    return Case(f"the root mean square of every token of rms_norm(x of shape {tuple(x.shape)} {str(x.dtype)[6:]}, ones"
                f"{')' if eps_given else ', eps left at its default)'}", rms, want,
                _differing(mistakes, want))


@graded("modern.rms_norm", points=2)
def test_rmsnorm_produces_unit_rms(student):
    """Tokens of very different scales, and shapes whose axes all differ: normalising over the wrong
    axis gives a tensor of the right shape and the wrong root mean square."""
    rms_norm = student.piece("modern", "rms_norm")
    scale = torch.logspace(0, 2, 24, dtype=torch.float64).view(4, 6, 1)
    scale2 = torch.logspace(0, 1.5, 15, dtype=torch.float64).view(3, 5, 1)
    expect_cases(_rms_case(rms_norm, _randn(4, 6, 32, seed=3) * scale), _rms_case(rms_norm, _randn(3, 5, 8, seed=13) * scale2),
                 _rms_case(rms_norm, (_randn(2, 3, 16, seed=23) * scale2[:2, :3]).float()),        # float32, as the model
                 _rms_case(rms_norm, 3 * _randn(16, seed=24, dtype=torch.float32), eps_given=False),  # one token (D,)
                 hint="divide each token by the square root of the mean of its squares over D", **LOOSE)


def _gamma_case(rms_norm, x, w):
    ones = torch.ones_like(w)

    def scaled_by_gamma():
        y1 = rms_norm(x, ones, 1e-5)
        return y1 * w if isinstance(y1, torch.Tensor) else y1
    y1 = ref_rms_norm(x, ones, 1e-5)

    def learner():
        return rms_norm(x, w, 1e-5)
    return Case(f"rms_norm(x of shape {tuple(x.shape)}, weight) against weight · rms_norm(x, ones)", learner,
                None, {"forgot gamma (weight): multiply the normalised x by weight": y1,
                       "added gamma instead of multiplying by it: y * weight, RMSNorm has no bias": y1 + w,
                       "applied gamma before normalising: normalise x first, then multiply by weight":
                           _rms_over(x * w, ones),
                       ONE_PLUS_GAMMA: y1 * (1 + w)}), scaled_by_gamma


@graded("modern.rms_norm", points=2)
def test_rmsnorm_scales_with_gamma(student):
    """gamma multiplies each feature of the normalised x: rms_norm(x, w) = w · rms_norm(x, 1), and
    rms_norm(x, 2·w) = 2 · rms_norm(x, w) (the learner's own normalisation on both sides)."""
    rms_norm = student.piece("modern", "rms_norm")
    w = _randn(16, seed=5)                      # negative, tiny and large gains
    w[3] = 0.0                                  # gamma may switch a feature off entirely
    cases = []
    for x, gain in ((_randn(2, 5, 16, seed=4) + 0.5, w), (_randn(4, 16, seed=14) - 1.0, 2.0 + _randn(16, seed=15))):
        case, scaled = _gamma_case(rms_norm, x, gain)
        cases.append(case._replace(want=scaled()))
    expect_cases(*cases, hint="the output is the normalised x times gamma, feature by feature", **LOOSE)
    x = _randn(2, 5, 16, seed=4) + 0.5
    expect_close(rms_norm(x, 2 * w, 1e-5), 2 * rms_norm(x, w, 1e-5), "rms_norm(x, 2·weight) against 2·rms_norm(x, weight)",
                 hint="the output is the normalised x times gamma, feature by feature", **LOOSE)


def _eps_case(rms_norm, x, w, eps):
    want = ref_rms_norm(x, w, eps)
    return Case(f"rms_norm(x of shape {tuple(x.shape)}, weight, eps={eps:g})", lambda: rms_norm(x, w, eps), want,
                _differing(_rms_norm_mistakes(x, w, eps), want))


@graded("modern.rms_norm", points=1)
def test_rmsnorm_eps_inside_the_sqrt(student):
    """Small activations and a large eps, so where eps goes shows (tokens of mean 0: centring would
    change nothing here, the values are this test's point)."""
    rms_norm = student.piece("modern", "rms_norm")
    expect_cases(_eps_case(rms_norm, 0.05 * _zero_mean(_randn(3, 12, seed=6)), 1.0 + _randn(12, seed=7).abs(), 1e-2),
                 _eps_case(rms_norm, 0.2 * _zero_mean(_randn(2, 3, 8, seed=16)), 0.5 + _randn(8, seed=17).abs(), 5e-2),
                 hint="x / sqrt(mean(x²) + eps) · weight: eps inside the square root")


def _bf16_norm(x, w, eps=1e-5):
    """The mistake: the whole norm computed in x's 16-bit dtype."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


RETURNED_FP32 = "returned fp32: cast the result back to x's dtype with .to(x.dtype)"
GAMMA_AFTER_CAST = ("gamma multiplied after the cast back to x's dtype: a bf16 result times an fp32 weight is promoted "
                    "to fp32 again (and rounded twice); multiply by gamma in fp32 first, then cast once, "
                    "(y * weight.to(wide)).to(x.dtype)")


@graded("modern.rms_norm", points=2)
def test_rmsnorm_computes_in_fp32(student):
    """bf16 keeps fp32's range but only 8 significant bits: squares, their mean and the rsqrt
    each round. Computed in fp32 and rounded once, the output is what the same norm gives for the
    fp32 copy of x, rounded to bf16 (the learner's own norm on both sides)."""
    rms_norm = student.piece("modern", "rms_norm")
    _normalises(rms_norm)
    g = torch.Generator().manual_seed(8)
    x = (3.0 + torch.rand(16, 768, generator=g)).bfloat16()   # all positive: roundings do not cancel
    w = torch.ones(768, dtype=torch.bfloat16)
    xh = (300.0 + 10 * torch.rand(4, 64, generator=g)).half()
    wh = torch.ones(64, dtype=torch.float16)
    dtype_of = lambda out: str(out.dtype) if isinstance(out, torch.Tensor) else type(out).__name__
    got = rms_norm(x, w, 1e-5)
    expect_equal(dtype_of(got), "torch.bfloat16", "rms_norm(bf16 x).dtype",
                 hint="compute in fp32, then give the result back in x's own dtype",
                 mistakes={RETURNED_FP32: "torch.float32"},
                 second=Second(lambda: dtype_of(rms_norm(xh, wh, 1e-5)), "torch.float16", {RETURNED_FP32: "torch.float32"}))
    want = rms_norm(x.float(), w.float(), 1e-5).bfloat16()
    expect_close(got, want, "rms_norm(bf16 x, ones) against rms_norm(x.float(), ones) rounded to bf16")
    differ = float((got != want).float().mean())
    in_bf16 = float((got != _bf16_norm(x, w)).float().mean())
    expect_true(differ <= 0.01, "rms_norm(bf16 x, ones)",
                f"{differ:.0%} of the outputs differ from the same norm computed in fp32 and rounded to bf16 "
                f"(at most 1% may, by one rounding step)",
                "upcast to torch.promote_types(x.dtype, torch.float32) (bf16 becomes fp32, float64 stays float64; "
                "x.float() would narrow float64), normalise and multiply there, cast back once at the end",
                mistake=("the norm computed in bf16: the sum of squares and the rsqrt lose precision; "
                         "upcast to fp32 first" if in_bf16 < differ else None))
    # fp16 is worse: its largest value is 65,504, so x² overflows to inf for |x| > 256.
    xh2 = (280.0 + 30 * torch.rand(3, 32, generator=g)).half()
    wh2 = torch.ones(32, dtype=torch.float16)
    in_fp16 = "the norm computed in fp16: 300² overflows fp16 (max 65,504); upcast to fp32 first"
    case = lambda xs, ws: Case("rms_norm(fp16 x of about 300, ones) against the same in fp32, rounded",
                               lambda: rms_norm(xs, ws, 1e-5), ref_rms_norm(xs, ws, 1e-5), {in_fp16: _bf16_norm(xs, ws)})
    first, second = case(xh, wh), case(xh2, wh2)
    mine = lambda xs, ws: rms_norm(xs.float(), ws.float(), 1e-5).half()
    expect_cases(first._replace(want=mine(xh, wh)), second._replace(want=mine(xh2, wh2)))

    # gamma in fp32 while x is bf16 (fp16), as a model that keeps its norms' weights in fp32 hands them over:
    # the result is still in x's dtype
    def with_fp32_gamma(xs):
        """(the dtype of rms_norm(xs, fp32 weight), {GAMMA_AFTER_CAST: 'torch.float32'} when its values are the
        learner's own fp32 norm of xs rounded to xs's dtype, then times the weight)."""
        w32 = 0.5 + torch.rand(xs.shape[-1], generator=torch.Generator().manual_seed(3))
        out, own = rms_norm(xs, w32, 1e-5), rms_norm(xs.float(), torch.ones_like(w32), 1e-5)
        after = (isinstance(out, torch.Tensor) and isinstance(own, torch.Tensor) and out.dtype == torch.float32
                 and out.shape == own.shape and torch.allclose(out, own.to(xs.dtype).float() * w32, rtol=1e-6, atol=0))
        return dtype_of(out), ({GAMMA_AFTER_CAST: "torch.float32"} if after else {})
    (got_dtype, wrong), (got_dtype2, wrong2) = with_fp32_gamma(x), with_fp32_gamma(xh)
    expect_equal(got_dtype, "torch.bfloat16", "rms_norm(bf16 x, fp32 weight).dtype",
                 hint="multiply by gamma in fp32, then cast the result back to x's dtype once, at the end",
                 mistakes=wrong, second=Second(lambda: got_dtype2, "torch.float16", wrong2))


# ----------------------------------------------------------------------------- SwiGLU
def _swish(z):
    return z * torch.sigmoid(z)


def _swiglu_mistakes(gate, up):
    return {
        "Swish applied to the value instead of the gate: swiglu(gate, up) = Swish(gate) ⊙ up": _swish(up) * gate,
        "sigmoid instead of Swish on the gate: Swish(z) = z·sigmoid(z)": torch.sigmoid(gate) * up,
        "no activation on the gate: Swish(gate) ⊙ up": gate * up,
        "ReLU instead of Swish on the gate": torch.relu(gate) * up,
        "GELU instead of Swish on the gate": F.gelu(gate) * up,
        "Swish on both the gate and the value": _swish(gate) * _swish(up),
        "added instead of multiplied, Swish(gate) + up: the gate must scale the value, Swish(gate) ⊙ up, an "
        "elementwise multiplication": _swish(gate) + up,
        "Swish of the product, silu(gate * up): apply Swish to the gate alone, then multiply, "
        "F.silu(gate) * up": _swish(gate * up),
        "Swish(gate) times the gate again: the value `up` is never used; Swish(gate) ⊙ up": _swish(gate) * gate,
    }


def _swiglu_case(fn, gate, up, what=None):
    return Case(what or f"swiglu(gate, up of shape {tuple(gate.shape)}, {str(gate.dtype)[6:]})", lambda: fn(gate, up),
                _swish(gate) * up, _swiglu_mistakes(gate, up))


@graded("modern.swiglu", points=1)
def test_swiglu_worked_example(student):
    # The example of notebook 07, F = 2: value (3, 3), gate (2, -2). Swish(2) ≈ 1.76, Swish(-2) ≈ -0.24,
    # so the same value 3 passes amplified in one place and nearly shut off in the other.
    fn = student.piece("modern", "swiglu")
    gate = torch.tensor([2.0, -2.0], dtype=torch.float64)
    up = torch.tensor([3.0, 3.0], dtype=torch.float64)
    expect_cases(_swiglu_case(fn, gate, up, "swiglu(gate=(2, -2), up=(3, 3))"),
                 _swiglu_case(fn, torch.tensor([1.0, -3.0, 0.5], dtype=torch.float64),
                              torch.tensor([2.0, 1.0, -4.0], dtype=torch.float64), "swiglu(gate=(1, -3, 0.5), up=(2, 1, -4))"))


@graded("modern.swiglu", points=1)
def test_swiglu_matches_reference(student):
    fn = student.piece("modern", "swiglu")
    expect_trainable(fn, (3 * _randn(2, 5, 12, seed=9), _randn(2, 5, 12, seed=10)),
                     "swiglu(gate, up of shape (2, 5, 12))")
    f32 = lambda *shape, seed: _randn(*shape, seed=seed, dtype=torch.float32)
    expect_cases(_swiglu_case(fn, 3 * _randn(2, 5, 12, seed=9), _randn(2, 5, 12, seed=10)),
                 _swiglu_case(fn, 2 * f32(4, 6, seed=19), f32(4, 6, seed=20)),
                 _swiglu_case(fn, 2 * f32(2, 3, 8, seed=25), f32(2, 3, 8, seed=26)),      # (B, T, F), as the model
                 _swiglu_case(fn, 2 * f32(8, seed=27), f32(8, seed=28)))                # one token (F,)


def _swiglu_module_case(module, ref, x, bias):
    with torch.no_grad():
        want = ref(x)
        g, u = ref.w_gate(x), ref.w_up(x)
        mistakes = {
            **layer_mixups({"w_gate": g, "w_up": u}, {"gate": "w_gate", "value": "w_up"},
                           lambda gate, value: ref.w_down(_swish(gate) * value),
                           {("w_up", "w_gate"): "w_gate and w_up swapped: Swish goes on w_gate(x), the value is w_up(x)"}),
            "no value branch: multiply Swish(w_gate(x)) by w_up(x)": ref.w_down(_swish(g)),
            "no gate: Swish(w_gate(x)) must multiply w_up(x)": ref.w_down(u),
            "forgot w_down: project F back to D": _swish(g) * u,
        }

    def got():
        out = module(x)
        return out.detach() if isinstance(out, torch.Tensor) else out
    return Case(f"SwiGLU(x of shape {tuple(x.shape)}), bias={bias}", got, want, mistakes)


@graded("modern.SwiGLU", points=2)
def test_swiglu_module_matches_reference(student):
    for bias in (False, True):
        cfg = ModelConfig(vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=40,
                          mlp="swiglu", bias=bias)
        module = student.piece("modern", "SwiGLU")(cfg)
        state = module.state_dict()
        shapes = {k: tuple(v.shape) for k, v in state.items()}
        want_shapes = {"w_gate.weight": (40, 16), "w_up.weight": (40, 16), "w_down.weight": (16, 40)}
        if bias:
            want_shapes.update({"w_gate.bias": (40,), "w_up.bias": (40,), "w_down.bias": (16,)})
        expect_equal(shapes, want_shapes, f"SwiGLU(cfg with D=16, F=40, bias={bias}).state_dict() shapes",
                     hint="keep the names w_gate, w_up (D -> F) and w_down (F -> D)")
        state = {k: _randn(*v.shape, seed=40 + i, dtype=torch.float32) * 0.3 for i, (k, v) in enumerate(sorted(state.items()))}
        load_weights(module, state, f"SwiGLU(cfg with D=16, F=40, bias={bias})")   # the same numbers on every run
        ref = pieces.module("modern").SwiGLU(cfg)
        ref.load_state_dict(state)
        expect_cases(_swiglu_module_case(module, ref, _randn(2, 5, 16, seed=11, dtype=torch.float32), bias),
                     _swiglu_module_case(module, ref, _randn(3, 16, seed=12, dtype=torch.float32), bias))


@graded("modern.SwiGLU", points=1)
def test_swiglu_module_calls_its_swiglu_slot(student):
    """self.swiglu is a slot: the package puts its fused op or a Triton kernel there; forward combines
    the gate and the value through it."""
    cfg = ModelConfig(vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=40, mlp="swiglu")
    module = student.piece("modern", "SwiGLU")(cfg)
    x = _randn(2, 5, 16, seed=13, dtype=torch.float32)
    expect_slot_called(student, "modern", "SwiGLU", "swiglu", "its gate", lambda: module(x))


# ----------------------------------------------------------------------------- the block
NORMALISED_STREAM = ("added the sublayer's output to the normalised x: add it to the raw x, "
                     "x = x + attn(ln1(x)), so the residual path stays an identity")


def _modern_block_case(block, ref, x):
    with torch.no_grad():
        want = ref(x)
        h = ref.ln1(x)
        h = h + ref.attn(h)
        normalised = ref.ln2(h) + ref.mlp(ref.ln2(h))
        post = ref.ln1(x + ref.attn(x))
        post = ref.ln2(post + ref.mlp(post))

    def got():
        out = block(x)
        return out.detach() if isinstance(out, torch.Tensor) else out
    return Case(f"Block(cfg with norm='rmsnorm', mlp='swiglu', H=4, G=2)(x of shape {tuple(x.shape)})", got, want, {
        NORMALISED_STREAM: normalised,
        "post-norm order: normalise the sublayer's input, x = x + attn(ln1(x)), not the sum": post})


@graded("block.Block", points=1, taught="modern")
def test_rmsnorm_block_adds_to_the_raw_stream(student):
    """The learner's block in a modern config (RMSNorm, SwiGLU, G = 2 key/value heads for H = 4):
    it still adds each sublayer's output to the raw residual stream x, never to the normalised
    x: x = x + attn(norm(x)); x = x + mlp(norm(x))."""
    cfg = ModelConfig(vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2,
                      d_ff=48, norm="rmsnorm", mlp="swiglu", bias=False)
    block = student.piece("block", "Block")(cfg)
    state = {k: (1.0 + 0.2 * _randn(*v.shape, seed=60 + i, dtype=torch.float32)) if k.startswith("ln")
             else 0.3 * _randn(*v.shape, seed=60 + i, dtype=torch.float32)
             for i, (k, v) in enumerate(sorted(block.state_dict().items()))}
    load_weights(block, state, "Block(modern cfg)")                       # the same numbers on every run
    ref = pieces.module("block").Block(cfg).eval()
    ref.load_state_dict(state)
    expect_cases(_modern_block_case(block, ref, 4.0 + 3.0 * _randn(2, 6, 16, seed=12, dtype=torch.float32)),  # far from unit scale
                 _modern_block_case(block, ref, -2.0 + 5.0 * _randn(3, 4, 16, seed=22, dtype=torch.float32)))


# ----------------------------------------------------------------------------- SwiGLU's width: the parameter budget
# The classic MLP has two matrices D x 4D: 8D² weights; SwiGLU has three, D x F each: 3DF. Equal
# budgets give F = 8D/3, rounded up to a multiple of 256 (D = 4096: 11,008; D = 768: 2,048).
def _round_up(n_num: int, n_den: int, multiple: int) -> int:
    """ceil(n_num / n_den) rounded up to a multiple, in exact integer arithmetic."""
    return multiple * -(-n_num // (n_den * multiple))


def _f_mistakes(D, multiple_of=256):
    return {
        "F = 4D with three matrices: that costs 1.5x the parameters of the classic MLP; "
        "use F = 8D/3 so that 3·D·F = 2·D·4D": 4 * D,
        "rounded 8D/3 down (math.floor, //, or round() to the nearest multiple, which goes down when 8D/3 lies less "
        "than half a step past one): round UP to the multiple, so the budget is at least the classic one":
            multiple_of * (8 * D // 3 // multiple_of),
        "ignored multiple_of and rounded 8D/3 down to an int (8D // 3): round it up to a multiple of multiple_of, "
        "multiple_of · ceil(8D/3 / multiple_of)": 8 * D // 3,
        "multiple_of ignored, 8D/3 only rounded up to an int (multiple_of left out, or multiplied and divided "
        "away again, as in multiple_of * c // multiple_of): round it up to a multiple of multiple_of, "
        "multiple_of · ceil(8D/3 / multiple_of)": -(-8 * D // 3),
        "always added one multiple (multiple_of · (8D//3 // multiple_of + 1)), so an 8D/3 that is already a multiple "
        "grows too: round up with multiple_of · ceil(8D/3 / multiple_of)": multiple_of * (8 * D // 3 // multiple_of + 1),
        "F = 2D/3: two thirds of 4D, not of D": _round_up(2 * D, 3, multiple_of),
        "8D // 3 floored before rounding up: when 8D/3 is not whole, its fraction is lost first, and the result can "
        "fall a step short; round up the exact 8D/3, multiple_of · ceil(8·D / (3·multiple_of))":
            multiple_of * -(-(8 * D // 3) // multiple_of),
    }


HALF_F = ("F = 4D/3, half of 8D/3: the classic MLP has two D x 4D matrices, 2·D·4D weights, so 3·D·F = 8D² gives "
          "F = 8D/3")


@graded("modern.swiglu_hidden_dim", points=2)
def test_swiglu_ffn_dim_is_8D_over_3(student):
    f = student.piece("modern", "swiglu_hidden_dim")
    case = lambda D, want: Case(f"swiglu_hidden_dim({D})", lambda: f(D), want,
                                {k: v for k, v in (_f_mistakes(D) | {HALF_F: _round_up(4 * D, 3, 256)}).items()
                                 if v != want})
    expect_cases(case(4096, 11_008), case(768, 2_048), case(1000, 2_816), case(1536, 4_096), case(3000, 8_192), exact=True,
                 hint="F = 8D/3 from 3·D·F = 2·D·4D, rounded up to a multiple of 256")
    for D in (4096, 768):
        got = f(D)
        expect_true(isinstance(got, int) and not isinstance(got, bool), f"swiglu_hidden_dim({D})",
                    f"returned {type_name(got)}: a layer width must be an int", "return an int (math.ceil gives one)",
                    mistake=(f"the right width as a float ({got!r}): 8 * D / 3 is a float, and floor division or "
                             f"rounding of a float stays a float, which nn.Linear refuses as a width; round up with "
                             f"math.ceil, which gives an int, or wrap the result in int(...)"
                             if isinstance(got, float) and got == _round_up(8 * D, 3, 256) else None))
    # The budget itself, at the widths of real models: never below the classic MLP's 8D², and
    # above it by less than one rounding step (3·D·256 weights).
    for D in (512, 1024, 2048, 2560, 5120, 8192):
        F = f(D)
        ratio = 3 * D * F / (8 * D * D)
        expect_true(1 <= ratio < 1 + 3 * 256 / (8 * D), f"swiglu_hidden_dim({D}) = {F}",
                    f"SwiGLU's three matrices hold {ratio:.3f}x the classic MLP's 8D² weights",
                    "3·D·F = 2·D·4D gives F = 8D/3; round up to a multiple of 256",
                    mistake=("F = 4D with three matrices: 1.5x the parameters" if F == 4 * D else None))


@graded("modern.swiglu_hidden_dim", points=1)
def test_swiglu_ffn_dim_rounds_up_to_multiple_of(student):
    f = student.piece("modern", "swiglu_hidden_dim")
    pairs = [(D, m) for D in (96, 128, 768, 1000, 4096) for m in (1, 64, 128, 256, 1024)]
    case = lambda D, m: Case(f"swiglu_hidden_dim({D}, multiple_of={m})", lambda: f(D, m), _round_up(8 * D, 3, m),
                             {k: v for k, v in _f_mistakes(D, m).items() if v != _round_up(8 * D, 3, m)})
    expect_cases(*(case(D, m) for D, m in pairs), exact=True, hint="round 8D/3 up to a multiple of multiple_of")


# ----------------------------------------------------------------------------- the KV cache's memory
def _cache_bytes(cfg, batch, seq_len):
    """What the model really allocates for generation (on the meta device: no memory used)."""
    with torch.device("meta"):
        caches = ANDREA(cfg).new_caches(batch, seq_len)
    return sum(c.k.nbytes + c.v.nbytes for c in caches), caches[0].k.element_size()


@graded("modern.kv_cache_bytes", points=1)
def test_kv_cache_bytes_for_every_G(student):
    kv_cache_bytes = student.piece("modern", "kv_cache_bytes")
    base = ModelConfig.preset("andrea-120m-modern")
    H, L = base.n_heads, base.n_layers

    def case(G, size):
        cfg = base.replace(n_kv_heads=G)
        allocated, allocated_size = _cache_bytes(cfg, 3, 1024)    # B = 3: a factor of its own, not the 2 of k and v
        want = allocated // allocated_size * size                 # the same values, `size` bytes each
        mistakes = {"forgot the values: the cache holds a key AND a value per head and position (factor 2)": want // 2,
                    "used H query heads instead of G key/value heads: only G are cached": want * H // G,
                    "forgot the L blocks: every block keeps its own cache": want // L,
                    "forgot the batch: each of the B sequences keeps its own keys and values (factor B)": want // 3,
                    "bytes_per_value ignored, 2 bytes a value hard-coded: an fp32 cache (4 bytes a value) is twice "
                    "that; multiply by bytes_per_value": want // size * 2}
        return Case(f"kv_cache_bytes(andrea-120m-modern with G={G}, batch=3, seq_len=1024, bytes_per_value={size})",
                    lambda: kv_cache_bytes(cfg, 3, 1024, size), want, {k: v for k, v in mistakes.items() if v != want})
    # 2 bytes a value (bf16) first, then 4 (fp32), in turn: a count that ignores bytes_per_value is right in bf16 only
    expect_cases(*(case(G, size) for G, size in ((1, 2), (2, 4), (3, 2), (4, 4), (6, 2), (12, 4))), exact=True,
                 hint="2 (keys and values) · L · B · G · S · K · bytes_per_value")

    # A cache for fewer positions than the context holds: S = seq_len, not T.
    def short(batch, seq_len):
        cfg = base.replace(n_kv_heads=4)
        want, size = _cache_bytes(cfg, batch, seq_len)
        return Case(f"kv_cache_bytes(andrea-120m-modern, batch={batch}, seq_len={seq_len}, bytes_per_value={size})",
                    lambda: kv_cache_bytes(cfg, batch, seq_len, size), want,
                    {"seq_len ignored: the cache holds S = seq_len positions, T only by default":
                     want * base.context_length // seq_len})
    expect_cases(short(3, 100), short(1, 256), exact=True,
                 hint="S = seq_len positions when it is given; the context length T only when it is None")
    # The defaults: one sequence of the full context T, in bf16. G = H = 12 at T = 1,024 is 36 MiB.
    expect_equal(kv_cache_bytes(base.replace(n_kv_heads=None)), 36 * 2 ** 20,
                 "kv_cache_bytes(andrea-120m-modern with G = H) with the defaults (B = 1, S = T, bf16)",
                 hint="seq_len=None means the context length T; bytes_per_value defaults to 2")


# ----------------------------------------------------------------------------- grouped heads and the cache
@graded("multihead.MultiHeadAttention", points=2, taught="modern")
def test_grouped_kv_heads_with_a_kv_cache(student):
    """H = 4 query heads, G = 2 key/value heads: the cache stores the G heads; each serves H/G
    query heads (query head h uses key/value head h // (H/G))."""
    from andrea_course.activity_tests.test_multihead import check_with_cache
    cfg = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=32)
    check_with_cache(student, cfg, "MultiHeadAttention(D=16, H=4, G=2) fed 3 positions, then 2, through a KV cache")


# ----------------------------------------------------------------------------- the modern model
def _final_norm_case(m, ref, ids, cfg):
    with torch.no_grad():
        want = ref(ids)
        x = ref.embed(ids)
        for block in ref.blocks:
            x = block(x)
        layer_normed = F.layer_norm(x, (cfg.d_model,), ref.ln_f.weight, None, cfg.norm_eps) @ ref.output_weight().T

    def got():
        with torch.no_grad():
            return m(ids)
    return Case(f"ANDREA(andrea-tiny-modern)(ids of shape {tuple(ids.shape)})", got, want,
                {"the final norm is always a LayerNorm: with cfg.norm = 'rmsnorm' it is an RMSNorm; build it with "
                 "make_norm(cfg)": layer_normed})


@graded("model.ANDREA", points=1, taught="modern")
def test_the_modern_model_ends_on_its_own_norm(student):
    """ANDREA with the modern config: the final norm is an RMSNorm like every block's (make_norm),
    not always a LayerNorm."""
    cfg = ModelConfig.preset("andrea-tiny-modern", n_layers=1, context_length=8)
    torch.manual_seed(0)
    ref = ANDREA(cfg).double().eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.3 * torch.randn_like(p))
    m = student.piece("model", "ANDREA")(cfg)
    m.double()
    load_weights(m, ref.state_dict(), "ANDREA(andrea-tiny-modern)")
    m.eval()
    g = torch.Generator().manual_seed(1)
    expect_cases(_final_norm_case(m, ref, torch.randint(0, cfg.vocab_size, (2, 6), generator=g), cfg),
                 _final_norm_case(m, ref, torch.randint(0, cfg.vocab_size, (1, 8), generator=g), cfg),
                 hint="the final norm is of the config's kind, built the way the blocks build theirs")


# ----------------------------------------------------------------------------- RoPE
# Feature pair i turns at theta^(-2i/K) radians per position. The course pairs feature i with
# feature i + K/2 (the GPT-NeoX and Hugging Face LLaMA layout); Meta's LLaMA code pairs
# neighbours (2i, 2i + 1). Expectations are built here as complex numbers: the pair (a, b) is
# a + ib, and turning it by an angle multiplies it by e^(i·angle).
def _angles(K, T, theta, exponent=2.0, first=0):
    """(T, K/2) float64: position t (from `first`) times theta^(-exponent·i/K)."""
    i = torch.arange(K // 2, dtype=torch.float64)
    return torch.outer(torch.arange(first, first + T, dtype=torch.float64), theta ** (-exponent * i / K))


def _turn(x, angles, layout="halves"):
    """x (..., T, K) with each pair turned by angles (T, K/2), via complex multiplication."""
    if layout == "halves":
        z = torch.complex(x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:])
    else:                                              # neighbours (2i, 2i + 1)
        z = torch.complex(x[..., 0::2], x[..., 1::2])
    z = z * torch.polar(torch.ones_like(angles), angles)
    if layout == "halves":
        return torch.cat([z.real, z.imag], dim=-1)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def _pair(result, what):
    expect_true(isinstance(result, (tuple, list)) and len(result) == 2, what,
                f"returned {type(result).__name__}, not a pair", "return cos, sin (two tensors)")
    return result


def _frequency_cases(fn, K, T, theta):
    what = f"rope_frequencies(d_head={K}, T={T}, theta={theta:g})"
    a = _angles(K, T, theta)
    mistakes = lambda wrong: {
        "frequency exponent i/K instead of 2i/K: pair i turns at theta^(-2i/K), i = 0 .. K/2 - 1":
            wrong(_angles(K, T, theta, exponent=1.0)),
        "positions counted from 1: the first position is 0 and is not turned": wrong(_angles(K, T, theta, first=1)),
        "the exponents from torch.linspace(0, K, K/2), which includes its end: they run 0 .. K in steps of "
        "K/(K/2 - 1), so the last pair turns at 1/theta; torch.arange(0, K, 2) / K gives 0, 2/K, .., (K - 2)/K":
            wrong(torch.outer(torch.arange(T, dtype=torch.float64),
                              theta ** (-torch.linspace(0, K, K // 2, dtype=torch.float64) / K))),
        "one frequency per feature (K of them): features turn in pairs, so there are K/2":
            wrong(torch.outer(torch.arange(T, dtype=torch.float64), theta ** (-torch.arange(K, dtype=torch.float64) / K))),
        "frequencies grow with i: theta^(-2i/K), the minus sign makes the last pairs slow":
            wrong(_angles(K, T, theta, exponent=-2.0)),
        "the exponent divided by K/2 instead of K, theta^(-2i/(K/2)) = theta^(-4i/K): the frequencies fall twice as "
        "fast; pair i turns at theta^(-2i/K), torch.arange(0, K, 2) / K": wrong(_angles(K, T, theta, exponent=4.0)),
        "the angles duplicated to (T, K), torch.cat([angles, angles], dim=-1), as Hugging Face's rotary tables are "
        "for its rotate_half: this course's apply_rope takes (T, K/2) tables, one angle per pair of features; "
        "return the cos and sin of the (T, K/2) angles": wrong(torch.cat([a, a], dim=-1)),
        "each angle repeated twice, angles.repeat_interleave(2, dim=-1), giving (T, K) tables: this course's apply_rope "
        "takes (T, K/2) tables, one angle per pair of features; return the cos and sin of the (T, K/2) angles":
            wrong(a.repeat_interleave(2, dim=-1)),
    }
    out = {}
    call = lambda i: lambda: _pair(fn(K, T, theta), what)[i]
    for i, (name, f, other) in enumerate((("cos", torch.cos, torch.sin), ("sin", torch.sin, torch.cos))):
        wrong = {k: v.float() for k, v in mistakes(f).items()}
        wrong[f"your {name} table holds the {'sines' if name == 'cos' else 'cosines'} of the angles (the two swapped, "
              f"or one of them returned twice?): return torch.cos(angles) first, then torch.sin(angles)"] = other(a).float()
        out[name] = Case(f"{what}[{i}] ({name})", call(i), f(a).float(), wrong)
    return out


@graded("modern.rope_frequencies", points=2)
def test_rope_frequencies(student):
    rope_frequencies = student.piece("modern", "rope_frequencies")
    first, second = _frequency_cases(rope_frequencies, 8, 6, 10000.0), _frequency_cases(rope_frequencies, 16, 5, 100.0)
    for part in ("cos", "sin"):
        expect_cases(first[part], second[part])
    cos, sin = _pair(rope_frequencies(8, 6, 10000.0), "rope_frequencies(d_head=8, T=6)")
    found = sorted({str(t.dtype).removeprefix("torch.") for t in (cos, sin)})
    expect_true(found == ["float32"], "rope_frequencies(d_head=8, T=6)", f"cos and sin are {', '.join(found)}",
                "build the angles in float32 (torch.arange(T, dtype=torch.float32)): the model's q and k are fp32",
                mistake="the angles in float64: the docstring asks for fp32, and float64 cos and sin promote fp32 "
                        "queries and keys to float64")


@graded("modern.rope_frequencies", points=1)
def test_rope_frequencies_keeps_nothing_between_calls(student):
    """Three calls in a row, each with its own tables: the same d_head with another T, then another theta."""
    rope_frequencies, ref = student.piece("modern", "rope_frequencies"), pieces.module("modern").rope_frequencies
    calls = ((8, 6, 10000.0), (8, 9, 10000.0), (8, 6, 100.0))
    expect_fresh_calls(*(Case(f"rope_frequencies(d_head={K}, T={T}, theta={theta:g})[0] (cos)",
                              lambda K=K, T=T, theta=theta: rope_frequencies(K, T, theta)[0], ref(K, T, theta)[0])
                         for K, T, theta in calls))


def _neighbours_into_halves(x, angles):
    """The pairs read as neighbours (2i, 2i + 1), turned, and written back as the two halves."""
    return _turn(torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1), angles)


def _signs_flipped(x, angles):
    """{formula: result} for (x1, x2) turned with the signs of its four terms changed in the ways that
    are neither the turn nor its inverse (x is (..., T, K), angles (T, K/2))."""
    half = x.shape[-1] // 2
    x1, x2, c, s = x[..., :half], x[..., half:], angles.cos(), angles.sin()
    return {"(x1·cos + x2·sin, x1·sin - x2·cos)": torch.cat([x1 * c + x2 * s, x1 * s - x2 * c], dim=-1),
            "(x1·cos - x2·sin, x1·sin - x2·cos)": torch.cat([x1 * c - x2 * s, x1 * s - x2 * c], dim=-1),
            "(x1·cos + x2·sin, x1·sin + x2·cos)": torch.cat([x1 * c + x2 * s, x1 * s + x2 * c], dim=-1),
            "(x1·cos - x2·sin, -x1·sin - x2·cos)": torch.cat([x1 * c - x2 * s, -x1 * s - x2 * c], dim=-1)}


def _rope_mistakes(x, angles):
    signs = {f"a sign of the turn wrong, {formula}: that is no rotation by the angle; (x1, x2) becomes "
             f"(x1·cos - x2·sin, x1·sin + x2·cos)": out for formula, out in _signs_flipped(x, angles).items()}
    return signs | {
        "paired neighbouring features (2i, 2i + 1), Meta's LLaMA layout: this course pairs feature i "
        "with feature i + K/2, the two halves of the head (GPT-NeoX, Hugging Face)": _turn(x, angles, "neighbours"),
        "paired neighbouring features (2i, 2i + 1), x[..., 0::2] with x[..., 1::2], and wrote the turned pairs as two "
        "halves: pair feature i with feature i + K/2, x[..., :K/2] with x[..., K/2:]": _neighbours_into_halves(x, angles),
        "turned the wrong way: (x1, x2) becomes (x1·cos - x2·sin, x1·sin + x2·cos)": _turn(x, -angles),
        "the halves swapped in the result: the first half is x1·cos - x2·sin":
            _turn(x, angles).roll(x.shape[-1] // 2, dims=-1),
        "the cos and sin tables swapped (sin where cos belongs): position 0, angle 0, must come back as it is, "
        "cos 1 and sin 0; (x1, x2) becomes (x1·cos - x2·sin, x1·sin + x2·cos)": _cos_sin_swapped(x, angles),
        "the cos table read where sin belongs too, (x1·cos - x2·cos, x1·cos + x2·cos): that is no rotation; (x1, x2) "
        "becomes (x1·cos - x2·sin, x1·sin + x2·cos)": _cos_sin_swapped(x, angles, sin_from="cos"),
        "read the pairs from the two halves but wrote the turned pairs interleaved (torch.stack(..., dim=-1)"
        ".flatten(-2)): write them back as the two halves, torch.cat([x1·cos - x2·sin, x1·sin + x2·cos], dim=-1)":
            _interleaved(_turn(x, angles)),
    }


def _cos_sin_swapped(x, angles, sin_from="swapped"):
    """(x1, x2) turned with the cos and sin tables swapped (sin_from="cos": the cos table in both places)."""
    half = x.shape[-1] // 2
    x1, x2, c, s = x[..., :half], x[..., half:], angles.sin(), angles.cos()
    if sin_from == "cos":
        c = s
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def _interleaved(y):
    """The two halves of y (..., K) written as neighbours: y1[0], y2[0], y1[1], y2[1], ..."""
    half = y.shape[-1] // 2
    return torch.stack([y[..., :half], y[..., half:]], dim=-1).flatten(-2)


def _rope_case(apply_rope, x, a, start):
    T = x.shape[-2]
    mistakes = _rope_mistakes(x, a[start:start + T])
    if start:
        mistakes["`start` ignored: the positions of x are start .. start + T - 1, rows start .. of cos and sin"] = \
            _turn(x, a[:T])
    return Case(f"apply_rope(x of shape {tuple(x.shape)}, cos, sin, start={start})",
                lambda: apply_rope(x, a.cos(), a.sin(), start), _turn(x, a[start:start + T]), mistakes)


@graded("modern.apply_rope", points=2)
def test_apply_rope_turns_each_pair_of_features(student):
    apply_rope = student.piece("modern", "apply_rope")
    K = 8
    a = _angles(K, 12, 100.0)                          # a table longer than T, as the model's is
    x = _randn(2, 3, 5, K, seed=20)
    expect_cases(_rope_case(apply_rope, x, a, 0), _rope_case(apply_rope, _randn(1, 2, 7, K, seed=30), a, 0))
    got = apply_rope(x, a.cos(), a.sin(), 0)
    # A turn keeps every pair's length: the norm of every (position, head) vector is unchanged.
    expect_close(got.norm(dim=-1), x.norm(dim=-1), "the length of every turned vector",
                 hint="a rotation changes directions, never lengths: check the signs of the 2-D rotation")
    # Position 0 is not turned at all.
    expect_close(got[..., 0, :], x[..., 0, :], "apply_rope(x)[..., position 0, :]",
                 hint="the angle at position 0 is 0: cos 1, sin 0")
    # As the model calls it: float32 queries that are a view, (B, T, H, K) seen as (B, H, T, K).
    xs = _randn(2, 5, 3, K, seed=25, dtype=torch.float32).transpose(1, 2)
    expect_close(apply_rope(xs, a.cos().float(), a.sin().float(), 0), _turn(xs.double(), a[:5]).float(),
                 "apply_rope(x: a float32 (2, 3, 5, 8) view of a (2, 5, 3, 8) tensor, float32 cos, sin)",
                 hint="work on x's last axis by indexing (halves of K); a transposed view cannot be .view()-ed")
    expect_trainable(apply_rope, (x, a.cos(), a.sin(), 0),
                     f"apply_rope(x of shape {tuple(x.shape)}, cos, sin, start=0)")


@graded("modern.apply_rope", points=2)
def test_apply_rope_after_cached_positions(student):
    apply_rope = student.piece("modern", "apply_rope")
    K = 8
    a = _angles(K, 12, 100.0)
    (x, start), (x2, start2) = (_randn(1, 2, 2, K, seed=21), 3), (_randn(2, 1, 3, K, seed=31), 5)
    raising = lambda x_, s_: {START_TO_T: lambda: _turn(x_, a[s_:x_.shape[-2]])}          # noqa: E731
    expect_runs(lambda: apply_rope(x, a.cos(), a.sin(), start), f"apply_rope(x of shape {tuple(x.shape)}, cos, sin, "
                f"start={start})", mistakes=raising(x, start),
                second=Second(lambda: apply_rope(x2, a.cos(), a.sin(), start2), None, raising(x2, start2)))
    expect_cases(_rope_case(apply_rope, x, a, start), _rope_case(apply_rope, x2, a, start2))


START_TO_T = ("the tables sliced cos[start:T] instead of cos[start:start + T]: that slice ends at row T, so it holds "
              "T - start rows (none once start >= T); the T positions of x are start .. start + T - 1, "
              "cos[start:start + T]")


@graded("modern.apply_rope", points=1)
def test_apply_rope_scores_depend_on_the_distance_only(student):
    """The point of RoPE: q at position m and k at position n give a score that depends on m - n
    only; shift both by 5 and every score stays the same. (Checked on a RoPE that turns: x turned
    at positions 5..8 is not x.)"""
    apply_rope = student.piece("modern", "apply_rope")
    K = 16
    a = _angles(K, 16, 10000.0)
    q, k = _randn(1, 1, 4, K, seed=22), _randn(1, 1, 4, K, seed=23)
    turned = apply_rope(q, a.cos(), a.sin(), 5)
    expect_true(isinstance(turned, torch.Tensor) and turned.shape == q.shape and not torch.allclose(turned, q),
                "apply_rope(q, cos, sin, start=5)", "q came back unturned (or not a tensor of q's shape)",
                "turn each pair of features by its position times its frequency")
    scores = lambda s: apply_rope(q, a.cos(), a.sin(), s) @ apply_rope(k, a.cos(), a.sin(), s).transpose(-1, -2)
    expect_close(scores(5), scores(0), "the scores of q, k turned at positions 5..8 against at 0..3",
                 hint="turn q and k by the same rule: a pair's angle is its position times its frequency")
    dtype_of = lambda dtype: (lambda out: str(out.dtype) if isinstance(out, torch.Tensor) else type(out).__name__)(
        apply_rope(q.to(dtype), a.cos().float(), a.sin().float(), 0))
    expect_equal(dtype_of(torch.float32), "torch.float32", "apply_rope(torch.float32 x).dtype",
                 hint="compute in at least fp32, return .to(x.dtype)")
    expect_equal(dtype_of(torch.bfloat16), "torch.bfloat16", "apply_rope(torch.bfloat16 x).dtype",
                 hint="compute in at least fp32, return .to(x.dtype)", mistakes={RETURNED_FP32: "torch.float32"},
                 second=Second(lambda: dtype_of(torch.float16), "torch.float16", {RETURNED_FP32: "torch.float32"}))


def _ref_rope_attention(q, k, v, cos, sin, past_k, past_v):
    return pieces.module("modern").rope_attention(q, k, v, cos, sin, past_k, past_v)


ONLY_Q_TURNED = ("turned only q: turn the new keys k by their positions too (apply_rope on q and on k), since "
                 "position lives in the scores q·k")
ONLY_K_TURNED = ("turned only k: turn the queries q by their positions too (apply_rope on q and on k), since "
                 "position lives in the scores q·k")
UNTURNED_KEYS_KEPT = ("the keys handed back for the cache are k as it came in, not turned: turn the new keys once, "
                      "k = apply_rope(k, cos, sin, start), then append and return that same tensor (the cache holds "
                      "turned keys, and nothing turns them again)")
START_FROM_BATCH = ("`start` taken from past_k.shape[0], the batch size B: the number of cached positions is "
                    "past_k.shape[-2], the position axis of (B, H, S0, K)")
START_FROM_HEADS = ("`start` taken from past_k.shape[1], the number of heads H: the number of cached positions is "
                    "past_k.shape[-2], the position axis of (B, H, S0, K)")
START_FROM_K = ("`start` taken from past_k.shape[-1], the head width K: the number of cached positions is "
                "past_k.shape[-2], the position axis")


CAT_FEATURES = ("the cached and the new keys joined along the feature axis (dim=-1) instead of the position axis: "
                "k and v are (B, H, T, K), so append the new positions after the cached ones, "
                "torch.cat([past_k, k], dim=-2)")


def _rope_attention_mistakes(q, k, v, cos, sin, past_k, past_v):
    from andrea_course.engine import ops
    S0, rope = past_k.shape[-2], pieces.module("modern").apply_rope
    cat = lambda a, b: torch.cat([a, b], dim=-2)
    turned_all = rope(cat(past_k, k), cos, sin, 0)
    mistakes = {
        "turned v as well: only q and k carry position (it lives in the scores q·k); the values stay as they are":
            ops.attention(rope(q, cos, sin, S0), cat(past_k, rope(k, cos, sin, S0)), cat(past_v, rope(v, cos, sin, S0))),
        "turned the attention's output (after the scores): turn q and k before their scores are taken":
            rope(ops.attention(q, cat(past_k, k), cat(past_v, v)), cos, sin, S0),
        "no RoPE at all: turn q and k by their positions": ops.attention(q, cat(past_k, k), cat(past_v, v)),
        "attention without the causal mask: several new positions at once (a prompt, or no cache at all) must not "
        "see each other's future; keep causal=True": ops.attention(rope(q, cos, sin, S0), cat(past_k, rope(k, cos, sin, S0)),
                                                      cat(past_v, v), causal=False) if q.shape[-2] > 1 else None,
        ONLY_Q_TURNED: ops.attention(rope(q, cos, sin, S0), cat(past_k, k), cat(past_v, v)),
        ONLY_K_TURNED: ops.attention(q, cat(past_k, rope(k, cos, sin, S0)), cat(past_v, v)),
        "the new keys appended to the values, cat(past_v, k): the values so far are past_v followed by the new v":
            ops.attention(rope(q, cos, sin, S0), cat(past_k, rope(k, cos, sin, S0)), cat(past_v, rope(k, cos, sin, S0))),
    }
    if S0:
        mistakes.update({
            "positions not offset by the cache: the new tokens sit at S0 .. S0 + T - 1 (start = past_k.shape[-2]), not at 0":
                ops.attention(rope(q, cos, sin, 0), cat(past_k, rope(k, cos, sin, 0)), cat(past_v, v)),
            "the queries turned from position 0 while the new keys start at S0: q sits at S0 .. S0 + T - 1 too, so "
            "turn it with the same start, apply_rope(q, cos, sin, start), or the query-key angles no longer match "
            "their distance": ops.attention(rope(q, cos, sin, 0), cat(past_k, rope(k, cos, sin, S0)), cat(past_v, v)),
            "turned the cached keys again: they were turned when they were new; turn only the new k, then append":
                ops.attention(rope(q, cos, sin, S0), turned_all, cat(past_v, v)),
            "attended to the new keys and values alone: the cached past (past_k, past_v) left out of the attention; "
            "the queries attend to every key so far, attention(q, k_all, v_all)":
                ops.attention(rope(q, cos, sin, S0), rope(k, cos, sin, S0), v),
            "put the new keys and values before the cached ones: append them after, torch.cat([past_k, k], dim=-2) "
            "and torch.cat([past_v, v], dim=-2), so that the positions stay in order":
                ops.attention(rope(q, cos, sin, S0), cat(rope(k, cos, sin, S0), past_k), cat(v, past_v))})
        H, K = past_k.shape[1], past_k.shape[-1]
        if H not in (S0, K):
            mistakes[START_FROM_HEADS] = ops.attention(rope(q, cos, sin, H), cat(past_k, rope(k, cos, sin, H)),
                                                       cat(past_v, v))
        if K != S0:
            mistakes[START_FROM_K] = ops.attention(rope(q, cos, sin, K), cat(past_k, rope(k, cos, sin, K)), cat(past_v, v))
    return mistakes


def _rope_attention_case(fn, args, what):
    want = _ref_rope_attention(*args)[0]

    def got():
        out = fn(*args)
        return out[0] if isinstance(out, (tuple, list)) and len(out) == 3 else out
    return Case(what, got, want, _rope_attention_mistakes(*args))


def _new_keys_case(fn, args, what):
    """The keys rope_attention hands back without a cache: the new keys, turned from position 0."""
    k, cos, sin = args[1], args[3], args[4]
    rope = pieces.module("modern").apply_rope
    want_k = _ref_rope_attention(*args)[1]

    def got():
        out = fn(*args)
        return out[1] if isinstance(out, (tuple, list)) and len(out) == 3 else out
    H = k.shape[1]
    return Case(what, got, want_k, {START_FROM_K: rope(k, cos, sin, k.shape[-1]), UNTURNED_KEYS_KEPT: k,
                                    START_FROM_HEADS: rope(k, cos, sin, H) if H != k.shape[-1] else None,
                                    START_FROM_BATCH: rope(k, cos, sin, k.shape[0]) if k.shape[0] != k.shape[-1] else None})


def _kept_keys_case(fn, args, first, want_k):
    """The keys rope_attention hands back after a cache of `first` turned keys: all S0 + T of them."""
    def got():
        out = fn(*args)
        return out[1] if isinstance(out, (tuple, list)) and len(out) == 3 else out
    return Case(f"rope_attention(positions {first} .. after a cache of {first} turned keys)[1], the keys to keep",
                got, want_k, {"only the new keys returned: the next call needs every key so far, the cache's and "
                              "these": want_k[:, :, first:]})


@graded("modern.rope_attention", points=3)
def test_rope_attention_with_and_without_a_cache(student):
    """Five positions at once, or three and then two through the (turned) cache: the same outputs."""
    rope_attention = student.piece("modern", "rope_attention")
    B, H, T, K = 2, 2, 5, 8
    a = _angles(K, 16, 100.0)
    cos, sin = a.cos(), a.sin()
    q, k, v = (_randn(B, H, T, K, seed=s) for s in (24, 25, 26))
    q2, k2, v2 = (_randn(1, 3, 4, K, seed=s) for s in (34, 35, 36))
    empty = lambda t: torch.zeros(t.shape[0], t.shape[1], 0, K, dtype=torch.float64)
    want, want_k, _ = _ref_rope_attention(q, k, v, cos, sin, empty(q), empty(q))
    on_features = lambda k_: {CAT_FEATURES: lambda: torch.cat([empty(k_), k_], dim=-1)}     # noqa: E731
    out = expect_runs(lambda: rope_attention(q, k, v, cos, sin, empty(q), empty(q)),
                      "rope_attention(q, k, v of 5 positions, no cache)", mistakes=on_features(k),
                      second=Second(lambda: rope_attention(q2, k2, v2, cos, sin, empty(q2), empty(q2)), None,
                                    on_features(k2)))
    expect_true(isinstance(out, (tuple, list)) and len(out) == 3, "rope_attention(...)",
                f"returned {type(out).__name__}, not (y, k_all, v_all)", "return the output and the grown keys and values")
    expect_cases(_rope_attention_case(rope_attention, (q, k, v, cos, sin, empty(q), empty(q)),
                                      "rope_attention(q, k, v of 5 positions, no cache)[0]"),
                 _rope_attention_case(rope_attention, (q2, k2, v2, cos, sin, empty(q2), empty(q2)),
                                      "rope_attention(q, k, v of 4 positions, no cache)[0]"))
    expect_cases(_new_keys_case(rope_attention, (q, k, v, cos, sin, empty(q), empty(q)),
                                "rope_attention(q, k, v of 5 positions, no cache)[1], the keys to cache"),
                 _new_keys_case(rope_attention, (q2, k2, v2, cos, sin, empty(q2), empty(q2)),
                                "rope_attention(q, k, v of 4 positions, no cache)[1], the keys to cache"),
                 hint="cache the keys turned, so that they never need turning again")
    # The same positions fed in two parts, the first part's keys turned in the cache.
    want2, want_k2, _ = _ref_rope_attention(q2, k2, v2, cos, sin, empty(q2), empty(q2))
    cached = lambda q_, k_, v_, wk, first: (q_[:, :, first:], k_[:, :, first:], v_[:, :, first:], cos, sin,
                                            wk[:, :, :first], v_[:, :, :first])
    expect_cases(_rope_attention_case(rope_attention, cached(q, k, v, want_k, 3),
                                      "rope_attention of positions 3, 4 after a cache of 3 turned keys"),
                 _rope_attention_case(rope_attention, cached(q2, k2, v2, want_k2, 2),
                                      "rope_attention of positions 2, 3 after a cache of 2 turned keys"))
    expect_cases(*(_kept_keys_case(rope_attention, cached(q_, k_, v_, wk, first), first, wk)
                   for q_, k_, v_, wk, first in ((q, k, v, want_k, 3), (q2, k2, v2, want_k2, 2))),
                 hint="return the cache's keys and the new ones together: torch.cat([past_k, k], dim=-2)")
    y1 = rope_attention(q[:, :, :3], k[:, :, :3], v[:, :, :3], cos, sin, empty(q), empty(q))[0]
    expect_close(y1, want[:, :, :3], "rope_attention of positions 0, 1, 2, no cache")
    # As the model calls it: float32, the queries contiguous or a view (B, T, H, K) seen as (B, H, T, K).
    f32 = [t.float() for t in (q, k, v, cos, sin, empty(q), empty(q))]
    want32 = _ref_rope_attention(*f32)[0]
    for q32, how in ((f32[0], "contiguous"), (f32[0].transpose(1, 2).contiguous().transpose(1, 2), "a view")):
        out32 = rope_attention(q32, *f32[1:])
        expect_close(out32[0] if isinstance(out32, (tuple, list)) else out32, want32,
                     f"rope_attention(float32 q ({how}), k, v of 5 positions, no cache)[0]")
    expect_trainable(rope_attention, (q, k, v, cos, sin, k[..., :0, :], v[..., :0, :]),
                     f"rope_attention(q, k, v of shape {(B, H, T, K)}, cos, sin, an empty cache)")


# ----------------------------------------------------------------------------- RMSNorm: keepdim
def _rms_without_keepdim(x, w, eps=1e-5):
    """The mistake: mean(x²) of shape (..., T), which lines up with the wrong axis."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1) + eps) * w


RMS_KEEPDIM = ("keepdim forgotten: mean(x²) over dim=-1 has one value per token but shape (..., T), which does "
               "not line up with the tokens of x; keepdim=True keeps it (..., T, 1)")


def _token_by_token(rms_norm, x, w):
    """The learner's norm of every token on its own, stacked: what a norm of one statistic per
    token gives for the whole x."""
    rows = [rms_norm(t[None], w, 1e-5) for t in x.reshape(-1, x.shape[-1])]
    if not all(isinstance(r, torch.Tensor) and r.shape == (1, x.shape[-1]) for r in rows):
        return None
    return torch.cat(rows).reshape(x.shape)


@graded("modern.rms_norm", points=1)
def test_rmsnorm_keeps_one_statistic_per_token(student):
    """(B, T, D) = (2, 3, 8) and (3, 5, 8), where mean(x²) without keepdim raises, then (T, D) = (8, 8),
    where it silently lines up with the features instead of the tokens. The whole x must give what
    each token gives on its own (the learner's own norm, one token at a time)."""
    rms_norm = student.piece("modern", "rms_norm")
    _normalises(rms_norm)
    w = 1.0 + 0.1 * _randn(8, seed=9)
    square = lambda seed: _randn(8, 8, seed=seed) * torch.logspace(0, 1.5, 8, dtype=torch.float64)[:, None]
    for x, other in ((_randn(2, 3, 8, seed=10), _randn(3, 5, 8, seed=18)), (square(11), square(19))):
        what = f"rms_norm(x of shape {tuple(x.shape)}, weight) against each token normalised on its own"
        raising = lambda t: {RMS_KEEPDIM: lambda: _rms_without_keepdim(t, w)}
        got = expect_runs(lambda: rms_norm(x, w, 1e-5), what, mistakes=raising(x),
                          second=Second(lambda: rms_norm(other, w, 1e-5), None, raising(other)))
        alone, alone2 = _token_by_token(rms_norm, x, w), _token_by_token(rms_norm, other, w)
        if alone is None:
            expect_close(got, ref_rms_norm(x, w, 1e-5), what)
        mistakes = lambda t: {RMS_KEEPDIM: _rms_without_keepdim(t, w)} if t.shape[-2] == t.shape[-1] else {}
        expect_close(got, alone, what, mistakes=mistakes(x),
                     second=Second(lambda: rms_norm(other, w, 1e-5), alone2, mistakes(other)), **LOOSE)
