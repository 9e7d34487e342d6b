"""Hidden and after-the-due-date graded tests of activity attention: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.graded.test_attention import (  # the activity's helpers
    F,
    USES_STEPS,
    _allowed,
    _attention_mistakes,
    _qkv,
    expect_close,
    graded)


@graded("attention.attention", points=1, visibility="after_due_date")
def test_attention_with_cached_keys(student):
    q, k, v = _qkv(T=3, S=7, seed=6)                                     # 4 keys cached before the 3 queries
    got = student.piece("attention", "attention")(q, k, v)
    expect_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(3, 7)),
                 "attention(q of T=3, k and v of S=7)", mistakes=_attention_mistakes(q, k, v), hint=USES_STEPS)
