"""Never stale: the learner's code as their files hold it now, wherever a notebook keeps it.

    bpe = learner_module("bpe")        # your exercises/bpe.py: your pieces where written, else the engine's
    bpe.train_bpe(text, 40)           # read again first if the file's content changed since

A notebook holds the learner's code in variables (a module in its first cell, a piece from use()
in one cell, called in the next), and the learner edits their files between cells. Every such
holder asks one accessor, Watched, whether the content of the files it was read from has changed
(by their bytes: an edit that keeps the size and the modification time counts), and reads them
again when it has: learner_module() for a module, fresh() for a function use() hands out. In a
notebook the files are compared at most once per cell (the first access of each cell); elsewhere
at every access.
"""
from __future__ import annotations

import functools
import inspect
from pathlib import Path

from ..grading.local import content_stamps
from ..overlay import Overlay, notebook_impl, resolve

__all__ = ["LearnerModule", "Watched", "fresh", "learner_module"]

_cell: list[int | None] = [None]       # the number of the notebook cell running; None outside IPython


def _new_cell(*_args) -> None:
    _cell[0] = (_cell[0] or 0) + 1


def _watch_cells() -> None:
    """Count the cells a notebook's kernel runs (once per process)."""
    if _cell[0] is not None:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None and hasattr(ip, "events"):
        ip.events.register("pre_run_cell", _new_cell)
        _cell[0] = 0


class Watched:
    """The content of some files (files(): their paths, asked each time): changed() says whether
    it differs from when changed() last answered (the first call primes it and answers True)."""

    def __init__(self, files):
        self.files = files
        self.stamp = None
        self.seen = -1
        _watch_cells()

    def changed(self) -> bool:
        if _cell[0] is not None and self.seen == _cell[0]:
            return False
        self.seen = _cell[0] if _cell[0] is not None else -1
        now = content_stamps(self.files())
        if now == self.stamp:
            return False
        self.stamp = now
        return True


def _shown(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


class LearnerModule:
    """The learner's module of one activity (Overlay.module: each piece theirs where written, the
    engine's where not), read again whenever the content of a file of their folder changes
    (a relative import reads another file): an attribute is always the file's as it is now."""

    def __init__(self, activity: str, impl=None):
        self._andrea_activity = activity
        self._andrea_folder = resolve(impl if impl is not None else notebook_impl())
        self._andrea_files = Watched(lambda: sorted(self._andrea_folder.glob("*.py")))
        self._andrea_module = None

    def _andrea_current(self):
        if self._andrea_files.changed() or self._andrea_module is None:
            again = self._andrea_module is not None
            overlay = Overlay(self._andrea_folder)
            self._andrea_module = overlay.module(self._andrea_activity)
            path = overlay.path(self._andrea_activity)
            if self._andrea_activity in overlay.errors:
                why = str(overlay.errors[self._andrea_activity]).splitlines()[0]
                print(f"{_shown(path)} could not be loaded, so the engine's pieces stand in: {why}")
            elif again:
                print(f"your files changed: {_shown(path)} read again")
        return self._andrea_module

    def __getattr__(self, name: str):
        if name.startswith("_andrea_"):
            raise AttributeError(name)
        return getattr(self._andrea_current(), name)

    def __dir__(self):
        return dir(self._andrea_current())

    def __repr__(self) -> str:
        return f"<your {self._andrea_activity} module, read from {self._andrea_folder / self._andrea_activity}.py>"


def learner_module(activity: str, impl=None) -> LearnerModule:
    """The learner's `activity` module, always as their files are now (LearnerModule). impl: whose
    folder ($ANDREA_IMPL, else the learner's exercises/)."""
    return LearnerModule(activity, impl)


def fresh(first, again, files):
    """A function calling `first` until the content of `files()` changes, then `again()`'s result
    (which may print why it chose what it did), and so on: a piece a notebook holds in a
    variable runs the code its file holds now (its __wrapped__: the one it calls). A class comes
    as a subclass of `first` of the same name whose construction builds the current class's
    instance (_fresh_class); anything else (a Triton kernel) as it is."""
    if isinstance(first, type):
        return _fresh_class(first, again, files)
    if not inspect.isfunction(first):
        return first
    state = {"fn": first, "files": Watched(files)}
    state["files"].changed()

    @functools.wraps(first)
    def piece(*args, **kwargs):
        if state["files"].changed():
            state["fn"] = piece.__wrapped__ = again()
        return state["fn"](*args, **kwargs)
    return piece


def _fresh_class(first: type, again, files) -> type:
    """A subclass of `first`, named as it is: constructing it builds an instance of `first` while
    `files()` keep their content, else of again()'s class. A class derived from it (a notebook's
    variant of the learner's block) derives from `first`, as when it was written."""
    state = {"cls": first, "files": Watched(files)}
    state["files"].changed()

    def __new__(cls, *args, **kwargs):
        if cls is fresh_cls:
            if state["files"].changed():
                state["cls"] = fresh_cls.__wrapped__ = again()
            if state["cls"] is not first:
                return state["cls"](*args, **kwargs)     # not an instance of cls: __init__ is not run twice
        base = super(fresh_cls, cls).__new__
        return base(cls) if base is object.__new__ else base(cls, *args, **kwargs)

    own = {k: v for k, v in vars(first).items() if inspect.isfunction(v) and k != "__new__"}   # shown as its own
    fresh_cls = type(first)(first.__name__, (first,), {
        **own, "__new__": __new__, "__module__": first.__module__, "__qualname__": first.__qualname__,
        "__doc__": first.__doc__, "__wrapped__": first})
    return fresh_cls
