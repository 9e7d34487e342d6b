"""A small graded suite for the autograder's own tests (7 points, 3 activities)."""
import torch

from andrea_course import ModelConfig
from andrea_course.grading import expect_close, graded
from andrea_course.engine.model import MLP
CFG = ModelConfig(vocab_size=16, context_length=8, d_model=8, n_layers=1, n_heads=2, d_ff=32)


@graded("embeddings.embed_lookup", points=2)
def test_embed_lookup(student):
    table = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 2, 9], [0, 0, 3]])
    expect_close(student.piece("embeddings", "embed_lookup")(table, ids), table[ids], "embed_lookup")


@graded("attention.softmax", points=2)
def test_softmax(student):
    scores = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))
    expect_close(student.piece("attention", "softmax")(scores), torch.softmax(scores, -1), "softmax")


@graded("attention.scale_scores", points=1)
def test_scale_scores(student):
    scores = torch.randn(3, 3, generator=torch.Generator().manual_seed(2))
    expect_close(student.piece("attention", "scale_scores")(scores, 16), scores / 4, "scale_scores")


@graded("mlp.gelu_tanh", points=1)
def test_gelu_tanh(student):
    x = torch.linspace(-4, 4, 17)
    expect_close(student.piece("mlp", "gelu_tanh")(x), torch.nn.functional.gelu(x, approximate="tanh"),
                 "gelu_tanh")


@graded("mlp.MLP", points=1, visibility="after_due_date")
def test_mlp_module(student):
    ref = MLP(CFG)
    mlp = student.piece("mlp", "MLP")(CFG)
    mlp.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, CFG.d_model, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = ref(x)
    expect_close(mlp(x), want, "MLP(x)")
    expect_close(mlp.fc.weight, ref.fc.weight.detach(), "MLP.fc.weight")


def test_not_graded():
    """A unit test of the package: the autograder must deselect it."""
    raise AssertionError("an ungraded test ran under the autograder")
