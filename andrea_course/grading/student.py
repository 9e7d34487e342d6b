"""The learner's code as graded tests see it.

InProcessStudent hands out the learner's own objects directly (fast; `pytest`, notebooks).
The autograder (andrea-grade) uses IsolatedStudent (isolated.py) instead, whose pieces
run in a separate process: tests must therefore use pieces only through this protocol:
call a function; construct a class; call an instance or its methods; read an attribute; and
read a piece's code as written (student.source: the file is read, never run, for checks of how a
piece is written, such as a Triton kernel's conversion to fp32).
Arguments and results: tensors, numbers, strings, None, random generators (a copy: draws in
the learner's code do not advance the test's), ModelConfig, and lists, tuples and
dicts of these.

Either way a piece is isolated (Overlay.isolated): it runs with the engine standing in for
every other piece it calls, so a test grades that piece alone.
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from ..overlay import Overlay, impl_from_env

MAX_SOURCE = 1 << 20          # bytes of a learner's file read for student.source


def source_of(path: Path, name: str) -> str:
    """The text of the top-level function or class `name` in the file at `path` (decorators
    included), read and parsed, never run; '' when the file or the name is missing or the file
    does not parse."""
    try:
        if path.stat().st_size > MAX_SOURCE:
            return ""
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return ""
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1:node.end_lineno])
    return ""


class InProcessStudent:
    """The learner's pieces, in this process.

    impl: whose code ("solutions", "exercises", a folder; default $ANDREA_IMPL, else solutions).
    overrides: {(activity, name): object} served instead of the learner's piece; the mutation
    tests (tests/test_mistakes.py) use it to check that a graded test names a typical mistake.
    """

    def __init__(self, impl: str | Overlay | None = None, overrides: dict | None = None):
        self.overrides = dict(overrides or {})
        self._impl = impl
        self._overlay = impl if isinstance(impl, Overlay) else None

    @property
    def overlay(self) -> Overlay:
        if self._overlay is None:
            self._overlay = Overlay(self._impl if self._impl is not None else impl_from_env("solutions"))
        return self._overlay

    @property
    def is_reference(self) -> bool:
        return not self.overrides and self.overlay.is_answer_key

    def piece(self, activity: str, name: str):
        """The learner's own function or class, exactly as written, isolated."""
        if (activity, name) in self.overrides:
            return self.overrides[(activity, name)]
        return self.overlay.isolated(activity, name)

    def source(self, activity: str, name: str) -> str:
        """The code of a piece as written (an override's own source in the mutation tests)."""
        if (activity, name) in self.overrides:
            obj = self.overrides[(activity, name)]
            try:
                return inspect.getsource(getattr(obj, "fn", obj))
            except (OSError, TypeError):
                return ""
        return source_of(self.overlay.path(activity), name)

    def close(self) -> None:
        pass
