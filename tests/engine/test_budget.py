"""The parameter budget of the modern block: SwiGLU's width F = 8D/3.

The classic MLP has two matrices D x 4D: 8D² weights. SwiGLU has three, D x F each: 3DF.
Equal budgets give F = 8D/3, rounded up to a multiple of 256 (D = 4096: 11,008; D = 768: 2,048).
Keeping F = 4D with three matrices costs 1.5x the parameters.
"""
import math

import pytest

from andrea_course import ModelConfig, count_parameters
from andrea_course.engine.config import PRESETS
from andrea_course.grading import expect_equal, expect_true, graded
from andrea_course import pieces

swiglu_hidden_dim = pieces.module("modern").swiglu_hidden_dim


# ----------------------------------------------------------------------------- the presets
# The rounding quantum each preset uses. 256 is the usual one (GPU tiles; LLaMA's multiple_of);
# at the tiny preset's D = 128 it would give F = 512 = 4D, i.e. 1.5x the budget, so it rounds to 128.
QUANTUM = {"andrea-120m-modern": 256, "andrea-tiny-modern": 128}


def test_every_swiglu_preset_has_a_quantum():
    swiglu_presets = {name for name in PRESETS if ModelConfig.preset(name).mlp == "swiglu"}
    assert swiglu_presets == set(QUANTUM), "a SwiGLU preset was added or removed: list its rounding here"


@pytest.mark.parametrize("name", sorted(QUANTUM))
def test_preset_d_ff_is_swiglu_hidden_dim(name):
    """The F typed into config.py is what the reference computes, and keeps the classic budget."""
    cfg = ModelConfig.preset(name)
    m = QUANTUM[name]
    assert cfg.d_ff == swiglu_hidden_dim(cfg.d_model, m), (name, cfg.d_ff, swiglu_hidden_dim(cfg.d_model, m))
    classic = count_parameters(cfg.replace(mlp="gelu", d_ff=4 * cfg.d_model))["mlp"]
    modern = count_parameters(cfg)["mlp"]
    assert 1 <= modern / classic < 1 + 3 * m / (8 * cfg.d_model), (name, modern, classic)
    # Had F stayed 4D, the three matrices would hold 1.5x the classic MLP's weights.
    assert count_parameters(cfg.replace(d_ff=4 * cfg.d_model))["mlp"] == 3 * classic // 2


def test_andrea_120m_modern_mlp_budget_is_exactly_the_classic_one():
    # D = 768: 8D/3 = 2,048 is already a multiple of 256, so the budgets are equal to the weight
    # (without biases: the modern preset has none).
    modern = count_parameters("andrea-120m-modern")["mlp"]
    classic = count_parameters(ModelConfig.preset("andrea-120m", bias=False))["mlp"]
    assert modern == classic == 3 * 768 * 2048 == 2 * 768 * 3072 == 4_718_592
    assert math.isclose(8 * 768 / 3, 2048)
