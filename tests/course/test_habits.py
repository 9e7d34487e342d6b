"""The house's habits (docs/architecture.md): short functions, short commit subjects."""
import ast
import subprocess

import pytest

from andrea_course.paths import PACKAGE, ROOT

LONGEST = 80                        # lines of a function, its docstring included
SUBJECT = 72                        # characters of a commit subject
HABIT_SINCE = "12be08a"             # the last commit before the subject rule was kept


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of each function over LONGEST lines whose docstring gives no reason ("Over 80
    lines: ...")."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            reason = "over 80 lines" in (ast.get_docstring(node) or "").lower()
            if lines > LONGEST and not reason:
                out.append((node.name, lines))
    return out


def test_no_function_is_over_80_lines_without_a_reason():
    found = [f"{path.relative_to(ROOT)}: {name} ({n} lines)" for path in sorted(PACKAGE.rglob("*.py"))
             if "data" not in path.relative_to(PACKAGE).parts
             for name, n in long_functions(path.read_text(encoding="utf-8"))]
    assert not found, "split these, or say in the docstring why not ('Over 80 lines: ...'):\n" + "\n".join(found)
    body = "\n".join(f"    x = {i}" for i in range(LONGEST))
    assert long_functions(f"def f():\n{body}\n") == [("f", LONGEST + 1)]
    assert long_functions(f'def f():\n    """Over 80 lines: a reason."""\n{body}\n') == []


def test_commit_subjects_are_short():
    done = subprocess.run(["git", "log", "--format=%s", f"{HABIT_SINCE}..HEAD"], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip("not a git checkout with its history")
    long = [s for s in done.stdout.splitlines() if len(s) >= SUBJECT]
    assert not long, f"commit subjects of {SUBJECT} characters or more (the detail goes in the body): {long}"


def test_no_module_binds_a_name_twice():
    """A module-level name (a constant, a function, a class) is bound once in each module: a second
    binding silently replaces the first for every use above it (two typical mistakes' texts under one
    name made one graded test name the other's mistake)."""
    twice = []
    for path in sorted(PACKAGE.rglob("*.py")):
        bound = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = ([t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign)
                     else [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [])
            for name in names:
                if name in bound:
                    twice.append(f"{path.relative_to(ROOT)}: {name} at lines {bound[name]} and {node.lineno}")
                bound[name] = node.lineno
    assert not twice, "\n".join(twice)
