"""Graded tests, activity 7.1 · MLP and GELU: the tanh and erf forms of GELU, the slope of the
exact GELU, and the MLP GELU(x·W1 + b1)·W2 + b2."""
import math

import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import Case, Second, expect_cases, expect_runs, graded, load_weights
from andrea_course import pieces
from andrea_course.activity_tests import expect_trainable, add_fitted_gelu, expect_slot_called, parameter_shapes

X = torch.linspace(-6, 6, 241, dtype=torch.float64)          # where the GELU forms differ most: |x| ~ 2
X2 = (torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(5)) * 2.5).float()    # (B, T, F) float32


def _gelu_tanh(x, c=math.sqrt(2 / math.pi), a=0.044715, power=3, half=0.5, squash=torch.tanh, sign=1):
    return half * x * (1 + sign * squash(c * (x + a * x ** power)))


TANH_TERM_ZERO = ("your output is x/2 for every x: the tanh term is 0 everywhere, so a factor inside the tanh came out "
                  "0 (2 // math.pi, a floor division, is 0; 2 / math.pi is 0.6366): "
                  "0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))")
ERF_TERM_ZERO = ("your output is x/2 for every x: the erf term is 0 everywhere, so a factor inside the erf came out 0 "
                 "(1 // math.sqrt(2) or 1 // 2, floor divisions, are 0): 0.5·x·(1 + erf(x / √2))")


def _tanh_case(fn, x):
    mistakes = {
        "the tanh form asked, but this is the exact erf form (0.5·x·(1 + erf(x/√2))); "
        "use 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))": F.gelu(x),
        "constant 0.44715 instead of 0.044715": _gelu_tanh(x, a=0.44715),
        "sqrt(pi/2) instead of sqrt(2/pi)": _gelu_tanh(x, c=math.sqrt(math.pi / 2)),
        "2/pi without the square root: use sqrt(2/pi)": _gelu_tanh(x, c=2 / math.pi),
        "x² instead of x³ inside the tanh": _gelu_tanh(x, power=2),
        "1 - tanh(...) instead of 1 + tanh(...): the sign before the tanh flipped, so the gate is the probability "
        "of the other side, x·Phi(-x), which shuts out large positive inputs; 0.5·x·(1 + tanh(√(2/π)·(x + "
        "0.044715·x³)))": _gelu_tanh(x, sign=-1),
        "the factor 0.5 is missing": _gelu_tanh(x, half=1.0),
        TANH_TERM_ZERO: 0.5 * x,
        "sigmoid where tanh belongs: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) uses torch.tanh":
            _gelu_tanh(x, squash=torch.sigmoid),
        "the sigmoid approximation x·sigmoid(1.702·x) (\"quick GELU\"), another formula: this piece is the tanh "
        "form, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))": x * torch.sigmoid(1.702 * x),
    }
    try:
        got, raised = fn(x), None
    except Exception as exc:                            # noqa: BLE001 - raised again where the case is judged
        got, raised = None, exc
    add_fitted_gelu(mistakes, x, got, lambda c, a: lambda t: _gelu_tanh(t, c=c, a=a))
    return Case(f"gelu_tanh(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]})", lambda: _given(got, raised),
                F.gelu(x, approximate="tanh"), mistakes)


def _given(value, raised):
    if raised is not None:
        raise raised
    return value


@graded("mlp.gelu_tanh", points=2)
def test_gelu_tanh(student):
    fn = student.piece("mlp", "gelu_tanh")
    expect_trainable(fn, (X,), f"gelu_tanh(x of shape {tuple(X.shape)})")
    expect_cases(_tanh_case(fn, X), _tanh_case(fn, X2), _tanh_case(fn, X[1::3] * 0.9))   # a float64 second input too


MATH_ERF = ("math.erf, which takes one Python number: a tensor of several elements cannot be converted to one; "
            "torch.erf is the error function elementwise, torch.erf(x / math.sqrt(2))")


def _erf_case(fn, x):
    return Case(f"gelu_erf(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]})", lambda: fn(x), F.gelu(x), {
        "1 - erf(...) instead of 1 + erf(...): the sign before the erf flipped, so the gate is the probability of "
        "the other side, x·Phi(-x); 0.5·x·(1 + erf(x / sqrt(2)))": 0.5 * x * (1 - torch.erf(x / math.sqrt(2))),
        "the exact (erf) form asked, but this is the tanh approximation": F.gelu(x, approximate="tanh"),
        "erf(x) instead of erf(x / sqrt(2)): Phi is the CDF of the standard normal": 0.5 * x * (1 + torch.erf(x)),
        "erf(x·sqrt(2)) instead of erf(x / sqrt(2))": 0.5 * x * (1 + torch.erf(x * math.sqrt(2))),
        "erf(x) / sqrt(2) instead of erf(x / sqrt(2)): the division belongs inside the erf's parentheses":
            0.5 * x * (1 + torch.erf(x) / math.sqrt(2)),
        "the factor 0.5 is missing": x * (1 + torch.erf(x / math.sqrt(2))),
        ERF_TERM_ZERO: 0.5 * x,
        "erf(x / 2) instead of erf(x / sqrt(2)): divide x by the square root of 2, not by 2":
            0.5 * x * (1 + torch.erf(x / 2)),
        "erf(x·sqrt(2/π)), the tanh form's constant: the exact form's argument is x / sqrt(2)":
            0.5 * x * (1 + torch.erf(x * math.sqrt(2 / math.pi))),
        "erf(x / sqrt(2/π)), the tanh form's constant: the exact form's argument is x / sqrt(2)":
            0.5 * x * (1 + torch.erf(x / math.sqrt(2 / math.pi))),
    })


@graded("mlp.gelu_erf", points=1)
def test_gelu_erf(student):
    fn = student.piece("mlp", "gelu_erf")
    raising = lambda x: {MATH_ERF: lambda: math.erf(x / math.sqrt(2))}
    expect_runs(lambda: fn(X), f"gelu_erf(x of shape {tuple(X.shape)}, float64)", mistakes=raising(X),
                second=Second(lambda: fn(X2), None, raising(X2)), hint="torch.erf works on every element of a tensor")
    expect_cases(_erf_case(fn, X), _erf_case(fn, X2))
    expect_trainable(fn, (X,), f"gelu_erf(x of shape {tuple(X.shape)})")


# ----- the slope of the exact GELU: d/dx [x·Phi(x)] = Phi(x) + x·phi(x) -----

GRAD_HINT = ("GELU(x) = x·Phi(x) is a product of two factors: by the product rule, one term per factor; "
             "the derivative of Phi, a cumulative distribution, is the standard normal density")


def _autograd_slope(x, approximate="none"):
    """d F.gelu(x) / dx by autograd, in float64 (x of any shape)."""
    x = x.detach().double().requires_grad_()
    return torch.autograd.grad(F.gelu(x, approximate=approximate).sum(), x)[0]


def _slope_mistakes(x):
    """{typical mistake: what it gives} for gelu_grad(x), in float64."""
    x = x.double()
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))                    # Phi(x)
    bell = torch.exp(-0.5 * x ** 2)                                   # phi(x)·sqrt(2·pi)
    return {
        "only Phi(x): the product rule gives a second term, x times the derivative of Phi (the normal "
        "density phi(x))": cdf,
        "the normal density without its factor 1/sqrt(2·pi): phi(x) = exp(-x²/2) / sqrt(2·pi)": cdf + x * bell,
        "the slope of the tanh approximation; asked: the exact erf GELU's, Phi(x) + x·phi(x)":
            _autograd_slope(x, approximate="tanh"),
        "ReLU's slope, a step from 0 to 1: GELU's slope is smooth and below 0 for some negative x": (x > 0).double(),
        "erf(x) instead of erf(x / sqrt(2)) in Phi: Phi is the CDF of the standard normal":
            0.5 * (1 + torch.erf(x)) + x * bell / math.sqrt(2 * math.pi),
        "x·phi(x) subtracted: the product rule adds its two terms": cdf - x * bell / math.sqrt(2 * math.pi),
        "GELU itself, not its slope": F.gelu(x),
        "the product rule mixed up, x·Phi(x) + phi(x): the x multiplies the density, not Phi; d(x·Phi)/dx = "
        "Phi(x) + x·phi(x)": x * cdf + bell / math.sqrt(2 * math.pi),
        "Phi(x)·phi(x), the two factors' derivatives multiplied: the product rule adds one term per factor, "
        "d(x·Phi)/dx = Phi(x) + x·phi(x)": cdf * bell / math.sqrt(2 * math.pi),
        "the density written exp(-x²) instead of exp(-x²/2): phi(x) = exp(-x²/2) / sqrt(2·pi)":
            cdf + x * torch.exp(-x ** 2) / math.sqrt(2 * math.pi),
        "the density written exp(x²/2), its minus sign lost: phi(x) = exp(-x²/2) / sqrt(2·pi)":
            cdf + x * torch.exp(0.5 * x ** 2) / math.sqrt(2 * math.pi),
    }


def _slope_case(fn, x):
    return Case(f"gelu_grad(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]})", lambda: fn(x),
                _autograd_slope(x).to(x.dtype), {name: wrong.to(x.dtype) for name, wrong in _slope_mistakes(x).items()})


@graded("mlp.gelu_grad", points=2)
def test_gelu_grad_is_the_slope_of_the_exact_gelu(student):
    fn = student.piece("mlp", "gelu_grad")
    expect_cases(_slope_case(fn, X), _slope_case(fn, X[::7].double() * 0.7), hint=GRAD_HINT)


@graded("mlp.gelu_grad", points=1)
def test_gelu_grad_in_float32_keeps_the_shape(student):
    """A (B, T, F) = (2, 3, 16) float32 input: the same shape back, within float32's tolerance."""
    fn = student.piece("mlp", "gelu_grad")
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(8)) * 2.5           # (B, T, F)
    expect_cases(_slope_case(fn, x), _slope_case(fn, X2[:1] * 0.8), hint=GRAD_HINT)


CFG = ModelConfig(vocab_size=16, context_length=8, d_model=8, n_layers=1, n_heads=2, d_ff=32)


BIAS_LEFT_OUT = ("{}'s bias left out: x @ layer.weight.T (a Keras Dense kernel's habit) multiplies by the weight "
                 "alone, where calling the layer, self.fc(x), adds its bias too")


def _mlp_case(m, ref, x):
    with torch.no_grad():
        h = ref.fc(x)                                                  # (B, T, F)
        want = ref.proj(F.gelu(h, approximate="tanh"))                 # (B, T, D)
        mistakes = {"ReLU instead of GELU": ref.proj(F.relu(h)),
                    "the exact erf GELU instead of the tanh form (self.gelu)": ref.proj(F.gelu(h)),
                    "no activation between the two linear layers: use self.gelu": ref.proj(h),
                    "GELU applied to the input, before fc, instead of between the two layers: with nothing between "
                    "them fc and proj compose into one linear map; self.proj(self.gelu(self.fc(x)))":
                        ref.proj(ref.fc(F.gelu(x, approximate="tanh"))),
                    "activation after the second layer: GELU goes between fc and proj":
                        F.gelu(ref.proj(h), approximate="tanh")}
        if ref.fc.bias is not None:
            bare = lambda layer, t: t @ layer.weight.T                # noqa: E731 (a Keras kernel's x @ W)
            mistakes[BIAS_LEFT_OUT.format("fc")] = ref.proj(F.gelu(bare(ref.fc, x), approximate="tanh"))
            mistakes[BIAS_LEFT_OUT.format("proj")] = bare(ref.proj, F.gelu(h, approximate="tanh"))
            mistakes[BIAS_LEFT_OUT.format("fc and proj")] = bare(ref.proj, F.gelu(bare(ref.fc, x), approximate="tanh"))
    return Case(f"MLP(cfg)(x of shape {tuple(x.shape)})", lambda: m(x), want, mistakes)


@graded("mlp.MLP", points=2)
def test_mlp(student):
    expect_cases(_mlp_shapes_case(student, CFG), _mlp_shapes_case(student, CFG.replace(d_ff=20, bias=False)),
                 _mlp_shapes_case(student, CFG.replace(d_ff=12, bias=False)), exact=True,
                 hint="fc: nn.Linear(D, cfg.d_ff, bias=cfg.bias), proj: nn.Linear(cfg.d_ff, D, bias=cfg.bias)")
    ref = pieces.module("mlp").MLP(CFG).double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g) * 0.7)
    x = torch.randn(2, 3, CFG.d_model, dtype=torch.float64, generator=g) * 2
    x2 = torch.randn(4, CFG.d_model, dtype=torch.float64, generator=g) * 3                # (T, D) alone
    x3 = torch.randn(3, 2, CFG.d_model, generator=g) * 2                                    # float32
    m = student.piece("mlp", "MLP")(CFG)
    m.double()
    load_weights(m, ref.state_dict(), "MLP(cfg)")
    expect_cases(_mlp_case(m, ref, x), _mlp_case(m, ref, x2), hint="x -> fc -> GELU (tanh form) -> proj")
    m.float()
    ref32 = pieces.module("mlp").MLP(CFG)
    ref32.load_state_dict(ref.state_dict())
    expect_cases(_mlp_case(m, ref32, x3), _mlp_case(m, ref32, x3[:1]), hint="x -> fc -> GELU (tanh form) -> proj")



def _mlp_shapes_case(student, cfg):
    D, F_ = cfg.d_model, cfg.d_ff
    want = parameter_shapes(pieces.module("mlp").MLP(cfg))
    four = F_ != 4 * D
    mistakes = {"the hidden width hard-coded as 4·D instead of cfg.d_ff":
                    parameter_shapes(pieces.module("mlp").MLP(cfg.replace(d_ff=4 * D))) if four else None,
                "fc's width hard-coded as 4·D (proj's is cfg.d_ff): fc = nn.Linear(D, cfg.d_ff)":
                    {**want, "fc.weight": (4 * D, D), **({"fc.bias": (4 * D,)} if cfg.bias else {})} if four else None,
                "proj's width hard-coded as 4·D (fc's is cfg.d_ff): proj = nn.Linear(cfg.d_ff, D)":
                    {**want, "proj.weight": (D, 4 * D)} if four else None}
    if not cfg.bias:
        mistakes.update({"cfg.bias ignored by fc: nn.Linear(D, F, bias=cfg.bias)": {**want, "fc.bias": (F_,)},
                         "cfg.bias ignored by proj: nn.Linear(F, D, bias=cfg.bias)": {**want, "proj.bias": (D,)}})
    return Case(f"MLP(cfg with D = {D}, d_ff = {F_}, bias={cfg.bias}).state_dict(): names and shapes",
                lambda: parameter_shapes(student.piece("mlp", "MLP")(cfg)), want, mistakes)


@graded("mlp.MLP", points=1)
def test_mlp_calls_its_gelu_slot(student):
    """self.gelu is a slot: the package puts its fused GELU, or a Triton kernel, there; forward
    computes the activation through it."""
    m = student.piece("mlp", "MLP")(CFG)
    x = torch.randn(2, 3, CFG.d_model, generator=torch.Generator().manual_seed(11))
    expect_slot_called(student, "mlp", "MLP", "gelu", "its GELU", lambda: m(x))
