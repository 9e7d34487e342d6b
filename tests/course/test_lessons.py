"""The lesson table (andrea_course/lessons.py) against every file it names: one list of the
activities, their numbers, notebooks and pieces, and every other list derived from it."""
import ast
import json
import re

import pytest

from andrea_course import lessons, pieces
from andrea_course.grading import markers
from andrea_course.lessons import LESSONS
from andrea_course.paths import PACKAGE, ROOT

SOLUTIONS = ROOT / "solutions"
needs_answer_key = pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="no solutions/ (a student release)")


def _docstring(path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def test_every_list_of_activities_is_the_tables():
    assert pieces.ACTIVITIES == markers.LESSONS == tuple(lesson.activity for lesson in LESSONS)
    assert len(set(pieces.ACTIVITIES)) == len(LESSONS)
    for lesson in LESSONS:
        assert pieces.names(lesson.activity) == lesson.pieces
    with pytest.raises(KeyError, match="no activity named 'nowhere'; activities: embeddings, attention"):
        lessons.lesson("nowhere")


def test_the_table_follows_the_notebooks():
    """The activities come in the order of their notebooks, and every notebook of the course teaches one."""
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert list(dict.fromkeys(lesson.notebook for lesson in LESSONS)) == notebooks
    assert lessons.later_or_same("model", "modern") and not lessons.later_or_same("modern", "model")


def test_every_activity_has_its_files():
    for lesson in LESSONS:
        a = lesson.activity
        for path in (ROOT / "exercises" / f"{a}.py", PACKAGE / "pieces" / f"{a}.py", PACKAGE / "activity_tests" / f"test_{a}.py"):
            assert path.is_file(), path


@pytest.mark.parametrize("activity", [lesson.activity for lesson in LESSONS])
def test_each_pieces_module_defines_its_rows_pieces(activity):
    module = pieces.module(activity)
    assert list(module.__all__) == list(lessons.lesson(activity).pieces)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"pieces/{activity}.py lacks {missing}"


def test_every_piece_has_a_graded_test_that_passing_runs():
    """passing() accepts a piece by its graded tests in activity_tests/ (markers.graded_files), and
    by nothing else: a piece with none there is never the learner's, and nothing else says why."""
    untested = [piece for lesson in LESSONS for piece in lesson.exercises
                if not any(markers._marks(path, piece) for path in markers.graded_files(piece))]
    assert not untested, f"pieces with no @graded(...) test in andrea_course/activity_tests/: {untested}"


@needs_answer_key
def test_the_pieces_are_the_answer_keys_regions():
    """The table lists exactly the pieces the learner writes: the solution regions, in file order."""
    from andrea_course.exercises import exercise_pieces
    for lesson in LESSONS:
        assert set(lesson.pieces) == exercise_pieces(SOLUTIONS / f"{lesson.activity}.py"), lesson.activity


def test_activity_numbers_are_the_tables_everywhere():
    """"Activity N · ..." opens each activity's files with the table's number; the notebook's title
    says the activity (7) and, for a part, which part (part 1 of 3)."""
    for lesson in LESSONS:
        a, n = lesson.activity, lesson.number
        files = [ROOT / "exercises" / f"{a}.py", PACKAGE / "pieces" / f"{a}.py"]
        files += [SOLUTIONS / f"{a}.py"] if SOLUTIONS.is_dir() else []
        for path in files:
            assert _docstring(path).startswith(f"Activity {n} · "), f"{path}: {_docstring(path)[:60]!r}"
        graded = PACKAGE / "activity_tests" / f"test_{a}.py"
        assert _docstring(graded).startswith(f"Graded tests, activity {n} · "), f"{graded}: {_docstring(graded)[:60]!r}"
        cells = json.loads((ROOT / "notebooks" / f"{lesson.notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
        title = "".join(cells[0]["source"]).splitlines()[0]
        major, _, part = n.partition(".")
        assert title.startswith(f"# Activity {major} · "), f"{lesson.notebook}: {title!r}"
        assert title == f"# {lesson.heading}", f"{lesson.notebook}: {title!r}, the table says {lesson.heading!r}"
        if part:
            assert re.search(rf"\(part {part} of \d", title), f"{lesson.notebook}: {title!r} (activity {n})"


def test_the_readme_table_gives_the_tables_numbers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lesson in LESSONS:
        row = re.search(rf"^\| \[{lesson.notebook}\].*$", readme, re.M)
        assert row, f"README.md has no row for {lesson.notebook}"
        assert f"| {lesson.number} · " in row.group(0) , row.group(0)[:120]
        assert f"`{lesson.activity}.py`" in row.group(0), (lesson.activity, row.group(0)[-80:])
