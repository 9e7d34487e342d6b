"""Hints that do not lead astray: each level-3 line (### LINE: in solutions/, sealed in hints.json)
uses only the names its stub gives the learner, and applied in place of the piece's code it passes
every graded test of that piece, so that following a hint never makes another test fail."""
import ast
import builtins
import importlib.util
import linecache
import sys
import types

import pytest

from andrea_course.exercises import SOLUTIONS, generate, piece_of, regions
from andrea_course.grading import Mismatch
from andrea_course.grading.student import InProcessStudent
from andrea_course.lessons import ACTIVITIES
from mutant_checks import _module

BUILTINS = set(dir(builtins))


def _regions():
    return [(a, r) for a in ACTIVITIES for r in regions((SOLUTIONS / f"{a}.py").read_text(encoding="utf-8"))]


def _statements(line: str) -> ast.Module | None:
    """A LINE level as statements (its parts are separated by '; '), parsed inside a function so
    that `return` is allowed; None when it is words around code rather than code."""
    body = "\n".join("    " + part.strip() for part in line.split("; "))
    try:
        return ast.parse("def _hint():\n" + body)
    except SyntaxError:
        return None


def _code_regions():
    return [(a, r) for a, r in _regions() if _statements(r["line"]) is not None]


def test_most_lines_are_code():
    assert len(_code_regions()) >= 0.75 * len(_regions()), [f"{a}.{r['qualname']}" for a, r in _regions()
                                                            if _statements(r["line"]) is None]


def _bound(tree) -> set[str]:
    """Every name a tree binds: assignments, loop and with targets, parameters, imports, defs."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.comprehension):
            names.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
    return names


def _stub_names(activity: str, qualname: str) -> set[str]:
    """The names a learner's stub of `qualname` can use: the exercise file's top-level names, and
    the parameters and local names of the stub function (and of the class around a method)."""
    tree = ast.parse(generate()[f"{activity}.py"])
    names = {n for node in tree.body for n in _bound(ast.Module(body=[node], type_ignores=[]))
             if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or n == node.name}
    node = tree
    for part in qualname.split("."):
        node = next(n for n in ast.iter_child_nodes(node) if getattr(n, "name", None) == part)
        names |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} if isinstance(node, ast.FunctionDef) else set()
    return names | _bound(node)


@pytest.mark.parametrize("case", _code_regions(), ids=lambda c: f"{c[0]}.{c[1]['qualname']}")
def test_the_line_uses_only_the_stubs_own_names(case):
    activity, region = case
    tree = _statements(region["line"])
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unknown = used - _bound(tree) - _stub_names(activity, region["qualname"]) - BUILTINS
    assert not unknown, (f"{activity}.{region['qualname']}: its level-3 line uses {sorted(unknown)}, which the "
                         f"stub never defines: {region['line']!r}")


def _complete(region) -> bool:
    """A line that can stand for the whole region: statements that end in a return where the
    reference code returns."""
    tree = _statements(region["line"])
    if tree is None:
        return False
    body = tree.body[0].body
    returns = any(isinstance(n, ast.Return) for n in ast.walk(ast.parse(region["code"])))
    return returns == isinstance(body[-1], ast.Return)


def _hinted_module(activity: str, piece: str):
    """solutions/<activity>.py with every region of `piece` replaced by its level-3 line."""
    source = (SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    for r in sorted((r for r in regions(source) if piece_of(activity, r["qualname"]) == piece),
                    key=lambda r: -r["start"]):
        lines[r["start"] - 1:r["end"]] = [r["indent"] + part.strip() for part in r["line"].split("; ")]
    name = f"solutions._hinted_{activity}_{piece.split('.')[1]}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "solutions"
    text, module.__file__ = "\n".join(lines) + "\n", f"<{piece}, its level-3 lines>"
    # The graded tests that read a piece's source (inspect.getsource) find it: the module stays
    # registered, its text in linecache.
    linecache.cache[module.__file__] = (len(text), None, text.splitlines(keepends=True), module.__file__)
    sys.modules[name] = module
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module


def _applicable():
    """(activity, piece) of every piece whose level-3 lines all stand for their regions, and the
    graded tests of it that run without Triton."""
    by_piece: dict[tuple, list] = {}
    for activity, r in _regions():
        by_piece.setdefault((activity, piece_of(activity, r["qualname"])), []).append(r)
    return [key for key, rs in by_piece.items() if all(_complete(r) for r in rs) and key[0] != "kernels"]


def _graded_tests_of(file: str):
    """[(file, test name, exercise)] of one graded file, test_bpe.py included."""
    module = _module(file)
    return [(file, name, marks[0].args[0]) for name, fn in vars(module).items()
            for marks in [[m for m in getattr(fn, "pytestmark", []) if m.name == "exercise"]]
            if name.startswith("test_") and marks]


def test_most_lines_can_be_applied():
    assert len(_applicable()) >= 30, len(_applicable())


@pytest.mark.parametrize("activity, piece", _applicable(), ids=[p for _, p in _applicable()])
def test_the_line_applied_passes_every_graded_test_of_its_piece(activity, piece):
    module = _hinted_module(activity, piece)
    top = piece.split(".", 1)[1]
    student = InProcessStudent("solutions", overrides={(activity, top): getattr(module, top)})
    tests = [(f, t) for f, t, ex in _graded_tests_of(f"test_{activity}.py") if ex == piece]
    assert tests, f"{piece}: no graded test"
    failed = {}
    for file, test in tests:
        try:
            getattr(_module(file), test)(student)
        except Mismatch as exc:
            failed[test] = str(exc).splitlines()[0]
    assert not failed, f"{piece}: following its level-3 hint fails {failed}"
