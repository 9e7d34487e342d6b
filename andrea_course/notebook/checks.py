"""check() and use(): run an exercise's graded tests and say what they found.

The graded tests live in tests/test_<activity>.py (and any other tests/test_*.py, see graded_files)
and carry @graded("activity.piece", ...).
check("attention.softmax") runs exactly the tests marked with that exercise, with pytest, against
the learner's freshly re-read files, each test under a time limit (grading/local.py: in a forked
child on Linux), and shows one box. It never raises, except KeyboardInterrupt: the learner's interrupt
stops the cell, after a box that says so.

One verdict per piece: check() and use() run every graded test of the piece, as passing()
(model.pieces, learner_model) and the grader do. A box lists the tests of ideas taught up to the
exercise's own notebook (upto=, default the exercise's activity); a test marked
@graded(..., taught="model") is listed from notebook 06 on (check("multihead.MultiHeadAttention",
upto="model")). When such a later test fails, the box says so (amber, with what fails) and use()
and the model take the engine's piece. The boxes point to hint("activity.piece") for more help.
"""
from __future__ import annotations

import os

from .. import pieces
from ..grading.local import CheckResult, failing, run_graded, run_graded_many, verdict
from ..grading.pipeline import time_limit
from ..grading.records import Record as Outcome
from ..grading.markers import LESSONS
from ..lessons import later_or_same, lesson
from ..overlay import ImplementationError, Overlay, notebook_impl, resolve
from ._display import box
from .fresh import fresh

__all__ = ["CheckResult", "Outcome", "check", "notebook_impl", "run_graded", "run_graded_many", "show_result", "use"]

def _sections(bad: list[Outcome]) -> list[tuple[str, list]]:
    """One section per distinct failure: tests that fail the same way (the same exception at the
    same line of the learner's code, say) share one section, with each test's hints."""
    groups: dict[tuple, tuple[list[str], list]] = {}
    for o in bad:
        rows = list(o.rows) if o.rows else [("problem", o.message or o.status)]
        key = tuple(r for r in rows if r[0] in ("problem", "where", "largest error", "shape", "typical mistake"))
        names, merged = groups.setdefault(key, ([], []))
        names.append(o.name)
        merged += [r for r in rows if r not in merged]
    return [(", ".join(names), merged) for names, merged in groups.values()]


def _more_help(exercise: str) -> tuple[str, str]:
    return ("more help", f'hint("{exercise}"): the idea, then what to reach for, then the line (one more each call); '
                         f'reveal_piece("{exercise}"): the answer')


def _notebooks(activities) -> str:
    where = sorted(set(activities), key=lambda a: LESSONS.index(a) if a in LESSONS else len(LESSONS))
    names = [lesson(a).notebook if a in LESSONS else a for a in where]
    return (f"notebook {names[0]} teaches" if len(names) == 1 else
            f"notebooks {', '.join(names[:-1])} and {names[-1]} teach")


def later_outcomes(result: CheckResult) -> list[Outcome]:
    """The tests of ideas a notebook after result.upto's teaches (none without upto): run, and part
    of the verdict, but listed in the box only when one fails."""
    return [o for o in result.outcomes if result.upto in LESSONS and o.taught in LESSONS
            and not later_or_same(o.taught, result.upto)]


def shown(result: CheckResult) -> list[Outcome]:
    """The tests of ideas taught up to result.upto's notebook: what its box lists."""
    later = {id(o) for o in later_outcomes(result)}
    return [o for o in result.outcomes if id(o) not in later]


def _later(result: CheckResult) -> list[tuple[str, str]]:
    """A line on the passing tests left off the box because a later notebook teaches their idea."""
    later = [o.taught for o in later_outcomes(result)]
    if not later:
        return []
    n, last = len(later), max(later, key=lambda a: LESSONS.index(a) if a in LESSONS else len(LESSONS))
    return [("later", f"{n} more graded test{'s' * (n != 1)} check{'s' * (n == 1)} what {_notebooks(later)}: "
                      f"{'they pass' if n != 1 else 'it passes'} too, and "
                      f"{'are' if n != 1 else 'is'} listed there (check({result.exercise!r}, upto={last!r}))")]


def _later_failing(result: CheckResult, too: bool = False) -> list[tuple[str, list]]:
    """Sections for the failing tests of ideas a later notebook teaches."""
    bad = failing(result, later_outcomes(result))
    if not bad:
        return []
    n = len(bad)
    head = (f"{n} graded test{'s' * (n != 1)} of what {_notebooks(o.taught for o in bad)} fail{'s' * (n == 1)}"
            f"{' too' if too else ''}: until {'they pass' if n != 1 else 'it passes'}, the notebook and the model use the engine's")
    return [("", [("later", head)])] + _sections(bad)


def show_result(result: CheckResult) -> None:
    """Display the one box that sums up a CheckResult: the tests of ideas taught so far, and any
    failing test of a later idea (the verdict is all of them: local.verdict)."""
    ex, listed = result.exercise, shown(result)
    st = result.status_of(listed) if listed else result.status
    who = f"checked: {result.impl}"
    if result.interrupted:
        done = [o for o in result.outcomes if o.status != "timeout"]
        box("error", f"{ex}: stopped: you interrupted the check",
            [("", [("", f"{len(done)} graded test{'s' * (len(done) != 1)} had finished; the cell stops here. "
                        f"Run it again when you are ready.")])], who)
    elif result.syntax:
        file = result.syntax.splitlines()[1].split(",")[0] if "\n" in result.syntax else "your file"
        problem, where = (result.syntax.split("\n", 1) + [""])[:2]
        box("failed", f"{ex}: {file} does not compile", [("", [("problem", problem), ("where", where)])],
            who + "; no test ran; until it compiles, the notebook uses the reference")
    elif result.shortcuts and not result.error and not failing(result):
        rows = [("", s.teach()) for s in result.shortcuts]
        passed = sum(o.status == "passed" for o in result.outcomes)
        rows.append(("", f"{passed} of its {len(result.outcomes)} graded tests pass with it; write the piece "
                         f"yourself and check it again"))
        box("shortcut", f"{ex}: {result.shortcuts[0].call} is this exercise", [("", rows + [_more_help(ex)])],
            who + "; until it is written, the notebook and the model use the reference")
    elif st == "passed" and result.passed:
        names = [o.name for o in listed if o.status == "passed"]
        box("passed", f"{ex}: " + (f"all {len(names)} graded tests pass" if len(names) != 1 else
                                   "its 1 graded test passes"),
            [("", [("", n) for n in names] + _later(result))], who)
    elif st == "passed":
        names = [o.name for o in listed if o.status == "passed"]
        bad = failing(result, later_outcomes(result))
        box("later", f"{ex}: the {len(names)} graded test{'s' * (len(names) != 1)} of this notebook pass; "
                     f"{len(bad)} more, of what a later notebook teaches, fail{'s' * (len(bad) == 1)}",
            [("", [("", n) for n in names])] + _later_failing(result) + [("", [_more_help(ex)])],
            who + "; until every graded test passes, the notebook and the model use the reference")
    elif st == "unwritten":
        hint = next((o.hint for o in result.outcomes if o.status == "unwritten"), "")
        rows = [("", "its body still raises NotImplementedError (the exercise stub)")]
        if hint:
            rows.append(("hint", hint))
        rows += [_more_help(ex)]
        box("unwritten", f"{ex}: the notebook uses the reference for now",
            [("", rows)], who + f"; write it in exercises/{ex.split('.')[0]}.py, then run this cell again")
    elif st == "failed":
        listed = listed or result.outcomes
        bad = failing(result, listed)
        total = len(listed) + result.not_run
        sections = _sections(bad)
        if result.not_run:
            sections.append(("", [("", f"{result.not_run} more graded test{'s' * (result.not_run != 1)} "
                                       f"did not run after that")]))
        sections += _later_failing(result, too=True)
        if result.shortcuts:
            sections.append(("", [("", s.teach()) for s in result.shortcuts]))
        later_pass = not failing(result, later_outcomes(result))
        sections.append(("", [_more_help(ex)] + (_later(result) if later_pass else [])))
        box("failed", f"{ex}: {len(bad)} of {total} graded tests fail", sections,
            who + "; until they pass, the notebook uses the reference")
    else:
        box("error", f"{ex}: the check could not run", [("", [("", result.error or "no graded tests found")])],
            who + "; the notebook uses the reference for now")


def _upto(exercise: str, upto: str | None) -> str | None:
    """check()'s and use()'s default: the tests of ideas taught up to the exercise's own notebook."""
    return upto if upto is not None else (str(exercise).split(".")[0] if "." in str(exercise) else None)


def check(exercise: str, *, impl: str | os.PathLike | None = None,
          tests_dir: str | os.PathLike | None = None, upto: str | None = None) -> None:
    """Run the graded tests of one exercise (e.g. "attention.softmax") and show one box.

    impl: whose code ($ANDREA_IMPL if set, else "exercises"); tests_dir: where test_<activity>.py
    lives (the course's tests/); upto: the activity of the notebook this runs in (default: the
    exercise's own): tests of ideas that a later notebook teaches run too but are not listed,
    unless one fails (an amber box). Each test may run time_limit() seconds ($ANDREA_CHECK_TIMEOUT,
    default 30); a result is reused while the files it read keep their content. Returns None;
    raises only KeyboardInterrupt, after its box, when the learner interrupts (so the cell, and
    a Run All, stop there).
    """
    try:
        result = run_graded(exercise, impl, tests_dir, reuse=True, upto=_upto(exercise, upto))
    except KeyboardInterrupt:
        result = CheckResult(exercise, str(impl or notebook_impl()), interrupted=True)
    except ImplementationError as exc:               # no exercises/ to check (outside a workspace, say)
        result = CheckResult(exercise, str(impl or notebook_impl()), error=str(exc))
    except Exception as exc:                         # noqa: BLE001 - a check must not break a notebook
        result = CheckResult(exercise, str(impl or notebook_impl()), error=f"{type(exc).__name__}: {exc}")
    try:
        show_result(result)
    except Exception as exc:                         # noqa: BLE001 - even the display must not break it
        print(f"[COULD NOT CHECK] {exercise}: {type(exc).__name__}: {exc}")
    if result.interrupted:
        raise KeyboardInterrupt
    return None


def use(activity: str, name: str, *, impl: str | os.PathLike | None = None,
        tests_dir: str | os.PathLike | None = None, quiet: bool = False, upto: str | None = None):
    """The learner's `name` from `activity` if every one of its graded tests passes (the verdict
    of check(), passing() and the grader: local.verdict), else the engine's
    (andrea_course/pieces/<activity>.py). upto: the notebook asking (default `activity`), named in
    the line when a test of a later notebook's idea is what fails.

    Prints one line saying which is used. The tests run under check()'s time limit, and the
    learner's file is loaded into this process only once they pass. A function comes back never
    stale: when its file's content changes, its next call decides again (printing the line) and
    runs the code the file holds then (fresh.py). Raises only KeyboardInterrupt, when the
    learner interrupts.
    """
    impl_name = str(impl) if impl is not None else notebook_impl()
    choose = lambda again=False: _choose(activity, name, impl_name, tests_dir, quiet, upto, again)  # noqa: E731
    chosen = choose()
    try:
        folder = resolve(impl_name)
    except Exception:                                # noqa: BLE001 - no folder: nothing to watch
        return chosen
    return fresh(chosen, lambda: choose(again=True), lambda: [folder / f"{activity}.py"])


def _choose(activity: str, name: str, impl_name: str, tests_dir, quiet: bool, upto, again: bool):
    """use()'s choice, and its line."""
    reference = pieces.get(activity, name)
    exercise = f"{activity}.{name}"
    hint = f"run check({exercise!r})"
    try:
        result = run_graded(exercise, impl_name, tests_dir, reuse=True, upto=_upto(exercise, upto))
        if result.interrupted:
            raise KeyboardInterrupt
        timeouts = [o.name for o in result.outcomes if o.status == "timeout"]
        if result.shortcuts:
            chosen, why = reference, f"the engine's ({verdict(result).removeprefix('engine: ')}: {hint})"
        elif result.passed:
            chosen = Overlay(impl_name).isolated(activity, name)
            why = f"yours (all {len(result.outcomes)} graded tests pass)"
        elif result.syntax:
            chosen, why = reference, f"the engine's (your file does not compile: {hint})"
        elif timeouts:
            chosen, why = reference, (f"the engine's (your code ran longer than {time_limit():g} s in "
                                      f"{timeouts[0]}: {hint})")
        elif result.status == "unwritten":
            chosen, why = reference, "the engine's (yours is not written yet)"
        elif result.status == "failed":
            bad, later = failing(result), failing(result, later_outcomes(result))
            where = f", {len(later)} of them of what {_notebooks(o.taught for o in later)}" if later else ""
            chosen, why = reference, f"the engine's ({len(bad)} of your graded tests fail{where}: {hint})"
        else:
            chosen, why = reference, f"the engine's (could not check yours: {verdict(result).removeprefix('engine: ')})"
    except KeyboardInterrupt:
        print(f"{exercise}: stopped: you interrupted the check")
        raise
    except Exception as exc:                         # noqa: BLE001 - fall back to the engine's
        chosen, why = reference, f"the engine's (could not load yours: {type(exc).__name__}: {exc})"
    if not quiet or again:
        print(f"{exercise}: {'your file changed: now ' if again else ''}using {why}")
    return chosen
