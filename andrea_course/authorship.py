"""Is a graded piece the learner's own? Two checks, before and after their file runs.

The package holds a working version of every piece (the engine, pieces/), and the grader's
worker must import it to stand in for the pieces a graded piece calls. So a submission could
hand in the engine's piece as its own. Overlay.isolated() refuses that:

- before the file runs (its source): no import of the course's inner modules (pieces, overlay,
  graded, grading, notebook) or of the answer key; no engine object imported or reached under
  a piece's name (andrea_course.model.Block, `engine.ANDREA`); no reaching around the file
  (__import__, importlib, sys.modules, __builtins__, __subclasses__, gc, inspect, ctypes);
- after it ran (the object): a graded function is defined in the learner's file, and a graded
  class defines its own forward there (a class that is not a module: its own methods).

What it cannot see: a learner who types the engine's code into their file, or hides an import
well enough. docs/instructors.md says so.
"""
from __future__ import annotations

import ast
from pathlib import Path

from . import pieces

INNER = ("andrea_course.pieces", "andrea_course.overlay", "andrea_course.graded", "andrea_course.grading",
         "andrea_course.notebook", "andrea_course.authorship", "solutions")
REACHING = ("importlib", "gc", "inspect", "ctypes")
DUNDERS = {"__import__", "__builtins__", "__subclasses__", "__globals__", "__loader__", "__spec__"}


class NotYours(ValueError):
    """A piece that is not the learner's own work; the message says why."""


def _piece_names() -> set[str]:
    return {name for activity in pieces.ACTIVITIES for name in pieces.names(activity)}


def check_source(source: str, path: Path) -> None:
    """Refuse a learner's file that reaches for the course's own pieces (see the module doc)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return                                    # loading it will report the syntax error
    piece_names, course_aliases, problems = _piece_names(), set(), []
    # An engine object imported by name is refused under the name of a piece of this file's own
    # activity: model.py may not import the engine's KVCache, multihead.py is given it (any piece
    # it would stand in for is graded with the engine's version anyway, and check_object refuses
    # an import handed in under another name).
    own = set(pieces.names(path.stem)) if path.stem in pieces.ACTIVITIES else piece_names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(INNER) or a.name.split(".")[0] in REACHING:
                    problems.append(f"line {node.lineno} imports {a.name}")
                if a.name.split(".")[0] == "andrea_course":
                    course_aliases.add(a.asname or "andrea_course")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith(INNER) or node.module.split(".")[0] in REACHING:
                problems.append(f"line {node.lineno} imports from {node.module}")
            elif node.module.split(".")[0] == "andrea_course":
                for a in node.names:
                    if ({a.name, a.asname} & own) or a.name.startswith(("pieces", "overlay", "graded", "grading")):
                        problems.append(f"line {node.lineno} imports {a.name} from {node.module} "
                                        f"(the engine's, not yours)")
                    course_aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Name) and node.id in DUNDERS:
            problems.append(f"line {node.lineno} uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in DUNDERS:
                problems.append(f"line {node.lineno} uses .{node.attr}")
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == "sys" and node.attr == "modules":
                problems.append(f"line {node.lineno} uses sys.modules")
    for node in ast.walk(tree):                   # engine objects reached under a piece's name
        if isinstance(node, ast.Attribute) and node.attr in piece_names:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in course_aliases:
                problems.append(f"line {node.lineno} uses the engine's {node.attr}")
    if problems:
        raise NotYours(f"{path.name} reaches for the course's own code, which is not yours to hand in: "
                       + "; ".join(sorted(set(problems))) + ". Write the piece in your file.")


def check_object(obj, name: str, path: Path) -> None:
    """A graded function must be defined in the learner's file; a graded class must define its
    forward (not a module: its methods) in its own body there."""
    where = str(path)
    if isinstance(obj, type):
        # a module: its forward, in its own body; any other class (a KV cache): every method it
        # has, its bases' included (none inherited from the engine)
        if hasattr(obj, "forward"):
            codes, what = [getattr(vars(obj).get("forward"), "__code__", None)], "forward"
        else:
            codes = [f.__code__ for k in obj.__mro__[:-1] for f in vars(k).values() if hasattr(f, "__code__")]
            what = "methods"
        if not codes or any(code is None or code.co_filename != where for code in codes):
            raise NotYours(f"{name} in {path.name} does not define its own {what}: write it in your file")
    elif callable(obj):
        code = _code(obj)
        if code is None or code.co_filename != where:
            raise NotYours(f"{name} is not defined in {path.name} (it comes from elsewhere): write it in your file")


def _code(fn):
    """A function's code object; a Triton kernel's (@triton.jit, compiled or interpreted, has no
    __code__ of its own) is that of the Python function it wraps, `.fn`."""
    code = getattr(fn, "__code__", None)
    if code is None:
        code = getattr(getattr(fn, "fn", None), "__code__", None)
    return code
