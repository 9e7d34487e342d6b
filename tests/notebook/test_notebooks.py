"""The notebooks and their toolkit (andrea_course.notebook).

1. Every committed notebook is clean and follows the conventions of docs/notebooks.md.
2. check/use/quiz/reveal behave as promised, against a small graded test file of our own.
3. Every check("activity.piece") a notebook makes names a real exercise with graded tests,
   and those tests pass on the reference solutions.
"""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from andrea_course.exercises import exercise_pieces
from andrea_course import pieces
from andrea_course.exercises import SOLUTIONS
from andrea_course.paths import ROOT
from andrea_course.notebook import check, quiz, reveal, run_graded_many, use
from andrea_course.notebook._display import render_html

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ACTIVITIES = {p.stem for p in SOLUTIONS.glob("*.py") if p.stem != "__init__"}
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([\w]+)\.([\w]+)["']""")
USE_CALL = re.compile(r"""\buse\(\s*["'](\w+)["']\s*,\s*["'](\w+)["']""")


def _nb(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _code(nb):
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3, "notebooks/ should hold the course's notebooks"


# ---------------------------------------------------------------- 1. conventions
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(path):
    nb = _nb(path)
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} carry outputs or execution counts; "
                       f"run `python tools/nb.py strip {path.relative_to(ROOT)}` before committing")
    assert "widgets" not in nb["metadata"], f"{path.name}: saved widget state; strip it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_valid_nbformat(path):
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_kernelspec(path):
    ks = _nb(path)["metadata"].get("kernelspec", {})
    assert ks.get("name") == "python3", (          # Colab refuses others ("Unrecognized runtime")
        f"{path.name}: kernelspec must be named 'python3' (`make lab` registers the course's venv "
        f"under that name), got {ks}; run `python tools/nb.py strip {path.relative_to(ROOT)}`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_title_names_its_activity(path):
    first = _nb(path)["cells"][0]
    assert first["cell_type"] == "markdown", f"{path.name}: the first cell must be a markdown title"
    title = "".join(first["source"]).splitlines()[0]
    from andrea_course.lessons import LESSONS
    expected = {f"# {lesson.heading}" for lesson in LESSONS if lesson.notebook == path.stem}
    assert expected == {title}, (
        f"{path.name}: the first line must read {sorted(expected)} (andrea_course/lessons.py's title), got {title!r}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_quiz_and_checks(path):
    nb = _nb(path)
    code = _code(nb)
    assert re.search(r"\bquiz\(", code), f"{path.name}: every notebook ends its ideas with a quiz(...)"
    if nb["metadata"].get("andrea", {}).get("exercises", True):
        assert CHECK_CALL.search(code), (
            f"{path.name}: no check('activity.piece') cell; a notebook whose activity has no exercise "
            f"says so with metadata andrea.exercises = false")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_checks_name_real_exercises(path):
    for activity, piece in CHECK_CALL.findall(_code(_nb(path))) + USE_CALL.findall(_code(_nb(path))):
        assert activity in ACTIVITIES, f"{path.name}: check/use of unknown activity {activity!r}"
        assert piece in exercise_pieces(SOLUTIONS / f"{activity}.py"), (
            f"{path.name}: {activity}.{piece} is not an exercise of solutions/{activity}.py")


def _notebook_exercises_by_activity():
    found: dict[str, set] = {}
    for path in NOTEBOOKS:
        for a, p in CHECK_CALL.findall(_code(_nb(path))):
            found.setdefault(a, set()).add(f"{a}.{p}")
    return {a: sorted(e) for a, e in sorted(found.items())}


@pytest.mark.parametrize("activity", list(_notebook_exercises_by_activity()))
def test_every_notebook_check_passes_on_the_reference(activity):
    """Each check in a notebook runs real graded tests, and the reference passes them
    (one pytest run per activity, through run_graded_many)."""
    exercises = _notebook_exercises_by_activity()[activity]
    results = run_graded_many(exercises, impl="solutions")
    problems = {e: r.error or [(o.name, o.status, o.message[:300]) for o in r.outcomes if o.status != "passed"]
                for e, r in results.items() if r.status != "passed"}
    assert not problems, problems


# ---------------------------------------------------------------- 2. the toolkit
GRADED = '''
import torch
from andrea_course.grading import Second, graded, expect_close


@graded("attention.softmax", points=1)
def test_softmax_values(student):
    softmax = student.piece("attention", "softmax")
    x, x2 = (torch.randn(3, 5, generator=torch.Generator().manual_seed(s)) for s in (0, 2))
    wrong = "normalised over the queries (dim=-2) instead of the keys"
    expect_close(softmax(x), torch.softmax(x, -1), "softmax(x)", mistakes={wrong: torch.softmax(x, -2)},
                 second=Second(lambda: softmax(x2), torch.softmax(x2, -1), {wrong: torch.softmax(x2, -2)}),
                 hint="normalise over dim=-1")


@graded("attention.softmax", points=1)
def test_softmax_rows_sum_to_one(student):
    softmax = student.piece("attention", "softmax")
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(softmax(x).sum(-1), torch.ones(4)), "rows do not sum to 1"


@graded("attention.weighted_sum", points=1)
def test_weighted_sum(student):
    ws = student.piece("attention", "weighted_sum")
    w, v = torch.rand(2, 4, 4), torch.randn(2, 4, 3)
    expect_close(ws(w, v), w @ v, "weighted_sum(w, v)")


def test_not_graded_is_ignored():
    raise RuntimeError("a check must run only the tests marked with its exercise")
'''


@pytest.fixture
def graded_dir(tmp_path):
    d = tmp_path / "gtests"
    d.mkdir()
    (d / "test_attention.py").write_text(GRADED, encoding="utf-8")
    return d


def _submission(tmp_path, replace: dict[str, str]) -> Path:
    """A submission folder: the reference attention.py with some lines replaced."""
    sub = tmp_path / "sub"
    sub.mkdir()
    text = (SOLUTIONS / "attention.py").read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    (sub / "attention.py").write_text(text, encoding="utf-8")
    return sub


WRONG_AXIS = {"scores.amax(dim=-1, keepdim=True)": "scores.amax(dim=-2, keepdim=True)",
              "e / e.sum(dim=-1, keepdim=True)": "e / e.sum(dim=-2, keepdim=True)"}


def test_check_passes_the_reference(graded_dir, capsys):
    assert check("attention.softmax", impl="solutions", tests_dir=graded_dir) is None
    out = capsys.readouterr().out
    assert out.startswith("[PASSED] attention.softmax")
    assert "test_softmax_values" in out and "test_softmax_rows_sum_to_one" in out
    assert "test_not_graded_is_ignored" not in out and "test_weighted_sum" not in out


def test_check_names_the_typical_mistake(graded_dir, tmp_path, capsys):
    sub = _submission(tmp_path, WRONG_AXIS)
    assert check("attention.softmax", impl=sub, tests_dir=graded_dir) is None
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax: 2 of 2 graded tests fail")
    assert "typical mistake: normalised over the queries (dim=-2) instead of the keys" in out
    assert "largest error:" in out and "shape: found (3, 5), expected (3, 5)" in out
    assert "hint: normalise over dim=-1" in out
    assert "rows do not sum to 1" in out


def test_check_shows_a_wrong_shape(graded_dir, tmp_path, capsys):
    sub = _submission(tmp_path, {"return weights @ v": "return (weights @ v)[..., :1]"})
    check("attention.weighted_sum", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert "[NOT YET RIGHT]" in out and "found (2, 4, 1), expected (2, 4, 3)" in out


def test_check_unwritten_piece_is_amber(graded_dir, capsys):
    check("attention.softmax", impl="exercises", tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert out.startswith("[NOT WRITTEN YET] attention.softmax")
    assert "the notebook uses the reference for now" in out
    assert "hint: Turn each row of scores into positive weights" in out  # the summary, never a level of hint
    assert "amax" not in out and 'hint("attention.softmax")' in out


def test_check_rereads_the_learners_file(graded_dir, tmp_path, capsys):
    sub = _submission(tmp_path, WRONG_AXIS)
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    assert "[NOT YET RIGHT]" in capsys.readouterr().out
    (sub / "attention.py").write_text((SOLUTIONS / "attention.py").read_text(encoding="utf-8"), encoding="utf-8")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)        # the learner fixed it
    assert capsys.readouterr().out.startswith("[PASSED]")


@pytest.mark.parametrize("case", ["missing file", "bad name", "unknown piece", "broken tests",
                                  "syntax error", "bad impl"])
def test_check_never_raises(case, graded_dir, tmp_path, capsys):
    kwargs = dict(impl="solutions", tests_dir=graded_dir)
    exercise = "attention.softmax"
    if case == "missing file":
        kwargs["tests_dir"] = tmp_path / "nowhere"
    elif case == "bad name":
        exercise = "softmax"
    elif case == "unknown piece":
        exercise = "attention.nothing"
    elif case == "broken tests":
        (graded_dir / "test_attention.py").write_text("import no_such_module_anywhere\n", encoding="utf-8")
    elif case == "syntax error":
        sub = tmp_path / "sub"
        sub.mkdir()
        (sub / "attention.py").write_text("def softmax(scores:\n", encoding="utf-8")
        kwargs["impl"] = sub
    elif case == "bad impl":
        kwargs["impl"] = tmp_path / "no-such-folder"
    assert check(exercise, **kwargs) is None
    out = capsys.readouterr().out
    assert out.startswith(("[COULD NOT CHECK]", "[NOT YET RIGHT]")), out
    assert "[PASSED]" not in out


def test_run_graded_many_splits_outcomes_by_exercise(graded_dir, tmp_path):
    sub = _submission(tmp_path, WRONG_AXIS)
    results = run_graded_many(["attention.softmax", "attention.weighted_sum", "attention.nothing", "bad"],
                              impl=sub, tests_dir=graded_dir)
    assert results["attention.softmax"].status == "failed"
    assert sorted(o.name for o in results["attention.softmax"].outcomes) == [
        "test_softmax_rows_sum_to_one", "test_softmax_values"]
    assert results["attention.weighted_sum"].status == "passed"
    assert [o.name for o in results["attention.weighted_sum"].outcomes] == ["test_weighted_sum"]
    assert results["attention.nothing"].status == "error" and "no graded test is marked" in results["attention.nothing"].error
    assert results["bad"].status == "error" and "not an exercise name" in results["bad"].error


def test_check_box_as_html_is_escaped():
    html = render_html("failed", "a <b> c", [("t", [("problem", "x < y & z")])])
    assert "a &lt;b&gt; c" in html and "x &lt; y &amp; z" in html and "#c62828" in html


def test_use_picks_the_learners_piece_only_when_it_passes(graded_dir, tmp_path, capsys):
    reference = pieces.get("attention", "softmax")
    sub = _submission(tmp_path, WRONG_AXIS)
    chosen = use("attention", "softmax", impl=sub, tests_dir=graded_dir)
    assert chosen.__wrapped__ is reference                  # use() hands out a never-stale wrapper
    assert "using the engine's (2 of your graded tests fail" in capsys.readouterr().out
    chosen = use("attention", "softmax", impl="exercises", tests_dir=graded_dir)
    assert chosen.__wrapped__ is reference and "not written yet" in capsys.readouterr().out
    chosen = use("attention", "weighted_sum", impl=sub, tests_dir=graded_dir)   # written and right
    assert chosen.__wrapped__ is not pieces.get("attention", "weighted_sum")
    assert chosen.__wrapped__.__module__.startswith("_andrea_learner_")
    assert "using yours (all 1 graded tests pass)" in capsys.readouterr().out


QUESTIONS = [{"question": "Why divide by sqrt(K)?", "options": ["speed", "keep scores near unit scale"],
              "answer": 1, "explain": "dot products grow like sqrt(K)."},
             {"question": "Mask before or after softmax?", "options": ["before", "after"],
              "answer": "before"}]


def test_quiz_and_reveal_print_without_a_notebook(capsys):
    assert quiz(QUESTIONS) is None
    assert reveal("Model answer", "Because **masking** happens first.") is None
    out = capsys.readouterr().out
    assert "1. Why divide by sqrt(K)?" in out and ") keep scores near unit scale -- dot products" in out
    assert "Model answer" in out and "masking" in out


def test_check_in_a_notebook_displays_one_html_box(graded_dir, tmp_path, monkeypatch, capsys):
    """In a kernel, check() displays exactly one HTML box (with a text twin) and prints nothing."""
    import IPython.display

    from andrea_course.notebook import _display
    shown = []
    monkeypatch.setattr(_display, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    sub = _submission(tmp_path, WRONG_AXIS)
    assert check("attention.softmax", impl=sub, tests_dir=graded_dir) is None
    assert len(shown) == 1 and capsys.readouterr().out == ""
    html, text = shown[0]["text/html"], shown[0]["text/plain"]
    assert "#c62828" in html and "normalised over the queries" in html and "typical mistake" in html
    assert text.startswith("[NOT YET RIGHT]")
    check("attention.softmax", impl="exercises", tests_dir=graded_dir)
    assert "#b26a00" in shown[1]["text/html"] and "not written yet" in shown[1]["text/html"]


def test_heatmap_draws_labels_values_and_masked_cells(monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    import IPython
    import IPython.display
    import torch
    from matplotlib.figure import Figure

    from andrea_course.notebook import heatmap, heatmaps
    backend = matplotlib.get_backend()
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: True)      # as in a notebook's kernel
    monkeypatch.setattr(IPython.display, "display", shown.append)
    scores = torch.tensor([[0.5, float("-inf")], [0.25, 1.0]])
    ax = Figure().subplots()
    assert heatmap(scores, rows=["a", "b"], cols=["a", "b"], title="t", ax=ax) is None
    assert shown == []                                          # drawn into the caller's axis only
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert sorted(t.get_text() for t in ax.texts) == ["-inf", "0.25", "0.50", "1.00"]
    assert ax.images[0].get_array().mask[0, 1]                  # -inf drawn blank
    with pytest.raises(ValueError):
        heatmap(torch.zeros(2, 2, 2))
    assert heatmaps([scores, scores], titles=["h0", "h1"], rows=["a", "b"], cols=["a", "b"]) is None
    assert len(shown) == 1 and shown[0].data.startswith(b"\x89PNG")   # its own figure, shown as a PNG
    assert matplotlib.get_backend() == backend                  # and the backend left as it was


def test_the_loss_plot_leaves_the_backend_and_pyplot_alone(tmp_path):
    """plot_losses writes its PNG with a Figure of its own: the notebook's later plt.show() still
    draws (it once switched the backend to Agg, and notebook 09's plots after it stayed blank)."""
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from andrea_course.train.trainer import plot_losses
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "loss": 2.5, "val_loss": 2.7}\n')
    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    plot_losses(log, tmp_path / "loss.png")
    assert (tmp_path / "loss.png").read_bytes().startswith(b"\x89PNG")
    assert matplotlib.get_backend() == backend and plt.get_fignums() == figures


def test_nb_tool_builds_strips_and_round_trips(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("nb_tool", ROOT / "tools" / "nb.py")
    nb_tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb_tool)
    src = "# %% [markdown]\n# # Activity 4 · grow_a_language_model_x\n#\n# text\n\n# %%\nprint(1)\n"
    nb = nb_tool.notebook(nb_tool.cells_from_text(src))
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code"]
    assert "".join(nb["cells"][0]["source"]) == "# Activity 4 · grow_a_language_model_x\n\ntext"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    nb["cells"][1]["execution_count"] = 3
    nb["metadata"]["widgets"] = {"state": {}}
    clean = nb_tool.strip(nb)
    assert clean["cells"][1]["outputs"] == [] and clean["cells"][1]["execution_count"] is None
    assert "widgets" not in clean["metadata"]
    again = nb_tool.cells_from_text(nb_tool.to_text(clean))
    assert ["".join(c["source"]) for c in again] == ["".join(c["source"]) for c in clean["cells"]]
