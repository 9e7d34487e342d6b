"""Hidden and after-the-due-date graded tests of activity embeddings: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.graded.test_embeddings import (  # the activity's helpers
    D,
    expect_close,
    graded,
    torch)


@graded("embeddings.cosine_similarity", points=1, visibility="hidden")
def test_cosine_similarity_of_a_zero_vector_is_zero(student):
    u = torch.zeros(2, D, dtype=torch.float64)
    v = torch.randn(2, D, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    got = student.piece("embeddings", "cosine_similarity")(u, v)
    expect_close(got, torch.zeros(2, dtype=torch.float64), "cosine_similarity(zero vector, v)",
                 hint="0/0 is NaN: clamp the product of the norms to at least eps before dividing")
