"""check() and use(): run an exercise's graded tests and say what they found.

The graded tests live in tests/test_<activity>.py (and any other tests/test_*.py, see graded_files)
and carry @graded("activity.piece", ...).
check("attention.softmax") runs exactly the tests marked with that exercise, with pytest, against
the learner's freshly re-read files, each test under a time limit (grading/local.py: in a forked
child on Linux), and shows one box. It never raises, except KeyboardInterrupt: the learner's interrupt
stops the cell, after a box that says so.

A notebook checks only what it has taught: check() and use() run the tests of ideas taught up to
the exercise's own notebook, and a test marked @graded(..., taught="model") runs from notebook
06 on (check("multihead.MultiHeadAttention", upto="model")) and in the grader, which runs every
test. The boxes point to hint("activity.piece") for more help (hints.py).
"""
from __future__ import annotations

import os

from .. import pieces
from ..grading.local import CheckResult, notebook_impl, run_graded, run_graded_many
from ..grading.local_runner import Outcome, time_limit
from ..grading.markers import LESSONS
from ..lessons import lesson
from ..overlay import ImplementationError, Overlay
from ._display import box

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


def _later(result: CheckResult) -> list[tuple[str, str]]:
    """A line on the tests left out because their idea is taught in a later notebook."""
    if not result.later:
        return []
    n = len(result.later)
    where = sorted(set(result.later), key=lambda a: LESSONS.index(a) if a in LESSONS else len(LESSONS))
    names = [lesson(a).notebook if a in LESSONS else a for a in where]
    notebooks = (f"notebook {names[0]} teaches" if len(names) == 1 else
                 f"notebooks {', '.join(names[:-1])} and {names[-1]} teach")
    return [("later", f"{n} more graded test{'s' * (n != 1)} check{'s' * (n == 1)} what {notebooks}: "
                      f"{'they run' if n != 1 else 'it runs'} there "
                      f"(check({result.exercise!r}, upto={where[-1]!r})) and in the grader")]


def show_result(result: CheckResult) -> None:
    """Display the one box that sums up a CheckResult."""
    ex, st = result.exercise, result.status
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
    elif st == "passed":
        names = [o.name for o in result.outcomes if o.status == "passed"]
        box("passed", f"{ex}: " + (f"all {len(names)} graded tests pass" if len(names) != 1 else
                                   "its 1 graded test passes"),
            [("", [("", n) for n in names] + _later(result))], who)
    elif st == "unwritten":
        hint = next((o.hint for o in result.outcomes if o.status == "unwritten"), "")
        rows = [("", "its body still raises NotImplementedError (the exercise stub)")]
        if hint:
            rows.append(("hint", hint))
        rows += [_more_help(ex)] + _later(result)
        box("unwritten", f"{ex}: the notebook uses the reference for now",
            [("", rows)], who + f"; write it in exercises/{ex.split('.')[0]}.py, then run this cell again")
    elif st == "failed":
        bad = [o for o in result.outcomes if o.status in ("failed", "error", "unwritten", "timeout")]
        good = [o for o in result.outcomes if o.status == "passed"]
        total = len(bad) + len(good) + result.not_run
        sections = _sections(bad)
        if result.not_run:
            sections.append(("", [("", f"{result.not_run} more graded test{'s' * (result.not_run != 1)} "
                                       f"did not run after that")]))
        sections.append(("", [_more_help(ex)] + _later(result)))
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
    exercise's own): tests of ideas that a later notebook teaches are left out, and the box says so. Each test may run time_limit() seconds ($ANDREA_CHECK_TIMEOUT,
    default 30). Returns None; raises only KeyboardInterrupt, after its box, when the learner
    interrupts (so the cell, and a Run All, stop there).
    """
    try:
        result = run_graded(exercise, impl, tests_dir, upto=_upto(exercise, upto))
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
    """The learner's `name` from `activity` if all its graded tests pass (those of ideas taught up
    to the notebook of `upto`, default `activity`, as check()), else the engine's
    (andrea_course/pieces/<activity>.py).

    Prints one line saying which is used. The tests run under check()'s time limit, and the
    learner's file is loaded into this process only once they pass. Raises only
    KeyboardInterrupt, when the learner interrupts.
    """
    reference = pieces.get(activity, name)
    impl_name = str(impl) if impl is not None else notebook_impl()
    exercise = f"{activity}.{name}"
    hint = f"run check({exercise!r})"
    try:
        result = run_graded(exercise, impl_name, tests_dir, reuse=True, upto=_upto(exercise, upto))
        if result.interrupted:
            raise KeyboardInterrupt
        timeouts = [o.name for o in result.outcomes if o.status == "timeout"]
        if result.passed:
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
            n = sum(o.status != "passed" for o in result.outcomes)
            chosen, why = reference, f"the engine's ({n} of your graded tests fail: {hint})"
        else:
            chosen, why = reference, f"the engine's (could not check yours: {(result.error or '').splitlines()[0]})"
    except KeyboardInterrupt:
        print(f"{exercise}: stopped: you interrupted the check")
        raise
    except Exception as exc:                         # noqa: BLE001 - fall back to the engine's
        chosen, why = reference, f"the engine's (could not load yours: {type(exc).__name__}: {exc})"
    if not quiet:
        print(f"{exercise}: using {why}")
    return chosen
