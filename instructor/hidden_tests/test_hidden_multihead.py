"""Hidden and after-the-due-date graded tests of activity multihead: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.activity_tests.test_multihead import (  # the activity's helpers
    ModelConfig,
    _check_mha,
    graded)


@graded("multihead.MultiHeadAttention", points=1, visibility="hidden")
def test_multihead_attention_with_grouped_kv_heads(student):
    cfg = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=64)
    _check_mha(student, cfg, "MultiHeadAttention(D=16, H=4, G=2)(x)")
