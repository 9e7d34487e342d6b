"""Hidden and after-the-due-date graded tests of activity attention: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.activity_tests.test_attention import (  # the activity's helpers
    ATTENTION_HINT,
    _attention_case,
    _qkv,
    expect_cases,
    graded)


@graded("attention.attention", points=1, visibility="after_due_date")
def test_attention_with_cached_keys(student):
    fn = student.piece("attention", "attention")
    expect_cases(_attention_case(fn, *_qkv(T=3, S=7, seed=6)),          # 4 keys cached before the 3 queries
                 _attention_case(fn, *_qkv(T=2, S=5, seed=11, H=3)), hint=ATTENTION_HINT)
