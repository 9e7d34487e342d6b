"""andrea_course.engine.hf: ANDREA <-> transformers GPT2LMHeadModel on small, locally built models
(nothing is downloaded)."""
import builtins
import importlib.util
import math

import pytest
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course.engine import hf as hfmod

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


# ----- andrea-sample --hf: a GPT-2 folder save_pretrained wrote, in the engine's code and in yours -----
@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory, transformers):
    """A small random GPT-2 with a byte-level BPE tokenizer of its own, as save_pretrained writes it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the cat sat on the mat and the dog ran home"] * 20,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(hf_tok), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                  eos_token_id=hf_tok.eos_token_id, bos_token_id=hf_tok.eos_token_id)
    out = tmp_path_factory.mktemp("gpt2")
    transformers.GPT2LMHeadModel(cfg).save_pretrained(out)
    hf_tok.save_pretrained(out)
    return out


def _sample(capsys, *args):
    from andrea_course.capstone.sample import main
    code = main(["--max-new-tokens", "6", "--seed", "3", "--prompt", "the cat", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow(seconds=20)
def test_sample_hf_runs_gpt2_in_the_engine_and_in_your_pieces(gpt2_folder, capsys):
    code, engine_text, err = _sample(capsys, "--hf", gpt2_folder)
    assert code == 0 and "GPT-2's weights in the engine's code" in err, err
    code, yours_text, err = _sample(capsys, "--hf", gpt2_folder, "--impl", "solutions")
    assert code == 0, err
    assert "GPT-2's weights in your code" in err and "pieces yours" in err and "the engine's:" not in err, err
    assert yours_text == engine_text and yours_text.startswith("the cat") and len(yours_text) > len("the cat\n")


@pytest.mark.slow(seconds=20)
def test_sample_hf_with_untouched_exercises_says_the_engine_runs_and_why(gpt2_folder, capsys):
    code, _, err = _sample(capsys, "--hf", gpt2_folder, "--impl", "exercises")
    assert code == 0, err
    assert "0 of its" in err and "not written yet" in err, err


@pytest.mark.slow(seconds=8)
def test_sample_hf_without_the_internet_is_one_line(tmp_path, transformers):
    """The hub path up to the download: offline (read when huggingface_hub is imported, so in a
    new process) and with an empty cache, one line and exit 1."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "andrea_course.capstone.sample", "--hf", "gpt2",
                          "--max-new-tokens", "3"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--hf gpt2: no GPT-2 model found" in lines[0] and "needs the internet" in lines[0], lines


@pytest.mark.parametrize("args, says", [
    (["--ckpt", "x", "--impl", "solutions"], "--impl goes with --hf"),
    (["--hf", "gpt2", "--export-hf", "out"], "--export-hf writes ANDREA's own models"),
    (["--hf", "gpt2", "--tokenizer", "t.json"], "a GPT-2 model (--hf) brings its tokenizer"),
    (["--hf", "gpt2", "--impl", "no/such/folder"], "--impl: 'no/such/folder' is neither"),
])
def test_sample_hf_refuses_what_does_not_go_together(args, says, capsys):
    """Refused before anything is loaded or downloaded."""
    code, out, err = _sample(capsys, *args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (code, err)
