"""andrea-start: a learner's workspace of the course, then JupyterLab in it.

    pip install 'andrea-course[notebooks]'
    andrea-start ~/andrea              # write the workspace (or reuse it), then open JupyterLab there
    andrea-start ~/andrea --no-lab     # only write it

A workspace is a folder holding the course's notebooks/, the untouched exercises/, the guide for
coding assistants (AGENTS.md, and CLAUDE.md pointing at it) and the marker file .andrea-workspace
(paths.py), copied from the installed package (or from the checkout it is run from:
paths.course_files). Inside it, the notebooks, check(), use() and
learner_model(cfg, "exercises") judge the workspace's exercises/.

Run again on a workspace (after `pip install -U andrea-course`, say), it changes no file that is
there: course files the workspace lacks are added, every other file is kept as it is, and it
names the files the newer course has changed (rename yours and run it again to get the course's).
The marker records what was written (a SHA-256 per file): that is how it tells the course's
changes from the learner's.

Exit status: 0 done (or JupyterLab's own); 1 the workspace could not be written, or JupyterLab
is not installed; 2 a bad argument (a file, or a folder with other things in it).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from .paths import PACKAGE, WORKSPACE_FILES, WORKSPACE_MARK, course_files, is_checkout, is_workspace

USAGE, FAILED = 2, 1
FIRST_NOTEBOOK = "notebooks/01_embeddings.ipynb"    # what JupyterLab opens first
SUFFIXES = {"notebooks": ".ipynb", "exercises": ".py"}
# How a coding assistant should help (AGENTS.md; CLAUDE.md imports it), at the workspace's top.
# The package's data/ holds links to the checkout's two files; a built package holds copies.
GUIDES = ("AGENTS.md", "CLAUDE.md")


class StartError(RuntimeError):
    """The workspace cannot be made there; `usage` says whether the argument was to blame."""

    def __init__(self, message: str, usage: bool = True):
        super().__init__(message)
        self.usage = usage


def course() -> dict[str, Path]:
    """{"notebooks/01_embeddings.ipynb": its file, "exercises/attention.py": ..., "AGENTS.md": ...}:
    the course's files a workspace holds."""
    found = {}
    for name in WORKSPACE_FILES:
        for path in sorted(course_files(name).glob(f"*{SUFFIXES[name]}")):
            found[f"{name}/{path.name}"] = path
    for name in GUIDES:
        path = PACKAGE / "data" / name
        if path.is_file():
            found[name] = path
    if not any(k.startswith("notebooks/") for k in found) or not any(k.startswith("exercises/") for k in found):
        raise StartError(f"the installed course has no notebooks or exercises in {course_files('notebooks').parent}: "
                         f"reinstall it (pip install --force-reinstall 'andrea-course[notebooks]')", usage=False)
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("andrea-course")
    except PackageNotFoundError:
        return "unknown"


def read_marker(folder: Path) -> dict:
    """The workspace's record: {"course", "version", "written": {file: sha256 as written}}."""
    try:
        marker = json.loads((folder / WORKSPACE_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = None
    if not isinstance(marker, dict) or not isinstance(marker.get("written"), dict):
        return {"written": {}}                       # an unreadable record: every file counts as the learner's
    return marker


def write_workspace(folder: str | os.PathLike) -> dict:
    """Make `folder` a workspace, or add to the one it is, changing no file that is there.
    Returns {"folder", "made" (a new workspace), "added": [files], "kept": [files],
    "newer": [files the course has changed since they were written, kept as they are]}."""
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise StartError(f"{folder} is a file, not a folder: give a new folder, or a workspace to open")
    made = not is_workspace(folder)
    if made and folder.is_dir() and any(folder.iterdir()):
        if is_checkout(folder):
            raise StartError(f"{folder} is a copy of the course's repository, not a workspace: open its "
                             f"notebooks there with `make lab`")
        raise StartError(f"{folder} holds other files and is not a workspace of the course (no "
                         f"{WORKSPACE_MARK}): give a new or empty folder, or a workspace to open")
    files = course()
    marker = {"written": {}} if made else read_marker(folder)
    if made:                                         # first: a run stopped half-way is finished by the next
        folder.mkdir(parents=True, exist_ok=True)
        _write_marker(folder, marker)
    written = marker["written"]
    added, kept, newer = [], [], []
    for name, source in files.items():
        target = folder / name
        if target.exists() or target.is_symlink():
            kept.append(name)
            if name in written and written[name] != _sha256(source):
                newer.append(name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)                      # a file appears whole or not at all
        written[name] = _sha256(target)
        added.append(name)
    marker["written"] = dict(sorted(written.items()))
    _write_marker(folder, marker)
    return {"folder": folder.resolve(), "made": made, "added": added, "kept": kept, "newer": newer}


def _write_marker(folder: Path, marker: dict) -> None:
    record = {"course": "andrea-course", "version": _version(), "written": marker["written"]}
    tmp = folder / f"{WORKSPACE_MARK}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, folder / WORKSPACE_MARK)


def report(done: dict) -> str:
    """What write_workspace did, in a few lines."""
    folder, added = done["folder"], done["added"]
    count = lambda kind, names: sum(n.startswith(kind + "/") for n in names)
    if done["made"]:
        lines = [f"ANDREA workspace: {folder} (made now: {count('notebooks', added)} notebooks, "
                 f"{count('exercises', added)} exercise files)"]
    else:
        lines = [f"ANDREA workspace: {folder} (your {len(done['kept'])} course files kept as they are"
                 + (f"; added {len(added)} new: {', '.join(added)}" if added else "") + ")"]
    if done["newer"]:
        lines.append(f"This version of the course changed {', '.join(done['newer'])}: yours "
                     f"{'is' if len(done['newer']) == 1 else 'are'} kept; to get the course's, rename yours "
                     f"and run andrea-start again.")
    lines.append(f"Write your code in {folder / 'exercises'}; the notebooks in {folder / 'notebooks'} check it.")
    return "\n".join(lines)


def lab_command(folder: Path) -> list[str]:
    """JupyterLab in the workspace, on the first notebook (as root it needs --allow-root)."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}", str(folder / FIRST_NOTEBOOK)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="andrea-start", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", nargs="?", default="~/andrea",
                   help="the workspace: a new or empty folder, or one andrea-start made (default: ~/andrea)")
    p.add_argument("--no-lab", action="store_true", help="only write the workspace; do not open JupyterLab")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        done = write_workspace(args.folder)
    except StartError as exc:
        print(f"andrea-start: {'error: ' if exc.usage else ''}{exc}", file=sys.stderr)
        return USAGE if exc.usage else FAILED
    except OSError as exc:                           # no permission, a full disk: nothing half-written
        print(f"andrea-start: cannot write the workspace {args.folder}: {exc.strerror or exc}"
              + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr)
        return FAILED
    print(report(done), flush=True)
    if args.no_lab:
        return 0
    if not has_jupyterlab():
        print(f"andrea-start: JupyterLab is not installed here: pip install 'andrea-course[notebooks]', "
              f"or open {done['folder'] / 'notebooks'} in your own Jupyter", file=sys.stderr)
        return FAILED
    cmd = lab_command(done["folder"])
    os.chdir(done["folder"])
    if os.name != "posix":
        import subprocess
        return subprocess.call(cmd)
    os.execv(cmd[0], cmd)                           # JupyterLab takes this process (and its Ctrl-C)
    return 0


def has_jupyterlab() -> bool:
    import importlib.util
    return importlib.util.find_spec("jupyterlab") is not None


if __name__ == "__main__":
    raise SystemExit(main())
