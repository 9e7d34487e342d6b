"""Whose code runs: ANDREA_IMPL=solutions (default) | exercises | /path/to/a/submission.

A submission folder is shaped like `exercises/`: one file per activity. Loading it gives two
views of every piece (function or class):

- own(activity, name): the learner's object exactly as written (graded tests use this);
- module(activity): the activity's module where every piece the learner has not written yet
  (its body still raises the exercise's NotImplementedError) is replaced by the reference,
  so a model can be built from whatever the learner has finished (notebooks and ANDREA use this).

report() says, piece by piece, whose code is in use.
"""
from __future__ import annotations

import ast
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
STUB_MARK = "not implemented yet"       # every generated exercise stub's message contains this
_counter = itertools.count()


class ImplementationError(RuntimeError):
    """A learner's file could not be loaded, or a piece does not exist."""


def resolve(impl: str | os.PathLike | None = None) -> Path:
    """The folder whose code runs: an explicit argument, else $ANDREA_IMPL, else solutions/."""
    impl = impl if impl is not None else os.environ.get("ANDREA_IMPL", "solutions")
    if str(impl) in ("solutions", "exercises"):
        return ROOT / str(impl)
    path = Path(impl).expanduser().resolve()
    if not path.is_dir():
        raise ImplementationError(
            f"ANDREA_IMPL={impl!r} is neither 'solutions', 'exercises' nor an existing folder")
    return path


def unwritten_pieces(source: str) -> set[str]:
    """Top-level functions and classes whose body still raises the exercise stub."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in ast.walk(node):
                if (isinstance(sub, ast.Raise) and isinstance(sub.exc, ast.Call)
                        and getattr(sub.exc.func, "id", None) == "NotImplementedError"
                        and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and STUB_MARK in a.value
                                for a in sub.exc.args)):
                    names.add(node.name)
                    break
    return names


class Impl:
    """One folder of activity files, loaded as a private package."""

    def __init__(self, folder: str | os.PathLike | None = None, reference: "Impl | None" = None):
        self.folder = resolve(folder)
        self.is_reference = self.folder == SOLUTIONS
        self.reference = None if self.is_reference else (reference or get_impl("solutions"))
        self.package = f"_andrea_impl_{next(_counter)}"
        self.unwritten: dict[str, set[str]] = {}     # activity -> pieces replaced by the reference
        self.own_objects: dict[str, dict] = {}       # activity -> the learner's raw objects
        self.errors: dict[str, BaseException] = {}   # activity -> why the learner's file failed to load
        self.missing: set[str] = set()               # activities with no file in the folder
        pkg = types.ModuleType(self.package)
        pkg.__path__ = [str(self.folder)]
        pkg.__andrea_impl__ = self
        sys.modules[self.package] = pkg

    # ----- loading -----
    def module(self, activity: str) -> types.ModuleType:
        """The activity's module, with unwritten pieces filled in from the reference.

        A missing file, or one that fails to load, stands in as the untouched exercise: every
        piece is then the reference, still calling the learner's pieces of other activities."""
        name = f"{self.package}.{activity}"
        if name in sys.modules:
            return sys.modules[name]
        path = self.folder / f"{activity}.py"
        if self.is_reference:
            if not path.exists():
                raise ImplementationError(f"no activity named {activity!r} in {self.folder}")
            return self._load(name, path)
        if not path.exists():
            self.missing.add(activity)
            return self._stand_in(activity)
        try:
            mod = self._load(name, path)
        except BaseException as exc:            # a learner's SyntaxError, a crash at import, sys.exit
            self.errors[activity] = exc
            return self._stand_in(activity)
        self.own_objects[activity] = {k: v for k, v in vars(mod).items() if not k.startswith("__")}
        self._fill_in(activity, mod, unwritten_pieces(path.read_text(encoding="utf-8")))
        return mod

    def _load(self, name: str, path: Path) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod

    def _stand_in(self, activity: str) -> types.ModuleType:
        """The untouched exercise file of the course, in place of a missing or broken one."""
        mod = self._load(f"{self.package}.{activity}", EXERCISES / f"{activity}.py")
        self._fill_in(activity, mod, _exercise_names(activity))
        return mod

    def _fill_in(self, activity: str, mod: types.ModuleType, unwritten: set[str]) -> None:
        ref = self.reference.module(activity)
        self.unwritten[activity] = {n for n in unwritten if hasattr(ref, n)}
        for n in self.unwritten[activity]:
            # The reference stand-in runs in the learner's module, so it calls the learner's
            # own pieces (their softmax inside the reference attention).
            setattr(mod, n, _rebind(getattr(ref, n), mod))

    def own(self, activity: str, name: str):
        """The learner's own `name` from `activity`, as written (stubs still raise)."""
        path = self.folder / f"{activity}.py"
        self.module(activity)
        if activity in self.errors:
            exc = self.errors[activity]
            raise ImplementationError(
                f"{path} could not be loaded: {type(exc).__name__}: {exc}") from exc
        if activity in self.missing:            # nothing written: never grade the reference as theirs
            raise ImplementationError(f"{path} does not exist: copy exercises/{activity}.py there and write it")
        if self.is_reference:
            src = self.module(activity)
        else:
            src = self.own_objects[activity]
            if name in src:
                return src[name]
            raise ImplementationError(f"{path} has no {name!r}: keep the exercise's names and signatures")
        if not hasattr(src, name):
            raise ImplementationError(f"activity {activity!r} has no piece named {name!r}")
        return getattr(src, name)

    def report(self, activities=None) -> dict[str, dict[str, str]]:
        """{activity: {piece: "yours" | "reference" | "reference (file failed to load)" |
        "reference (no file)"}}."""
        activities = activities or [p.stem for p in sorted(SOLUTIONS.glob("*.py")) if p.stem != "__init__"]
        out = {}
        for activity in activities:
            self.module(activity)
            ref_names = _exercise_names(activity)
            if self.is_reference:
                out[activity] = {n: "reference" for n in sorted(ref_names)}
            elif activity in self.errors or activity in self.missing:
                why = "reference (file failed to load)" if activity in self.errors else "reference (no file)"
                out[activity] = {n: why for n in sorted(ref_names)}
            else:
                out[activity] = {n: ("reference" if n in self.unwritten.get(activity, ()) else "yours")
                                 for n in sorted(ref_names)}
        return out

    def __repr__(self) -> str:
        return f"Impl({self.folder})"


@functools.lru_cache(maxsize=None)
def _exercise_names(activity: str) -> frozenset[str]:
    """The pieces of an activity that learners write: those with a solution region (read once)."""
    from .exercises import exercise_pieces
    return frozenset(exercise_pieces(SOLUTIONS / f"{activity}.py"))


def _rebind(obj, module: types.ModuleType):
    """A copy of a reference function or class whose global names resolve in `module`;
    `reference_of(copy)` gives back the original."""
    if isinstance(obj, types.FunctionType):
        new = types.FunctionType(obj.__code__, vars(module), obj.__name__, obj.__defaults__, obj.__closure__)
        new.__kwdefaults__, new.__doc__, new.__qualname__ = obj.__kwdefaults__, obj.__doc__, obj.__qualname__
        new.__module__ = module.__name__
        new.__andrea_reference__ = obj
        return new
    if isinstance(obj, type):
        ns = {k: (_rebind(v, module) if isinstance(v, types.FunctionType) else v)
              for k, v in vars(obj).items() if k not in ("__dict__", "__weakref__")}
        ns["__module__"] = module.__name__
        ns["__andrea_reference__"] = obj
        return type(obj)(obj.__name__, (obj,), ns)   # a subclass, so zero-argument super() works


def reference_of(obj):
    """The reference object behind `obj` (itself, or what a stand-in copies), else None."""
    if "__andrea_reference__" in getattr(obj, "__dict__", {}):
        return obj.__andrea_reference__
    return obj if getattr(obj, "__module__", "").startswith(get_impl("solutions").package + ".") else None


def runs_reference_only(fn, _seen=None) -> bool:
    """True when a function and every course function it calls (through its module's globals)
    are reference code: then a fused op computing the same thing may replace it."""
    if reference_of(fn) is None:
        return False
    _seen = _seen if _seen is not None else set()
    _seen.add(id(fn))
    for name in getattr(getattr(fn, "__code__", None), "co_names", ()):
        callee = fn.__globals__.get(name)
        if isinstance(callee, types.FunctionType) and id(callee) not in _seen:
            if callee.__module__.startswith("_andrea_impl_") and not runs_reference_only(callee, _seen):
                return False
    return True
    return obj


class _ImplFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Routes `from .attention import ...` inside an activity file through Impl.module, so a
    learner's multihead.py sees the reference for whatever their attention.py leaves unwritten."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, activity = fullname.partition(".")
        if not head.startswith("_andrea_impl_") or not activity or "." in activity:
            return None
        impl = getattr(sys.modules.get(head), "__andrea_impl__", None)
        if impl is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, loader_state=(impl, activity))

    def create_module(self, spec):
        impl, activity = spec.loader_state
        return impl.module(activity)

    def exec_module(self, module):
        pass


if not any(isinstance(f, _ImplFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _ImplFinder())

_cache: dict[Path, Impl] = {}


def get_impl(impl: str | os.PathLike | None = None, fresh: bool = False) -> Impl:
    """The Impl for a folder (cached; fresh=True re-reads the learner's files)."""
    folder = resolve(impl)
    if fresh and folder != SOLUTIONS:
        _cache.pop(folder, None)
    if folder not in _cache:
        _cache[folder] = Impl(folder)
    return _cache[folder]
