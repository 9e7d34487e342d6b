"""Graded tests, activity 7.2 · The transformer block: LayerNorm from its formula, the pre-norm
block x = x + Attn(LN(x)); x = x + MLP(LN(x)), and the 2017 post-norm block."""
import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import expect_close, expect_equal, expect_runs, expect_true, graded
from andrea_course import pieces



def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _layer_norm_case():
    """x: (B=2, T=3, D=16), each token with its own offset and a scale from 0.01 to 5, so that
    where eps sits and which variance is used both change the output well beyond tolerance."""
    scales = torch.tensor([[0.01, 1.0, 5.0], [0.05, 0.3, 2.0]], dtype=torch.float64)[..., None]
    x = _randn(2, 3, 16, seed=1) * scales + _randn(2, 3, 1, seed=2) * 3
    return x, 1 + _randn(16, seed=3, scale=0.5), _randn(16, seed=4)


def _layer_norm_mistakes(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    norm = (x - mean) / torch.sqrt(var + eps)
    return {
        "variance with Bessel's correction (divide by D - 1): LayerNorm uses the biased variance, "
        "var(unbiased=False) or mean((x - mean)**2)": (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b,
        "eps outside the square root: divide by sqrt(var + eps), not sqrt(var) + eps":
            (x - mean) / (var.sqrt() + eps) * w + b,
        "normalised over the wrong axis: mean and variance over the last axis (D, dim=-1) of each token":
            F.layer_norm(x.transpose(-1, -2), x.shape[-2:-1]).transpose(-1, -2) * w + b,
        "normalised over the whole tensor: each token gets its own mean and variance over D":
            (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * w + b,
        "gamma (weight) forgotten: multiply by weight before adding bias": norm + b,
        "beta (bias) forgotten: add bias after multiplying by weight": norm * w,
        "mean not subtracted: LayerNorm centres x before dividing": x / torch.sqrt(var + eps) * w + b,
    }


@graded("block.layer_norm", points=3)
def test_layer_norm(student):
    x, w, b = _layer_norm_case()
    got = student.piece("block", "layer_norm")(x, w, b)
    expect_close(got, F.layer_norm(x, (16,), w, b, eps=1e-5), "layer_norm(x, weight, bias)",
                 mistakes=_layer_norm_mistakes(x, w, b))


@graded("block.layer_norm", points=1)
def test_layer_norm_uses_the_eps_it_is_given(student):
    x, w, b = _layer_norm_case()
    got = student.piece("block", "layer_norm")(x, w, b, 0.1)
    expect_close(got, F.layer_norm(x, (16,), w, b, eps=0.1), "layer_norm(x, weight, bias, eps=0.1)",
                 mistakes={"eps ignored: use the argument, not a constant 1e-5":
                           F.layer_norm(x, (16,), w, b, eps=1e-5), **_layer_norm_mistakes(x, w, b, 0.1)})




CFG = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=2, n_heads=4, d_ff=32)
USES_PIECES = ("the block runs your layer_norm, MultiHeadAttention and MLP: if one of their tests fails, "
               "fix that one first")


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
    return pre, post, {
        "added the normalised x to the residual stream: x = x + attn(ln1(x)) adds to the raw x":
            normalised_residual,
        "no residual connection: add each sublayer's output to x": no_residual,
        "ln1 used for both sublayers: the MLP reads ln2(x)": one_norm,
        "both sublayers read the block's input: the MLP reads the x that attention has already updated": parallel,
    }


@graded("block.Block", points=3)
def test_pre_norm_block(student):
    ref, x, ln = _block_case()
    pre, post, mistakes = _block_variants(ref, x, ln)
    m = student.piece("block", "Block")(CFG)
    m.double()
    m.load_state_dict(ref.state_dict())
    expect_close(m(x), pre, "Block(cfg)(x)", hint=USES_PIECES, mistakes={
        "post-norm where pre-norm was asked: normalise the sublayer's input, x = x + attn(ln1(x)), "
        "and leave the residual stream unnormalised": post, **mistakes})


@graded("block.PostNormBlock", points=1)
def test_post_norm_block(student):
    ref, x, ln = _block_case(seed=20)
    pre, post, _ = _block_variants(ref, x, ln)
    m = student.piece("block", "PostNormBlock")(CFG)
    m.double()
    m.load_state_dict(ref.state_dict())
    with torch.no_grad():
        h = ln(ref.ln1, x + ref.attn(x))
        no_second_norm = h + ref.mlp(h)
    expect_close(m(x), post, "PostNormBlock(cfg)(x)", hint=USES_PIECES, mistakes={
        "pre-norm where post-norm was asked: x = ln1(x + attn(x)); x = ln2(x + mlp(x))": pre,
        "the second sublayer left unnormalised: x = ln2(x + mlp(x))": no_second_norm})


@graded("block.Block", points=1, taught="model")
def test_block_passes_the_cache_on(student):
    """Fed in two parts through a KV cache, the block gives what one pass over the whole
    sequence gives: it must hand its cache to the attention."""
    ref, x, _ = _block_case(seed=30)
    m = student.piece("block", "Block")(CFG)
    m.double()
    m.load_state_dict(ref.state_dict())
    cache = student.piece("block", "KVCache")(x.shape[0], CFG.kv_heads, x.shape[1], CFG.d_head, torch.float64, "cpu")
    with torch.no_grad():
        want, fresh = ref(x)[:, 3:], ref(x[:, 3:])
    m(x[:, :3], cache)
    expect_close(m(x[:, 3:], cache), want, "Block(cfg) fed 3 positions, then 2, through a KV cache",
                 hint="hand the cache to the attention: it appends the new keys and values and attends to all of them",
                 mistakes={"the cache not passed on: self.attn(self.ln1(x), cache) keeps the earlier "
                           "positions' keys and values": fresh})


@graded("block.Block", points=1)
def test_block_applies_dropout_while_training(student):
    """Block(cfg, dropout=0.5): in training mode each sublayer's output is dropped out (two calls
    differ); in eval mode dropout is off and the block is the plain equation."""
    ref, x, ln = _block_case(seed=40)
    pre, _, _ = _block_variants(ref, x, ln)
    m = student.piece("block", "Block")(CFG, dropout=0.5)
    m.double()
    m.load_state_dict(ref.state_dict())
    m.train()
    first, second = m(x), m(x)
    expect_true(isinstance(first, torch.Tensor) and not torch.allclose(first, second),
                "Block(cfg, dropout=0.5) in training mode, called twice on the same x",
                "both calls gave the same output: nothing was dropped out",
                "pass each sublayer's output through self.drop before adding it to x",
                mistake="no dropout in the block: x = x + self.drop(self.attn(self.ln1(x), cache)), and the same for the MLP")
    m.eval()
    expect_close(m(x), pre, "Block(cfg, dropout=0.5) in eval mode", hint="dropout is off in eval mode: "
                 "use the module self.drop (an nn.Dropout), not torch.nn.functional.dropout with training=True")


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
    """(B, T, D) = (2, 3, 16), where a mean without keepdim raises, then (T, D) = (16, 16), where it
    silently lines up with the features instead of the tokens."""
    layer_norm = student.piece("block", "layer_norm")
    x, w, b = _layer_norm_case()
    for case in (x, _randn(16, 16, seed=5, scale=2) + _randn(16, 1, seed=6)):
        what = f"layer_norm(x of shape {tuple(case.shape)}, weight, bias)"
        got = expect_runs(lambda: layer_norm(case, w, b), what,
                          mistakes={LN_KEEPDIM: lambda: _layer_norm_without_keepdim(case, w, b)})
        mistakes = {}
        if case.shape[-2] == case.shape[-1]:
            mistakes[LN_KEEPDIM] = _layer_norm_without_keepdim(case, w, b)
        expect_close(got, F.layer_norm(case, (16,), w, b, eps=1e-5), what, mistakes=mistakes)


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
KEPT_WITH_P = ("kept with probability p instead of 1 - p: p is the probability of being DROPPED, so an element "
               "survives when its random number is at least p")


def _dropout(student, x, p, training=True, seed=0):
    return student.piece("block", "dropout")(x, p, training, torch.Generator().manual_seed(seed))


def _drop_input(seed=60, dtype=torch.float32):
    """(B, T, D) = (4, 64, 256) values around 1.5, none of them 0: a 0 in the output is a dropped element."""
    return (torch.rand(DROP_SHAPE, generator=torch.Generator().manual_seed(seed)) + 1.0).to(dtype)


def _bound(p, n=N_DROP):
    """SIGMAS standard deviations of the fraction of n elements that Bernoulli(p) draws pick."""
    return SIGMAS * (p * (1 - p) / n) ** 0.5


@graded("block.dropout", points=2)
def test_dropout_zeroes_or_scales_each_element(student):
    """Every output element is 0 or x / (1 - p), at p = 0.1 and 0.3, in x's dtype."""
    x = _drop_input()
    for p in (0.1, 0.3):
        what = f"dropout(x, p={p}, training=True): the elements not zeroed"
        got = _dropout(student, x, p)
        kept = got != 0 if isinstance(got, torch.Tensor) and got.shape == x.shape else torch.ones_like(x, dtype=torch.bool)
        expect_close(got, torch.where(kept, x / (1 - p), 0.0), what, hint=DROP_HINT,
                     mistakes={NOTHING_DROPPED: x, NOT_SCALED: torch.where(kept, x, 0.0), MULTIPLIED: torch.where(kept, x * (1 - p), 0.0)})
        expect_equal(got.dtype, x.dtype, f"dropout(x, p={p}, training=True).dtype",
                     "the output has x's dtype: a bool mask multiplied into x takes x's dtype")


@graded("block.dropout", points=2)
def test_dropout_zeroes_a_fraction_p(student):
    """The fraction of the 65,536 elements set to 0 lies within 6 standard deviations of p."""
    x = _drop_input(seed=61)
    for p in (0.1, 0.3):
        got = _dropout(student, x, p, seed=1)
        frac = (got == 0).double().mean() if isinstance(got, torch.Tensor) else got
        expect_close(frac, torch.tensor(p, dtype=torch.float64),
                     f"the fraction of the {N_DROP:,} elements that dropout(x, p={p}) sets to 0 (a correct dropout "
                     f"lands within {SIGMAS} standard deviations of p, ±{_bound(p):.4f})",
                     atol=_bound(p), rtol=0.0, hint=DROP_HINT,
                     mistakes={KEPT_WITH_P: torch.tensor(1 - p, dtype=torch.float64),
                               NOTHING_DROPPED: torch.tensor(0.0, dtype=torch.float64)})


@graded("block.dropout", points=1)
def test_dropout_does_nothing_outside_training_or_at_p_0(student):
    x = _drop_input(seed=62)
    for p, training in ((0.3, False), (1.0, False), (0.0, True)):
        got = _dropout(student, x, p, training, seed=3)
        applied = (torch.where(got == 0, 0.0, x / (1 - p)) if p < 1 and isinstance(got, torch.Tensor)
                   and got.shape == x.shape else torch.zeros_like(x))
        expect_close(got, x, f"dropout(x, p={p}, training={training})",
                     hint="when not training, or when p is 0, dropout gives x back unchanged",
                     mistakes={"dropout applied when not training: outside training (model.eval(), generation) "
                               "it must return x unchanged": applied})


P_IS_1 = ("p = 1 not handled: dividing by 1 - p = 0 gives 0/0 = NaN in a tensor (ZeroDivisionError with a Python "
          "float); when p is 1 every element is dropped: return zeros")


@graded("block.dropout", points=1)
def test_dropout_at_p_1_gives_zeros(student):
    x = _drop_input(seed=63)
    what, hint = "dropout(x, p=1.0, training=True)", "p = 1 drops every element, and there is no 1 / (1 - p) to scale by"
    got = expect_runs(lambda: _dropout(student, x, 1.0, seed=4), what, hint=hint,
                      mistakes={P_IS_1: lambda: x / (1 / (1 - 1.0))})
    expect_close(got, torch.zeros_like(x), what, hint=hint, mistakes={P_IS_1: torch.full_like(x, float("nan"))})


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
    for dim, name in ((0, "row of the batch (B)"), (1, "position (T)")):
        expect_true(not _same_mask_along(got == 0, dim), what, f"every {name} has the same mask",
                    "draw a random number for every element of x: the mask has x's full shape",
                    mistake=f"the same mask for every {name}: draw the random numbers with x's full shape, not one "
                            f"slice broadcast over the others")


@graded("block.dropout", points=1)
def test_dropout_follows_its_generator(student):
    """Two generators with the same seed give the same mask; different seeds, different masks."""
    x = _drop_input(seed=64)
    first, again, other = (_dropout(student, x, 0.5, seed=s) for s in (7, 7, 8))
    expect_close(again, first, "dropout(x, p=0.5) twice, each with a generator seeded 7",
                 hint="take every random number from the generator you are given",
                 mistakes={"generator ignored: pass generator=generator to the call that draws the random "
                           "numbers, so that a seeded generator gives the same mask": again})
    expect_true(not torch.equal(first, other), "dropout(x, p=0.5) with generators seeded 7 and 8",
                "both gave the same mask", "take the random numbers from the generator you are given")
