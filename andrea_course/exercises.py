"""Generate exercises/ from solutions/: one source of truth for every piece.

In a solution file a region carries a one-line summary and three levels of hint, one line each:

        ### BEGIN SOLUTION
        ### SUMMARY: what the piece does, in one short line (the stub and the check box show it)
        ### HINT: level 1, the idea: how to think about it, in words, with no code
        ### API: level 2, what to reach for, with an example on other data: `EXPR` gives `VALUE`
        ### LINE: level 3, the line itself (or its key expression)
        <reference code>
        ### END SOLUTION

Each "`EXPR` gives `VALUE`" in an API line is run by tests/course/test_exercises.py and must come out as
VALUE, e.g. `torch.tensor([[1., 3.], [2., 2.]]).amax(dim=-1, keepdim=True)` gives `[[3.], [2.]]`.
The region becomes, in the exercise file, a stub that gives the summary only:

        # Hint: what the piece does, in one short line
        # More help: hint("attention.softmax") in the notebook, one level at a time.
        raise NotImplementedError("attention.softmax: not implemented yet. Hint: what the piece does, ...")

The stub's comment, its NotImplementedError message and the amber box of check() (which quotes
the message) all say the summary, word for word; the three levels of hint are new words, each
more than the last. They and the reference code of each piece go to andrea_course/data/hints.json
(sealed like a quiz's answers: reading the file does not show them at a glance; the summary is in
the open), which notebook.hint() and notebook.reveal_piece() read at run time, without solutions/.

Run `andrea-make-exercises` (or `make exercises`) after editing a solution; a test fails when
exercises/ or hints.json differs from what this generates.
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
import textwrap
from pathlib import Path

from .lessons import lesson
from .paths import ROOT, STUB_MARK

SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"
HINTS = Path(__file__).resolve().parent / "data" / "hints.json"

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
LEVELS = {"summary": "### SUMMARY:", "idea": "### HINT:", "api": "### API:", "line": "### LINE:"}
HINT_LEVELS = ("idea", "api", "line")                     # what hint() gives, one more each call
# What an exercise file says first: what the learner edits here, and how it is checked.
HEADER = ('# Your work for notebooks/{notebook}.ipynb: write your code where a `raise NotImplementedError`\n'
          '# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.\n')
# exercises/__init__.py: what the folder is, for the learner.
PACKAGE_DOC = ('"""Your exercises, one file per activity: each notebook names the file it teaches, and you write\n'
               'its pieces where a `raise NotImplementedError` stands."""\n')


class RegionError(ValueError):
    pass


def _qualnames(tree: ast.AST) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function, innermost last."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                out.append((child.lineno, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return out


def regions(source: str) -> list[dict]:
    """Every solution region: its lines, indentation, the piece it sits in, its summary, its
    three hint levels (idea, api, line) and its reference code."""
    lines = source.splitlines()
    spans = _qualnames(ast.parse(source))
    found, start = [], None
    for i, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(BEGIN):
            if start is not None:
                raise RegionError(f"line {i}: nested {BEGIN}")
            start = i
        elif stripped.startswith(END):
            if start is None:
                raise RegionError(f"line {i}: {END} without {BEGIN}")
            inside = [n for n in spans if n[0] <= start <= n[1]]
            if not inside:
                raise RegionError(f"line {start}: a solution region must sit inside a function")
            qualname = max(inside, key=lambda n: n[0])[2]
            body = lines[start:i - 1]
            where = f"line {start}: the region in {qualname}"
            levels = {level: _level(body, marker, where) for level, marker in LEVELS.items()}
            code = [b for b in body if not b.strip().startswith(tuple(LEVELS.values()))]
            indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
            found.append(dict(start=start, end=i, qualname=qualname, indent=indent,
                              code=textwrap.dedent("\n".join(code)).strip("\n"), **levels))
            start = None
    if start is not None:
        raise RegionError(f"line {start}: {BEGIN} never ended")
    return found


def _level(body: list[str], marker: str, where: str) -> str:
    """The text of one hint level in a region's lines: exactly one non-empty line."""
    found = [b.strip()[len(marker):].strip() for b in body if b.strip().startswith(marker)]
    if len(found) != 1 or not found[0]:
        missing = "has no" if not found else ("has more than one" if len(found) > 1 else "has an empty")
        raise RegionError(f"{where} {missing} '{marker} ...' line: every region gives a summary and three "
                          f"levels of hint, one line each: {', '.join(m + ' ...' for m in LEVELS.values())}")
    return found[0]


def piece_of(activity: str, qualname: str) -> str:
    """The exercise a region belongs to: "model.ANDREA" for a region in ANDREA.forward."""
    return f"{activity}.{qualname.split('.')[0]}"


def stub_lines(activity: str, region: dict) -> list[str]:
    """The stub that stands for a region in the exercise file: the summary, never a level of hint
    nor the code."""
    piece, indent = piece_of(activity, region["qualname"]), region["indent"]
    message = f"{activity}.{region['qualname']}: {STUB_MARK}. Hint: {region['summary']}"
    summary = textwrap.wrap(region["summary"], width=100, initial_indent=f"{indent}# Hint: ",
                            subsequent_indent=f"{indent}#       ")
    return [*summary, f'{indent}# More help: hint("{piece}") in the notebook, one level at a time.',
            f"{indent}raise NotImplementedError({_quoted(message)})"]


def _quoted(text: str) -> str:
    """A single-quoted Python literal, whatever quotes `text` holds (repr switches to double
    quotes for a text with an apostrophe; the stubs keep one form)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def strip_solutions(source: str, activity: str, found: list[dict] | None = None) -> str:
    """The exercise text for one solution file (`found`: its regions, when already read)."""
    lines = source.splitlines()
    out, pos = [], 0
    for r in (regions(source) if found is None else found):
        out.extend(lines[pos:r["start"] - 1])
        out.extend(stub_lines(activity, r))
        pos = r["end"]
    out.extend(lines[pos:])
    text = "\n".join(out) + "\n"
    return HEADER.format(notebook=lesson(activity).notebook) + text


def file_regions(path: Path) -> list[dict]:
    """regions() of one solution file; a RegionError names the file."""
    path = Path(path)
    try:
        return regions(path.read_text(encoding="utf-8"))
    except RegionError as exc:
        raise RegionError(f"solutions/{path.name}, {exc}") from None


def exercise_pieces(path: Path) -> set[str]:
    """Top-level pieces (functions, classes) of a solution file that hold a region."""
    return {r["qualname"].split(".")[0] for r in file_regions(path)}


def generate(solutions: Path | None = None) -> dict[str, str]:
    """{file name: exercise text} for every solution file."""
    solutions = SOLUTIONS if solutions is None else Path(solutions)
    if not any(Path(solutions).glob("*.py")):
        raise FileNotFoundError(f"no solution files in {solutions}: exercises are generated from the "
                                f"answer key, which a student release does not have")
    out = {}
    for path in sorted(solutions.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if path.name == "__init__.py":
            out[path.name] = PACKAGE_DOC
        else:
            out[path.name] = strip_solutions(source, path.stem, file_regions(path))
    return out


def hints(solutions: Path | None = None) -> dict[str, dict]:
    """{"activity.piece": {"summary": ..., "sealed": token}} for every exercise piece: the summary
    in the open (the stub says it too); the idea, the API, the line and the reference code sealed
    (see notebook.quizzes.seal). A piece with several regions (ANDREA's __init__ and forward)
    gives each level region by region."""
    from .notebook.quizzes import seal

    solutions = SOLUTIONS if solutions is None else Path(solutions)
    found: dict[str, list[dict]] = {}
    for path in sorted(solutions.glob("*.py")):
        if path.name != "__init__.py":
            for r in file_regions(path):
                found.setdefault(piece_of(path.stem, r["qualname"]), []).append(r)
    out = {}
    for piece, rs in sorted(found.items()):
        if len(rs) == 1:
            levels = {k: rs[0][k] for k in (*LEVELS, "code")}
        else:
            levels = {k: "\n".join(f"in {r['qualname']}: {r[k]}" for r in rs) for k in LEVELS}
            levels["code"] = "\n\n".join(f"# in {r['qualname']}\n{r['code']}" for r in rs)
        out[piece] = {"summary": levels.pop("summary"), "sealed": seal(piece, levels)}
    return out


def hints_text(solutions: Path | None = None) -> str:
    """hints.json as generated: sorted keys, one entry per piece."""
    return json.dumps(hints(solutions), indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv=None) -> int:
    from . import __version__
    parser = argparse.ArgumentParser(prog="andrea-make-exercises", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--check", action="store_true", help="only report files that differ")
    parser.add_argument("--out", type=Path, default=EXERCISES)
    args = parser.parse_args(argv)
    try:
        files = generate()
        hints_json = hints_text()
    except (FileNotFoundError, RegionError) as exc:
        print(f"andrea-make-exercises: {exc}", file=sys.stderr)
        return 2
    stale = []
    args.out.mkdir(exist_ok=True)
    for name, text in files.items():
        target = args.out / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(name)
            if not args.check:
                target.write_text(text, encoding="utf-8")
    if args.out == EXERCISES and (not HINTS.exists() or HINTS.read_text(encoding="utf-8") != hints_json):
        stale.append(str(HINTS.relative_to(ROOT)))
        if not args.check:
            HINTS.write_text(hints_json, encoding="utf-8")
    verb = "differ" if args.check else "written"
    print(f"{len(stale)} file(s) {verb}: {', '.join(stale) or '-'}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
