"""RUN_DIR/log.jsonl: one JSON line per optimizer step, appended as the run goes.

The file is only ever appended to or cut short, never rewritten: a crash, a kill or a full disk
at any moment leaves every complete line in place and at most one torn last line. A resumed run
keeps the lines of the steps its checkpoint has seen and cuts the file after them (one truncate,
naming the file and what it cut), so the log again holds exactly the steps the run has taken.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .files import named


class LogError(ValueError):
    """A log whose middle cannot be read (not a crash's torn last line: someone edited it)."""


def _records(path: Path):
    """Yield (byte offset of the line, record or None for a torn line, is the last line)."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        line = data[pos:] if end < 0 else data[pos:end]
        last = end < 0 or end + 1 >= len(data)
        rec = None
        if end >= 0 or not line.strip():
            try:
                rec = json.loads(line) if line.strip() else {}
            except (json.JSONDecodeError, UnicodeDecodeError):
                rec = None
        if end < 0 and line.strip():          # no newline: the write was cut off
            rec = None
        yield pos, rec, last
        pos = len(data) if end < 0 else end + 1


def trim(path: str | os.PathLike, last_step: int) -> str | None:
    """Cut the log after the records of steps <= last_step and any torn last line. Returns a
    note of what was cut (None if nothing)."""
    path = Path(path)
    if not path.is_file():
        return None
    cut, torn, later = None, False, 0
    for line_no, (pos, rec, last) in enumerate(_records(path), 1):
        if rec is None:
            if not last:
                raise LogError(f"{path}:{line_no} is not a JSON record; the log was changed by hand "
                               f"(a crash tears only the last line): fix or remove that line")
            cut, torn = (pos if cut is None else cut), True
        elif rec and not isinstance(rec.get("step"), int):
            raise LogError(f"{path}:{line_no} has no integer \"step\"; fix or remove that line")
        elif rec and rec["step"] > last_step:
            cut = pos if cut is None else cut
            later += 1
    if cut is None:
        return None
    size = path.stat().st_size
    os.truncate(path, cut)
    parts = ([f"{later} line(s) after step {last_step}"] if later else []) + \
            (["a torn last line left by a crash or a full disk"] if torn else [])
    return f"{path}: cut {' and '.join(parts)} ({size - cut} bytes)"


class RunLog:
    """Appends records to log.jsonl, each one whole line written straight to the file (no
    buffer that a failed write could leave half-flushed)."""

    def __init__(self, path: str | os.PathLike, new: bool):
        self.path = Path(path)
        self.f = open(self.path, "wb" if new else "ab", buffering=0)

    def append(self, rec: dict) -> None:
        line = memoryview((json.dumps(rec) + "\n").encode("utf-8"))
        try:
            while line:
                line = line[self.f.write(line):]
        except OSError as exc:
            raise named(exc, self.path) from exc

    def close(self) -> None:
        self.f.close()


def read_log(path: str | os.PathLike) -> list[dict]:
    """The records of a log, without a torn last line."""
    path = Path(path)
    return [rec for _, rec, _ in _records(path) if rec]
