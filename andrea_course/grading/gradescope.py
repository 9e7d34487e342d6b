"""Gradescope's results.json, written from the graded tests' outcomes.

    {"score": 37.0, "execution_time": 21, "output": "...", "visibility": "visible",
     "stdout_visibility": "hidden",
     "tests": [{"name": ..., "score": 2.0, "max_score": 2.0, "status": "passed", "output": ...,
                "output_format": "text", "visibility": "visible", "number": "3", "tags": [...]}]}

https://gradescope-autograders.readthedocs.io/en/latest/specs/ (fields as of 2024).
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field


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

    @property
    def activity(self) -> str:
        return self.exercise.split(".", 1)[0]

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0

    @property
    def max_score(self) -> float:
        return 0.0 if self.skipped else self.points


@dataclass
class Results:
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # what went wrong outside single tests
    execution_time: float = 0.0

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

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
            "status": "passed" if (t.passed or t.skipped) else "failed",
            "output": output,
            "output_format": "text",
            "visibility": t.visibility,
            "number": str(number),
            "tags": [t.activity, t.exercise],
        })
    summary = f"Score: {results.score:g} / {results.max_score:g}"
    return {
        "score": results.score,
        "execution_time": int(round(results.execution_time)),
        "output": "\n".join([summary, *results.notes]),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": stdout_visibility,
        "tests": tests,
    }


def write_json(path: str | os.PathLike, data: dict) -> None:
    """Write atomically: a reader never sees half a file, and whatever was at `path` before
    (a file the learner's code planted there, say) is replaced, not appended to."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".results-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
                first = (t.output.strip().splitlines() or ["failed"])[0]
                mark = "-" if t.skipped else "x"
                lines.append(f"      {mark} {t.name} [{t.exercise}]: {first[:150]}")
    lines.append(f"  {'TOTAL':<{width}}  {results.score:>5g} / {results.max_score:<5g}")
    lines.extend(f"  note: {n}" for n in results.notes)
    return "\n".join(lines)
