"""Graded tests run for the learner, in the learner's own process tree (pipeline.run): check(),
use() and passing() read their one verdict here.

    run_graded("attention.softmax", "exercises")           # a CheckResult: outcomes, status, ...
    run_graded_many(["attention.softmax", "mlp.MLP"], "exercises")   # one pytest run for several
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..overlay import notebook_impl, resolve
from ..paths import ACTIVITY_TESTS
from . import pipeline, shortcuts
from .markers import LESSONS, graded_files
from .pipeline import Run, Spec, time_limit
from .explain import syntax_error
from .records import Record as Outcome, failed, timed_out


@dataclass
class CheckResult:
    exercise: str
    impl: str
    outcomes: list[Outcome] = field(default_factory=list)   # every graded test of the piece
    error: str | None = None         # the tests could not be run at all (missing file, bad name, ...)
    syntax: str | None = None        # the learner's file does not compile: `file, line N` and a caret
    not_run: int = 0                 # tests left unrun after a timeout or a crash
    upto: str | None = None          # the notebook it is shown in (notebook/checks.py: later_outcomes)
    interrupted: bool = False        # the learner interrupted the check
    shortcuts: list = field(default_factory=list)   # library calls that are the piece (shortcuts.find)

    @property
    def status(self) -> str:
        """passed | failed | unwritten | error, over every graded test of the piece."""
        return self.status_of(self.outcomes)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def status_of(self, outcomes: list[Outcome]) -> str:
        """The status over `outcomes`, some of the piece's tests (a notebook's box: those it lists)."""
        if self.syntax:
            return "failed"
        if self.error or not outcomes:
            return "error"
        st = {o.status for o in outcomes}
        if st <= {"passed", "skipped"} and "passed" in st and not self.not_run:
            return "passed"
        if "unwritten" in st and not (st & {"failed", "error", "timeout"}):
            return "unwritten"
        if st <= {"skipped"}:
            return "error"
        return "failed"


def failing(result: CheckResult, outcomes: list[Outcome] | None = None) -> list[Outcome]:
    """The outcomes that keep a piece from being the learner's."""
    return [o for o in (result.outcomes if outcomes is None else outcomes) if o.status not in ("passed", "skipped")]


def verdict(result: CheckResult) -> str:
    """The one verdict on a piece: "yours" when every graded test passes, else "engine: <why>"."""
    if result.shortcuts and not (result.syntax or result.error):
        first = result.shortcuts[0]
        return f"engine: yours calls {first.call} (line {first.line}), which is this exercise"
    if result.passed:
        return "yours"
    if result.syntax:
        return "engine: its file does not compile"
    if result.error or result.interrupted:
        first = (result.error or "the check was interrupted").splitlines()[0]
        return f"engine: its graded tests could not run ({first})"
    if result.status == "unwritten":
        return "engine: not written yet"
    total = len(result.outcomes) + result.not_run
    return f"engine: {len(failing(result)) + result.not_run} of its {total} graded tests fail"


def content_stamps(files) -> tuple:
    """(path, digest of its bytes) of each file that exists: equal while no content changes (an
    edit that keeps the size and the modification time included)."""
    return tuple((str(f), hashlib.sha1(f.read_bytes()).hexdigest()) for f in files if f.is_file())


_recent: dict[tuple, tuple] = {}      # (exercise, folder, tests folder) -> (stamps, CheckResult)


def run_graded(exercise: str, impl: str | os.PathLike | None = None,
               tests_dir: str | os.PathLike | None = None, reuse: bool = False,
               upto: str | None = None) -> CheckResult:
    """Run every graded test of `exercise` ("activity.piece") against `impl`. Raises
    ImplementationError when `impl` names no folder (check() shows it); a test that fails, times out
    or crashes, and an interrupt while the tests run, are in the CheckResult. upto: the activity of
    the notebook asking (notebook/checks.py's later_outcomes); reuse: the last result while the
    learner's files, the tests and the time limit are the same."""
    return run_graded_many([exercise], impl, tests_dir, upto=upto, reuse=reuse)[exercise]


def run_graded_many(exercises, impl: str | os.PathLike | None = None,
                    tests_dir: str | os.PathLike | None = None, upto: str | None = None,
                    reuse: bool = False) -> dict[str, CheckResult]:
    """{exercise: CheckResult} for several exercises, in one pytest run; raises as run_graded does."""
    impl_name = str(impl) if impl is not None else notebook_impl()
    exercises = list(dict.fromkeys(exercises))
    if upto is not None and upto not in LESSONS:
        bad = f"upto={upto!r} is not an activity of the course: one of {', '.join(LESSONS)}"
        return {e: CheckResult(e, impl_name, error=bad) for e in exercises}
    try:                                             # one memory per folder, however it is named
        folder = resolve(impl_name)
    except Exception:                                # noqa: BLE001 - a bad name: its result says so
        folder = None
    where = (str(folder or impl_name), str(Path(tests_dir).resolve()) if tests_dir is not None else None)
    stamps, out = {}, {}
    for exercise in exercises:
        try:
            stamps[exercise] = (time_limit(),) + content_stamps(sorted(folder.glob("*.py"))
                                                                + graded_files(exercise, tests_dir))
        except Exception:                            # noqa: BLE001 - then simply do not reuse
            stamps[exercise] = None
        known, result = _recent.get((exercise, *where), (None, None))
        if reuse and stamps[exercise] is not None and known == stamps[exercise]:
            out[exercise] = result
    missing = [e for e in exercises if e not in out]
    for exercise, result in _run_many(missing, impl_name, folder, tests_dir).items():
        complete = (result.error is None and not result.interrupted and not result.not_run
                    and not any(o.status == "timeout" for o in result.outcomes))
        if stamps[exercise] is not None and complete:    # a timeout or a crash may not happen again
            _recent[(exercise, *where)] = (stamps[exercise], result)
        out[exercise] = result
    return {e: dataclasses.replace(out[e], upto=upto) for e in exercises}


def _run_many(exercises: list[str], impl_name: str, folder: Path | None, tests_dir) -> dict[str, CheckResult]:
    """Run the graded tests of `exercises` against `folder`, resolved from `impl_name` (None: it names
    no folder, whose ImplementationError check() shows, raised once an exercise is to run)."""
    results = {e: CheckResult(e, impl_name) for e in exercises}
    tests_dir = Path(tests_dir) if tests_dir is not None else ACTIVITY_TESTS
    files: dict[str, list[Path]] = {}
    for exercise, result in results.items():
        try:
            activity, _ = str(exercise).split(".")
        except ValueError:
            result.error = (f"{exercise!r} is not an exercise name: write it as 'activity.piece', "
                            f"e.g. 'attention.softmax'")
            continue
        try:
            paths = graded_files(exercise, tests_dir)
        except Exception as exc:                     # noqa: BLE001 - unreadable test files
            result.error = f"the graded tests could not be read: {type(exc).__name__}: {exc}"
            continue
        if not paths:
            result.error = (f"no graded tests for {exercise}: {tests_dir / f'test_{activity}.py'} does not exist "
                            f"and no other test file names it")
            continue
        result.syntax = syntax_error(folder / f"{activity}.py", folder) if folder is not None else None
        if result.syntax is None:
            files[exercise] = paths
            with contextlib.suppress(OSError, ValueError):   # no folder: resolve's ImplementationError
                result.shortcuts = shortcuts.find((folder or resolve(impl_name)) / f"{activity}.py", exercise)
    if not files:
        return results
    paths = list(dict.fromkeys(p for ps in files.values() for p in ps))
    run = pipeline.run(Spec(tests=paths, folder=impl_name, isolation="process", limit=time_limit(),
                            exercises=list(files), rootdir=tests_dir.parent))
    for exercise in files:
        _fill(results[exercise], run, files[exercise])
    return results


def _fill(result: CheckResult, run: Run, paths: list[Path]) -> None:
    """Put what a run found for one exercise into its CheckResult."""
    exercise, limit = result.exercise, time_limit()
    mine = {n: r for n, r in run.collected.items() if r.exercise == exercise}
    outcomes = {n: r for n, r in run.results.items() if n in mine}
    running = mine.get(run.running.nodeid) if run.running is not None else None
    if running is not None and run.stopped == "timeout":
        outcomes[running.nodeid] = timed_out(running.name, limit, run.where)
    elif running is not None and run.stopped == "crash":
        outcomes[running.nodeid] = failed(running.name, "error", (
            "problem", "the process running this test ended abruptly (a crash, os._exit or exit() in your "
                       "code, or it ran out of memory)"))
    for nodeid, outcome in outcomes.items():
        outcome.taught = mine[nodeid].taught
    result.outcomes = list(outcomes.values())
    result.not_run = max(0, len(mine) - len(outcomes)) if run.stopped else 0
    result.interrupted = run.stopped == "interrupt"
    if run.errors:
        result.error = "the graded tests could not be loaded:\n" + run.errors[0].rows[0][1]   # its end (plugin.py)
    elif not result.outcomes and not result.interrupted and run.stopped in ("timeout", "crash"):
        result.error = (f"the graded tests did not start within {limit:g} s" if run.stopped == "timeout"
                        else "the process running the graded tests ended before they started")
    elif not result.outcomes and not result.interrupted:
        log = "\n".join(run.log.rstrip().splitlines()[-12:])
        result.error = (f"no graded test is marked @graded({exercise!r}) in {', '.join(p.name for p in paths)}"
                        + ("" if run.exit_code in (0, 5) else f" (pytest exit code {run.exit_code}):\n{log}"))
