"""A learner's pieces plugged into the engine by name.

A learner's code is a folder shaped like exercises/: one file per activity (attention.py, ...),
each defining the pieces of that activity under the exercise's names. SLOTS below lists the
pieces the model is built from and what each replaces in the engine (model.py): a module class,
or a hot-op slot (backends.py).

    ANDREA(cfg, impl="exercises")       # each piece the learner's once its graded tests pass
    model.pieces                        # {"attention.attention": "yours", "mlp.MLP": "engine: ...", ...}

A piece is used only when it is written AND all its graded tests pass; a piece that is not
written, fails its tests, or sits in a file that does not load, is the engine's, and
model.pieces says why. The graded tests themselves see each piece isolated: Overlay.isolated()
runs the learner's piece with the engine standing in for every other piece it calls, so one
mistake costs points in one place only.

Whose code: an explicit impl, else $ANDREA_IMPL (read in impl_from_env, and only there),
"solutions" and "exercises" naming the course's folders. Nothing here reads solutions/ unless
asked to grade it.
"""
from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import os
import sys
import types
from pathlib import Path

import torch.nn as nn

from . import authorship, pieces
from .paths import COURSE_FOLDERS, ROOT, STUB_MARK  # noqa: F401  (STUB_MARK: read here by older callers)
from . import model as engine


# The learner's pieces the model is built from:  exercise -> the engine class it replaces, the
# name of the op slot (backends.py) its function fills, or the engine function generate() draws
# tokens with (ANDREA.sampler).
SLOTS: dict[str, type | str] = {
    "embeddings.Embeddings":        engine.Embeddings,
    "attention.attention":          "attention",
    "multihead.MultiHeadAttention": engine.MultiHeadAttention,
    "mlp.gelu_tanh":                "gelu",
    "mlp.MLP":                      engine.MLP,
    "block.layer_norm":             "layer_norm",
    "block.Block":                  engine.Block,
    "modern.rms_norm":              "rms_norm",
    "modern.swiglu":                "swiglu",
    "modern.SwiGLU":                engine.SwiGLU,
    "model.ANDREA":                 engine.ANDREA,     # its forward runs the engine's model
    "model.KVCache":                engine.KVCache,    # the class model.new_caches builds
    "model.sample_next":            engine.sample_next,  # what model.generate draws each token with
}

# The learner's classes written for learned positions: with cfg.position = "rope" the engine's
# run instead (its Embeddings has no position table; its attention turns q and k).
LEARNED_POSITIONS_ONLY = ("embeddings.Embeddings", "multihead.MultiHeadAttention")

_counter = itertools.count()


class ImplementationError(RuntimeError):
    """A learner's folder or file could not be used; the message says which and why."""


def impl_from_env(default: str | None = None) -> str | None:
    """Whose code runs when nobody says: $ANDREA_IMPL, else `default`. The one place it is read."""
    return os.environ.get("ANDREA_IMPL") or default


def resolve(impl: str | os.PathLike) -> Path:
    """The folder of a learner's code: "solutions", "exercises" or a path to a folder."""
    if str(impl) in COURSE_FOLDERS:
        folder = ROOT / str(impl)
        if not folder.is_dir():
            why = " (a student release has no answer key)" if str(impl) == "solutions" else ""
            raise ImplementationError(f"there is no {impl}/ folder beside the course's package at {ROOT}{why}")
        return folder
    folder = Path(impl).expanduser().resolve()
    if not folder.is_dir():
        raise ImplementationError(f"{impl!r} is neither 'solutions', 'exercises' nor an existing folder")
    return folder


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


class Overlay:
    """One learner's folder, loaded as private packages.

    accept: which pieces ("activity.piece") of the learner's are used where a piece is looked up
    by name (module()); None: every written piece. The others are the engine's (pieces/).
    """

    def __init__(self, folder: str | os.PathLike, accept: set[str] | frozenset | None = None):
        self.folder = resolve(folder)
        self.accept = None if accept is None else frozenset(accept)
        self.errors: dict[str, BaseException] = {}    # activity -> why its file failed to load
        self._isolated: dict[tuple[str, str], object] = {}
        self.package = self._package(self.module)
        self.iso_package = self._package(pieces.module)   # relative imports -> the engine's pieces

    def _package(self, provider) -> str:
        name = f"_andrea_learner_{next(_counter)}"
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(self.folder)]
        pkg.__andrea_provider__ = provider
        sys.modules[name] = pkg
        return name

    @property
    def is_answer_key(self) -> bool:
        return self.folder == ROOT / "solutions"

    # ----- what the learner wrote -----
    def path(self, activity: str) -> Path:
        return self.folder / f"{activity}.py"

    def written(self, activity: str) -> set[str]:
        """The pieces of `activity` the learner has written (none when the file is missing)."""
        path = self.path(activity)
        if not path.is_file():
            return set()
        try:
            stubs = unwritten_pieces(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            return set(pieces.names(activity))          # written, but broken: its tests will say how
        return set(pieces.names(activity)) - stubs

    # ----- loading -----
    def _exec(self, package: str, activity: str, tag: str = "") -> types.ModuleType:
        path = self.path(activity)
        if not path.is_file():
            raise ImplementationError(f"{path} does not exist: copy exercises/{activity}.py there and write it")
        name = f"{package}.{activity}{tag}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        mod.__package__ = package
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException as exc:               # a learner's SyntaxError, a crash at import, sys.exit
            sys.modules.pop(name, None)
            raise ImplementationError(f"{path} could not be loaded: {type(exc).__name__}: {exc}") from exc
        return mod

    def module(self, activity: str) -> types.ModuleType:
        """The activity's module with each piece the learner's (if accepted) or the engine's.
        A missing or broken file stands in as the engine's pieces."""
        name = f"{self.package}.{activity}"
        if name in sys.modules:
            return sys.modules[name]
        try:
            mod = self._exec(self.package, activity)
        except ImplementationError as exc:
            self.errors[activity] = exc
            sys.modules[name] = mod = pieces.module(activity)
            return mod
        for piece in pieces.names(activity):
            if not self._accepted(activity, piece):
                setattr(mod, piece, pieces.get(activity, piece))
        return mod

    def _accepted(self, activity: str, piece: str) -> bool:
        if piece not in self.written(activity):
            return False
        return self.accept is None or f"{activity}.{piece}" in self.accept

    def isolated(self, activity: str, name: str):
        """The learner's `name` as written, run with the engine's version of every other piece
        (of this activity and the ones it imports): what a graded test grades. A name given in
        the exercise file that is not a piece (a kernel's launcher, say) comes as written, with
        the learner's own pieces around it."""
        key = (activity, name)
        if key not in self._isolated:
            graded = name in pieces.names(activity)
            if graded:
                self._authorship(activity, lambda path: authorship.check_source(path.read_text(encoding="utf-8"), path))
            mod = self._exec(self.iso_package, activity, tag=f"__{name}")
            if not hasattr(mod, name):
                raise ImplementationError(f"{self.path(activity)} has no {name!r}: keep the exercise's names and signatures")
            if graded:
                self._authorship(activity, lambda path: authorship.check_object(getattr(mod, name), name, path))
                for piece in pieces.names(activity):
                    if piece != name:
                        setattr(mod, piece, pieces.get(activity, piece))
            self._isolated[key] = getattr(mod, name)
        return self._isolated[key]

    def _authorship(self, activity: str, check) -> None:
        """The answer key's own pieces are exempt; a learner's must be theirs (authorship.py)."""
        if self.is_answer_key or not self.path(activity).is_file():
            return
        try:
            check(self.path(activity))
        except authorship.NotYours as exc:
            raise ImplementationError(str(exc)) from None

    def __repr__(self) -> str:
        return f"Overlay({self.folder})"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Routes `from .attention import ...` inside a learner's file to its package's provider:
    the overlay's own modules, or the engine's pieces for an isolated piece."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, activity = fullname.partition(".")
        if not head.startswith("_andrea_learner_") or not activity or "." in activity:
            return None
        provider = getattr(sys.modules.get(head), "__andrea_provider__", None)
        if provider is None or activity not in pieces.ACTIVITIES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, loader_state=(provider, activity))

    def create_module(self, spec):
        provider, activity = spec.loader_state
        return provider(activity)

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())


# ----------------------------------------------------------------------------- the model
_passing: dict[tuple, dict[str, str]] = {}    # (folder, its files' stamps, exercises) -> status


def passing(impl: str | os.PathLike, exercises) -> dict[str, str]:
    """{exercise: "yours" | "engine: <why>"} for the learner's pieces, by their graded tests
    (run in this process; remembered while no file of the learner's changes)."""
    overlay = Overlay(impl)
    files = sorted(overlay.folder.glob("*.py"))
    key = (overlay.folder, tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files), tuple(exercises))
    if key not in _passing:
        _passing[key] = _run_passing(overlay, list(exercises))
    return dict(_passing[key])


def _run_passing(overlay: Overlay, exercises: list[str]) -> dict[str, str]:
    from .notebook.checks import run_graded_many   # the graded tests' in-process runner

    out, to_run = {}, []
    for exercise in exercises:
        activity, piece = exercise.split(".")
        if not overlay.path(activity).is_file():
            out[exercise] = "engine: no file"
        elif piece not in overlay.written(activity):
            out[exercise] = "engine: not written yet"
        else:
            to_run.append(exercise)
    for exercise, result in run_graded_many(to_run, impl=str(overlay.folder)).items() if to_run else ():
        if result.passed:
            out[exercise] = "yours"
        elif result.error:
            out[exercise] = f"engine: its graded tests could not run ({result.error.splitlines()[0]})"
        else:
            failing = sum(o.status != "passed" for o in result.outcomes)
            out[exercise] = f"engine: {failing} of its {len(result.outcomes)} graded tests fail"
    return {e: out[e] for e in exercises}


def build(cfg, impl=None, *, accept=None, kernels: str = "torch", dropout: float = 0.0,
          init_std: float | None = None) -> nn.Module:
    """The engine's model with the learner's pieces in `accept` applied (every passing one when
    accept is None); model.pieces says whose code runs where. (A stand-in with this signature
    until the overlay's own factory replaces it.)"""
    model = engine.ANDREA(cfg, init_std=init_std)
    if impl is not None:
        plug_in(model, impl, accept=accept)
    model.set_dropout(dropout)
    model.use_kernels(kernels)
    return model


def plug_in(model: nn.Module, impl, accept=None) -> None:
    """Replace the engine's pieces in `model` (just built) by the learner's that pass their
    graded tests (or, given `accept`, those in it): op slots by name, module classes by name
    (the engine's initial weights are copied into the learner's module), the model's own
    forward, the KV cache class that model.new_caches builds (so generate() runs the learner's
    cache), and the sampler generate() draws each token with. Fills model.pieces."""
    if accept is None:
        status = passing(impl, SLOTS)
    else:
        status = {e: "yours" if e in accept else "engine: not among the pieces that pass" for e in SLOTS}
    if model.cfg.position != "learned":
        for exercise in LEARNED_POSITIONS_ONLY:
            if status[exercise] == "yours":
                status[exercise] = (f"engine: position={model.cfg.position!r} needs the engine's rotary "
                                    f"positions; yours adds learned ones")
    overlay = Overlay(impl, accept={e for e, s in status.items() if s == "yours"})
    classes = {}
    for exercise, target in SLOTS.items():
        if status[exercise] != "yours":
            continue
        activity, piece = exercise.split(".")
        mine = getattr(overlay.module(activity), piece)
        if isinstance(target, str):
            model.learner_ops[target] = mine
        elif target is engine.ANDREA:
            model.forward = types.MethodType(mine.forward, model)
        elif target is engine.KVCache:
            model.kv_cache = mine
        elif target is engine.sample_next:
            model.sampler = mine
        else:
            classes[target] = (exercise, mine)
    _swap_modules(model, classes, model.cfg, status)
    model.pieces = status
    model.impl = overlay


def _swap_modules(parent: nn.Module, classes: dict, cfg, status: dict) -> None:
    for name, child in parent.named_children():
        if type(child) in classes and status[classes[type(child)][0]] == "yours":
            exercise, cls = classes[type(child)]
            new = cls(cfg)
            try:
                new.load_state_dict(child.state_dict())
            except RuntimeError as exc:
                status[exercise] = f"engine: its parameters differ from the engine's ({str(exc).splitlines()[0]})"
                new = child
            setattr(parent, name, new)
            child = new
        _swap_modules(child, classes, cfg, status)
