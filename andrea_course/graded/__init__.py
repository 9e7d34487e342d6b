"""The graded tests, one file per activity (test_<activity>.py), shipped with the package so that
check() in a notebook and andrea-grade work from any install.

Each test carries @graded("activity.piece", points=...), asks the `student` fixture for the
learner's piece (isolated: the engine stands in for every other piece it calls), and judges
it with expect_close / expect_equal / expect_cases against PyTorch or the engine
(andrea_course/pieces/). A typical mistake is listed with its output on two inputs (a failure names
it only when the learner's output matches both), and each piece is also called the ways the
notebooks and the model call it (float32, strided heads, 1-D forms: tests/piece_calls.py checks).
Hidden and after-the-due-date tests are not here: they live in the instructor's private folder
(instructor/hidden_tests/ in the course's repository), passed to andrea-grade --hidden-tests.
"""
from pathlib import Path

GRADED = Path(__file__).resolve().parent


def graded_file(activity: str) -> Path:
    """The graded tests of one activity."""
    return GRADED / f"test_{activity}.py"


def parameter_shapes(module) -> dict:
    """{name: shape} of a module's state_dict: what a class builds, compared without its values."""
    return {name: tuple(t.shape) for name, t in module.state_dict().items()}


def slot_reads(source: str, slot: str) -> bool:
    """Whether a class's source reads self.<slot> in some method other than __init__ (forward, or a
    helper forward calls): read and parsed, never run."""
    import ast
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return False
    methods = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name != "__init__"]
    return any(isinstance(node, ast.Attribute) and node.attr == slot and isinstance(node.ctx, ast.Load)
               and isinstance(node.value, ast.Name) and node.value.id == "self"
               for method in methods for node in ast.walk(method))


def expect_slot_called(student, activity: str, name: str, slot: str, computes: str, run) -> None:
    """A module that carries a slot (model.MODULE_SLOTS: MLP.gelu, SwiGLU.swiglu,
    MultiHeadAttention.attention, ANDREA.cross_entropy) computes through it: its class reads
    self.<slot> outside __init__ (from its source: the learner's objects live in the worker, which
    takes no function from a test). run(): the module run once first, so that a stub says so.
    computes: what the slot computes, as the failure names it ("its GELU")."""
    from ..grading import expect_true
    run()
    expect_true(slot_reads(student.source(activity, name), slot), f"{activity}.{name}, read from its source",
                f"no method but __init__ reads self.{slot}", f"compute {computes} by calling self.{slot}(...)",
                mistake=(f"self.{slot} never called: your {name} computes {computes} itself, so whatever the "
                         f"package puts in the slot (its fused op, a Triton kernel, your own piece) never runs; "
                         f"call self.{slot}(...)"))
