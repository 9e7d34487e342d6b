"""Graded tests, activity 7.2 · The transformer block: LayerNorm from its formula, the pre-norm
block x = x + Attn(LN(x)); x = x + MLP(LN(x)), and the 2017 post-norm block."""
import math

import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.activity_tests import expect_trainable, randn64
from andrea_course.grading import (Case, Second, expect_cases, expect_close, expect_equal, expect_runs, expect_true,
                                   expect_unchanged, graded, load_weights)
from andrea_course import pieces



def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _layer_norm_case():
    """x: (B=2, T=3, D=16), each token with its own offset and a scale from 0.01 to 5, so that
    where eps sits and which variance is used both change the output well beyond tolerance."""
    scales = torch.tensor([[0.01, 1.0, 5.0], [0.05, 0.3, 2.0]], dtype=torch.float64)[..., None]
    x = _randn(2, 3, 16, seed=1) * scales + _randn(2, 3, 1, seed=2) * 3
    return x, 1 + _randn(16, seed=3, scale=0.5), _randn(16, seed=4)


LAST_TWO_AXES = ("mean and variance over the last two axes (dim=(-2, -1)), positions and features together: every "
                 "token is normalised with its whole sequence's statistics; each token has its own, over its D "
                 "features, dim=-1")
MEAN_NOT_SQUARED = ("the variance written mean(x²) - mean: the mean is not squared; the variance is the mean of the "
                    "squared deviations, ((x - mean) ** 2).mean(dim=-1, keepdim=True)")


def _layer_norm_mistakes(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    norm = (x - mean) / torch.sqrt(var + eps)
    across = {} if x.dim() < 2 else {
        "normalised over the wrong axis: mean and variance over the last axis (D, dim=-1) of each token":
            F.layer_norm(x.transpose(-1, -2), x.shape[-2:-1]).transpose(-1, -2) * w + b,
        "normalised over the whole tensor: each token gets its own mean and variance over D":
            (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * w + b}
    if x.dim() > 2:                                     # for (T, D) the last two axes are the whole tensor
        m2 = x.mean(dim=(-2, -1), keepdim=True)
        across[LAST_TWO_AXES] = (x - m2) / torch.sqrt(((x - m2) ** 2).mean(dim=(-2, -1), keepdim=True) + eps) * w + b
    no_square = (x ** 2).mean(-1, keepdim=True) - mean                # mean(x²) - mean, the mean not squared
    return {
        **across,
        "variance with Bessel's correction (divide by D - 1): LayerNorm uses the biased variance, "
        "var(unbiased=False) or mean((x - mean)**2)": (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b,
        "eps outside the square root: divide by sqrt(var + eps), not sqrt(var) + eps":
            (x - mean) / (var.sqrt() + eps) * w + b,
        "x.std() plus eps: std divides by D - 1 (Bessel's correction) and eps is outside the square root; "
        "LayerNorm divides by sqrt(var + eps) with the biased variance":
            (x - mean) / (x.std(-1, keepdim=True) + eps) * w + b,
        "gamma (weight) forgotten: multiply by weight before adding bias": norm + b,
        "gamma (weight) added instead of multiplied: LayerNorm scales the normalised x by weight, then adds bias":
            norm + w + b,
        "divided by the variance instead of its square root: divide by sqrt(var + eps), the standard deviation":
            (x - mean) / (var + eps) * w + b,
        "beta (bias) forgotten: add bias after multiplying by weight": norm * w,
        "mean not subtracted: LayerNorm centres x before dividing": x / torch.sqrt(var + eps) * w + b,
        MEAN_NOT_SQUARED: (x - mean) / torch.sqrt(no_square + eps) * w + b,
        "the variance as the mean of x² (RMSNorm's mean square), not of (x - mean)²: centre x before squaring, "
        "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)": (x - mean) / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps) * w + b,
        "the weight added where the bias belongs (norm * weight + weight): the shift is bias, norm * weight + bias":
            norm * w + w,
        **{MEAN_PART.format(which): _normed_with(x, part, w, b, eps)
           for which, part in (("first", x[..., 1:].sum(-1, keepdim=True)),
                               ("last", x[..., :-1].sum(-1, keepdim=True)))},
    }


MEAN_PART = ("the mean summed without the {} feature (a loop one feature short, range(1, D) or range(D - 1)) and "
             "divided by D: every feature counts, x.mean(dim=-1, keepdim=True)")


def _normed_with(x, total, w, b, eps):
    """LayerNorm with the mean total / D (the variance around it) from a sum `total` over part of D."""
    mean = total / x.shape[-1]
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps) * w + b


def _layer_norm_case_2():
    """x: (T, D) = (5, 16) float32, scales from 0.02 to 8 and offsets, with its weight and bias."""
    g = torch.Generator().manual_seed(7)
    scales = torch.tensor([0.02, 0.5, 1.0, 3.0, 8.0])[:, None]
    x = torch.randn(5, 16, generator=g) * scales + torch.randn(5, 1, generator=g) * 2
    return x, 1 + 0.5 * torch.randn(16, generator=g), torch.randn(16, generator=g)


def _ln_case_32(shape, seed):
    """float32 x of `shape` (any rank), tokens of several scales, its weight and bias."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * (1 + 3 * torch.rand(*shape[:-1], 1, generator=g)) + 0.5
    return x, 1 + 0.3 * torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)


CONSTANT_EPS = ("a constant eps of 0.001 in place of the eps argument (Keras' LayerNormalization's default): use "
                "the eps the call gives, 1e-5 by default")


def _ln_case(fn, x, w, b, eps=None):
    args = (x, w, b) if eps is None else (x, w, b, eps)
    e = 1e-5 if eps is None else eps
    mistakes = _layer_norm_mistakes(x, w, b, e)
    if eps is not None:
        mistakes["eps ignored: use the argument, not a constant 1e-5"] = F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5)
    mistakes[CONSTANT_EPS] = F.layer_norm(x, x.shape[-1:], w, b, eps=1e-3)      # smaller ones float32 cannot tell apart
    what = (f"layer_norm(x of shape {tuple(x.shape)} {str(x.dtype)[6:]}, weight, bias"
            + (f", eps={eps})" if eps is not None else ")"))
    return Case(what, lambda: fn(*args), F.layer_norm(x, x.shape[-1:], w, b, eps=e), mistakes)


@graded("block.layer_norm", points=3)
def test_layer_norm(student):
    fn = student.piece("block", "layer_norm")
    expect_trainable(fn, _layer_norm_case()[:3], "layer_norm(x, weight, bias)")
    expect_cases(_ln_case(fn, *_layer_norm_case()), _ln_case(fn, *_layer_norm_case_2()),
                 _ln_case(fn, *_ln_case_32((3, 4, 16), 10)),             # float32 (B, T, D)
                 hint="per token: subtract its mean over D, divide by sqrt(its variance + eps), then times weight plus bias")


@graded("block.layer_norm", points=1)
def test_layer_norm_uses_the_eps_it_is_given(student):
    fn = student.piece("block", "layer_norm")
    expect_cases(_ln_case(fn, *_layer_norm_case(), eps=0.1), _ln_case(fn, *_layer_norm_case_2(), eps=0.5),
                 _ln_case(fn, *_ln_case_32((2, 3, 16), 8), eps=0.2),     # float32 (B, T, D), as the model calls it
                 _ln_case(fn, *_ln_case_32((16,), 9), eps=0.05))         # one token (D,)


CANCELLATION = ("the variance as mean(x²) - mean²: right on paper, but in float32 two numbers near 1000² = 10⁶, held "
                "to about 0.06, are subtracted to leave a variance near 1 or less, which rounding wipes out (it can "
                "even come out negative: NaN under the square root); centre first and then square, "
                "((x - mean) ** 2).mean(dim=-1, keepdim=True)")


def _far_case(fn, seed):
    """float32 (T, D) = (5, 16) tokens at 1000 + a spread of 0.1 to 2, its weight and bias; the right
    output computed in float64 from the same float32 numbers."""
    g = torch.Generator().manual_seed(seed)
    spread = torch.tensor([1.0, 0.3, 0.1, 2.0, 0.5])[:, None]
    x = torch.randn(5, 16, generator=g) * spread + 1000.0
    w, b = 1 + 0.3 * torch.randn(16, generator=g), torch.randn(16, generator=g)
    mean = x.mean(dim=-1, keepdim=True)
    cancelled = (x ** 2).mean(dim=-1, keepdim=True) - mean ** 2        # float32, as the learner's code computes it
    want = F.layer_norm(x.double(), (16,), w.double(), b.double(), eps=1e-5).float()
    return Case(f"layer_norm(x of shape {tuple(x.shape)} float32, every token at 1000 ± a spread of 0.1 to 2, "
                f"weight, bias)", lambda: fn(x, w, b), want,
                {CANCELLATION: (x - mean) / torch.sqrt(cancelled + 1e-5) * w + b})


@graded("block.layer_norm", points=1)
def test_layer_norm_of_tokens_far_from_zero(student):
    """float32 tokens whose features share a large offset (1000: a residual stream drifts) and a small
    spread, within 1e-2 of the exact answer: a float32 LayerNorm that centres before it squares is
    within 1e-3."""
    fn = student.piece("block", "layer_norm")
    expect_cases(_far_case(fn, 12), _far_case(fn, 13), atol=1e-2, rtol=1e-2,
                 hint="subtract each token's mean first, then average the squared deviations: the offset cancels "
                      "before anything is squared")


NO_BIAS = ("bias=None not handled: a model with cfg.bias False builds its LayerNorms without a beta and passes "
           "bias=None, and `+ bias` raises; when bias is None, return the scaled output as it is")


def _no_bias_case(fn, x, w):
    """layer_norm(x, w, None): the learner's output (a raise of `+ None` named), the right one, the mistakes."""
    what = f"layer_norm(x of shape {tuple(x.shape)}, weight, bias=None)"
    mistakes = {k: v for k, v in _layer_norm_mistakes(x, w, 0.0).items()
                if "beta" not in k and k != LAST_TWO_AXES}       # its second input is (T, D): one case lists it
    second = _layer_norm_case_2()
    adds_none = lambda x_, w_: (lambda: x_ * w_ + None)                      # what `y * weight + bias` raises

    def got():
        return expect_runs(lambda: fn(x, w, None), what, mistakes={NO_BIAS: adds_none(x, w)},
                           second=Second(lambda: fn(second[0], second[1], None), None,
                                         {NO_BIAS: adds_none(second[0], second[1])}))
    return Case(what, got, F.layer_norm(x, x.shape[-1:], w, None, eps=1e-5), mistakes)


@graded("block.layer_norm", points=1)
def test_layer_norm_without_bias(student):
    """bias=None, as every LayerNorm of a model with cfg.bias False calls it: gamma only, no beta."""
    fn = student.piece("block", "layer_norm")
    (x, w, _), (x2, w2, _) = _layer_norm_case(), _layer_norm_case_2()
    expect_cases(_no_bias_case(fn, x, w), _no_bias_case(fn, x2, w2),
                 hint="bias is None when cfg.bias is False: then return the scaled output as it is")


CFG = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=2, n_heads=4, d_ff=32)
PRE_NORM_HINT = ("x = x + attn(ln1(x)), then x = x + mlp(ln2(x)): each sublayer reads a normalised copy of x and "
                 "adds its output to the raw x")


def _block_case(seed=10):
    """A reference Block with random weights (norm gains away from 1), an input with an offset
    and a scale far from 1 (so that normalising it changes it a lot), and the pieces to
    assemble every variant of the block equation."""
    ref = pieces.module("block").Block(CFG).double()
    with torch.no_grad():
        for i, (name, p) in enumerate(ref.named_parameters()):
            p.copy_(_randn(*p.shape, seed=seed + i, scale=0.4) + (1.0 if name.endswith("ln1.weight")
                                                                     or name.endswith("ln2.weight") else 0.0))
    x = _randn(2, 5, CFG.d_model, seed=seed - 1, scale=3) + 1
    ln = lambda norm, t: F.layer_norm(t, (CFG.d_model,), norm.weight, norm.bias, norm.eps)
    return ref, x, ln


def _block_variants(ref, x, ln):
    attn, mlp = ref.attn, ref.mlp
    with torch.no_grad():
        h = x + attn(ln(ref.ln1, x))
        pre = h + mlp(ln(ref.ln2, h))
        h = ln(ref.ln1, x + attn(x))
        post = ln(ref.ln2, h + mlp(h))
        a = ln(ref.ln1, x)
        h = a + attn(a)
        b = ln(ref.ln2, h)
        normalised_residual = b + mlp(b)
        h = attn(ln(ref.ln1, x))
        no_residual = mlp(ln(ref.ln2, h))
        h = x + attn(ln(ref.ln1, x))
        one_norm = h + mlp(ln(ref.ln1, h))
        parallel = x + attn(ln(ref.ln1, x)) + mlp(ln(ref.ln2, x))
        h = a + attn(a)
        attn_on_normalised = h + mlp(ln(ref.ln2, h))
        h = x + attn(ln(ref.ln1, x))
        mlp_no_residual = mlp(ln(ref.ln2, h))
        h = attn(ln(ref.ln1, x))
        attn_no_residual = h + mlp(ln(ref.ln2, h))
        h = x + mlp(ln(ref.ln2, x))
        mlp_first = h + attn(ln(ref.ln1, h))
        output_normalised = ln(ref.ln2, pre)
        attention_dropped = x + mlp(ln(ref.ln2, x))
        stale_ln2 = x + attn(a) + mlp(ln(ref.ln2, a))
        stale = x + attn(a) + mlp(a)
    return pre, post, {
        "the MLP run before attention: the two sublayers in the wrong order; attention goes first, "
        "x = x + attn(ln1(x)), then x = x + mlp(ln2(x))": mlp_first,
        "the block's output normalised again (return self.ln2(x)): a pre-norm block normalises each sublayer's "
        "input only and returns the residual stream as it is, return x": output_normalised,
        "added the normalised x to the residual stream: x = x + attn(ln1(x)) adds to the raw x":
            normalised_residual,
        "no residual connection: add each sublayer's output to x": no_residual,
        "ln1 used for both sublayers: the MLP reads ln2(x)": one_norm,
        "both sublayers read the block's input: the MLP reads the x that attention has already updated": parallel,
        "attention's output added to the normalised x, ln1(x): add it to the raw stream, x = x + attn(ln1(x))":
            attn_on_normalised,
        "the MLP's output replaces the stream (its residual connection missing): add it, x = x + mlp(ln2(x))":
            mlp_no_residual,
        "attention's output replaces the stream (its residual connection missing, x = attn(ln1(x))): add it, "
        "x = x + attn(ln1(x))": attn_no_residual,
        STALE_NORMALISED.format("ln2 of "): stale_ln2,
        ATTENTION_DROPPED: attention_dropped,
        STALE_NORMALISED.format(""): stale,
    }


ATTENTION_DROPPED = ("attention's update thrown away: your output is x + mlp(ln2(x)), the MLP's half alone on the "
                     "block's input (each sublayer added to the original x and the result kept under another "
                     "name); carry the stream on, x = x + attn(ln1(x)), then x = x + mlp(ln2(x))")
STALE_NORMALISED = ("the MLP reads {}ln1(x), the normalised input kept from before attention (h = ln1(x) used again): "
                    "it reads the stream that attention has already updated, x = x + attn(ln1(x)), then "
                    "x = x + mlp(ln2(x))")


def _student_block(student, name, ref, *args, **kwargs):
    m = student.piece("block", name)(CFG, *args, **kwargs)
    m.double()
    load_weights(m, ref.state_dict(), f"{name}(cfg)")
    return m


def _pre_case(m, ref, x, ln, cache=False):
    pre, post, mistakes = _block_variants(ref, x, ln)
    call = (lambda: m(x, None)) if cache else (lambda: m(x))
    return Case(f"Block(cfg)(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]}{', cache=None' if cache else ''})", call, pre, {
        "post-norm where pre-norm was asked: normalise the sublayer's input, x = x + attn(ln1(x)), "
        "and leave the residual stream unnormalised": post, **mistakes})


@graded("block.Block", points=3)
def test_pre_norm_block(student):
    ref, x, ln = _block_case()
    m = _student_block(student, "Block", ref)
    expect_cases(_pre_case(m, ref, x, ln), _pre_case(m, ref, _randn(3, 4, CFG.d_model, seed=11, scale=2) - 1, ln),
                 hint=PRE_NORM_HINT)
    m32, ref32 = m.float(), _single(ref)                 # float32, the cache given as None: as the model calls it
    expect_cases(_pre_case(m32, ref32, x.float(), ln, cache=True), _pre_case(m32, ref32, x[:1, :3].float(), ln, cache=True),
                 hint=PRE_NORM_HINT)


def _single(ref):
    """A float32 copy of a reference module."""
    import copy
    return copy.deepcopy(ref).float()


POST_HALF = {  # how one half of a post-norm block can be written: (its output from norm n, sublayer f, input x; words)
    "pre": (lambda n, f, x: x + f(n(x)), "written pre-norm, x + {f}({n}(x))"),
    "normed": (lambda n, f, x: x + n(f(x)), "normalises its sublayer's output instead of the sum, x + {n}({f}(x))"),
    "no residual": (lambda n, f, x: n(f(x)), "leaves the residual out, {n}({f}(x))"),
    "no norm": (lambda n, f, x: x + f(x), "is left unnormalised, x + {f}(x)"),
    "input normed": (lambda n, f, x: n(x) + f(x), "normalises x before adding its sublayer's output, {n}(x) + {f}(x), "
                                                   "instead of the sum, {n}(x + {f}(x))"),
    "both": (lambda n, f, x: n(x + f(n(x))), "normalises the sublayer's input as well as the sum, {n}(x + {f}({n}(x))): "
                                             "pre-norm and post-norm at once; the sublayer reads the raw x"),
    "post": (lambda n, f, x: n(x + f(x)), ""),
}
POST_SAID = {("pre", "pre"): "pre-norm where post-norm was asked: x = ln1(x + attn(x)); x = ln2(x + mlp(x))",
             ("post", "no norm"): "the second sublayer left unnormalised: x = ln2(x + mlp(x))",
             ("normed", "normed"): "the sublayer's output normalised instead of the sum: normalise x + sublayer(x), "
                                   "x = ln1(x + attn(x))",
             ("pre", "post"): "the first sublayer written pre-norm, x + attn(ln1(x)): post-norm normalises the sum, "
                              "x = ln1(x + attn(x))",
             ("no residual", "post"): "the residual left out of the attention half: ln1 normalises x + attn(x), the "
                                      "sum, not attn(x) alone",
             ("post", "no residual"): "the residual left out of the MLP half: ln2 normalises x + mlp(x), the sum, not "
                                      "mlp(x) alone"}


def _post_halves(ref, x, ln) -> dict:
    """{mistake: output} for every way of writing each half of the post-norm block (POST_HALF),
    one half or both wrong; the words of POST_SAID where it has them."""
    n1, n2 = (lambda t: ln(ref.ln1, t)), (lambda t: ln(ref.ln2, t))
    out = {}
    for first, (f1, said1) in POST_HALF.items():
        for second, (f2, said2) in POST_HALF.items():
            if first == second == "post":
                continue
            halves = [f"the attention half {said1.format(n='ln1', f='attn')}" if said1 else "",
                      f"the MLP half {said2.format(n='ln2', f='mlp')}" if said2 else ""]
            said = POST_SAID.get((first, second)) or ("; ".join(h for h in halves if h) + ": post-norm normalises "
                                                      "each sum, x = ln1(x + attn(x)), then x = ln2(x + mlp(x))")
            with torch.no_grad():
                h = f1(n1, ref.attn, x)
                out[said] = f2(n2, ref.mlp, h)
    return out


def _post_case(m, ref, x, ln, cache=False):
    pre, post, _ = _block_variants(ref, x, ln)
    with torch.no_grad():
        h = ln(ref.ln2, x + ref.attn(x))
        swapped = ln(ref.ln1, h + ref.mlp(h))
        after_attn = ln(ref.ln1, x + ref.attn(x))
        stale = ln(ref.ln2, x + ref.mlp(after_attn))
        mlp_of_input = ln(ref.ln2, after_attn + ref.mlp(x))
        twice = ln(ref.ln1, after_attn + ref.mlp(after_attn))
    call = (lambda: m(x, None)) if cache else (lambda: m(x))
    return Case(f"PostNormBlock(cfg)(x of shape {tuple(x.shape)}, {str(x.dtype)[6:]}{', cache=None' if cache else ''})",
                call, post, {**_post_halves(ref, x, ln),
                             "ln1 and ln2 swapped: ln1 normalises the sum after attention, ln2 the one after the MLP":
                                 swapped,
                             "ln1 used after the MLP too, ln2 never used (so its gamma and beta never apply): the sum "
                             "after the MLP is normalised by ln2, x = ln2(x + mlp(x))": twice,
                             "the MLP's residual adds to the block's input x instead of to the attention half's result: "
                             "the MLP reads h = ln1(x + attn(x)) but the sum is x + mlp(h), so attention drops out of "
                             "the stream; the second sum is h + mlp(h)": stale,
                             "the MLP reads the block's input x instead of the attention half's result: the sum is "
                             "h + mlp(x) with h = ln1(x + attn(x)); the MLP must read h too, h + mlp(h)": mlp_of_input,
                             "the MLP half never ran: your output is ln1(x + attn(x)), the attention half alone (a "
                             "return before the MLP?); go on, x = ln2(x + mlp(x))": after_attn})


@graded("block.PostNormBlock", points=1)
def test_post_norm_block(student):
    ref, x, ln = _block_case(seed=20)
    m = _student_block(student, "PostNormBlock", ref)
    hint = "x = ln1(x + attn(x)), then x = ln2(x + mlp(x)): the 2017 order, the norm after each sum"
    expect_cases(_post_case(m, ref, x, ln), _post_case(m, ref, _randn(3, 4, CFG.d_model, seed=21, scale=2) - 1, ln),
                 hint=hint)
    m32, ref32 = m.float(), _single(ref)
    expect_cases(_post_case(m32, ref32, x.float(), ln, cache=True), _post_case(m32, ref32, x[:1, :3].float(), ln, cache=True),
                 hint=hint)


CACHE_NOT_PASSED = ("the cache not passed on: self.attn(self.ln1(x), cache) keeps the earlier positions' keys and "
                    "values")


def _own_cache_run(student, m, x, first):
    """The learner's block fed x[:, :first] and then the rest through one cache: (the call for the
    rest, the block's own output for those positions in one pass, and its output for them alone)."""
    cache = student.piece("block", "KVCache")(x.shape[0], CFG.kv_heads, x.shape[1], CFG.d_head, x.dtype, torch.device("cpu"))
    with torch.no_grad():
        whole, alone = m(x)[:, first:], m(x[:, first:])

    def rest():
        with torch.no_grad():
            m(x[:, :first], cache)
            return m(x[:, first:], cache)
    return rest, whole, alone


def _check_cache(student, name, seed, not_passed):
    """The block `name` fed in two parts through a KV cache gives what it gives in one pass over the
    whole sequence (its own one-pass output: this check is about the cache alone)."""
    ref, x, _ = _block_case(seed=seed)
    m = _student_block(student, name, ref)
    with torch.no_grad():
        out = m(x)
    expect_true(isinstance(out, torch.Tensor) and out.shape == x.shape and not torch.allclose(out, x),
                f"{name}(cfg)(x)", "returned None: a forward that ends without `return` gives None" if out is None
                else "the block gave x back unchanged (or not a tensor of x's shape)",
                "end forward with `return x`" if out is None else "the block adds each sublayer's output to x")
    x2 = _randn(3, 6, CFG.d_model, seed=seed + 1, scale=2)
    for dtype in (torch.float64, torch.float32):        # float32 as the model runs it
        m.to(dtype)
        rest, whole, alone = _own_cache_run(student, m, x.to(dtype), 3)
        rest2, whole2, alone2 = _own_cache_run(student, m, x2.to(dtype), 2)
        expect_close(rest(), whole, f"{name}(cfg) in {str(dtype)[6:]} fed 3 positions, then 2, through a KV cache, "
                                    f"against its own one pass",
                     hint="hand the cache to the attention: it appends the new keys and values and attends to all of them",
                     mistakes={not_passed: alone}, second=Second(rest2, whole2, {not_passed: alone2}))


@graded("block.Block", points=1, taught="model")
def test_block_passes_the_cache_on(student):
    """Fed in two parts through a KV cache, the block gives what it gives in one pass over the
    whole sequence (its own one-pass output: this test is about the cache alone)."""
    _check_cache(student, "Block", 30, CACHE_NOT_PASSED)


POST_CACHE_NOT_PASSED = ("the cache not passed on: attention without it sees only the new positions; "
                         "self.attn(x, cache) keeps the earlier positions' keys and values, "
                         "x = self.ln1(x + self.drop(self.attn(x, cache)))")


@graded("block.PostNormBlock", points=1, taught="model")
def test_post_norm_block_passes_the_cache_on(student):
    """The 2017 block takes a cache too (its forward(x, cache)): fed in two parts through a KV cache,
    it gives what it gives in one pass over the whole sequence."""
    _check_cache(student, "PostNormBlock", 34, POST_CACHE_NOT_PASSED)


DROPPED = {"Block": "x = x + self.drop(self.attn(self.ln1(x), cache))",
           "PostNormBlock": "x = self.ln1(x + self.drop(self.attn(x, cache)))"}
MLP_DROPPED = {"Block": "x = x + self.drop(self.mlp(self.ln2(x)))",
               "PostNormBlock": "x = self.ln2(x + self.drop(self.mlp(x)))"}


def _one_sublayer_dropped(name, ref, kept):
    """The reference block `name` with dropout p = 1 on one sublayer only: the other's output
    projection zeroed (`kept`, "attn" or "mlp", is the sublayer whose output is not dropped)."""
    dropped = "mlp" if kept == "attn" else "attn"
    state = {k: (torch.zeros_like(v) if k.startswith(f"{dropped}.proj.") else v) for k, v in ref.state_dict().items()}
    block = getattr(pieces.module("block"), name)(CFG).double().eval()
    block.load_state_dict(state)
    return block


def _dropout_mistakes(name, ref, x):
    """{typical mistake: what the block gives with dropout=1.0 in training mode} on x."""
    with torch.no_grad():
        return {f"no dropout on the MLP's output: pass it through self.drop too, {MLP_DROPPED[name]}":
                    _one_sublayer_dropped(name, ref, "mlp")(x),
                f"no dropout on attention's output: pass it through self.drop too, {DROPPED[name]}":
                    _one_sublayer_dropped(name, ref, "attn")(x)}


EVAL_DROPOUT = ("dropout still applied in eval mode: F.dropout(x, p) drops whatever the mode (its training argument "
                "defaults to True); self.drop, the block's nn.Dropout, follows model.train() and model.eval() (or pass "
                "training=self.training)")


def check_block_dropout(student, name, seed):
    """The block `name` (Block or PostNormBlock) built with dropout=p: in training mode each sublayer's output is dropped out (two calls
    differ), and p = 1 drops it whole (the block then gives what it gives with both sublayers'
    output projections zeroed); in eval mode dropout is off (the block gives what it gives without
    dropout). Each against the learner's own block, same weights: these checks are about dropout alone."""
    ref, x, _ = _block_case(seed=seed)
    m = _student_block(student, name, ref, dropout=0.5)
    plain = _student_block(student, name, ref)
    m.train()
    first, second = m(x), m(x)
    expect_true(isinstance(first, torch.Tensor), f"{name}(cfg, dropout=0.5)(x) in training mode",
                f"returned {type(first).__name__}, not a tensor" + (": a forward that ends without `return` gives None"
                                                                   if first is None else ""),
                "end forward with `return x`")
    expect_true(not torch.allclose(first, second),
                f"{name}(cfg, dropout=0.5) in training mode, called twice on the same x",
                "both calls gave the same output: nothing was dropped out",
                "pass each sublayer's output through self.drop before adding it to x",
                mistake=f"no dropout in the block: each sublayer's output goes through self.drop before it is added "
                        f"({DROPPED[name]}), and the same for the MLP")
    m.eval()
    plain.eval()
    with torch.no_grad():
        evaluated, again = m(x), m(x)
        expect_true(not isinstance(evaluated, torch.Tensor) or torch.equal(evaluated, again),
                    f"{name}(cfg, dropout=0.5) in eval mode, called twice on the same x",
                    "the two calls gave different outputs: something still drops at random in eval mode",
                    "use the module self.drop (an nn.Dropout), which model.eval() switches off",
                    mistake=EVAL_DROPOUT)
        expect_close(evaluated, plain(x), f"{name}(cfg, dropout=0.5) in eval mode against {name}(cfg) (no dropout), "
                     "same weights", hint="dropout is off in eval mode: use the module self.drop (an nn.Dropout), not "
                     "torch.nn.functional.dropout with training=True")
    silent = {k: (torch.zeros_like(v) if k.startswith(("attn.proj.", "mlp.proj.")) else v)
              for k, v in ref.state_dict().items()}                   # both sublayers' outputs zeroed
    without = student.piece("block", name)(CFG)
    without.double()
    load_weights(without, silent, f"{name}(cfg)")
    everything = _student_block(student, name, ref, dropout=1.0).train()
    x2 = _randn(3, 4, CFG.d_model, seed=seed + 1, scale=2) - 1
    without.eval()

    def dropped_again():
        with torch.no_grad():
            return everything(x2)
    with torch.no_grad():
        expect_close(everything(x), without(x), f"{name}(cfg, dropout=1.0) in training mode against the same "
                                                "block with both sublayers' outputs zeroed",
                     mistakes=_dropout_mistakes(name, ref, x),
                     second=Second(dropped_again, without(x2), _dropout_mistakes(name, ref, x2)),
                     hint="dropout=1.0 drops each sublayer's whole output: the block's dropout takes its p from the "
                          "argument, self.drop = nn.Dropout(dropout)")


@graded("block.Block", points=1)
def test_block_applies_dropout_while_training(student):
    """Block(cfg, dropout=p): dropped out in training mode, p honoured, off in eval mode."""
    check_block_dropout(student, "Block", 40)


@graded("block.PostNormBlock", points=1)
def test_post_norm_block_applies_dropout_while_training(student):
    """PostNormBlock(cfg, dropout=p): dropped out in training mode, p honoured, off in eval mode."""
    check_block_dropout(student, "PostNormBlock", 41)


# ----- LayerNorm: keepdim -----

def _layer_norm_without_keepdim(x, w, b, eps=1e-5):
    """The mistake: mean and variance of shape (..., T), which line up with the wrong axis."""
    mean = x.mean(dim=-1)
    var = ((x - mean) ** 2).mean(dim=-1)
    return (x - mean) / torch.sqrt(var + eps) * w + b


LN_KEEPDIM = ("keepdim forgotten: x.mean(dim=-1) has one value per token but shape (..., T), which does not line "
              "up with the tokens of x; keepdim=True keeps it (..., T, 1), for the mean and the variance alike")


@graded("block.layer_norm", points=1)
def test_layer_norm_keeps_one_statistic_per_token(student):
    """(B, T, D) = (2, 3, 16) and (4, 5, 16), where a mean without keepdim raises, then (T, D) =
    (16, 16), where it silently lines up with the features instead of the tokens."""
    layer_norm = student.piece("block", "layer_norm")
    x, w, b = _layer_norm_case()
    square = lambda seed: _randn(16, 16, seed=seed, scale=2) + _randn(16, 1, seed=seed + 1)
    for case, other in ((x, _randn(4, 5, 16, seed=7, scale=3) + 1), (square(5), square(8))):
        what = f"layer_norm(x of shape {tuple(case.shape)}, weight, bias)"
        raising = lambda t: {LN_KEEPDIM: lambda: _layer_norm_without_keepdim(t, w, b)}
        got = expect_runs(lambda: layer_norm(case, w, b), what, mistakes=raising(case),
                          second=Second(lambda: layer_norm(other, w, b), None, raising(other)))
        mistakes = lambda t: {**_layer_norm_mistakes(t, w, b),
                              **({LN_KEEPDIM: _layer_norm_without_keepdim(t, w, b)} if t.shape[-2] == t.shape[-1] else {})}
        expect_close(got, F.layer_norm(case, (16,), w, b, eps=1e-5), what, mistakes=mistakes(case),
                     second=Second(lambda: layer_norm(other, w, b), F.layer_norm(other, (16,), w, b, eps=1e-5),
                                   mistakes(other)))


# ----- dropout -----
# dropout draws a random mask, which no test can expect bit for bit: the tests hold its output to
# properties every correct dropout has, on 65,536 elements drawn from a seeded generator, one
# property per test so that one mistake costs in one test. (That the mean is kept follows from the
# first two; notebook 05 shows it.)

DROP_SHAPE = (4, 64, 256)                          # (B, T, D)
N_DROP = 4 * 64 * 256
SIGMAS = 6       # a bound of 6 standard deviations: a correct dropout exceeds it with probability about 2e-9
DROP_HINT = ("in training, each element is zeroed with probability p and every element kept is divided by 1 - p; "
             "outside training nothing happens")
NOT_SCALED = "survivors not scaled: divide the elements you keep by 1 - p, so that each keeps its expected value"
MULTIPLIED = "survivors multiplied by 1 - p instead of divided by it"
NOTHING_DROPPED = "nothing dropped in training: zero each element with probability p when training is True"
TRAINING_INVERTED = ("the training test inverted: nothing is dropped while training, and elements are dropped outside "
                     "it (at evaluation, in generation); drop when training is True, `if not training or p == 0: "
                     "return x`")
KEPT_WITH_P = ("kept with probability p instead of 1 - p: p is the probability of being DROPPED, so an element "
               "survives when its random number is at least p")


def _dropout(student, x, p, training=True, seed=0):
    return student.piece("block", "dropout")(x, p, training, torch.Generator().manual_seed(seed))


def _not_dropping(student):
    """What a dropout that drops nothing in training does: the training test inverted, when it drops
    outside training (at p = 0.5), else nothing dropped at all."""
    x = _drop_input(67)
    try:
        idle = _dropout(student, x.clone(), 0.5, training=False, seed=2)
    except Exception:                                   # noqa: BLE001 - its own tests say what it raises
        return NOTHING_DROPPED
    if not (isinstance(idle, torch.Tensor) and idle.shape == x.shape and idle.dtype == x.dtype):
        return NOTHING_DROPPED
    kept = idle != 0
    drops = bool(kept.any()) and bool((~kept).any()) and torch.allclose(idle[kept], x[kept] / 0.5)
    return TRAINING_INVERTED if drops else NOTHING_DROPPED


def _drop_input(seed=60, dtype=torch.float32):
    """(B, T, D) = (4, 64, 256) values around 1.5, none of them 0: a 0 in the output is a dropped element."""
    return (torch.rand(DROP_SHAPE, generator=torch.Generator().manual_seed(seed)) + 1.0).to(dtype)


def _bound(p, n=N_DROP):
    """SIGMAS standard deviations of the fraction of n elements that Bernoulli(p) draws pick."""
    return SIGMAS * (p * (1 - p) / n) ** 0.5


def _dropped(student, x, p, training=True, seed=0):
    """The learner's dropout(x, p, training, generator seeded `seed`), and a copy of x taken before
    the call (what every expectation is computed from: an in-place dropout has its own test)."""
    before = x.clone()
    return _dropout(student, x, p, training, seed), before


def _scales_case(student, p, seed):
    x = _drop_input(seed)
    got, x0 = _dropped(student, x, p)
    kept = got != 0 if isinstance(got, torch.Tensor) and got.shape == x.shape else torch.ones_like(x, dtype=torch.bool)
    dropped = not bool(kept.all())                     # else "not scaled" and "nothing dropped" give the same
    return Case(f"dropout(x, p={p}, training=True): the elements not zeroed", lambda: got,
                torch.where(kept, x0 / (1 - p), 0.0),
                {_not_dropping(student): x0, NOT_SCALED: torch.where(kept, x0, 0.0) if dropped else None,
                 MULTIPLIED: torch.where(kept, x0 * (1 - p), 0.0)}), got, x0


@graded("block.dropout", points=2)
def test_dropout_zeroes_or_scales_each_element(student):
    """Every output element is 0 or x / (1 - p), at p = 0.1 and 0.3, in x's dtype."""
    (first, got, x0), (second, _, _) = _scales_case(student, 0.1, 60), _scales_case(student, 0.3, 65)
    expect_cases(first, second, hint=DROP_HINT)
    expect_equal(got.dtype, x0.dtype, "dropout(x, p=0.1, training=True).dtype",
                 "the output has x's dtype: a bool mask multiplied into x takes x's dtype")
    for dtype in (torch.bfloat16, torch.float16):                      # mixed-precision training's inputs
        half, _ = _dropped(student, _drop_input(60, dtype), 0.1)
        found = getattr(half, "dtype", type(half).__name__)
        expect_true(found == dtype, f"dropout(x in {str(dtype)[6:]}, p=0.1, training=True).dtype",
                    f"the output is {str(found).replace('torch.', '')}, not x's {str(dtype)[6:]}",
                    "a bool mask multiplied into x keeps x's dtype", mistake=(
                        "the output widened to float32: a mask made float32 (.float(), torch.rand's default dtype) "
                        "multiplied into half-precision x gives float32; use the bool mask, or .to(x.dtype)"
                        if found == torch.float32 else None))
    expect_trainable(student.piece("block", "dropout"), (randn64(4, 8, seed=77), 0.1, True),
                     "dropout(x of shape (4, 8), p=0.1, training=True)")


NORMAL_COINS = ("the random numbers drawn with torch.randn (normal, mostly between -3 and 3) where torch.rand "
                "(uniform on [0, 1)) was meant: a normal number falls below p about half the time, so the fraction "
                "dropped is far from p; compare torch.rand's numbers with p")


def _fraction(got):
    return (got == 0).double().mean() if isinstance(got, torch.Tensor) else got


def _fraction_case(student, p, seed):
    got, _ = _dropped(student, _drop_input(seed), p, seed=1)
    normal_below_p = 0.5 * (1 + math.erf(p / math.sqrt(2)))             # P(z < p) for z ~ N(0, 1)
    return (lambda: _fraction(got)), torch.tensor(p, dtype=torch.float64), {
        KEPT_WITH_P: torch.tensor(1 - p, dtype=torch.float64), _not_dropping(student): torch.tensor(0.0, dtype=torch.float64),
        NORMAL_COINS: torch.tensor(normal_below_p, dtype=torch.float64),
        NORMAL_COINS + " (here the numbers above p were dropped)": torch.tensor(1 - normal_below_p, dtype=torch.float64)}


@graded("block.dropout", points=2)
def test_dropout_zeroes_a_fraction_p(student):
    """The fraction of the 65,536 elements set to 0 lies within 6 standard deviations of p."""
    cases = {p: _fraction_case(student, p, seed) for p, seed in ((0.1, 61), (0.3, 66))}
    for p, other in ((0.1, 0.3), (0.3, 0.1)):
        got, want, mistakes = cases[p]
        expect_close(got(), want, f"the fraction of the {N_DROP:,} elements that dropout(x, p={p}) sets to 0 (a correct "
                     f"dropout lands within {SIGMAS} standard deviations of p, ±{_bound(p):.4f})",
                     atol=_bound(p), rtol=0.0, hint=DROP_HINT, mistakes=mistakes, second=Second(*cases[other]))


SCALED_IN_EVAL = ("scaled by 1 - p outside training, as the original (not inverted) dropout does: this dropout "
                  "already divides by 1 - p while training, so outside training it gives x back unchanged")
APPLIED_IN_EVAL = ("dropout applied when not training: outside training (model.eval(), generation) it must return x "
                   "unchanged")


def _idle_case(student, p, training, seed):
    x = _drop_input(seed)
    got, x0 = _dropped(student, x, p, training, seed=3)
    applied = (torch.where(got == 0, 0.0, x0 / (1 - p)) if p < 1 and isinstance(got, torch.Tensor)
               and got.shape == x.shape else torch.zeros_like(x))
    mistakes = {APPLIED_IN_EVAL: applied, SCALED_IN_EVAL: x0 * (1 - p)} if not training else {}
    return Case(f"dropout(x, p={p}, training={training})", lambda: got, x0, mistakes)


def _drops(student, why):
    """The precondition of the dropout tests that look at something else: in training at p = 0.5 it
    does drop (else giving x back would pass them)."""
    busy, _ = _dropped(student, _drop_input(67), 0.5, seed=2)
    drops = isinstance(busy, torch.Tensor) and bool((busy == 0).any())
    expect_true(drops, "dropout(x, p=0.5, training=True)", f"nothing was dropped: {why}", DROP_HINT,
                mistake=None if drops or _not_dropping(student) != TRAINING_INVERTED else TRAINING_INVERTED)


@graded("block.dropout", points=1)
def test_dropout_does_nothing_outside_training_or_at_p_0(student):
    """Outside training, or at p = 0, x comes back unchanged; and in training at p = 0.5 dropout
    does drop (else giving x back would pass)."""
    _drops(student, "this test checks that dropout is off outside training, which means something only for a "
                    "dropout that drops while training")
    expect_cases(_idle_case(student, 0.3, False, 62), _idle_case(student, 1.0, False, 68), _idle_case(student, 0.0, True, 69),
                 _idle_case(student, 0.6, False, 70),
                 hint="when not training, or when p is 0, dropout gives x back unchanged")


@graded("block.dropout", points=1)
def test_dropout_leaves_its_input_unchanged(student):
    """x belongs to the caller (the block adds the dropped-out sublayer output to the stream and may
    still need it): dropout returns a new tensor and never writes into x."""
    _drops(student, "this test checks that dropout leaves its input as it was while it drops")
    for p, training in ((0.3, True), (0.5, True), (0.3, False)):
        x = _drop_input(71)
        got, x0 = _dropped(student, x, p, training, seed=4)
        expect_unchanged({"x": x0}, {"x": x}, f"dropout(x, p={p}, training={training})")


@graded("block.dropout", points=1)
def test_dropout_of_any_shape_with_or_without_a_generator(student):
    """One vector (D,) and a (T, D) matrix, float32, with a generator and with none (torch's own):
    each element 0 or x / (1 - p), something dropped, the shape and dtype kept."""
    _drops(student, "this test checks the shapes dropout takes, which means something only for a dropout that drops")
    dropout = student.piece("block", "dropout")
    g = torch.Generator().manual_seed(72)
    for shape in ((512,), (64, 32)):
        x = torch.rand(shape, generator=g) + 1.0
        for generator in (torch.Generator().manual_seed(9), None):
            what = f"dropout(x of shape {shape}, p=0.5, training=True{', generator' if generator else ''})"
            x0 = x.clone()                               # an in-place dropout has its own test
            got = dropout(x, 0.5, True, generator) if generator is not None else dropout(x, 0.5, True)
            x = x0
            expect_true(isinstance(got, torch.Tensor) and got.shape == x.shape and got.dtype == x.dtype, what,
                        f"expected a {x.dtype} tensor of x's shape {shape}, got "
                        f"{getattr(got, 'dtype', type(got).__name__)} of shape {tuple(getattr(got, 'shape', ()))}", DROP_HINT)
            kept = got != 0
            expect_close(got, torch.where(kept, x / 0.5, 0.0), f"{what}: the elements not zeroed", hint=DROP_HINT)
            expect_true(bool((~kept).any()) and bool(kept.any()), what, "nothing was dropped, or everything",
                        DROP_HINT)
    x = torch.rand(64, 32, generator=g) + 1.0
    first, again = dropout(x, 0.5, True), dropout(x, 0.5, True)
    expect_true(not torch.equal(first, again), "dropout(x of shape (64, 32), p=0.5, training=True) called twice, "
                "no generator", "both calls dropped the very same elements", "without a generator, draw from PyTorch's "
                "own (torch.rand(x.shape, generator=None)), which moves on at every call", mistake=SAME_DRAWS)


SAME_DRAWS = ("the same random numbers at every call without a generator: a generator made inside the function "
              "with a fixed seed (torch.Generator().manual_seed(0)) starts over each time, so every step of training "
              "would drop the same elements; when generator is None, draw from PyTorch's global generator")
P_IS_1 = ("p = 1 not handled: dividing by 1 - p = 0 gives 0/0 = NaN in a tensor (ZeroDivisionError with a Python "
          "float); when p is 1 every element is dropped: return zeros")


@graded("block.dropout", points=1)
def test_dropout_at_p_1_gives_zeros(student):
    what, hint = "dropout(x, p=1.0, training=True)", "p = 1 drops every element, and there is no 1 / (1 - p) to scale by"
    x, x2 = _drop_input(seed=63), _drop_input(seed=64)[:2]
    got = expect_runs(lambda: _dropout(student, x, 1.0, seed=4), what, hint=hint,
                      mistakes={P_IS_1: lambda: x / (1 / (1 - 1.0))},
                      second=Second(lambda: _dropout(student, x2, 1.0, seed=5), None, {P_IS_1: lambda: x2 / (1 / (1 - 1.0))}))
    expect_close(got, torch.zeros_like(x), what, hint=hint, mistakes={P_IS_1: torch.full_like(x, float("nan"))},
                 second=Second(lambda: _dropout(student, x2, 1.0, seed=5), torch.zeros_like(x2),
                               {P_IS_1: torch.full_like(x2, float("nan"))}))


def _same_mask_along(dropped: torch.Tensor, dim: int) -> bool:
    """Whether every slice of the 0/1 mask along `dim` is the same (for a correct dropout on 16,384
    elements per slice at p = 0.5, two slices agree everywhere with probability 2^-16384)."""
    first = dropped.narrow(dim, 0, 1)
    return bool((dropped == first).all())


@graded("block.dropout", points=1)
def test_dropout_draws_one_number_per_element(student):
    """At p = 0.5 each element is dropped on its own: no two rows of the batch, and no two
    positions, share one mask."""
    got = _dropout(student, torch.ones(DROP_SHAPE), 0.5, seed=5)
    what = "the dropout mask of ones of shape (B, T, D) = (4, 64, 256), p=0.5"
    expect_true(isinstance(got, torch.Tensor) and got.shape == DROP_SHAPE, what,
                f"expected a tensor of x's shape {DROP_SHAPE}, got {getattr(got, 'shape', type(got).__name__)}",
                "dropout returns a tensor of x's shape")
    expect_true(bool((got == 0).any()), what, "nothing was dropped", DROP_HINT)
    for dim, name in ((0, "row of the batch (B)"), (1, "position (T)")):
        expect_true(not _same_mask_along(got == 0, dim), what, f"every {name} has the same mask",
                    "draw a random number for every element of x: the mask has x's full shape",
                    mistake=f"the same mask for every {name}: draw the random numbers with x's full shape, not one "
                            f"slice broadcast over the others")


@graded("block.dropout", points=1)
def test_dropout_follows_its_generator(student):
    """Two generators with the same seed give the same mask; different seeds, different masks."""
    x = _drop_input(seed=64)
    first, again, other = (_dropout(student, x.clone(), 0.5, seed=s) for s in (7, 7, 8))
    expect_true(isinstance(first, torch.Tensor) and bool((first == 0).any()), "dropout(x, p=0.5, training=True)",
                "nothing was dropped", DROP_HINT)
    expect_true(isinstance(again, torch.Tensor) and again.shape == first.shape and torch.equal(again, first),
                "dropout(x, p=0.5) twice, each with a generator seeded 7", "the two masks differ",
                "take every random number from the generator you are given",
                mistake="generator ignored: pass generator=generator to the call that draws the random numbers, so "
                        "that a seeded generator gives the same mask")
    expect_true(not torch.equal(first, other), "dropout(x, p=0.5) with generators seeded 7 and 8",
                "both gave the same mask", "take the random numbers from the generator you are given")
