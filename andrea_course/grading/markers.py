"""How a graded test is marked and scored: the `graded` decorator (exercise, points, Gradescope
visibility and, for a test of an idea taught in a later notebook, that notebook's activity), its
marks read back off a test (graded_info, for the plugin), the test files that hold an exercise's
graded tests, and partial credit (the plugin's `credit` fixture): a test scores its points by the
weight of the parts that pass; a failed part fails the test, but the next part still runs:

    @graded("attention.softmax", points=3)
    def test_softmax(student, credit):
        with credit.part(1, "rows sum to one"):
            expect_true(...)
        with credit.part(2, "equals the reference"):
            expect_close(...)
"""
from __future__ import annotations

import ast
import contextlib
import os
from pathlib import Path

import pytest

from ..lessons import ACTIVITIES as LESSONS, later_or_same  # noqa: F401  (the lesson table's order: taught=, upto=)
from ..paths import ACTIVITY_TESTS

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


# the marks graded() puts on a test, as pytest's ini lines declare them (the plugin does)
MARKS = ("points(n): points this graded test is worth",
         "visibility(v): Gradescope visibility",
         "exercise(name): the exercise ('activity.piece') a graded test grades",
         "taught(activity): the later notebook that teaches the idea a graded test checks")


def mark_of(item, name: str, default=None):
    """The argument of the mark `name` on a pytest test item, else `default`."""
    mark = item.get_closest_marker(name)
    return mark.args[0] if mark is not None and mark.args else default


def graded_info(item) -> dict | None:
    """{"exercise", "points", "visibility", "taught"} of a graded test item, else None."""
    exercise = mark_of(item, "exercise")
    if exercise is None:
        return None
    return {"exercise": exercise, "points": float(mark_of(item, "points", 1.0)),
            "visibility": mark_of(item, "visibility", "visible"),
            "taught": mark_of(item, "taught") or exercise.split(".")[0]}


def graded_files(exercise: str, tests_dir: str | os.PathLike | None = None) -> list[Path]:
    """The test files holding `exercise`'s graded tests: tests/test_<activity>.py, and any other
    tests/test_*.py with a test decorated @graded(exercise) (an activity's tests may span files)."""
    tests_dir = Path(tests_dir) if tests_dir is not None else ACTIVITY_TESTS
    home = tests_dir / f"test_{str(exercise).split('.')[0]}.py"
    others = [p for p in sorted(tests_dir.glob("test_*.py")) if p != home and _marks(p, exercise)]
    return ([home] if home.exists() else []) + others


def _marks(path: Path, exercise: str) -> bool:
    """Whether a test function in `path` is decorated @graded(exercise, ...) (not just mentions it)."""
    text = path.read_text(encoding="utf-8")
    if exercise not in text:
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "graded" and d.args
               and isinstance(d.args[0], ast.Constant) and d.args[0].value == exercise
               for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for d in node.decorator_list)


class PartsFailed(AssertionError):
    """Some parts of a partial-credit test failed (the message lists them)."""


class Credit:
    """The parts of one graded test."""

    def __init__(self):
        self.parts: list[tuple[float, str, str | None]] = []     # (weight, what, failure or None)
        self.mistakes: list[str] = []                            # typical mistakes the failed parts named

    @contextlib.contextmanager
    def part(self, weight: float, what: str):
        if weight <= 0:
            raise ValueError(f"a part's weight must be > 0, got {weight}")
        from ..worker.client import LearnerCodeError
        from .expect import Mismatch
        try:
            yield
        except (AssertionError, LearnerCodeError, NotImplementedError) as exc:
            self.parts.append((float(weight), what, f"{what}: {str(exc).strip() or type(exc).__name__}"))
            if isinstance(exc, Mismatch) and getattr(exc, "mistake", None):
                self.mistakes.append(exc.mistake)
        except Exception as exc:          # noqa: BLE001  (the learner's error fails this part only)
            self.parts.append((float(weight), what, f"{what}: {type(exc).__name__}: {exc}"))
        else:
            self.parts.append((float(weight), what, None))

    @property
    def fraction(self) -> float | None:
        total = sum(w for w, _, _ in self.parts)
        return None if not total else sum(w for w, _, f in self.parts if f is None) / total

    def failures(self) -> list[str]:
        return [f for _, _, f in self.parts if f is not None]

    def settle(self) -> None:
        """After the test: PartsFailed naming every failed part (and the first typical mistake one named)."""
        if self.failures():
            failed = PartsFailed(f"{len(self.failures())} of {len(self.parts)} parts failed (partial credit "
                                 f"{self.fraction:.0%}):\n" + "\n".join(self.failures()))
            failed.mistake = self.mistakes[0] if self.mistakes else None
            raise failed
