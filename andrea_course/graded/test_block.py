"""Graded tests, activity 7 · The transformer block: LayerNorm from its formula, the pre-norm
block x = x + Attn(LN(x)); x = x + MLP(LN(x)), and the 2017 post-norm block."""
import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import expect_close, expect_runs, expect_true, graded
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


# ----- LayerNorm: keepdim (issue 15) -----

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
