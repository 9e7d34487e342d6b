"""An instructor's hidden test: the same `graded` decorator and `student` fixture."""
import torch

from andrea_course.grading import expect_close, graded


@graded("modern.rms_norm", points=1, visibility="hidden")
def test_rms_norm_hidden(student):
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(4))
    w = torch.rand(8, generator=torch.Generator().manual_seed(5)) + 0.5
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    expect_close(student.piece("modern", "rms_norm")(x, w, 1e-5), want, "rms_norm")
