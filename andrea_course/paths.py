"""Where the course lives: the folder that holds andrea_course/, exercises/, notebooks/ (a clone
of the course, or its learner's release), the learner's workspace, and the names every layer
uses for its parts.

A learner's exercises/ is in one of two places:
- a workspace that andrea-start wrote (start.py): a folder holding the marker file
  .andrea-workspace beside notebooks/ and exercises/. A process works in the workspace that
  $ANDREA_WORKSPACE names, else in the one its current folder is in (that folder or a parent
  holds the marker; a notebook's current folder is its own, the workspace's notebooks/);
- else a checkout of the course (ROOT, with its pyproject.toml: a clone, or the learner's
  release), editable-installed.
A package that pip installed into site-packages has neither until andrea-start writes a
workspace; it carries the course's notebooks/ and untouched exercises/ for that
(andrea_course/_workspace/, pyproject.toml's package-dir).

A leaf module: it imports nothing of the package, so the engine, the trainer, the grader and
the notebooks can all ask it without importing each other.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent            # andrea_course/
ROOT = PACKAGE.parent                                # the course's checkout (editable install)
STUB_MARK = "not implemented yet"                    # every generated exercise stub's message says this
COURSE_FOLDERS = ("solutions", "exercises")          # the answer key and the learner's files, in ROOT
WORKSPACE_FILES = ("notebooks", "exercises")         # what a learner's workspace holds of the course
WORKSPACE_MARK = ".andrea-workspace"                 # the file that makes a folder a workspace
WORKSPACE_ENV = "ANDREA_WORKSPACE"                   # names the workspace, wherever the process runs
SHIPPED = PACKAGE / "_workspace"                     # notebooks/ and exercises/ inside an installed package
ACTIVITY_TESTS = PACKAGE / "activity_tests"         # the graded tests, test_<activity>.py (they ship with the package)
MAKE_ONE = "run `andrea-start ~/andrea` to make a workspace, then open its notebooks"


class WorkspaceError(ValueError):
    """No workspace where one is needed, or $ANDREA_WORKSPACE names a folder that is not one."""


def is_checkout(root: Path = ROOT) -> bool:
    """Whether `root` is a copy of the course's repository (not site-packages)."""
    return (root / "pyproject.toml").is_file() and (root / "andrea_course").is_dir()


def is_workspace(folder: str | os.PathLike) -> bool:
    return (Path(folder) / WORKSPACE_MARK).is_file()


def workspace(start: str | os.PathLike | None = None) -> Path | None:
    """The learner's workspace this process works in: $ANDREA_WORKSPACE, else `start` (default:
    the current folder) or its nearest parent holding the marker; None outside any."""
    named = os.environ.get(WORKSPACE_ENV)
    if named:
        folder = Path(named).expanduser().resolve()
        if not is_workspace(folder):
            raise WorkspaceError(f"${WORKSPACE_ENV} is {named}, which is not a workspace of the course (it holds "
                                 f"no {WORKSPACE_MARK}): run `andrea-start {named}` to make it one, or unset it")
        return folder
    try:
        here = Path(start if start is not None else os.getcwd()).resolve()
    except OSError:                                  # the current folder was deleted
        return None
    return next((folder for folder in (here, *here.parents) if is_workspace(folder)), None)


def exercises_folder() -> Path:
    """The learner's exercises/: the workspace's when there is one, else the checkout's.
    WorkspaceError, saying what to do, when there is neither (a pip install, outside a workspace)."""
    found = workspace()
    if found is not None:
        return found / "exercises"
    if is_checkout():
        return ROOT / "exercises"
    try:
        here = f"{os.getcwd()} is not in a workspace of the course"
    except OSError:
        here = "this folder is not in a workspace of the course"
    raise WorkspaceError(f"no exercises to check: {here} (neither it nor a folder above it holds "
                         f"{WORKSPACE_MARK}); {MAKE_ONE}")


def course_folder(name: str) -> Path:
    """A folder of COURSE_FOLDERS by name: the learner's exercises/ (exercises_folder()), or the
    answer key beside the package."""
    return exercises_folder() if name == "exercises" else ROOT / name


def course_files(name: str) -> Path:
    """The course's own, untouched notebooks/ or exercises/ (WORKSPACE_FILES), that a workspace
    is made from: the checkout's, else the copies the installed package carries."""
    if name not in WORKSPACE_FILES:
        raise ValueError(f"{name!r} is not one of {WORKSPACE_FILES}")
    return ROOT / name if is_checkout() else SHIPPED / name
