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
