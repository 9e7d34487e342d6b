"""A graded test with partial credit (4 points: 1 for the shape, 3 for the values)."""
import torch

from andrea_course.grading import Second, expect_close, expect_equal, graded


@graded("attention.softmax", points=4)
def test_softmax_in_parts(student, credit):
    scores = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))
    other = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))    # confirms a mistake it names
    softmax = student.piece("attention", "softmax")
    got = softmax(scores)
    with credit.part(1, "shape"):
        expect_equal(tuple(got.shape), tuple(scores.shape), "softmax(scores).shape")
    with credit.part(3, "values"):
        expect_close(got, torch.softmax(scores, -1), "softmax(scores)",
                     mistakes={"softmax over the wrong axis (dim=-2)": torch.softmax(scores, -2)},
                     second=Second(lambda: softmax(other), torch.softmax(other, -1),
                                   {"softmax over the wrong axis (dim=-2)": torch.softmax(other, -2)}))
