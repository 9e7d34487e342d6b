"""Hidden and after-the-due-date graded tests of activity embeddings: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.activity_tests.test_embeddings import (  # the activity's helpers
    D,
    expect_close,
    graded,
    torch)


@graded("embeddings.cosine_similarity", points=1, visibility="hidden")
def test_cosine_similarity_of_parallel_and_opposite_vectors(student):
    """A vector against itself stretched (cosine 1) and against its opposite (cosine -1), whatever the lengths."""
    u = torch.randn(3, D, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    scale = torch.tensor([[0.01], [1.0], [300.0]], dtype=torch.float64)
    got = student.piece("embeddings", "cosine_similarity")(torch.cat([u, u]), torch.cat([u * scale, -u * scale]))
    expect_close(got, torch.tensor([1.0] * 3 + [-1.0] * 3, dtype=torch.float64),
                 "cosine_similarity(u, u stretched) and cosine_similarity(u, -u stretched)",
                 hint="the cosine only sees directions: the same direction gives 1, the opposite -1")
