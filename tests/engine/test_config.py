"""ModelConfig: presets, overrides, derived sizes, and configs refused with a message that
names the field and the rule."""
import dataclasses
import math

import pytest

from andrea_course import ConfigError, ModelConfig
from andrea_course.engine.config import PRESETS


def test_andrea_120m_is_the_course_table():
    cfg = ModelConfig.preset("andrea-120m")
    assert (cfg.vocab_size, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_head, cfg.context_length, cfg.d_ff) \
        == (8449, 768, 12, 12, 64, 1024, 3072)
    assert cfg.d_ff == 4 * cfg.d_model
    assert cfg.kv_heads == cfg.n_heads and not cfg.tie_embeddings and cfg.bias
    assert (cfg.norm, cfg.mlp) == ("layernorm", "gelu")
    assert ModelConfig() == cfg                     # the defaults are ANDREA-120M


def test_modern_presets_switch_every_modern_option():
    for name in ("andrea-120m-modern", "andrea-tiny-modern"):
        cfg = ModelConfig.preset(name)
        assert (cfg.norm, cfg.mlp, cfg.tie_embeddings, cfg.bias) == ("rmsnorm", "swiglu", True, False), name
        assert cfg.kv_heads < cfg.n_heads and cfg.n_heads % cfg.kv_heads == 0, name
    # SwiGLU's three matrices at the classic MLP's two-matrix budget: F = 8D/3 rounded up to 256.
    assert ModelConfig.preset("andrea-120m-modern").d_ff == 2048 == 256 * math.ceil(8 * 768 / 3 / 256)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_and_round_trips(name):
    cfg = ModelConfig.preset(name)
    assert cfg.d_head * cfg.n_heads == cfg.d_model
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_overrides_and_replace():
    cfg = ModelConfig.preset("andrea-tiny", n_layers=2)
    assert (cfg.n_layers, cfg.d_model) == (2, 128)
    assert ModelConfig.preset("andrea-tiny").n_layers == 4        # presets are not mutated
    other = cfg.replace(n_kv_heads=2)
    assert other.kv_heads == 2 and cfg.kv_heads == 4
    with pytest.raises(ConfigError, match=r"d_model \(D=130\) must be divisible by n_heads \(H=4\)"):
        cfg.replace(d_model=130)                                   # replace validates too


@pytest.mark.parametrize("change, message", [
    (dict(d_model=100, n_heads=12), r"d_model \(D=100\) must be divisible by n_heads \(H=12\)"),
    (dict(n_kv_heads=5), r"n_heads \(H=12\) must be divisible by n_kv_heads \(G=5\)"),
    (dict(n_kv_heads=24), r"n_heads \(H=12\) must be divisible by n_kv_heads \(G=24\)"),
    (dict(n_kv_heads=0), r"n_kv_heads must be a positive integer or None, got 0"),
    (dict(n_kv_heads=True), r"n_kv_heads must be a positive integer or None, got True"),
    (dict(vocab_size=0), r"vocab_size must be a positive integer, got 0"),
    (dict(context_length=-1), r"context_length must be a positive integer, got -1"),
    (dict(d_model=768.0), r"d_model must be a positive integer, got 768.0"),
    (dict(n_layers=True), r"n_layers must be a positive integer, got True"),
    (dict(n_heads=0), r"n_heads must be a positive integer, got 0"),
    (dict(d_ff=0), r"d_ff must be a positive integer, got 0"),
    (dict(norm="batchnorm"), r"norm must be one of \('layernorm', 'rmsnorm'\), got 'batchnorm'"),
    (dict(mlp="relu"), r"mlp must be one of \('gelu', 'swiglu'\), got 'relu'"),
    (dict(norm_eps=0.0), r"norm_eps must be positive, got 0.0"),
])
def test_invalid_config_is_refused_naming_field_and_rule(change, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**change)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown preset 'andrea-7b'; known presets: andrea-120m, andrea-tiny"):
        ModelConfig.preset("andrea-7b")


def test_from_dict_refuses_unknown_keys():
    d = ModelConfig.preset("andrea-tiny").to_dict()
    d["n_embd"] = 128
    with pytest.raises(ConfigError, match=r"unknown config fields \['n_embd'\]; known: .*'d_model'"):
        ModelConfig.from_dict(d)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_the_same_model_is_an_equal_config():
    """ModelConfig holds only what the weights fix; run-time switches are not in it, and a dict
    written by an older file that still carries them reads as the same model."""
    cfg = ModelConfig.preset("andrea-tiny")
    assert not {"kernels", "dropout", "init_std"} & set(cfg.to_dict())
    old = {**cfg.to_dict(), "kernels": "triton", "dropout": 0.1, "init_std": None}
    assert ModelConfig.from_dict(old) == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64
