"""andrea-release: the learner's copy of the course, built from the instructor's repository.

    andrea-release OUT              # OUT/ : the repository a class gets, without the answer key
    andrea-release OUT --repo https://github.com/you/andrea-course   # its links point there

A listed pipeline (in the manner of nbgrader's generate_assignment), each step one function:

    1. copy      every file the repository tracks, except what is the instructor's alone:
                 solutions/ (the answer key), instructor/ (hidden tests), tests/ (the course's
                 own tests, which grade the answer key), CI files and the tools that need them,
                 and the instructors' documents (docs/instructors.md, docs/notebooks.md,
                 docs/gradescope/); AGENTS.md (how a coding assistant helps a learner; CLAUDE.md
                 imports it) ships
    2. exercises regenerate exercises/ from solutions/, so every piece is a stub
    3. readme    README.md written for the learner's copy: the parts between
                 <!-- instructor-only --> and <!-- /instructor-only --> left out, the parts in
                 <!-- learner-only ... --> shown (on GitHub both markers are invisible comments)
    4. links     every Colab badge and set-up cell, Binder link, git clone and pip line (and
                 pyproject.toml's Repository) pointed at --repo (default: pyproject.toml's
                 address; andrea_course/links.py), and checked: none points elsewhere
    5. notebooks check every notebook is committed without outputs
    6. verify    nothing of the answer key is left: no solutions/, no file holding a solution
                 region or a hidden test, and every exercise piece a stub

The graded tests (andrea_course/activity_tests/) ship with the package, so a learner checks their work
with check() in the notebooks or `make grade`; the Gradescope bundle is docs/gradescope/make_zip.sh.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import __version__
from . import links as course_links
from .exercises import BEGIN, generate
from .paths import ROOT
from .overlay import unwritten_pieces
from . import pieces

# The instructor's alone: the answer key, hidden tests, the course's own tests and CI, and the
# documents written for instructors and for whoever writes the course (grading, Gradescope, how a
# notebook is written).
INSTRUCTOR_ONLY = ("solutions/", "instructor/", "tests/", ".ci/", "tools/train_shipped_model.py",
                   "tools/fresh_mistakes.py", "docs/instructors.md", "docs/notebooks.md", "docs/gradescope/")


class ReleaseError(RuntimeError):
    """The release could not be built, or would leak the answer key; the message says what."""


def tracked_files(root: Path = ROOT) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ReleaseError(f"{root} is not a git checkout: the release copies the files git tracks") from exc
    return [f for f in out.decode().split("\0") if f]


def copy(root: Path, out: Path) -> list[str]:
    """1. The learner's files."""
    kept = [f for f in tracked_files(root) if not f.startswith(INSTRUCTOR_ONLY) and (root / f).is_file()]
    for f in kept:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, out / f)
    return kept


def exercises(root: Path, out: Path) -> list[str]:
    """2. exercises/ made anew from the answer key."""
    files = generate(root / "solutions")
    target = out / "exercises"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
    return sorted(files)


# A block (the markers on lines of their own) goes with its last line's end; an inline part
# (inside a sentence or at the end of a paragraph) leaves the line's end where it was.
INSTRUCTOR_TEXT = re.compile(r"^<!-- instructor-only -->\n.*?<!-- /instructor-only -->\n|"
                             r"<!-- instructor-only -->.*?<!-- /instructor-only -->", re.S | re.M)
LEARNER_TEXT = re.compile(r"<!-- learner-only\n(.*?)-->\n?", re.S)
# What the learner's README must not mention: their copy has none of it (the course's own tests/,
# not andrea_course/activity_tests/, which ships).
NOT_IN_THE_COPY = re.compile(r"\bsolutions\b|instructor/|hidden.tests|andrea-release|make exercises|\.ci/|\btests/")


def readme_for_learners(text: str) -> str:
    """README.md as the learner's copy shows it: instructor-only parts out, learner-only parts in.
    Raises ReleaseError when a marker is left unpaired or the result still names what the copy
    does not hold (solutions, hidden tests, the release tool, the course's own tests)."""
    text = LEARNER_TEXT.sub(lambda m: m.group(1), INSTRUCTOR_TEXT.sub("", text))
    if "instructor-only" in text or "learner-only" in text:
        raise ReleaseError("README.md has an unpaired <!-- instructor-only --> or <!-- learner-only marker")
    found = sorted({m.group(0) for m in NOT_IN_THE_COPY.finditer(text)})
    if found:
        raise ReleaseError(f"README.md would tell learners about {found}, which their copy does not have: "
                           f"put those lines between <!-- instructor-only --> and <!-- /instructor-only -->")
    return text


def readme(root: Path, out: Path) -> list[str]:
    """3. The README of the learner's copy (see readme_for_learners)."""
    path = out / "README.md"
    path.write_text(readme_for_learners(path.read_text(encoding="utf-8")), encoding="utf-8")
    return ["README.md"]


def links(root: Path, out: Path, repo: str | None = None) -> list[str]:
    """4. Every link to the course's repository pointed at `repo` (default: pyproject's)."""
    try:
        course_links.rewrite(out, repo)
    except course_links.LinkError as exc:
        raise ReleaseError(str(exc)) from None
    found = course_links.links(out)
    stray = course_links.problems(out)
    if stray:
        raise ReleaseError(f"{len(stray)} link(s) of the release point elsewhere: {stray[0]}")
    return [str(link) for link in found]


def notebooks(root: Path, out: Path) -> list[str]:
    """4. Notebooks without outputs (a saved output could hold a solution's result)."""
    names = []
    for path in sorted((out / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        dirty = [i for i, c in enumerate(nb["cells"]) if c.get("outputs") or c.get("execution_count")]
        if dirty:
            raise ReleaseError(f"{path.name} has outputs in cells {dirty[:5]}: strip them "
                               f"(python tools/nb.py strip notebooks/*.ipynb) before releasing")
        names.append(path.name)
    return names


def verify(root: Path, out: Path) -> list[str]:
    """5. Nothing of the answer key left."""
    problems = [f"{p} exists" for p in ("solutions", "instructor") if (out / p).exists()]
    for path in out.rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if BEGIN in text and path.name != "exercises.py":
            problems.append(f"{path.relative_to(out)} holds a solution region")
        if _private_tests(text):
            problems.append(f"{path.relative_to(out)} holds tests learners must not see: {_private_tests(text)}")
    for activity in pieces.ACTIVITIES:
        path = out / "exercises" / f"{activity}.py"
        if not path.is_file():
            problems.append(f"exercises/{activity}.py is missing")
            continue
        written = set(pieces.names(activity)) - unwritten_pieces(path.read_text(encoding="utf-8"))
        if written:
            problems.append(f"exercises/{activity}.py has pieces that are not stubs: {sorted(written)}")
    if problems:
        raise ReleaseError("the release would leak the answer key: " + "; ".join(problems))
    return ["no answer key"]


def _private_tests(source: str) -> list[str]:
    """Tests decorated @graded(..., visibility=...) with a visibility other than "visible"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            for d in node.decorator_list
            if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "graded"
            and any(k.arg == "visibility" and isinstance(k.value, ast.Constant) and k.value.value != "visible"
                    for k in d.keywords)]


PIPELINE = (copy, exercises, readme, links, notebooks, verify)


def build(out: str | Path, root: Path = ROOT, force: bool = False, quiet: bool = False,
          repo: str | None = None) -> Path:
    """Run the pipeline into `out` (refused if it exists, unless force), its links pointed at
    `repo` (default: pyproject.toml's address). Returns the folder."""
    out = Path(out).resolve()
    root = Path(root).resolve()
    try:
        repo = course_links.normalize(repo) if repo else course_links.repository(root)
    except course_links.LinkError as exc:
        raise ReleaseError(f"--repo: {exc}") from None
    if not (root / "solutions").is_dir():
        raise ReleaseError(f"{root} has no solutions/: a release is built from the instructor's repository")
    if out == root or root in out.parents and not out.is_relative_to(root / "build"):
        raise ReleaseError(f"{out} is inside the course's repository: choose a folder outside it (or under build/)")
    if out.exists():
        if not force:
            raise ReleaseError(f"{out} already exists: choose another folder, or pass --force to replace it")
        shutil.rmtree(out)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for step in PIPELINE:
            done = step(root, tmp, repo) if step is links else step(root, tmp)
            if not quiet:
                print(f"{step.__name__:>9}: {len(done)} {'item' if len(done) == 1 else 'items'}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.rename(out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="andrea-release", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the folder to write the learner's copy to (must not exist)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists (default: refuse)")
    p.add_argument("--repo", help="the address the copy is published at, https://github.com/you/andrea-course: "
                                  "every Colab, Binder, clone and pip link points there (default: pyproject.toml's "
                                  "[project.urls] Repository)")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = p.parse_args(argv)
    try:
        out = build(args.out, force=args.force, repo=args.repo)
    except ReleaseError as exc:
        print(f"andrea-release: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the learner's copy to {out}; its links point at {course_links.repository(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
