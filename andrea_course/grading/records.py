"""What a run of graded tests reports: one Record per event (a signed JSON line on pipeline.py's
channel), and the one description of a failure: describe()'s rows for check()'s box, text()'s
text for results.json, the command line and the class report.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import ROOT, STUB_MARK

MAX_PRINTED = (12, 1200)        # lines, characters of a failing test's prints shown
MAX_OUTPUT = 4000               # characters of a failure's text in results.json


@dataclass
class Record:
    """One event of a run; a "result" is one graded test's outcome (notebook.Outcome)."""
    kind: str = "result"             # collected | start | result | collect_error
    nodeid: str = ""
    name: str = ""
    exercise: str = ""
    status: str = ""                 # passed | failed | unwritten | error | skipped | timeout
    rows: list = field(default_factory=list)   # [(label, text)] for the box, and text()
    hint: str = ""                   # an unwritten stub's hint
    taught: str = ""                 # the activity whose notebook teaches what it checks
    points: float = 1.0
    visibility: str = "visible"
    fraction: float = 0.0            # partial credit of a failed test with parts (markers.Credit)
    mistake: str | None = None       # the typical mistake its failure names (Mismatch.mistake)
    when: str = "call"               # the phase it failed in: "setup" and "teardown" prefix text()

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


TEXT_LABELS = {"problem": "", "how it relates": "How it relates to the expected output",
               "typical mistake": "Looks like a typical mistake"}


def text(rec: Record) -> str:
    """A failure's rows as one text: the problem first, then "Label: text" rows; "" when it
    passed; a failure in a fixture's set-up or teardown starts with "setup: " or "teardown: "."""
    from .expect import NO_KNOWN_MISTAKE
    if rec.status == "passed":
        return ""
    lines = []
    for label, value in rec.rows:
        if label == "typical mistake" and value == NO_KNOWN_MISTAKE:
            lines.append(f"Typical mistakes: {value}.")
            continue
        shown = TEXT_LABELS.get(label, label[:1].upper() + label[1:])
        lines.append(f"{shown}: {value}" if shown else str(value))
    prefix = f"{rec.when}: " if rec.status != "skipped" and rec.when not in ("call", "") else ""
    return (prefix + "\n".join(lines).strip())[:MAX_OUTPUT] or rec.status


# ------------------------------------------------------------------ where the learner's code is
def learner_path(path: str, folder: Path, base: Path | None = None) -> str | None:
    """`path` when it is the learner's (under `folder`), relative to `base` (default: the course:
    exercises/attention.py; the grader passes its staged copy: attention.py), else None."""
    try:
        p = Path(path).resolve()
        p.relative_to(Path(folder).resolve())
    except (ValueError, OSError):
        return None
    try:
        return str(p.relative_to(Path(base).resolve() if base is not None else ROOT))
    except (ValueError, OSError):
        return str(p)


def syntax_error_text(exc: SyntaxError, folder: Path, base: Path | None = None) -> str:
    """`exercises/attention.py, line 12` then the line and a caret under the column."""
    shown = exc.filename and learner_path(exc.filename, folder, base) or exc.filename or "your file"
    lines = [f"{shown}, line {exc.lineno}"]
    if exc.text:
        code = exc.text.rstrip("\n")
        stripped = code.lstrip()
        lines.append("    " + stripped)
        if exc.offset:
            lines.append("    " + " " * max(0, exc.offset - 1 - (len(code) - len(stripped))) + "^")
    return "\n".join(lines)


def where(frames, folder: Path, base: Path | None = None) -> str:
    """The innermost line of the learner's own code in (path, line, function, code) frames,
    outermost first, as `file, line N, in f` and the code."""
    for path, lineno, func, code in reversed(frames):
        shown, code = learner_path(path, folder, base), (code or "").strip()
        if shown:
            return f"{shown}, line {lineno}, in {func}" + (f"\n    {code}" if code else "")
    return ""


def _frames(exc, call=None) -> list:
    """An exception's frames, outermost first: the learner's when it came from the grading worker
    (its `frames`), else its traceback here."""
    frames = getattr(exc, "frames", None)
    if isinstance(frames, list):
        return [tuple(f) for f in frames]
    if call is None:
        return [(f.filename, f.lineno, f.name, f.line or "") for f in traceback.extract_tb(exc.__traceback__)]
    out = []
    for e in call.excinfo.traceback:
        try:
            code = str(e.statement).strip()
        except Exception:                                   # noqa: BLE001 - source may be gone
            code = ""
        out.append((str(e.path), e.lineno + 1, e.name, code))
    return out


# ------------------------------------------------------------------ describing a failure
def _stub_error(exc: BaseException | None) -> NotImplementedError | None:
    """The exercise stub's error, when that is what raised (possibly wrapped by the test, or by
    Triton's interpreter, whose InterpreterError carries it as its cause)."""
    for _ in range(5):
        if exc is None or isinstance(exc, NotImplementedError) and STUB_MARK in str(exc):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if isinstance(shape, (tuple, list)) else str(shape)


def _mismatch_rows(exc, folder: Path, base: Path | None) -> list:
    from .expect import NO_KNOWN_MISTAKE
    cause = exc.__cause__                       # expect_runs: the error the learner's code raised
    rows = [("problem", f"{exc.what}: {exc.problem}"),
            ("where", where(_frames(cause), folder, base) if getattr(cause, "__traceback__", None) else None),
            ("what it means", exc.meaning),
            ("largest error", f"{exc.max_error:.3g}" if exc.max_error is not None else None),
            ("shape", f"found {_shape(exc.shape_found)}, expected {_shape(exc.shape_expected)}"
             if exc.shape_found is not None or exc.shape_expected is not None else None),
            ("where they differ", exc.differences),
            ("how it relates", exc.relation),
            ("typical mistake", exc.mistake or (NO_KNOWN_MISTAKE if exc.unmatched else None)),
            ("hint", exc.hint)]
    return [(label, value) for label, value in rows if value]


def _raised_rows(item, call, exc, folder: Path, base: Path | None) -> list:
    """The rows of an error the learner's code (or the test after it) raised."""
    from .expect import advice_in
    from .explain import _kind_and_text, explain
    hints, mistakes = advice_in(getattr(item, "function", None))
    at = where(_frames(exc, call), folder, base)
    kind, said = _kind_and_text(exc)          # a worker's LearnerCodeError: the learner's own error
    first = "\n".join((said.strip() or kind).splitlines()[:4])
    when = getattr(call, "when", "call")
    rows = [("problem", f"your code raised {kind}: {first}" if at else f"{kind}: {first}"),
            ("where", at or (f"in the test {item.name}, after your code returned" if when == "call"
                             else f"in the {when} of the test {item.name}, outside its body"))]
    meaning = explain(exc, at.split("\n", 1)[1].strip() if "\n" in at else None)
    rows += [("what it means", meaning), *(("hint", h) for h in hints),
             ("this test looks for", "" if meaning else "\n".join(f"• {m}" for m in mistakes[:4]))]
    return [(label, value) for label, value in rows if value]


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
        rows, status = _mismatch_rows(exc, folder, base), "failed"
    elif isinstance(exc, SyntaxError):
        rows = [("problem", f"SyntaxError: {exc.msg}"), ("where", syntax_error_text(exc, folder, base))]
    elif isinstance(exc, AssertionError):
        msg = str(exc).strip().split("\nassert ")[0].strip() or "an assertion failed"
        whole = "parts failed" in msg.split("\n")[0]        # markers.PartsFailed: every part named
        rows, status = [("problem", msg if whole else "\n".join(msg.splitlines()[:6]))], "failed"
        rows += [("hint", h) for h in advice_in(getattr(item, "function", None))[0] if h not in msg]
    elif exc is not None:
        rows = _raised_rows(item, call, exc, folder, base)
    else:
        rows = [("problem", rep.longreprtext.strip().splitlines()[-1] if rep.longreprtext else "failed")]
    lines, chars = MAX_PRINTED
    printed = ((getattr(rep, "capstdout", "") or "") + (getattr(rep, "capstderr", "") or "")).rstrip().splitlines()
    shown = "\n".join(printed[:lines])
    shown = shown[:chars] + "…" if len(shown) > chars else shown
    shown += f"\n… ({len(printed) - lines} more lines)" if len(printed) > lines else ""
    rows += [("your prints", shown)] if shown else []
    return Record(name=name, status=status, rows=rows, mistake=mistake)
