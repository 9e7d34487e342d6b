"""check() and use() with code that misbehaves: an infinite loop, the learner's interrupt, a
syntax error, an exception, prints, a crash. The box says what happened in the learner's words
and points at the learner's line, never at the grader's internals.

Each runs a small graded test file of our own against a copy of the reference attention.py with
one line changed, as grading/pipeline.py runs them (pytest in a forked child, the learner's code
in the grader's worker process, one per test)."""
from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from andrea_course.exercises import SOLUTIONS
from andrea_course.notebook import check, use
from andrea_course.notebook._display import render_html, render_text

GRADED = '''
import torch
from andrea_course.grading import Second, graded, expect_close

HINT = "normalise over dim=-1"


@graded("attention.softmax", points=1)
def test_softmax_values(student):
    softmax = student.piece("attention", "softmax")
    x, x2 = (torch.randn(3, 5, generator=torch.Generator().manual_seed(s)) for s in (0, 2))
    wrong = "normalised over the queries (dim=-2)"
    expect_close(softmax(x), torch.softmax(x, -1), "softmax(x)", mistakes={wrong: torch.softmax(x, -2)}, hint=HINT,
                 second=Second(lambda: softmax(x2), torch.softmax(x2, -1), {wrong: torch.softmax(x2, -2)}))


@graded("attention.softmax", points=1)
def test_softmax_4d(student):
    softmax = student.piece("attention", "softmax")
    x = torch.randn(2, 2, 3, 5, generator=torch.Generator().manual_seed(1))
    expect_close(softmax(x), torch.softmax(x, -1), "softmax(4-D x)", hint="keep every leading axis")


@graded("attention.weighted_sum", points=1)
def test_weighted_sum(student):
    ws = student.piece("attention", "weighted_sum")
    w, v = torch.rand(2, 4, 4), torch.randn(2, 4, 3)
    expect_close(ws(w, v), w @ v, "weighted_sum(w, v)")
'''

SOFTMAX_BODY = "    return e / e.sum(dim=-1, keepdim=True)\n"


@pytest.fixture
def graded_dir(tmp_path):
    d = tmp_path / "gtests"
    d.mkdir()
    (d / "test_attention.py").write_text(GRADED, encoding="utf-8")
    return d


@pytest.fixture
def check_mode():
    return "fork"


def _softmax_ending(tmp_path: Path, body: str) -> Path:
    """A submission whose softmax ends with `body` instead of the reference's last line."""
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    text = (SOLUTIONS / "attention.py").read_text(encoding="utf-8")
    assert SOFTMAX_BODY in text
    (sub / "attention.py").write_text(text.replace(SOFTMAX_BODY, body), encoding="utf-8")
    return sub


def _line_of(sub: Path, needle: str) -> int:
    return next(i for i, row in enumerate((sub / "attention.py").read_text().splitlines(), 1)
                if needle in row and not row.lstrip().startswith("#"))      # not the hint lines


def _no_internals(out: str) -> None:
    assert "andrea_course" not in out and "_pytest" not in out and "Traceback" not in out, out
    assert "\x1b[" not in out


def test_an_infinite_loop_is_stopped_and_named(check_mode, graded_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANDREA_CHECK_TIMEOUT", "1.5")          # only here: every other test keeps 30 s
    sub = _softmax_ending(tmp_path, "    while True:\n        e = e + 0\n")
    assert check("attention.softmax", impl=sub, tests_dir=graded_dir) is None
    out = capsys.readouterr().out
    assert "your code ran longer than 1.5 s: an infinite loop?" in out
    # each test's worker is stopped on its own, as in the grader; its stack, dumped at the
    # timeout, names the line
    assert out.startswith("[NOT YET RIGHT] attention.softmax: 2 of 2 graded tests fail"), out
    assert "test_softmax_values, test_softmax_4d" in out
    assert f"attention.py, line {_line_of(sub, 'e = e + 0')}, in softmax" in out
    _no_internals(out)
    chosen = use("attention", "softmax", impl=sub, tests_dir=graded_dir)
    assert chosen is not None and "ran longer than 1.5 s in test_softmax_values" in capsys.readouterr().out


def test_a_stuck_pytest_is_stopped_and_its_stack_names_the_line(graded_dir, tmp_path, monkeypatch):
    """The learner's code running in pytest's own process (in-process: no worker to stop it) is
    stopped by the run's outer limit, and pytest's stack, dumped then, names the learner's line."""
    from andrea_course.grading import pipeline
    monkeypatch.setattr(pipeline, "GRACE", 1.0)
    sub = _softmax_ending(tmp_path, "    while True:\n        e = e + 0\n")
    got = pipeline.run(pipeline.Spec(tests=[graded_dir / "test_attention.py"], folder=sub, isolation="in-process",
                                     limit=1.0, exercises=["attention.softmax"], rootdir=tmp_path))
    assert got.stopped == "timeout" and got.running is not None, (got.stopped, got.log)
    assert got.where.startswith(f"{(sub / 'attention.py').resolve()}, line {_line_of(sub, 'e = e + 0')}, in softmax"), got.where
    assert got.where.endswith("e = e + 0")


@pytest.mark.parametrize("body", [
    "    while True:\n        e = e + 0\n",
    # swallows the first interrupt, then loops again: the worker is stopped all the same
    "    try:\n        while True:\n            e = e + 0\n    except KeyboardInterrupt:\n        pass\n"
    "    while True:\n        e = e + 0\n",
], ids=["loop", "swallows-one-interrupt"])
def test_a_loop_is_stopped_when_the_process_started_with_sigint_ignored(body, graded_dir, tmp_path, capsys,
                                                                          monkeypatch):
    """A background job of a non-interactive shell (nohup ... &, some CI agents) starts with SIGINT
    ignored; the learner's loop is stopped all the same."""
    monkeypatch.setenv("ANDREA_CHECK_TIMEOUT", "1.5")
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        check("attention.softmax", impl=_softmax_ending(tmp_path, body), tests_dir=graded_dir)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN      # put back as it was
    finally:
        signal.signal(signal.SIGINT, old)
    out = capsys.readouterr().out
    assert "your code ran longer than 1.5 s: an infinite loop?" in out, out


def test_an_interrupt_stops_the_cell_after_its_box(check_mode, graded_dir, tmp_path, capsys, monkeypatch):
    """Ctrl-C or the stop button during a check: a box that says so, then KeyboardInterrupt
    (the next cell must not run). Never 'no graded test is marked'."""
    sub = _softmax_ending(tmp_path, "    while True:\n        e = e + 0\n")
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))     # as Jupyter's stop button
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            check("attention.softmax", impl=sub, tests_dir=graded_dir)
    finally:
        timer.cancel()
    out = capsys.readouterr().out
    assert out.startswith("[COULD NOT CHECK] attention.softmax: stopped: you interrupted the check"), out
    assert "no graded test is marked" not in out


def test_a_syntax_error_is_shown_once_with_a_caret(check_mode, graded_dir, tmp_path, capsys):
    sub = _softmax_ending(tmp_path, "    return e / e.sum(dim=-1, keepdim=True\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax:") and "does not compile" in out, out
    assert out.count("SyntaxError") == 1 and "was never closed" in out
    line = _line_of(sub, "return e / e.sum(dim=-1, keepdim=True")
    assert f"attention.py, line {line}" in out
    rows = out.splitlines()
    code = next(i for i, r in enumerate(rows) if r.strip() == "return e / e.sum(dim=-1, keepdim=True")
    assert rows[code + 1].strip() == "^"
    _no_internals(out)


def test_an_exception_shows_the_learners_line_and_the_tests_hint(check_mode, graded_dir, tmp_path, capsys):
    """softmax written for 2-D input only: the 4-D test raises inside the learner's code."""
    sub = _softmax_ending(tmp_path, "    return e / e.sum(dim=-1).reshape(e.shape[0], 1)\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax: 1 of 2 graded tests fail"), out
    assert "your code raised RuntimeError" in out
    assert f"attention.py, line {_line_of(sub, 'reshape(e.shape[0], 1)')}, in softmax" in out
    assert "hint: keep every leading axis" in out
    _no_internals(out)


def test_the_learners_prints_are_shown_clipped(check_mode, graded_dir, tmp_path, capsys):
    sub = _softmax_ending(tmp_path, "    for i in range(40):\n        print('row', i)\n"
                                    "    return torch.softmax(scores, dim=-2)\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert "your prints: row 0" in out and "row 11" in out and "row 12\n" not in out
    assert "(28 more lines)" in out
    assert "typical mistake: normalised over the queries (dim=-2)" in out


def test_the_same_failure_in_many_tests_is_shown_once(check_mode, graded_dir, tmp_path, capsys):
    sub = _softmax_ending(tmp_path, "    raise ValueError('not today')\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert out.count("ValueError: not today") == 1, out
    assert "test_softmax_values, test_softmax_4d" in out
    assert "hint: normalise over dim=-1" in out and "hint: keep every leading axis" in out


def test_a_crash_costs_only_the_running_test(graded_dir, tmp_path, capsys, monkeypatch):
    """os._exit in softmax: both softmax tests fail, each saying so; weighted_sum, in the same
    file and run, still passes (the worker of one test dies, not the run)."""
    sub = _softmax_ending(tmp_path, "    import os; os._exit(3)\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax: 2 of 2 graded tests fail"), out
    assert "ended abruptly: your code ended the process (exit status 3)" in out, out
    from andrea_course.notebook import run_graded_many
    results = run_graded_many(["attention.softmax", "attention.weighted_sum"], impl=sub, tests_dir=graded_dir)
    assert results["attention.weighted_sum"].passed and results["attention.softmax"].status == "failed"


def test_boxes_carry_no_terminal_colour_codes():
    sections = [("t", [("problem", "\x1b[31mred\x1b[0m text")])]
    assert "\x1b" not in render_html("failed", "x", sections)
    assert "\x1b" not in render_text("failed", "x", sections) and "red text" in render_text("failed", "x", sections)


# ----- tiered hints, tests of ideas taught later, named shape errors (issue 15) -----

def test_hint_gives_one_more_level_each_call_and_reveal_piece_says_it_is_the_answer(capsys, monkeypatch):
    from andrea_course.notebook import hint, reveal_piece
    from andrea_course.notebook import hints
    monkeypatch.setattr(hints, "_given", {})
    found = hints.levels("attention.softmax")
    outs = []
    for _ in range(4):
        assert hint("attention.softmax") is None
        outs.append(capsys.readouterr().out)
    assert "hint 1 of 3" in outs[0] and found["idea"] in outs[0]
    assert found["api"] not in outs[0] and found["line"] not in outs[0] and 'hint("attention.softmax") again' in outs[0]
    assert "hint 2 of 3" in outs[1] and found["api"] in outs[1] and found["line"] not in outs[1]
    assert "hint 3 of 3" in outs[2] and found["line"] in outs[2] and 'reveal_piece("attention.softmax")' in outs[2]
    assert outs[3] == outs[2]                                      # no level beyond the line
    assert reveal_piece("attention.softmax") is None
    out = capsys.readouterr().out
    assert out.startswith("The answer: the reference code of attention.softmax") and found["code"] in out
    hint("attention.sofmax")                                        # a typo: a box, never an exception
    out = capsys.readouterr().out
    assert out.startswith("[COULD NOT CHECK] attention.sofmax: no hint") and "'attention.softmax'" in out


@pytest.mark.parametrize("exercise", ["attention.softmax", "kernels.softmax_kernel"])
def test_the_amber_box_gives_only_the_summary_and_points_to_hint(capsys, exercise):
    """Also for a Triton kernel's stub, whose error reaches the test wrapped in Triton's
    InterpreterError: the box quotes the stub's own words (the one-line summary), not the
    wrapper's repr of them, and no level of hint."""
    from andrea_course.notebook.hints import levels
    if exercise.startswith("kernels."):
        pytest.importorskip("triton")
    found = levels(exercise)
    check(exercise, impl="exercises")
    out = capsys.readouterr().out
    assert out.startswith(f"[NOT WRITTEN YET] {exercise}"), out
    hint_line = next(line for line in out.splitlines() if line.strip().startswith("hint:"))
    assert " ".join(hint_line.split()[1:]) == " ".join(found["summary"].split()), hint_line
    assert f'hint("{exercise}")' in out
    assert found["idea"] not in out and found["api"] not in out and found["line"] not in out


def test_a_forgotten_keepdim_is_named_with_the_learners_line(tmp_path, capsys, monkeypatch):
    """The course's own graded tests: the learner's shape error becomes the named mistake, with
    the learner's line, never a traceback through attention.py's callers."""
    sub = _softmax_ending(tmp_path, "    return e / e.sum(dim=-1)\n")
    check("attention.softmax", impl=sub)
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax"), out
    assert "typical mistake: keepdim forgotten in a row statistic" in out
    assert f"attention.py, line {_line_of(sub, 'e / e.sum(dim=-1)')}, in softmax" in out
    assert 'more help: hint("attention.softmax")' in out
    _no_internals(out)


def test_a_notebook_lists_what_it_has_taught_and_runs_every_test(capsys):
    """check() in notebook 03 runs every graded test of multi-head attention (the verdict is all of
    them) but lists only those of its own ideas: the KV-cache test (taught in 06) and the
    grouped-head tests (taught in 07) pass unlisted, and the box says so; upto="modern" lists them."""
    from andrea_course.notebook import run_graded
    from andrea_course.notebook.checks import later_outcomes, shown
    later = {"test_multihead_attention_with_a_kv_cache", "test_grouped_kv_heads_with_a_kv_cache", "test_grouped_kv_heads"}
    ex = "multihead.MultiHeadAttention"
    in_03 = run_graded(ex, impl="solutions", upto="multihead")
    in_07 = run_graded(ex, impl="solutions", upto="modern", reuse=True)
    grader = run_graded(ex, impl="solutions", reuse=True)
    names = lambda outcomes: {o.name for o in outcomes}      # noqa: E731
    assert in_03.passed and names(shown(in_03)) and not names(shown(in_03)) & later
    assert sorted(o.taught for o in later_outcomes(in_03)) == ["model", "modern", "modern"]
    assert names(in_03.outcomes) == names(in_07.outcomes) == names(grader.outcomes) and later <= names(grader.outcomes)
    assert in_07.passed and later <= names(shown(in_07)) and not later_outcomes(in_07)
    check(ex, impl="solutions")
    out = capsys.readouterr().out
    assert out.startswith(f"[PASSED] {ex}: "), out
    assert all(f"      {name}\n" in out for name in names(shown(in_03))) and not any(name in out for name in later)
    assert "3 more graded tests check what notebooks 06_model and 07_modern teach: they pass too" in out and "upto='modern'" in out
    check(ex, impl="solutions", upto="nowhere")
    assert "upto='nowhere' is not an activity of the course" in capsys.readouterr().out


def test_a_later_test_that_fails_turns_the_box_amber_and_use_follows(tmp_path, capsys):
    """notebook 06's model.ANDREA whose final norm is always a LayerNorm: the tests notebook 06
    teaches pass, the modern model's test (taught in 07) fails. The box is amber and names it,
    use() gives the engine's, and passing() (model.pieces) says the same."""
    from andrea_course import pieces
    from andrea_course.grading.passing import passing
    from andrea_course.notebook import run_graded
    from andrea_course.notebook.checks import shown
    sub = tmp_path / "learner"
    shutil.copytree(SOLUTIONS, sub)
    text = (sub / "model.py").read_text(encoding="utf-8")
    line = "        self.ln_f = make_norm(cfg)\n"
    assert line in text
    (sub / "model.py").write_text(text.replace(line, "        self.ln_f = make_norm(cfg.replace(norm='layernorm'))\n"),
                                  encoding="utf-8")
    ex = "model.ANDREA"
    result = run_graded(ex, impl=sub, upto="model")
    assert result.status_of(shown(result)) == "passed" and not result.passed, result
    check(ex, impl=sub)
    out = capsys.readouterr().out
    assert out.startswith(f"[RIGHT SO FAR, A LATER TEST FAILS] {ex}: "), out
    assert "test_the_modern_model_ends_on_its_own_norm" in out and "notebook 07_modern teaches" in out, out
    assert use("model", "ANDREA", impl=sub).__wrapped__ is pieces.get("model", "ANDREA")
    assert "using the engine's (1 of your graded tests fail, 1 of them of what notebook 07_modern teaches" in capsys.readouterr().out
    assert passing(sub, [ex])[ex] == f"engine: 1 of its {len(result.outcomes)} graded tests fail"


def test_taught_must_name_a_later_notebook():
    from andrea_course.grading import graded
    with pytest.raises(ValueError, match="at or after 'multihead'"):
        graded("multihead.MultiHeadAttention", taught="attention")
    with pytest.raises(ValueError, match="got 'later'"):
        graded("multihead.MultiHeadAttention", taught="later")
    graded("multihead.MultiHeadAttention", taught="modern")


def test_the_lessons_follow_the_notebooks():
    """LESSONS (the order taught= and upto= read) is the order of notebooks/NN_<activity>.ipynb."""
    from andrea_course.grading.markers import LESSONS
    from andrea_course.paths import ROOT
    stems = [p.stem.split("_", 1)[1] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    taught = [s for s in stems if s in LESSONS]
    assert taught == [a for a in LESSONS if a in taught] and len(taught) >= 7, (stems, LESSONS)
