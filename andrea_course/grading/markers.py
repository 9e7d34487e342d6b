"""The `graded` decorator: exercise, points, Gradescope visibility and, for a test of an idea
taught in a later notebook, that notebook's activity."""
import pytest

from ..lessons import ACTIVITIES as LESSONS, later_or_same  # noqa: F401  (the lesson table's order: taught=, upto=)

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def graded(exercise: str, points: float = 1, visibility: str = "visible", taught: str | None = None):
    """Mark a test as graded: `exercise` is "activity.piece" (e.g. "attention.softmax").

    taught: the activity whose notebook teaches the idea this test checks, when that is a later
    notebook than the exercise's own (a KV-cache test of multihead.MultiHeadAttention: "modern").
    Every runner runs it (it is part of the piece's one verdict); check() in the exercise's own
    notebook does not list it while it passes, and an amber box names it when it fails; the
    notebook that teaches it lists it (check(..., upto="modern"))."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}, got {visibility!r}")
    if points < 0:
        raise ValueError(f"points must be >= 0, got {points}")
    if exercise.count(".") != 1:
        raise ValueError(f"exercise must look like 'activity.piece', got {exercise!r}")
    if taught is not None and not later_or_same(exercise.split(".")[0], taught):
        raise ValueError(f"taught must be an activity of {LESSONS} at or after {exercise.split('.')[0]!r}, "
                         f"got {taught!r}")

    def mark(fn):
        fn = pytest.mark.points(points)(fn)
        fn = pytest.mark.visibility(visibility)(fn)
        if taught is not None:
            fn = pytest.mark.taught(taught)(fn)
        return pytest.mark.exercise(exercise)(fn)
    return mark

