"""exercises/ is what the generator makes of solutions/, every solution region has a hint,
every exercise file imports, and every exercise piece has at least one graded test."""
import ast
import functools
import subprocess
from pathlib import Path

import pytest

from andrea_course.exercises import exercise_pieces, generate, regions
from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.graded import GRADED
from andrea_course.overlay import ROOT, STUB_MARK, Overlay, unwritten_pieces

TESTS = Path(__file__).resolve().parent
GRADED_TEST_DIRS = [GRADED, ROOT / "instructor" / "hidden_tests"]   # every graded test, hidden ones too
ACTIVITIES = sorted(p.stem for p in SOLUTIONS.glob("*.py") if p.stem != "__init__")


def _committed(name: str) -> str:
    """exercises/<name> as committed at git HEAD (a learner's own edits don't count), else the file."""
    try:
        return subprocess.run(["git", "show", f"HEAD:exercises/{name}"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):      # not a git checkout, or a file not yet committed
        return (EXERCISES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(generate()))
def test_exercise_file_is_generated_from_its_solution(name):
    assert _committed(name) == generate()[name], (
        f"exercises/{name} differs from what solutions/{name} generates: run `make exercises` "
        f"(python -m andrea_course.exercises) and commit the result")


def test_no_exercise_file_without_a_solution():
    assert {p.name for p in EXERCISES.glob("*.py")} <= set(generate())


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_solution_region_has_a_hint(activity):
    found = regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8"))
    assert found, f"solutions/{activity}.py has no solution region"
    for r in found:
        assert len(r["hint"].strip(" .")) >= 10, f"{activity}.{r['qualname']}: the hint says too little: {r['hint']!r}"


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_exercise_file_imports_and_every_piece_is_a_stub(activity):
    overlay = Overlay(EXERCISES)
    overlay.module(activity)
    assert activity not in overlay.errors, f"exercises/{activity}.py does not import: {overlay.errors.get(activity)!r}"
    pieces = exercise_pieces(SOLUTIONS / f"{activity}.py")
    assert unwritten_pieces((EXERCISES / f"{activity}.py").read_text(encoding="utf-8")) == pieces, (
        "every exercise piece starts as a stub the loader recognises")
    assert overlay.written(activity) == set()
    assert STUB_MARK in (EXERCISES / f"{activity}.py").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _graded_exercises() -> frozenset[str]:
    """Every "activity.piece" named by @graded(...) or @pytest.mark.exercise(...) in the graded tests."""
    names = set()
    for path in (p for d in GRADED_TEST_DIRS for p in d.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called in ("graded", "exercise") and isinstance(node.args[0].value, str):
                    names.add(node.args[0].value)
    return frozenset(names)


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_exercise_piece_has_a_graded_test(activity):
    graded = _graded_exercises()
    untested = sorted(p for p in exercise_pieces(SOLUTIONS / f"{activity}.py") if f"{activity}.{p}" not in graded)
    assert not untested, f"exercise pieces of {activity} with no graded test: {untested}"


def test_every_graded_test_names_a_real_exercise():
    known = {f"{a}.{p}" for a in ACTIVITIES for p in exercise_pieces(SOLUTIONS / f"{a}.py")}
    unknown = sorted(_graded_exercises() - known)
    assert not unknown, f"graded tests name exercises that do not exist: {unknown}"


def test_make_exercises_check_fails_loudly_without_solutions(tmp_path, capsys, monkeypatch):
    """In a copy without the answer key there is nothing to generate from: say so, exit 2,
    never "0 exercise file(s) differ"."""
    import andrea_course.exercises as ex
    with pytest.raises(FileNotFoundError, match="no solution files"):
        ex.generate(tmp_path)
    monkeypatch.setattr(ex, "SOLUTIONS", tmp_path)
    assert ex.main(["--check"]) == 2
    assert "student release" in capsys.readouterr().err
