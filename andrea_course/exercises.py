"""Generate exercises/ from solutions/: one source of truth for every piece.

In a solution file a region

        ### BEGIN SOLUTION
        ### HINT: what to reach for
        <reference code>
        ### END SOLUTION

becomes, in the exercise file,

        # Hint: what to reach for
        raise NotImplementedError("attention.softmax: not implemented yet. Hint: what to reach for")

Run `andrea-make-exercises` (or `make exercises`) after editing a solution; a test fails when
exercises/ differs from what this generates.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from .overlay import ROOT, STUB_MARK

SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"

BEGIN, END, HINT = "### BEGIN SOLUTION", "### END SOLUTION", "### HINT:"
HEADER = ('# GENERATED from solutions/{name} by `make exercises`. Write your code where a\n'
          '# `raise NotImplementedError` stands, then delete that line.\n')


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
    """Every solution region: its lines, indentation, hint and the piece it sits in."""
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
            hints = [b.strip()[len(HINT):].strip() for b in body if b.strip().startswith(HINT)]
            if not hints:
                raise RegionError(f"line {start}: region in {qualname} has no '{HINT} ...' line")
            indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
            found.append(dict(start=start, end=i, qualname=qualname, hint=" ".join(hints), indent=indent))
            start = None
    if start is not None:
        raise RegionError(f"line {start}: {BEGIN} never ended")
    return found


def strip_solutions(source: str, activity: str) -> str:
    """The exercise text for one solution file."""
    lines = source.splitlines()
    out, pos = [], 0
    for r in regions(source):
        out.extend(lines[pos:r["start"] - 1])
        message = f"{activity}.{r['qualname']}: {STUB_MARK}. Hint: {r['hint']}"
        out.append(f"{r['indent']}# Hint: {r['hint']}")
        out.append(f"{r['indent']}raise NotImplementedError({message!r})")
        pos = r["end"]
    out.extend(lines[pos:])
    text = "\n".join(out) + "\n"
    return HEADER.format(name=f"{activity}.py") + text


def exercise_pieces(path: Path) -> set[str]:
    """Top-level pieces (functions, classes) of a solution file that hold a region."""
    return {r["qualname"].split(".")[0] for r in regions(Path(path).read_text(encoding="utf-8"))}


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
            out[path.name] = source.replace("Reference solutions", "Your exercises", 1)
        else:
            out[path.name] = strip_solutions(source, path.stem)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report files that differ")
    parser.add_argument("--out", type=Path, default=EXERCISES)
    args = parser.parse_args(argv)
    try:
        files = generate()
    except FileNotFoundError as exc:
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
    verb = "differ" if args.check else "written"
    print(f"{len(stale)} exercise file(s) {verb}: {', '.join(stale) or '-'}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
