"""check() and use() with code that misbehaves: an infinite loop, the learner's interrupt, a
syntax error, an exception, prints, a crash. The box says what happened in the learner's words
and points at the learner's line, never at the grader's internals.

Each runs a small graded test file of our own against a copy of the reference attention.py with
one line changed, in both ways _runner.py can run tests (a forked child; this process with a
watchdog thread)."""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from andrea_course.exercises import SOLUTIONS
from andrea_course.notebook import check, use
from andrea_course.notebook._display import render_html, render_text

GRADED = '''
import torch
from andrea_course.grading import graded, expect_close

HINT = "normalise over dim=-1"


@graded("attention.softmax", points=1)
def test_softmax_values(student):
    softmax = student.piece("attention", "softmax")
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    expect_close(softmax(x), torch.softmax(x, -1), "softmax(x)",
                 mistakes={"normalised over the queries (dim=-2)": torch.softmax(x, -2)}, hint=HINT)


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
MODES = ["fork", "thread"]


@pytest.fixture
def graded_dir(tmp_path):
    d = tmp_path / "gtests"
    d.mkdir()
    (d / "test_attention.py").write_text(GRADED, encoding="utf-8")
    return d


@pytest.fixture(params=MODES)
def check_mode(request, monkeypatch):
    monkeypatch.setenv("ANDREA_CHECK_MODE", request.param)
    return request.param


def _softmax_ending(tmp_path: Path, body: str) -> Path:
    """A submission whose softmax ends with `body` instead of the reference's last line."""
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    text = (SOLUTIONS / "attention.py").read_text(encoding="utf-8")
    assert SOFTMAX_BODY in text
    (sub / "attention.py").write_text(text.replace(SOFTMAX_BODY, body), encoding="utf-8")
    return sub


def _line_of(sub: Path, needle: str) -> int:
    return next(i for i, row in enumerate((sub / "attention.py").read_text().splitlines(), 1) if needle in row)


def _no_internals(out: str) -> None:
    assert "andrea_course" not in out and "_pytest" not in out and "Traceback" not in out, out
    assert "\x1b[" not in out


def test_an_infinite_loop_is_stopped_and_named(check_mode, graded_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANDREA_CHECK_TIMEOUT", "1.5")          # only here: every other test keeps 30 s
    sub = _softmax_ending(tmp_path, "    while True:\n        e = e + 0\n")
    assert check("attention.softmax", impl=sub, tests_dir=graded_dir) is None
    out = capsys.readouterr().out
    assert out.startswith("[NOT YET RIGHT] attention.softmax: 1 of 2 graded tests fail"), out
    assert "your code ran longer than 1.5 s: an infinite loop?" in out
    assert "1 more graded test did not run after that" in out
    if check_mode == "fork":           # the child's stack, dumped at the timeout, names the line
        assert f"attention.py, line {_line_of(sub, 'e = e + 0')}, in softmax" in out
    _no_internals(out)
    chosen = use("attention", "softmax", impl=sub, tests_dir=graded_dir)
    assert chosen is not None and "ran longer than 1.5 s in test_softmax_values" in capsys.readouterr().out


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
    monkeypatch.setenv("ANDREA_CHECK_MODE", "fork")
    sub = _softmax_ending(tmp_path, "    import os; os._exit(3)\n")
    check("attention.softmax", impl=sub, tests_dir=graded_dir)
    out = capsys.readouterr().out
    assert "[NOT YET RIGHT]" in out and "ended abruptly" in out, out


def test_boxes_carry_no_terminal_colour_codes():
    sections = [("t", [("problem", "\x1b[31mred\x1b[0m text")])]
    assert "\x1b" not in render_html("failed", "x", sections)
    assert "\x1b" not in render_text("failed", "x", sections) and "red text" in render_text("failed", "x", sections)
