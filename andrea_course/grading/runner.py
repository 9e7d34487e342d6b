"""Grade one submission: the graded tests run by pipeline.run, the learner's code isolated.

    results = grade("path/to/submission", out="results.json")                   # the best tier here
    results = grade("exercises", isolation="process", own_work=True)            # make grade

The submission is staged and the tier chosen by staging.py; where no tier keeps the hidden tests
and the results out of the learner's reach, nothing runs and the results say why. With a
leaderboard (hooks.py), the learner's model is trained after the tests in the same tier, never for
the score. Runs in a sandbox or container tier are independent (a batch grades in parallel
threads); in the process tier (orphans reparent to this process), one at a time.
"""
from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

from ..paths import ROOT
from ..overlay import resolve
from . import pipeline, shortcuts
from .gradescope import Results, TestResult, to_gradescope, write_json
from .pipeline import Spec
from .staging import ISOLATIONS, Course, choose, sandbox_uid, stage_submission, stage_tests
from ..worker.tiers import Isolation, Limits, tier_for

DEFAULT_TIMEOUT_PER_TEST = 60.0
DEFAULT_TIMEOUT_TOTAL = 1800.0


# ----------------------------------------------------------------------------- grading
def grade(submission: str | os.PathLike, out: str | os.PathLike | None = None, *,
          course: Course | None = None, hidden_tests: str | os.PathLike | None = None,
          timeout_per_test: float = DEFAULT_TIMEOUT_PER_TEST,
          timeout_total: float = DEFAULT_TIMEOUT_TOTAL, jobs: int = 1, isolation: str = "auto",
          own_work: bool = False, uid: int | None = None, limits: Limits = Limits(),
          log: str | os.PathLike | None = None, leaderboard: str | os.PathLike | bool | None = None,
          library_shortcuts: str = "refuse", warm=None) -> Results:
    """Grade one submission folder; write Gradescope's results.json to `out` (always, last).

    isolation: "auto" (the strongest tier this machine allows: sandbox, else container as root,
    else nothing runs), or one tier by name. own_work: the learner grades their own code
    (`make grade`): the process tier is allowed as root too. leaderboard (without `course`): the
    leaderboard's settings file; default: the hidden tests folder's leaderboard.json, if any.
    library_shortcuts: what a piece written as the library call that is the piece gets
    (shortcuts.POLICIES: refuse, warn, allow). warm: a batch's worker.warm.WarmStart (a root
    grader's sandbox and container worker parents are forked from it, then confined)."""
    start, results = time.monotonic(), Results()
    try:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, not {isolation!r}")
        course = course or Course(hidden=hidden_tests, leaderboard=leaderboard)
        if library_shortcuts not in shortcuts.POLICIES:
            raise ValueError(f"library_shortcuts must be one of {', '.join(shortcuts.POLICIES)}, "
                             f"not {library_shortcuts!r}")
        submission = resolve(submission)
        results = _run(submission, course, timeout_per_test, timeout_total, jobs, isolation, own_work, uid, limits,
                       log, out, warm)
        used = shortcuts.apply(results, submission, library_shortcuts)
        if used:
            results.notes.append(f"library shortcuts (policy: {library_shortcuts}): " + "; ".join(
                f"{s.piece} uses {s.call} (line {s.line})" for s in used))
    except BaseException as exc:         # noqa: BLE001  (the grader's own failure: still report)
        results.notes.append(f"the grader failed: {type(exc).__name__}: {exc}")
        results.notes.append(traceback.format_exc(limit=3))
        if not isinstance(exc, Exception):
            raise
    finally:
        results.execution_time = time.monotonic() - start
        if out is not None:
            results.written = write_json(out, to_gradescope(results))
    return results


def _run(submission: Path, course: Course, timeout_per_test, timeout_total, jobs, isolation,
         own_work, uid, limits: Limits, log, out, warm) -> Results:
    results, began = Results(), time.monotonic()
    uid = (uid if uid is not None else sandbox_uid()) if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory(prefix="andrea-grade-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o700)
        staged = tmp / "submission"
        skipped = stage_submission(submission, staged)
        if skipped:
            results.notes.append("files of the submission not graded: " + ", ".join(skipped))
        tier, refused = choose(results, submission, staged, tmp, course, isolation, uid, limits, own_work, out)
        with tier_for(tier, staged, name=f"andrea-grade-{os.getpid()}-{tmp.name}", uid=uid, limits=limits,
                      timeout=timeout_per_test, notes=results.notes) as (iso, folder):
            if iso is not None:
                results.isolation = iso.describe()
                results.notes.append(results.isolation)
            if tier == "container" and (ROOT / "solutions").is_dir():
                results.notes.append(f"WARNING: the answer key {ROOT / 'solutions'} is readable by the learner's "
                                     f"code in the container tier: grade from the learner's release "
                                     f"(docs/gradescope/make_zip.sh) or make it root's only")
            if refused:
                results.notes.append(refused)
                results.refused = refused
            if refused and "no .py file" not in refused:
                return results        # nothing runs: no test is listed, the note says why
            hook = course.leaderboard if iso is not None else None            # none when refused
            parent = None
            try:
                # the hook's work is prepared by the tests' worker parent before it forks any worker, and
                # that parent is kept for the hook (none where the submission wrote nothing it uses)
                prepare = hook.prepare() if hook is not None and hook.wants(folder) else None
                stopped, parent = _pytest(results, tmp, folder, course, timeout_per_test, timeout_total, jobs, iso,
                                          log, collect_only=bool(refused), prepare=prepare, warm=warm)
                if hook is not None and stopped:
                    results.leaderboard = hook.stopped(stopped)
                elif hook is not None:
                    parent, started = None, parent            # after() closes it
                    results.leaderboard = hook.after(folder, results.tests, iso, started=started,
                                                     seconds=timeout_total - (time.monotonic() - began))
                if hook is not None:
                    results.notes.append(results.leaderboard.note)
            finally:
                if parent is not None:
                    parent.close()
    return results


def _pytest(results: Results, tmp: Path, staged: Path, course: Course, timeout_per_test, timeout_total, jobs,
            iso: Isolation | None, log, collect_only: bool, prepare: tuple | None = None,
            warm=None) -> tuple[str | None, object]:
    """Run the graded tests and fill `results`; returns why the run stopped early, else None, and
    with `prepare` the worker parent the tests used, the caller's to close."""
    tests, env = stage_tests(course, tmp)
    iso = iso or Isolation("process", timeout=timeout_per_test)
    walled = iso.tier in ("sandbox", "container") or collect_only
    got = pipeline.run(Spec(tests=[tests], folder=staged, isolation=iso, limit=timeout_per_test,
                            total=timeout_total, rootdir=tmp, cwd=tmp, env=env,
                            log=Path(log) if log else None, jobs=jobs, collect_only=collect_only,
                            hand_over=True, prepare=prepare, orphans=not walled, names_in_impl=True, warm=warm))
    stops = {"total": f"the grading stopped at the total time limit of {timeout_total:g} s",
             "timeout": f"the grading stopped: a test ran past {timeout_per_test + pipeline.GRACE:g} s",
             "interrupt": "the grading was interrupted"}
    if got.stopped in stops:
        said = stops[got.stopped] + " (Ctrl-C or SIGTERM)" * (got.stopped == "interrupt")
        results.notes.append(f"{said}; tests that had not finished count as failed")
        why = "not run: " + (stops[got.stopped][4:] + " (an earlier test may have been slow)"
                             if got.stopped == "total" else stops[got.stopped])
    elif collect_only:
        why = f"not graded: {results.refused}"
    elif got.exit_code not in (0, 1):
        results.notes.append(f"pytest stopped early (exit status {got.exit_code}): "
                             + " | ".join(got.log.strip().splitlines()[-5:]))
        why = f"not run: pytest stopped early (exit status {got.exit_code})"
    else:
        why = "not run: the test did not report a result"
    results.tests += [TestResult.of(rec, got.results.get(rec.nodeid), why) for rec in got.collected.values()]
    for e in got.errors:
        last = [line for line in e.rows[0][1].splitlines() if line.strip()][-1:] or [""]
        results.notes.append(f"a test file failed to load: {Path(e.name).name}: {last[0].strip()}")
    if got.forged:
        results.notes.append(f"TAMPERING: {got.forged} line(s) in the grader's results stream were not "
                             f"written by the grader; they were ignored")
    if not got.collected:
        results.notes.append("no graded test was collected")
    changes = course.changes()
    if changes:
        results.notes.append("WARNING: course files changed while this submission was graded "
                             "(this run used copies made before; later runs will not): "
                             + ", ".join(changes[:10]))
    return stops.get(got.stopped), got.parent
