"""What a run of graded tests reports: one Record per event (a signed JSON line on pipeline.py's
channel), and the one description of a failure: describe()'s rows, which check()'s box shows and
gradescope.text words for results.json, the command line and the class report.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import STUB_MARK
from .explain import frames_of, raised_rows, syntax_error_text, where

MAX_PRINTED = (12, 1200)        # lines, characters of a failing test's prints shown


@dataclass
class Record:
    """One event of a run; a "result" is one graded test's outcome (notebook.Outcome)."""
    kind: str = "result"             # collected | start | result | collect_error
    nodeid: str = ""
    name: str = ""
    exercise: str = ""
    status: str = ""                 # passed | failed | unwritten | error | skipped | timeout
    rows: list = field(default_factory=list)   # [(label, text)] for the box, and gradescope.text
    hint: str = ""                   # an unwritten stub's hint
    taught: str = ""                 # the activity whose notebook teaches what it checks
    points: float = 1.0
    visibility: str = "visible"
    fraction: float = 0.0            # partial credit of a failed test with parts (markers.Credit)
    mistake: str | None = None       # the typical mistake its failure names (Mismatch.mistake)
    when: str = "call"               # the phase it failed in: "setup" and "teardown" prefix its text

    @property
    def message(self) -> str:
        """The failure in one short text: the problem's first line (empty when passed)."""
        return next((t for label, t in self.rows if label == "problem"), "").split("\n", 1)[0]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, data: dict) -> "Record":
        names = {f.name for f in dataclasses.fields(cls)}
        rec = cls(**{k: v for k, v in data.items() if k in names})
        rec.rows = [tuple(r) for r in rec.rows]
        return rec


def sign(key: bytes, record: dict) -> str:
    """HMAC-SHA256 of the record's canonical JSON (empty without a key)."""
    if not key:
        return ""
    return hmac.new(key, json.dumps(record, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def read(lines: list[bytes], key: bytes) -> tuple[list[Record], int]:
    """(the Records of `lines` signed with the run's key, how many lines were not)."""
    out, forged = [], 0
    for line in lines:
        try:
            data = json.loads(line)
            mac = str(data.pop("mac"))
            if not mac or not hmac.compare_digest(sign(key, data), mac):
                raise ValueError("bad signature")
            out.append(Record.of(data))
        except Exception:                # noqa: BLE001  (anything not ours is forged)
            forged += 1
    return out, forged


def failed(name: str, status: str, *rows: tuple) -> Record:
    return Record(name=name, status=status, rows=list(rows))


def timed_out(name: str, limit: float, where: str = "") -> Record:
    """A test stopped at the time limit, with the learner's line running then when known."""
    return failed(name, "timeout", ("problem", f"your code ran longer than {limit:g} s: an infinite loop? "
                                               f"(the check stopped it)"),
                  *([("where", f"{where}\n(the line running when it was stopped)")] if where else []))


# ------------------------------------------------------------------ describing a failure
def _stub_error(exc: BaseException | None) -> NotImplementedError | None:
    """The exercise stub's error, when that is what raised (possibly wrapped by the test, or by
    Triton's interpreter, whose InterpreterError carries it as its cause)."""
    for _ in range(5):
        if exc is None or isinstance(exc, NotImplementedError) and STUB_MARK in str(exc):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def describe(item, call, rep, folder: Path, limit: float, base: Path | None = None) -> Record:
    """The Record of a failed test from pytest's report: the rows a learner reads, the learner's
    files named relative to `base` (default: the course; the grader: the submission)."""
    from ..worker.client import LearnerCodeError
    from .expect import Mismatch, advice_in
    exc = call.excinfo.value if call.excinfo is not None else None
    name, mistake = item.name, getattr(exc, "mistake", None) if isinstance(exc, AssertionError) else None
    stub = _stub_error(exc)
    if stub is not None:
        msg = str(stub)
        return Record(name=name, status="unwritten", rows=[("problem", msg)],
                      hint=msg.split("Hint:", 1)[1].strip() if "Hint:" in msg else "")
    if isinstance(exc, LearnerCodeError) and exc.kind != "error":     # the worker stopped or lost it
        if exc.kind == "timeout":        # the worker's stack at the limit: innermost first
            return timed_out(name, limit, where(exc.frames[::-1], folder, base))
        said = f"the process running your code ended abruptly: {exc}" if exc.kind == "crash" else str(exc)
        at = where(exc.frames, folder, base)                           # sys.exit, memory
        return failed(name, "error", ("problem", said), *([("where", at)] if at else []))
    status = "error"
    if isinstance(exc, Mismatch):
        rows, status = exc.rows(folder, base), "failed"
    elif isinstance(exc, SyntaxError):
        rows = [("problem", f"SyntaxError: {exc.msg}"), ("where", syntax_error_text(exc, folder, base))]
    elif isinstance(exc, AssertionError):
        msg = str(exc).strip().split("\nassert ")[0].strip() or "an assertion failed"
        whole = "parts failed" in msg.split("\n")[0]        # markers.PartsFailed: every part named
        rows, status = [("problem", msg if whole else "\n".join(msg.splitlines()[:6]))], "failed"
        rows += [("hint", h) for h in advice_in(getattr(item, "function", None))[0] if h not in msg]
    elif exc is not None:
        rows = raised_rows(exc, where(frames_of(exc, call), folder, base), item.name, getattr(call, "when", "call"),
                           advice_in(getattr(item, "function", None)))
    else:
        rows = [("problem", rep.longreprtext.strip().splitlines()[-1] if rep.longreprtext else "failed")]
    lines, chars = MAX_PRINTED
    printed = ((getattr(rep, "capstdout", "") or "") + (getattr(rep, "capstderr", "") or "")).rstrip().splitlines()
    shown = "\n".join(printed[:lines])
    shown = shown[:chars] + "…" if len(shown) > chars else shown
    shown += f"\n… ({len(printed) - lines} more lines)" if len(printed) > lines else ""
    rows += [("your prints", shown)] if shown else []
    return Record(name=name, status=status, rows=rows, mistake=mistake)
