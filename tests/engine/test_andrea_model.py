"""The engine (andrea_course/engine/model.py): shapes of every module, causality, parameter counts
against COURSE.md, the loss at initialisation, generation with and without the KV cache, the
fused ops against the formulas, the answer key computing what the engine computes, dropout and
weight tying, initialisation and slots by module type. The learner's overlay has its own tests
(test_overlay.py).
"""
import math
import re

import pytest
import torch

from andrea_course import ANDREA, ModelConfig, count_parameters, pieces
from andrea_course.engine import backends, ops
from andrea_course.engine import model as engine
from andrea_course.engine.config import PRESETS
from andrea_course.grading.passing import learner_model
from andrea_course.paths import ROOT

PRESET_NAMES = ["andrea-tiny", "andrea-tiny-modern"]
needs_answer_key = pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a student release)")


def piece(activity, name):
    return pieces.get(activity, name)


def rand_ids(cfg, B, T, seed=0):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", params=PRESET_NAMES)
def tiny(request):
    torch.manual_seed(0)
    return ANDREA(request.param).eval()


# ----------------------------------------------------------------- shapes
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_shapes_of_every_module(name):
    torch.manual_seed(0)
    cfg = ModelConfig.preset(name)
    B, T, D, V, H, G, K, F = 2, 5, cfg.d_model, cfg.vocab_size, cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_ff
    ids = rand_ids(cfg, B, T)
    x = torch.randn(B, T, D)

    emb = piece("embeddings", "Embeddings")(cfg)
    assert emb.token_table.shape == (V, D) and emb.position_table.shape == (cfg.context_length, D)
    torch.nn.init.normal_(emb.token_table), torch.nn.init.normal_(emb.position_table)
    assert emb(ids).shape == (B, T, D)

    head = piece("attention", "AttentionHead")(D, K, bias=cfg.bias)
    assert head.w_q.weight.shape == (K, D)
    assert head(x).shape == (B, T, K)

    mha = piece("multihead", "MultiHeadAttention")(cfg)
    assert mha.qkv.weight.shape == ((H + 2 * G) * K, D) and mha.proj.weight.shape == (D, D)
    assert mha(x).shape == (B, T, D)

    mlp = piece("mlp", "MLP")(cfg)
    assert (mlp.fc.weight.shape, mlp.proj.weight.shape) == ((F, D), (D, F))
    assert mlp(x).shape == (B, T, D)

    glu = piece("modern", "SwiGLU")(cfg)
    assert (glu.w_gate.weight.shape, glu.w_up.weight.shape, glu.w_down.weight.shape) == ((F, D), (F, D), (D, F))
    assert glu(x).shape == (B, T, D)

    for cls in ("Block", "PostNormBlock"):
        assert piece("block", cls)(cfg)(x).shape == (B, T, D), cls

    model = ANDREA(cfg)
    assert len(model.blocks) == cfg.n_layers
    logits, loss = model(ids, rand_ids(cfg, B, T, seed=1))
    assert logits.shape == (B, T, V) and loss.shape == ()


def test_grouped_kv_heads_with_G_below_H():
    cfg = ModelConfig(vocab_size=11, context_length=8, d_model=24, n_layers=1, n_heads=6, n_kv_heads=2, d_ff=48)
    mha = piece("multihead", "MultiHeadAttention")(cfg)
    assert mha.qkv.weight.shape == ((6 + 2 * 2) * 4, 24)
    x = torch.randn(3, 8, 24)
    assert mha(x).shape == (3, 8, 24)
    # G = H with the key/value weights copied per group computes the same thing.
    full = piece("multihead", "MultiHeadAttention")(cfg.replace(n_kv_heads=None))
    H, G, K = 6, 2, 4
    with torch.no_grad():
        wq, wk, wv = mha.qkv.weight.split([H * K, G * K, G * K])
        bq, bk, bv = mha.qkv.bias.split([H * K, G * K, G * K])
        rep = lambda w: w.view(G, K, -1).repeat_interleave(H // G, dim=0).reshape(H * K, -1)
        full.qkv.weight.copy_(torch.cat([wq, rep(wk), rep(wv)]))
        full.qkv.bias.copy_(torch.cat([bq, rep(bk[:, None])[:, 0], rep(bv[:, None])[:, 0]]))
        full.proj.load_state_dict(mha.proj.state_dict())
    torch.testing.assert_close(full(x), mha(x), rtol=1e-5, atol=1e-6)


def test_post_norm_block_ends_on_a_layer_norm():
    cfg = ModelConfig.preset("andrea-tiny")
    y = piece("block", "PostNormBlock")(cfg)(torch.randn(2, 5, cfg.d_model) * 3)
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)


# ----------------------------------------------------------------- causality
def test_later_tokens_never_change_earlier_logits(tiny):
    ids = rand_ids(tiny.cfg, 2, 12)
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % tiny.cfg.vocab_size
    with torch.no_grad():
        a, b = tiny(ids), tiny(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], rtol=0, atol=1e-6)
    assert (a[:, 7:] - b[:, 7:]).abs().amax(-1).min() > 1e-3      # every later position does change


# ----------------------------------------------------------------- parameter counts
COURSE_FIGURES = dict(token_table=6_488_832, position_table=786_432, block=7_087_872,
                      blocks=85_054_464, total=98_820_096)


def test_count_parameters_reproduces_course_figures():
    c = count_parameters("andrea-120m")
    assert {k: c[k] for k in COURSE_FIGURES} == COURSE_FIGURES
    assert c["token_table"] + c["position_table"] == 7_275_264                  # embeddings
    nobias = count_parameters(ModelConfig.preset("andrea-120m", bias=False))
    assert nobias["mlp"] == 4_718_592 and 12 * nobias["mlp"] == 56_623_104      # MLP without biases
    assert count_parameters(ModelConfig.preset("andrea-120m", tie_embeddings=True))["total"] == 92_331_264
    # llm.c's GPT-2 124M: the same trunk, V = 50,257, T = 1,024, tied head.
    gpt2 = ModelConfig(vocab_size=50257, tie_embeddings=True)
    assert count_parameters(gpt2)["total"] == 124_439_808


ODD_CONFIGS = {
    "no-bias": dict(vocab_size=101, context_length=9, d_model=48, n_layers=3, n_heads=6, d_ff=100, bias=False),
    "gqa": dict(vocab_size=101, context_length=9, d_model=48, n_layers=2, n_heads=6, n_kv_heads=3, d_ff=96),
    "mqa-tied": dict(vocab_size=101, context_length=9, d_model=48, n_layers=2, n_heads=6, n_kv_heads=1,
                     d_ff=96, tie_embeddings=True),
    "swiglu-bias": dict(vocab_size=101, context_length=9, d_model=48, n_layers=2, n_heads=4, d_ff=128,
                        mlp="swiglu"),
    "rms-swiglu-nobias": dict(vocab_size=101, context_length=9, d_model=48, n_layers=2, n_heads=4, d_ff=128,
                              mlp="swiglu", norm="rmsnorm", bias=False, n_kv_heads=2),
    "rms-with-bias": dict(vocab_size=101, context_length=9, d_model=48, n_layers=1, n_heads=4, d_ff=64,
                          norm="rmsnorm"),
}


@pytest.mark.parametrize("cfg", [ModelConfig.preset(n) for n in PRESETS] + [ModelConfig(**kw) for kw in ODD_CONFIGS.values()],
                         ids=list(PRESETS) + list(ODD_CONFIGS))
def test_config_formula_equals_tensor_count(cfg):
    with torch.device("meta"):                    # no memory, no init cost, even for 120M
        model = ANDREA(cfg)
    assert count_parameters(model) == count_parameters(cfg)
    assert count_parameters(cfg)["total"] == sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------- loss at init
def test_loss_at_init_is_ln_V_plus_half():
    """With std 1/sqrt(D) the head's logits are N(0, 1) given the final LayerNorm's output
    (|x|^2 = D exactly), so E[loss] = E[logsumexp z] - E[z_target] ≈ ln(V·E[e^z]) = ln V + 1/2.
    Spread of the mean over N tokens: the target logit contributes 1/sqrt(N); logsumexp over
    V draws has relative spread sqrt((e^2 - e)/V)/e^(1/2). Allow four of each."""
    torch.manual_seed(0)
    cfg = ModelConfig.preset("andrea-tiny")
    model = ANDREA(cfg).eval()
    B, T, V = 8, 128, cfg.vocab_size
    with torch.no_grad():
        logits, loss = model(rand_ids(cfg, B, T), rand_ids(cfg, B, T, seed=1))
    tol = 4 / math.sqrt(B * T) + 4 * math.sqrt((math.e ** 2 - math.e) / V) / math.exp(0.5)
    assert abs(loss.item() - (math.log(V) + 0.5)) < tol, (loss.item(), math.log(V) + 0.5, tol)
    assert abs(logits.var().item() - 1.0) < 0.05
    assert abs(loss.item() - math.log(V)) > 0.5 - tol       # the +1/2 is really there


# ----------------------------------------------------------------- generation and the cache
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_cached_forward_equals_full_forward(name):
    torch.manual_seed(0)
    model = ANDREA(ModelConfig.preset(name, context_length=16), dropout=0.0).eval()
    ids = rand_ids(model.cfg, 2, 16)
    with torch.no_grad():
        full = model(ids)
        caches = model.new_caches(2)
        parts = [model(ids[:, :5], caches=caches), model(ids[:, 5:6], caches=caches), model(ids[:, 6:], caches=caches)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=1.0), dict(temperature=0.8, top_k=5)],
                         ids=["greedy", "sampled", "top-k"])
def test_generation_with_cache_equals_without(name, sampling):
    torch.manual_seed(0)
    T = 8
    model = ANDREA(ModelConfig.preset(name, context_length=T), dropout=0.0).eval()
    prompt = rand_ids(model.cfg, 2, 3)
    n = 2 * T                                        # past the context length: the window slides
    out = {}
    for use_cache in (True, False):
        g = torch.Generator().manual_seed(123)
        out[use_cache] = model.generate(prompt, n, generator=g, use_cache=use_cache, **sampling)
    assert out[True].shape == (2, 3 + n)
    assert torch.equal(out[True][:, :3], prompt)
    assert torch.equal(out[True], out[False])
    if sampling["temperature"] > 0:                 # another seed gives another sample
        other = model.generate(prompt, n, generator=torch.Generator().manual_seed(7), **sampling)
        assert not torch.equal(other, out[True])


# ----------------------------------------------------------------- fused ops against the formulas
def _attention_formula(q, k, v, causal):
    T, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.arange(S)[None, :] <= torch.arange(T)[:, None] + (S - T)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("T, S", [(6, 6), (1, 6), (3, 7)])
def test_fused_attention_equals_the_formula(T, S):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (T, S, S))
    for causal in (True, False):
        torch.testing.assert_close(ops.attention(q, k, v, causal), _attention_formula(q, k, v, causal),
                                   rtol=1e-5, atol=1e-6)


def test_fused_norms_and_activations_equal_the_formulas():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 32, generator=g, dtype=torch.float64) * 3 + 1
    w, b = torch.randn(32, generator=g, dtype=torch.float64), torch.randn(32, generator=g, dtype=torch.float64)
    close = lambda a, e: torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    close(ops.layer_norm(x, w, b, 1e-5), (x - mean) / torch.sqrt(var + 1e-5) * w + b)
    close(ops.layer_norm(x, w, None, 1e-5), (x - mean) / torch.sqrt(var + 1e-5) * w)
    close(ops.rms_norm(x, w, 1e-6), x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
    close(ops.gelu(x), 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))
    close(ops.swiglu(x, x.flip(-1)), x * torch.sigmoid(x) * x.flip(-1))
    xb, wb = x.float().bfloat16(), w.float().bfloat16()
    fused = ops.rms_norm(xb, wb, 1e-5)
    assert fused.dtype == torch.bfloat16
    exact = ops.rms_norm(xb.double(), wb.double(), 1e-5)
    torch.testing.assert_close(fused.double(), exact, rtol=8e-3, atol=8e-3)   # one bf16 rounding: computed in fp32


@needs_answer_key
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_the_answer_key_computes_what_the_engine_computes(name):
    """ANDREA built from solutions/ (every piece the answer key's, its formulas instead of the
    fused ops) gives the engine's logits and loss."""
    torch.manual_seed(0)
    engine = ANDREA(name).eval()
    key = learner_model(name, "solutions").eval()
    assert set(key.pieces.values()) == {"yours"}, key.pieces
    key.load_state_dict(engine.state_dict())
    ids, targets = rand_ids(engine.cfg, 2, 32), rand_ids(engine.cfg, 2, 32, seed=1)
    with torch.no_grad():
        (a, la), (b, lb) = engine(ids, targets), key(ids, targets)
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lb, la, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- run-time switches, tying
def test_dropout_is_a_run_time_switch():
    torch.manual_seed(0)
    cfg = ModelConfig.preset("andrea-tiny", n_layers=2)
    model = ANDREA(cfg, dropout=0.2)
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.2}
    ids = rand_ids(cfg, 2, 16)
    model.train()
    a, b = model(ids), model(ids)
    assert not torch.allclose(a, b)
    model.eval()
    with torch.no_grad():
        c, d = model(ids), model(ids)
        plain = ANDREA(cfg).eval()
        plain.load_state_dict(model.state_dict())
        e = plain(ids)
    assert torch.equal(c, d)
    torch.testing.assert_close(c, e, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got 1.0"):
        ANDREA(cfg, dropout=1.0)


def test_init_std_and_kernels_are_run_time_switches():
    cfg = ModelConfig.preset("andrea-tiny", n_layers=1)
    torch.manual_seed(0)
    wide = ANDREA(cfg, init_std=0.5)
    assert 0.45 < wide.embed.token_table.std().item() < 0.55
    assert abs(ANDREA(cfg).embed.token_table.std().item() - 1 / math.sqrt(cfg.d_model)) < 0.01
    with pytest.raises(ValueError, match=r"kernels must be one of \('torch', 'triton'\), got 'cuda'"):
        ANDREA(cfg, kernels="cuda")


# ----------------------------------------------------------------- initialisation and slots, by module type
def test_parameters_are_initialised_by_module_type():
    """Every Linear's weight is drawn with std 1/sqrt(D), a residual projection's (marked by the
    engine: W_O, the MLP's last layer) with std 1/sqrt(D)/sqrt(2L); biases 0, norm gains 1."""
    torch.manual_seed(0)
    for name in PRESET_NAMES:
        cfg = ModelConfig.preset(name, n_layers=4, vocab_size=4096)
        model = ANDREA(cfg)
        std = 1 / math.sqrt(cfg.d_model)
        residual = [m for m in model.modules() if engine.is_residual(m)]
        assert len(residual) == 2 * cfg.n_layers
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                want = std / math.sqrt(2 * cfg.n_layers) if engine.is_residual(m) else std
                assert abs(m.weight.std().item() - want) < 0.1 * want, m
                assert m.bias is None or not m.bias.any()
            if isinstance(m, engine.Norm):
                assert torch.equal(m.weight, torch.ones_like(m.weight))
                assert getattr(m, "bias", None) is None or not m.bias.any()


class ScaleNorm(engine.Norm):
    """A normalisation the engine does not have (one gain per feature, no centring, no
    statistics kept): the kind of module a new model option adds."""

    def __init__(self, d_model: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(d_model))      # left uninitialised on purpose
        self.bias = torch.nn.Parameter(torch.empty(d_model))

    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-5) * x.shape[-1] ** 0.5 * self.weight + self.bias


def test_a_new_normalisation_starts_with_gains_1_untouched(monkeypatch):
    """A model option that adds a normalisation (here every norm, and a qk-norm inside attention)
    gets its gains initialised to 1 and its shift to 0 without a line of reset_parameters changed."""
    monkeypatch.setattr(engine, "make_norm", lambda cfg: ScaleNorm(cfg.d_model))
    original = engine.MultiHeadAttention.__init__

    def with_qk_norm(self, cfg):
        original(self, cfg)
        self.q_norm = torch.nn.RMSNorm(cfg.d_head)                   # PyTorch's own counts as a norm too
        torch.nn.init.zeros_(self.q_norm.weight)
    monkeypatch.setattr(engine.MultiHeadAttention, "__init__", with_qk_norm)
    model = ANDREA(ModelConfig.preset("andrea-tiny", n_layers=2))
    norms = [m for m in model.modules() if isinstance(m, (ScaleNorm, torch.nn.RMSNorm))]
    assert len(norms) == 2 * 2 + 1 + 2
    for m in norms:
        assert torch.equal(m.weight, torch.ones_like(m.weight)), m
        assert getattr(m, "bias", None) is None or not m.bias.any()


def test_slots_are_filled_by_module_type_and_reported():
    """backends.apply sets a slot on every module whose type carries it (a subclass carries its
    base's), never on another module with an attribute of that name, and says who runs each."""
    cfg = ModelConfig.preset("andrea-tiny", n_layers=1)
    model = ANDREA(cfg)
    stranger = torch.nn.Module()
    stranger.gelu = "not a slot"                                   # an attribute named like a slot
    model.extra = stranger
    class WiderMLP(engine.MLP):
        pass
    model.blocks[0].mlp.__class__ = WiderMLP
    mine = lambda x: ops.gelu(x)                                   # noqa: E731
    report = backends.apply(model, "torch", engine.MODULE_SLOTS, {"gelu": (mine, "yours")})
    assert model.blocks[0].mlp.gelu is mine and stranger.gelu == "not a slot"
    assert report == {"attention": "engine", "layer_norm": "engine", "gelu": "yours", "cross_entropy": "engine"}
    assert model.slots == {"attention": "engine", "layer_norm": "engine", "gelu": "engine", "cross_entropy": "engine"}
    modern = ANDREA(ModelConfig.preset("andrea-tiny-modern", position="rope", n_layers=1))
    assert modern.slots == {"attention": "engine", "rms_norm": "engine", "swiglu": "engine", "cross_entropy": "engine",
                            "apply_rope": "engine", "rope_attention": "engine", "rope_frequencies": "engine"}
    with pytest.raises(ValueError, match="who runs a slot must be one of"):
        backends.apply(model, "torch", engine.MODULE_SLOTS, {"gelu": (mine, "mine")})


def test_tied_weights_are_one_tensor():
    torch.manual_seed(0)
    cfg = ModelConfig.preset("andrea-tiny", tie_embeddings=True, n_layers=1)
    model = ANDREA(cfg)
    assert model.head is None
    assert model.output_weight() is model.embed.token_table
    assert sum(p.numel() for p in model.parameters()) == count_parameters(cfg)["total"]
    ids = rand_ids(cfg, 1, 4)
    targets = rand_ids(cfg, 1, 4, seed=1)
    model(ids, targets)[1].backward()
    grad = model.embed.token_table.grad
    unseen = sorted(set(range(cfg.vocab_size)) - set(ids.flatten().tolist()))[:3]
    assert grad[unseen].abs().sum() > 0          # rows never read as input still learn through the head


def test_prompts_of_different_lengths_generate_as_each_alone():
    """A batch of prompts of different lengths: every row equals generating that prompt alone
    (no padding is attended to), greedy, past the context length too."""
    torch.manual_seed(0)
    model = ANDREA(ModelConfig.preset("andrea-tiny", context_length=8, n_layers=2)).eval()
    prompts = [[5, 9, 2], [7], [1, 2, 3, 4, 5, 6], [3, 3, 3]]
    together = model.generate(prompts, 10, temperature=0)
    assert isinstance(together, list) and len(together) == len(prompts)
    for prompt, row in zip(prompts, together):
        alone = model.generate(torch.tensor([prompt]), 10, temperature=0)[0]
        assert torch.equal(row, alone), (prompt, row.tolist(), alone.tolist())
    with pytest.raises(ValueError, match="at least one token"):
        model.generate([[1, 2], []], 3)


# ----------------------------------------------------------------- RoPE (cfg.position = "rope")
ROPE = ModelConfig.preset("andrea-tiny-modern", position="rope", n_layers=2, context_length=32)


@pytest.fixture(scope="module")
def rope_model():
    torch.manual_seed(0)
    return ANDREA(ROPE).eval()


def test_rope_has_no_position_table_and_counts_follow():
    learned = ROPE.replace(position="learned")
    with torch.device("meta"):
        model = ANDREA(ROPE)
    assert model.embed.position_table is None and "embed.position_table" not in model.state_dict()
    counts, before = count_parameters(ROPE), count_parameters(learned)
    assert counts["position_table"] == 0
    assert before["total"] - counts["total"] == ROPE.context_length * ROPE.d_model


def test_rope_turns_q_and_k_but_not_v():
    """Scores depend on the distance between positions only: the same token repeated gives the
    same scores on every diagonal; the values are not turned (a single position is unchanged)."""
    torch.manual_seed(0)
    attn = ANDREA(ROPE).blocks[0].attn.double()
    x = torch.randn(1, 1, ROPE.d_model, dtype=torch.float64).expand(1, 6, -1)
    seen = {}
    attn.attention = lambda q, k, v: seen.update(q=q, k=k, v=v) or ops.attention(q, k, v)
    attn(x)
    scores = seen["q"] @ seen["k"].transpose(-1, -2)                           # (B, H, T, T), k repeated to H
    for d in range(6):
        diag = scores.diagonal(-d, dim1=-2, dim2=-1)
        assert torch.allclose(diag, diag[..., :1].expand_as(diag), atol=1e-10), d
    # v is exactly the projection's values: RoPE never touches them. Compared with the same
    # projection of the same input (bit for bit by construction), not position 0 with position 5:
    # a matrix product may round its last rows differently from its first on some processors
    # (8.9e-16 apart in float64 on an AMD EPYC), so equal rows in need not give equal rows out.
    H, G, K = attn.n_heads, attn.n_kv_heads, attn.d_head
    v = attn.qkv(x).split([H * K, G * K, G * K], dim=-1)[2].view(1, 6, G, K).transpose(1, 2)
    assert torch.equal(seen["v"], v.repeat_interleave(H // G, dim=1))
    assert not torch.allclose(seen["k"][:, :, 0], seen["k"][:, :, 5])           # k: turned


def test_rope_later_tokens_never_change_earlier_logits(rope_model):
    ids = rand_ids(ROPE, 2, 12)
    other = ids.clone()
    other[:, 7:] = rand_ids(ROPE, 2, 5, seed=1)
    with torch.no_grad():
        assert torch.allclose(rope_model(ids)[:, :7], rope_model(other)[:, :7], atol=1e-6)
        assert not torch.allclose(rope_model(ids)[:, 7:], rope_model(other)[:, 7:], atol=1e-3)


def test_rope_cached_forward_equals_full_forward(rope_model):
    ids = rand_ids(ROPE, 2, 9)
    with torch.no_grad():
        full = rope_model(ids)
        caches = rope_model.new_caches(2)
        parts = [rope_model(ids[:, a:b], caches=caches) for a, b in ((0, 4), (4, 5), (5, 9))]
    assert torch.allclose(torch.cat(parts, dim=1), full, atol=1e-5)


@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=1.0, top_k=20)])
def test_rope_generation_with_cache_equals_recomputing(rope_model, sampling):
    prompt = rand_ids(ROPE, 2, 5)
    run = lambda cache: rope_model.generate(prompt, 40, generator=torch.Generator().manual_seed(3),
                                            use_cache=cache, **sampling)    # 45 > T = 32: the window slides
    assert torch.equal(run(True), run(False))


def test_rope_config_rules_and_gpt2_refusal():
    from andrea_course.engine.config import ConfigError
    from andrea_course.engine.hf import check_gpt2_compatible
    with pytest.raises(ConfigError, match="position must be one of"):
        ModelConfig(position="sinusoidal")
    with pytest.raises(ConfigError, match="must be even"):
        ModelConfig(d_model=60, n_heads=4, position="rope")                  # K = 15
    with pytest.raises(ConfigError, match="does nothing with position='learned'"):
        ModelConfig(rope_theta=500000.0)
    with pytest.raises(ConfigError, match="rope_theta must be"):
        ModelConfig(position="rope", rope_theta=0)
    assert ModelConfig(position="rope", rope_theta=500000.0).rope_theta == 500000.0
    with pytest.raises(ValueError, match="position='rope'"):
        check_gpt2_compatible(ModelConfig(position="rope"))
    assert ModelConfig.from_dict(ModelConfig().to_dict()) == ModelConfig()
    old = {k: v for k, v in ModelConfig().to_dict().items() if k not in ("position", "rope_theta")}
    assert ModelConfig.from_dict(old) == ModelConfig()                        # files written before RoPE


def test_rope_matches_the_complex_number_form():
    """apply_rope turns the pair (x_i, x_{i+K/2}) as the complex number x_i + i·x_{i+K/2} times
    e^(i·t·theta^(-2i/K))."""
    from andrea_course.engine.model import apply_rope, rope_frequencies
    K, T = 8, 6
    cos, sin = rope_frequencies(K, T, 10000.0)
    x = torch.randn(2, 3, T, K)
    z = torch.complex(x[..., :K // 2], x[..., K // 2:]) * torch.complex(cos, sin)
    assert torch.allclose(apply_rope(x, cos, sin), torch.cat([z.real, z.imag], -1), atol=1e-6)
    angle = torch.atan2(sin, cos)
    assert torch.allclose(angle[1], torch.tensor([10000.0 ** (-2 * i / K) for i in range(K // 2)]), atol=1e-6)


@needs_answer_key
def test_a_learners_model_with_rope_keeps_the_engines_rotary_attention():
    """The learner's Embeddings and MultiHeadAttention add learned positions: with RoPE the
    overlay keeps the engine's and says why; the model computes what the engine computes."""
    torch.manual_seed(0)
    engine = ANDREA(ROPE).eval()
    mine = learner_model(ROPE, "solutions").eval()
    for exercise in ("embeddings.Embeddings", "multihead.MultiHeadAttention"):
        assert mine.pieces[exercise].startswith("engine: position='rope'"), mine.pieces[exercise]
    mine.load_state_dict(engine.state_dict())
    ids = rand_ids(ROPE, 2, 7)
    with torch.no_grad():
        assert torch.allclose(mine(ids), engine(ids), atol=1e-5)


@pytest.mark.parametrize("name", PRESET_NAMES + ["andrea-tiny-rope"])
def test_the_training_forward_compiles_to_one_graph(name):
    """torch.compile sees the whole training forward (loss included) as one graph: no break."""
    cfg = (ModelConfig.preset("andrea-tiny-modern", position="rope") if name == "andrea-tiny-rope"
           else ModelConfig.preset(name)).replace(n_layers=2, context_length=32)
    model = ANDREA(cfg).train()
    torch._dynamo.reset()
    ids = rand_ids(cfg, 2, 32)
    explained = torch._dynamo.explain(model)(ids, rand_ids(cfg, 2, 32, seed=1))
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
