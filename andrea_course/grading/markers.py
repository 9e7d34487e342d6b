"""The `graded` decorator: exercise, points and Gradescope visibility of one test."""
import pytest

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def graded(exercise: str, points: float = 1, visibility: str = "visible"):
    """Mark a test as graded: `exercise` is "activity.piece" (e.g. "attention.softmax")."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}, got {visibility!r}")
    if points < 0:
        raise ValueError(f"points must be >= 0, got {points}")
    if exercise.count(".") != 1:
        raise ValueError(f"exercise must look like 'activity.piece', got {exercise!r}")

    def mark(fn):
        fn = pytest.mark.points(points)(fn)
        fn = pytest.mark.visibility(visibility)(fn)
        return pytest.mark.exercise(exercise)(fn)
    return mark
