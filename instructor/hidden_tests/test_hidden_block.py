"""Hidden and after-the-due-date graded tests of activity block: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.graded.test_block import (  # the activity's helpers
    F,
    _layer_norm_case,
    _layer_norm_mistakes,
    expect_close,
    graded)


@graded("block.layer_norm", points=1, visibility="hidden")
def test_layer_norm_without_bias(student):
    x, w, _ = _layer_norm_case()
    got = student.piece("block", "layer_norm")(x, w, None)
    mistakes = {k: v for k, v in _layer_norm_mistakes(x, w, 0.0).items() if "beta" not in k}
    expect_close(got, F.layer_norm(x, (16,), w, None, eps=1e-5), "layer_norm(x, weight, bias=None)",
                 hint="bias is None when cfg.bias is False: then return the scaled output as it is",
                 mistakes=mistakes)
