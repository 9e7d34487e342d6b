"""The parameter budget of the modern block: SwiGLU's width F = 8D/3.

The classic MLP has two matrices D x 4D: 8D² weights. SwiGLU has three, D x F each: 3DF.
Equal budgets give F = 8D/3, rounded up to a multiple of 256 (D = 4096: 11,008; D = 768: 2,048).
Keeping F = 4D with three matrices costs 1.5x the parameters.
"""
import math

import pytest

from andrea_course import ModelConfig, count_parameters
from andrea_course.config import PRESETS
from andrea_course.grading import expect_equal, expect_true, graded
from andrea_course import pieces

swiglu_hidden_dim = pieces.module("modern").swiglu_hidden_dim


def _round_up(n_num: int, n_den: int, multiple: int) -> int:
    """ceil(n_num / n_den) rounded up to a multiple, in exact integer arithmetic."""
    return multiple * -(-n_num // (n_den * multiple))


def _f_mistakes(D, multiple_of=256):
    return {
        "F = 4D with three matrices: that costs 1.5x the parameters of the classic MLP; "
        "use F = 8D/3 so that 3·D·F = 2·D·4D": 4 * D,
        "rounded 8D/3 down: round UP to the multiple, so the budget is at least the classic one":
            multiple_of * (8 * D // 3 // multiple_of),
        "no rounding: round 8D/3 up to a multiple of multiple_of": 8 * D // 3,
        "F = 2D/3: two thirds of 4D, not of D": _round_up(2 * D, 3, multiple_of),
    }


@graded("modern.swiglu_hidden_dim", points=2)
def test_swiglu_ffn_dim_is_8D_over_3(student):
    f = student.piece("modern", "swiglu_hidden_dim")
    for D, want in ((4096, 11_008), (768, 2_048)):
        got = f(D)
        expect_equal(got, want, f"swiglu_hidden_dim({D})", mistakes=_f_mistakes(D),
                     hint="F = 8D/3 from 3·D·F = 2·D·4D, rounded up to a multiple of 256")
        expect_true(isinstance(got, int) and not isinstance(got, bool), f"swiglu_hidden_dim({D})",
                    f"returned {type(got).__name__}: a layer width must be an int", "return an int (math.ceil gives one)")
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
    for D in (96, 128, 768, 1000, 4096):
        for m in (1, 64, 128, 256, 1024):
            expect_equal(f(D, m), _round_up(8 * D, 3, m), f"swiglu_hidden_dim({D}, multiple_of={m})",
                         mistakes=_f_mistakes(D, m), hint="round 8D/3 up to a multiple of multiple_of")


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


def test_typical_mistakes_are_caught_and_named():
    from andrea_course.grading import Mismatch
    from andrea_course.grading.student import InProcessStudent

    mutants = [(lambda D, multiple_of=256: 4 * D, "1.5x the parameters"),
               (lambda D, multiple_of=256: multiple_of * (8 * D // 3 // multiple_of), "rounded 8D/3 down"),
               (lambda D, multiple_of=256: float(swiglu_hidden_dim(D, multiple_of)), "must be an int")]
    for mutant, words in mutants:
        with pytest.raises(Mismatch) as caught:
            test_swiglu_ffn_dim_is_8D_over_3(InProcessStudent("solutions", overrides={("modern", "swiglu_hidden_dim"): mutant}))
        assert words in str(caught.value), (words, str(caught.value))
