"""Gradescope's results.json, written from the graded tests' outcomes (TestResult.of: a test's
records; text: a failure's rows as its output).

    {"score": 37.0, "execution_time": 21, "output": "...", "visibility": "visible",
     "stdout_visibility": "hidden",
     "tests": [{"name": ..., "score": 2.0, "max_score": 2.0, "status": "passed", "output": ...,
                "output_format": "text", "visibility": "visible", "number": "3", "tags": [...]}],
     "leaderboard": [{"name": "Validation loss", "value": 4.2133, "order": "asc"}]}   # the capstone's (capstone/leaderboard.py)

https://gradescope-autograders.readthedocs.io/en/latest/specs/ (fields as of 2024).

Hidden tests: a test from the instructor's hidden folder (--hidden-tests) that its @graded
leaves "visible" is written "after_due_date" (one marked hidden or after_published keeps that).
Gradescope then shows neither those tests nor the total to learners before the due date, so the
visible "output" says the score on the tests shown now and how many points are still to come
from the others: "all tests passed" is not read as the final grade.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

# Where the runner puts the hidden folder's tests (staging.stage_tests: tests/hidden/ under its rootdir).
HIDDEN_NODEID_PREFIX = "tests/hidden/"
MAX_OUTPUT = 4000               # characters of a failure's text in results.json
LATER = {"after_due_date": "shown after the due date", "after_published": "shown when grades are published",
         "hidden": "never shown"}


def text(rec) -> str:
    """A failure's rows (a records.Record's) as one text, a test's output: the problem first, then
    "Label: text" rows; "" when it passed; a failure in a fixture's set-up or teardown starts with
    "setup: " or "teardown: "."""
    from .expect import rows_text
    if rec.status == "passed":
        return ""
    prefix = f"{rec.when}: " if rec.status != "skipped" and rec.when not in ("call", "") else ""
    return (prefix + rows_text(rec.rows).strip())[:MAX_OUTPUT] or rec.status


@dataclass
class TestResult:
    __test__ = False                 # not a pytest test class
    nodeid: str
    name: str
    exercise: str                    # "activity.piece"
    points: float
    visibility: str = "visible"
    passed: bool = False
    skipped: bool = False
    output: str = ""
    fraction: float = 0.0            # partial credit of a failed test with parts (markers.Credit)
    mistake: str | None = None       # the typical mistake its failure names (Mismatch.mistake)

    @classmethod
    def of(cls, collected, done, why: str) -> "TestResult":
        """A graded test as the plugin's records say: its "collected" records.Record and its "result"
        (None when it never reported: it fails, and its output is `why`)."""
        passed = bool(done and done.status == "passed")
        return cls(nodeid=collected.nodeid, name=collected.name, exercise=collected.exercise,
                   points=float(collected.points), visibility=collected.visibility, passed=passed,
                   skipped=bool(done and done.status == "skipped"), fraction=float(done.fraction) if done else 0.0,
                   output=text(done) if done else why, mistake=None if passed or done is None else done.mistake)

    @property
    def activity(self) -> str:
        return self.exercise.split(".", 1)[0]

    @property
    def score(self) -> float:
        if self.skipped:
            return 0.0
        return self.points if self.passed else round(self.points * min(max(self.fraction, 0.0), 1.0), 6)

    @property
    def max_score(self) -> float:
        return 0.0 if self.skipped else self.points

    @property
    def shown(self) -> str:
        """Its Gradescope visibility: a hidden folder's test is never "visible"."""
        if self.visibility == "visible" and self.nodeid.startswith(HIDDEN_NODEID_PREFIX):
            return "after_due_date"
        return self.visibility


@dataclass
class Results:
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # what went wrong outside single tests
    execution_time: float = 0.0
    isolation: str = ""              # how the learner's code was isolated (sandbox.describe)
    refused: str | None = None       # why nothing was graded (no sandbox, no .py file)
    written: str | None = None       # where results.json was written
    leaderboard: object = None       # leaderboard.Entry when the course has a leaderboard (never in the score)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def later(self) -> list[TestResult]:
        """The tests that count and that learners do not see before the due date (hidden ones
        included; a skipped test counts nothing)."""
        return [t for t in self.tests if t.shown != "visible" and not t.skipped]

    def by_activity(self) -> dict[str, list[TestResult]]:
        out: dict[str, list[TestResult]] = {}
        for t in self.tests:
            out.setdefault(t.activity, []).append(t)
        return out


def to_gradescope(results: Results, stdout_visibility: str = "hidden") -> dict:
    """The results.json dictionary."""
    tests = []
    for number, t in enumerate(results.tests, start=1):
        output = t.output
        if t.skipped:
            output = f"{t.output} (not counted)".strip()
        tests.append({
            "name": f"{t.exercise}: {t.name}",
            "score": t.score,
            "max_score": t.max_score,
            "status": "passed" if (t.passed or t.skipped) else "failed",   # a partial score fails
            "output": output,
            "output_format": "text",
            "visibility": t.shown,
            "number": str(number),
            "tags": [t.activity, t.exercise],
        })
    summary = score_lines(results)
    board = results.leaderboard.gradescope() if results.leaderboard is not None else []
    out = {
        "score": results.score,
        "execution_time": int(round(results.execution_time)),
        "output": "\n".join([*summary, *results.notes]),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": stdout_visibility,
        "tests": tests,
    }
    if board:
        out["leaderboard"] = board
    return out


def score_lines(results: Results) -> list[str]:
    """The score as learners may see it before the due date: the total when every test is
    visible; else the score on the tests shown now and the points still to come."""
    later = results.later
    if not later:
        return [f"Score: {results.score:g} / {results.max_score:g}"]
    now = [t for t in results.tests if t.shown == "visible"]
    kinds = {}
    for t in later:
        kinds[t.shown] = kinds.get(t.shown, 0) + 1
    how = ", ".join(f"{n} {LATER.get(kind, kind)}" for kind, n in kinds.items())
    return [f"Score on the {len(now)} test(s) shown now: {sum(t.score for t in now):g} / "
            f"{sum(t.max_score for t in now):g}.",
            f"Still to come: {sum(t.max_score for t in later):g} more point(s) from {len(later)} test(s) "
            f"not shown before the due date ({how}); your final score counts them."]


def write_json(path: str | os.PathLike, data: dict) -> str:
    """Write atomically (a temp file renamed over `path`), and always: when the rename fails
    (`path` is a folder, say), write `path` in place, else a sibling `<name>.fallback-<pid>.json`
    (or one in the temp folder); the file written says so in its output. Returns the path written."""
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    text = json.dumps(data, indent=1)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".results-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            return path
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        why = f"{type(exc).__name__}: {exc}"
    stem = os.path.splitext(os.path.basename(path))[0]
    for target in (path, os.path.join(folder, f"{stem}.fallback-{os.getpid()}.json"),
                   os.path.join(tempfile.gettempdir(), f"{stem}.fallback-{os.getpid()}.json")):
        note = (f"NOTE: {path} could not be written atomically ({why}); this copy is at {target}")
        fallback = {**data, "output": f"{data.get('output', '')}\n{note}".strip()}
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(fallback, f, indent=1)
        except OSError:
            continue
        print(f"andrea-grade: {note}", file=sys.stderr)
        return target
    raise OSError(f"results could not be written anywhere ({why})")


def table(results: Results, title: str = "") -> str:
    """A readable report: one line per activity, then every failed test and why."""
    lines = [title] if title else []
    groups = results.by_activity()
    width = max([len(a) for a in groups] + [8])
    for activity, tests in groups.items():
        got, most = sum(t.score for t in tests), sum(t.max_score for t in tests)
        passed = sum(t.passed for t in tests)
        lines.append(f"  {activity:<{width}}  {got:>5g} / {most:<5g}  ({passed}/{len(tests)} tests passed)")
        for t in tests:
            if not t.passed:
                first = (t.output.strip().splitlines() or ["failed"])[0][:150]
                where = re.search(r"^Where: (\S.*?, line \d+(?:, in \S+)?)$", t.output, re.M)
                first += f" ({where.group(1)})" if where and where.group(1) not in first else ""
                mark = "-" if t.skipped else "x"
                lines.append(f"      {mark} {t.name} [{t.exercise}]: {first}")
    lines.append(f"  {'TOTAL':<{width}}  {results.score:>5g} / {results.max_score:<5g}")
    later = results.later
    if later:
        lines.append(f"  {'of which':<{width}}  {sum(t.score for t in later):>5g} / "
                     f"{sum(t.max_score for t in later):<5g}  from {len(later)} test(s) learners do not "
                     f"see before the due date (results.json's output says the points still to come)")
    lines.extend(f"  note: {n}" for n in results.notes)
    return "\n".join(lines)
