"""andrea_course.hf: ANDREA <-> transformers GPT2LMHeadModel on small, locally built models
(nothing is downloaded)."""
import builtins
import importlib.util
import math

import pytest
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course import hf as hfmod

# Imported by the tests that need it, so that collecting this file stays cheap.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed (the `hf` extra)")


@pytest.fixture(scope="module")
def transformers():
    import transformers
    return transformers

SMALL = dict(vocab_size=101, context_length=16, d_model=32, n_layers=2, n_heads=4, d_ff=96, norm_eps=1e-6)


def small(**kw):
    torch.manual_seed(0)
    model = ANDREA(ModelConfig(**{**SMALL, **kw})).eval()
    with torch.no_grad():          # give every norm gain and bias a non-trivial value too
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model


def ids(cfg, B=2, T=16):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_round_trip_gives_equal_logits(tied, transformers):
    model = small(tie_embeddings=tied)
    hf = hfmod.to_hf(model)
    assert isinstance(hf, transformers.GPT2LMHeadModel) and not hf.training
    c = hf.config
    assert (c.activation_function, c.layer_norm_epsilon, c.n_inner, c.tie_word_embeddings) == ("gelu_new", 1e-6, 96, tied)
    assert (hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()) == tied
    x = ids(model.cfg)
    with torch.no_grad():
        ours = model(x)
        theirs = hf(x).logits
        torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
        back = hfmod.from_hf(hf).eval()
        assert back.cfg == model.cfg
        torch.testing.assert_close(back(x), ours, rtol=0, atol=1e-5)
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), back.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2), n1


def test_to_hf_copies_weights():
    model = small()
    hf = hfmod.to_hf(model)
    with torch.no_grad():
        hf.transformer.wte.weight.zero_()
    assert model.embed.token_table.abs().sum() > 0


def test_same_loss_on_next_token_targets():
    model = small()
    hf = hfmod.to_hf(model)
    x = ids(model.cfg)
    with torch.no_grad():
        _, ours = model(x[:, :-1], x[:, 1:])
        theirs = hf(x, labels=x).loss             # GPT-2 shifts the labels itself
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert abs(ours.item() - math.log(101)) < 2


@pytest.mark.parametrize("kw, reason", [
    (dict(norm="rmsnorm"), r"norm='rmsnorm' \(GPT-2 uses LayerNorm\)"),
    (dict(mlp="swiglu"), r"mlp='swiglu' \(GPT-2 uses a GELU MLP\)"),
    (dict(n_kv_heads=2), r"n_kv_heads=2 < n_heads=4 \(GPT-2 has no grouped key/value heads\)"),
    (dict(bias=False), r"bias=False \(GPT-2 has biases"),
])
def test_configs_gpt2_cannot_express_are_refused(kw, reason):
    model = ANDREA(ModelConfig(**{**SMALL, **kw}))
    with pytest.raises(ValueError, match=r"GPT-2 cannot express this ANDREA config: .*" + reason):
        hfmod.to_hf(model)


def test_modern_preset_lists_every_reason():
    with pytest.raises(ValueError) as e:
        hfmod.check_gpt2_compatible(ModelConfig.preset("andrea-tiny-modern"))
    assert all(w in str(e.value) for w in ("norm=", "mlp=", "n_kv_heads=", "bias=False"))


def test_gpt2_config_andrea_cannot_express_is_refused(transformers):
    cfg = transformers.GPT2Config(vocab_size=50, n_positions=8, n_embd=16, n_layer=1, n_head=2,
                                  activation_function="relu", bos_token_id=49, eos_token_id=49)
    with pytest.raises(ValueError, match=r"ANDREA cannot express this GPT-2 config: activation_function='relu'"):
        hfmod.from_hf(transformers.GPT2LMHeadModel(cfg))


def test_missing_transformers_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    with pytest.raises(ImportError, match=r"needs the transformers package: install the `hf` extra"):
        hfmod.to_hf(small())


def test_gpt2_weights_in_a_learners_model_give_transformers_logits(transformers):
    """A GPT2LMHeadModel built here (random, GPT-2's shape in small) loaded into a model made of
    a learner's pieces (the answer key's, every piece accepted): the logits are transformers'
    own within 1e-4; a model of another config is refused with what differs."""
    from andrea_course import overlay

    hf_cfg = transformers.GPT2Config(vocab_size=101, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, bos_token_id=100, eos_token_id=100)
    torch.manual_seed(3)
    gpt2 = transformers.GPT2LMHeadModel(hf_cfg).eval()
    cfg = hfmod.config_from_hf(hf_cfg)
    mine = overlay.build(cfg, "solutions", accept=set(overlay.model_pieces(cfg))).eval()
    assert any(verdict == "yours" for verdict in mine.pieces.values()), mine.pieces
    hfmod.load_gpt2(mine, gpt2)
    x = ids(cfg)
    with torch.no_grad():
        ours, theirs = mine(x), gpt2(x).logits
    ours = ours[0] if isinstance(ours, tuple) else ours
    assert (ours - theirs).abs().max().item() < 1e-4
    other = ANDREA(ModelConfig(**{**SMALL, "n_layers": 1}))
    with pytest.raises(ValueError, match=r"not the GPT-2 model's: n_layers=1 \(GPT-2's: 2\)"):
        hfmod.load_gpt2(other, gpt2)
