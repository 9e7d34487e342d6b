"""Hidden and after-the-due-date graded tests of activity block: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.graded.test_block import (  # the activity's helpers
    Case,
    F,
    _layer_norm_case,
    _layer_norm_case_2,
    _layer_norm_mistakes,
    expect_cases,
    graded)


def _no_bias_case(fn, x, w):
    mistakes = {k: v for k, v in _layer_norm_mistakes(x, w, 0.0).items() if "beta" not in k}
    return Case(f"layer_norm(x of shape {tuple(x.shape)}, weight, bias=None)", lambda: fn(x, w, None),
                F.layer_norm(x, x.shape[-1:], w, None, eps=1e-5), mistakes)


@graded("block.layer_norm", points=1, visibility="hidden")
def test_layer_norm_without_bias(student):
    fn = student.piece("block", "layer_norm")
    (x, w, _), (x2, w2, _) = _layer_norm_case(), _layer_norm_case_2()
    expect_cases(_no_bias_case(fn, x, w), _no_bias_case(fn, x2, w2),
                 hint="bias is None when cfg.bias is False: then return the scaled output as it is")
