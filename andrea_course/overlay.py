"""A learner's pieces put into the engine: one factory above the model, and the folders it reads.

A learner's code is a folder shaped like exercises/: one file per activity (attention.py, ...),
each defining the pieces of that activity under the exercise's names. build() returns the
engine's model (model.py) with the learner's accepted pieces in it, each replacing exactly what
it teaches, at every level:

    model = build(cfg, "exercises", accept={"attention.softmax": "yours", ...})
    model.pieces        # {"attention.softmax": "yours", "mlp.MLP": "engine: not written yet", ...}
    model.slots         # {"attention": "yours", "gelu": "engine", ...}: which code runs each slot
    model.calls         # what the probe counted, from which both are read

Both say what ran: build() runs the model once (a forward and backward on two tokens, one token
generated) counting every slot's and every learner's piece's calls, and reports a piece that never
ran with why ("not run: your MLP calls F.gelu itself, not self.gelu: ...").

Which pieces pass is not decided here: the grading layer runs their graded tests and hands the
verdict down (grading/passing.py: learner_model(cfg, impl) = build(cfg, impl, accept=passing(...))).
SLOTS (a view of contracts.py, one row per piece) lists what each piece fills: a module class
(replaced by type, the engine's weights copied in), a slot (backends.py: a function a module calls
by the slot's name), or what generate() and new_caches() use. A piece that calls other pieces
(attention calls softmax, ...; STEPS) runs with each of them the learner's where it passes: the
learner's softmax runs inside the learner's attention, or inside the engine's attention written
step by step when the learner's attention does not pass. With kernels="triton" the learner's Triton
kernels run in the package's launchers (TRITON_KERNELS).

The graded tests see each piece isolated: Overlay.isolated() runs the learner's piece with the
engine standing in for every other piece it calls, so one mistake costs points in one place only.

Whose code: an explicit impl, else $ANDREA_IMPL (read in impl_from_env, and only there),
"solutions" and "exercises" naming the course's folders; a notebook, when nobody says, runs
notebook_impl(): $ANDREA_IMPL, else the learner's workspace's exercises/. Nothing here reads
solutions/ unless asked to. The import hook that resolves a learner's relative imports is
installed when a learner's folder is first used (Overlay()), never by importing the package.
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
from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn as nn

from . import authorship, contracts, pieces
from .engine import backends
from .inputs import keeps_forward_inputs, keeps_inputs
from .engine import model as engine
from .engine.config import ModelConfig
from .paths import (COURSE_FOLDERS, ROOT, STUB_MARK,  # noqa: F401  (STUB_MARK: read by older callers)
                    WorkspaceError, course_folder, workspace)

YOURS = "yours"

# The tables below are views of contracts.CONTRACTS (one row per piece: what it fills, the steps
# it calls, its Triton kernel, the config values it computes); a new piece changes its row there.
# SLOTS: the engine class a piece replaces (module by module, by type), the slot its function
# fills (backends.py; model.MODULE_SLOTS says which module types carry it), or, for model.py's
# pieces, the model's forward, the cache class new_caches builds (ANDREA.kv_cache) and the
# function generate draws each token with (ANDREA.sampler). A model lists the pieces whose class
# or slot it has (model_pieces).
SLOTS: dict[str, type | str | object] = {
    piece: getattr(engine, row.replaces) if row.replaces else row.slot for piece, row in contracts.filling().items()}

# The pieces a piece calls by name: each is the learner's where it passes, wherever it is called
# from (the learner's piece, or the engine's, ENGINE_BY_STEPS, written step by step). (The
# engine's rotary attention takes its steps from its slots: model.Rotary.)
STEPS: dict[str, tuple[str, ...]] = {piece: row.steps for piece, row in contracts.declared().items() if row.steps}
ENGINE_BY_STEPS = {piece: row.by_steps for piece, row in contracts.declared().items() if row.by_steps}

# kernels="triton": the pieces whose job a Triton kernel does, and the learner's kernel that the
# package's launcher launches once it passes (the slot's Triton function in backends.TABLE; the
# softmax, inside attention, kernels/softmax.py's).
TRITON_KERNELS: dict[str, str] = {piece: row.kernel for piece, row in contracts.declared().items() if row.kernel}
# Of those, the kernels that do a piece's whole job only once the learner's kernel passes; until then
# the piece runs as without them (its steps in Triton: the learner's attention with its softmax).
TRITON_ONCE_YOURS = {"attention.attention"}

# Given classes of the exercise files that carry slots as the engine's class of the same name does.
GIVEN_CLASSES: dict[str, type] = {name: getattr(engine, cls) for name, cls in contracts.GIVEN_CLASSES.items()}

# What the learner's pieces are written for: {config field: the values they compute}. In a model
# with another value the engine's runs instead, and model.pieces says why (RoPE: the engine's
# Embeddings has no position table and its attention turns q and k; the learner's add learned
# positions). A model option a learner's class does not compute adds its field to the row.
SUPPORTS: dict[str, Mapping[str, frozenset]] = {
    piece: row.supports for piece, row in contracts.declared().items() if row.supports}

_counter = itertools.count()


class ImplementationError(RuntimeError):
    """A learner's folder or file could not be used; the message says which and why."""


def impl_from_env(default: str | None = None) -> str | None:
    """Whose code runs when nobody says: $ANDREA_IMPL, else `default`. The one place it is read."""
    return os.environ.get("ANDREA_IMPL") or default


def notebook_impl() -> str:
    """Whose code a notebook's check(), use() and models run when nobody says: $ANDREA_IMPL if set,
    else the learner's exercises/ (the workspace's, by its path, when the process runs in one)."""
    chosen = impl_from_env()
    if chosen:
        return chosen
    try:
        found = workspace()
    except WorkspaceError:                           # a bad $ANDREA_WORKSPACE: check() says so
        found = None
    return str(found / "exercises") if found is not None else "exercises"


def resolve(impl: str | os.PathLike) -> Path:
    """The folder of a learner's code: "solutions", "exercises" (in a learner's workspace, its
    exercises/: paths.py) or a path to a folder."""
    if str(impl) in COURSE_FOLDERS:
        try:
            folder = course_folder(str(impl))      # exercises/: the learner's workspace's, else ROOT's
        except WorkspaceError as exc:
            raise ImplementationError(str(exc)) from None
        if not folder.is_dir():
            why = " (a student release has no answer key)" if str(impl) == "solutions" else ""
            raise ImplementationError(f"there is no {impl}/ folder in {folder.parent}{why}")
        return folder
    folder = Path(impl).expanduser().resolve()
    if not folder.is_dir():
        raise ImplementationError(f"{impl!r} is neither 'solutions', 'exercises' nor an existing folder")
    return folder


@functools.lru_cache(maxsize=128)
def unwritten_pieces(source: str) -> frozenset[str]:
    """Top-level functions and classes whose body still raises the exercise stub. (Cached by the
    text: building one learner's model asked it 98 times, for every piece of every file.)"""
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
    return frozenset(names)


class Overlay:
    """One learner's folder, loaded as private packages.

    accept: which pieces ("activity.piece") of the learner's are used where a piece is looked up
    by name (module()); None: every written piece. The others are the engine's (pieces/).
    """

    def __init__(self, folder: str | os.PathLike, accept: set[str] | frozenset | None = None):
        self.folder = resolve(folder)
        _install_finder()
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
            obj = getattr(mod, name)
            if graded:
                obj = keeps_inputs(obj, name) if isinstance(obj, types.FunctionType) else keeps_forward_inputs(obj, name)
            self._isolated[key] = obj
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


def _install_finder() -> None:
    """Put the import hook in sys.meta_path, once, when a learner's folder is first used."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


# ----------------------------------------------------------------------------- the model
def model_pieces(cfg: ModelConfig | str, kernels: str = "torch") -> tuple[str, ...]:
    """The learner's pieces a model of `cfg` is built from: those whose class or slot its
    modules have, each after the steps it calls, and with kernels="triton" the Triton kernels
    that do their job. model.pieces lists these. The modules are read off a model with the same
    options at the smallest sizes (built in microseconds; a meta-device model would make torch
    import its compiler, seconds, the first time)."""
    backends.check_backend(kernels)
    cfg = ModelConfig.preset(cfg) if isinstance(cfg, str) else cfg
    with torch.random.fork_rng(devices=[]):          # the caller's random draws stay as they were
        shape = engine.ANDREA(cfg.replace(vocab_size=2, context_length=2, d_model=2 * cfg.n_heads,
                                          n_layers=min(cfg.n_layers, 2), d_ff=2))
    types_ = {type(m) for m in shape.modules()}
    slots = {s for m in shape.modules() for s in backends.slots_of(m, engine.MODULE_SLOTS)}
    out: list[str] = []

    def add(exercise: str) -> None:
        for step in STEPS.get(exercise, ()):
            add(step)
        if exercise not in out:
            out.append(exercise)

    for exercise, target in SLOTS.items():
        if (target in slots if isinstance(target, str) else
                target in types_ or target in (engine.KVCache, engine.sample_next)):
            add(exercise)
    if kernels == "triton":
        out += [kernel for exercise, kernel in TRITON_KERNELS.items() if exercise in out]
    return tuple(out)


def build(cfg: ModelConfig | str, impl: str | os.PathLike | None = None, *,
          accept: Mapping[str, str] | set | frozenset | None = None, kernels: str = "torch",
          dropout: float = 0.0, init_std: float | None = None) -> engine.ANDREA:
    """The engine's ANDREA for `cfg` with the learner's accepted pieces in it.

    impl: the learner's folder ("exercises", "solutions" or a path); None: the engine alone.
    accept: which of the learner's pieces pass, decided by the grading layer: a mapping
    {"activity.piece": "yours" | "engine: <why>"} (grading.passing.passing) or a set of the
    passing pieces. A piece that is not accepted, not written, or in a file that does not load is
    the engine's. kernels, dropout, init_std: how the model runs (see model.ANDREA).

    Once built, the model runs one probe (_observe): a forward and backward pass on a few tokens
    and one generated, counting the calls of every slot and every learner's piece. What it
    reports is what ran: model.pieces, {piece: "yours" | "engine: <why>" | "not run: <why>"} for
    every piece of model_pieces(cfg, kernels); model.slots, which code runs each slot ("engine",
    "yours", "Triton kernel", "yours in Triton", or "not run: <why>", such as a learner's class
    that computes the slot's job itself); model.calls, the counts. A learner's piece that raises
    during the probe is reported ("engine: yours raised ...") and the model is built again
    without it, from the same random draws: the weights are the engine's for the same seed."""
    backends.check_backend(kernels)
    exercises = model_pieces(cfg, kernels)
    if impl is None:
        if accept:
            raise ValueError("build(cfg, accept=...) without impl: name the learner's folder the accepted pieces are in")
        model = engine.ANDREA(cfg, init_std=init_std, dropout=dropout, kernels=kernels)
        parts = _Parts(None, {e: "engine: no learner's folder given" for e in exercises}, dict(engine.MODULE_SLOTS),
                       dict(model.slots), {}, {})
        crash = _observe(model, parts)
        if crash is not None:
            raise crash[2]
        return model
    if accept is None:
        raise ValueError("build(cfg, impl) needs accept=, the pieces that pass their graded tests, from the "
                         "grading layer: grading.passing.learner_model(cfg, impl) runs them and builds the model")
    overlay = Overlay(impl)
    with torch.random.fork_rng(devices=[]):          # a learner's file may draw at import: not the model's draws
        verdicts = _statuses(overlay, exercises, accept)
    model_cfg = ModelConfig.preset(cfg) if isinstance(cfg, str) else cfg
    for exercise in SUPPORTS:
        refused = _not_computed(exercise, model_cfg)
        if verdicts.get(exercise) == YOURS and refused:
            verdicts[exercise] = refused
    start = torch.get_rng_state()
    for attempt in range(len(verdicts) + 1):         # each crash takes one of the learner's pieces out
        if attempt:
            torch.set_rng_state(start)               # the same draws: the engine's weights again
        model, parts = _assemble(cfg, overlay.folder, dict(verdicts), kernels, dropout, init_std)
        crash = _observe(model, parts)
        if crash is None:
            return model
        verdicts[crash[0]] = crash[1]
    raise ImplementationError("the model built from your pieces kept failing its first forward pass")


def _not_computed(exercise: str, cfg: ModelConfig) -> str | None:
    """Why the learner's `exercise` cannot run in a model of `cfg` (a config value its contract
    does not support: "engine: position='rope' needs the engine's; yours computes
    position='learned'"), else None."""
    missing = contracts.computes(contracts.contract(exercise), cfg)
    if missing is None:
        return None
    field, values = missing
    computes = " or ".join(f"{field}={value!r}" for value in sorted(values, key=repr))
    return f"engine: {field}={getattr(cfg, field)!r} needs the engine's; yours computes {computes}"


def _assemble(cfg, folder: Path, status: dict, kernels: str, dropout: float, init_std):
    """The engine's model (its random draws, the only ones the caller sees) with the pieces that
    `status` calls "yours" put in: (model, _Parts)."""
    model = engine.ANDREA(cfg, init_std=init_std, dropout=dropout)
    with torch.random.fork_rng(devices=[]):          # the learner's classes draw weights that are then
        overlay = Overlay(folder, accept={e for e, s in status.items() if s == YOURS})   # replaced
        carriers = dict(engine.MODULE_SLOTS)
        classes = {}
        for exercise, target in SLOTS.items():
            if status.get(exercise) != YOURS:
                continue
            mine = _learner(overlay, exercise)
            if target is engine.ANDREA:
                model.forward = types.MethodType(mine.forward, model)
            elif target is engine.KVCache:
                model.kv_cache = mine
            elif target is engine.sample_next:
                model.sampler = mine
            elif isinstance(target, type):
                classes[target] = (exercise, mine)
                _carries(carriers, mine, target)
        for name, like in GIVEN_CLASSES.items():      # in the learner's files their classes loaded
            activity, cls = name.split(".")
            if f"{overlay.package}.{activity}" in sys.modules:
                _carries(carriers, getattr(sys.modules[f"{overlay.package}.{activity}"], cls, None), like)
        _swap_modules(model, classes, model.cfg, status)
        model.set_dropout(dropout)
        mine, jobs = _slot_functions(overlay, status, list(status), kernels)
    model.kernels = kernels
    declared = backends.apply(model, kernels, carriers, mine)
    return model, _Parts(overlay.folder, status, carriers, declared, jobs,
                         {cls: exercise for exercise, cls in classes.values()})


def _statuses(overlay: "Overlay", exercises, accept) -> dict[str, str]:
    """{piece: "yours" | "engine: <why>"} from the grading layer's verdict, never using a piece
    that is not written or whose file does not load."""
    given = dict(accept) if isinstance(accept, Mapping) else {e: YOURS for e in accept}
    unknown = sorted(e for e in given if e.partition(".")[0] not in pieces.ACTIVITIES
                     or e.partition(".")[2] not in pieces.names(e.partition(".")[0]))
    if unknown:
        raise ValueError(f"accept names {unknown[0]!r}, which is no piece of the course: name pieces as "
                         f"'activity.piece', e.g. 'attention.softmax'")
    status = {}
    for exercise in exercises:
        activity, piece = exercise.split(".")
        verdict = given.get(exercise, "engine: not checked")
        if not overlay.path(activity).is_file():
            verdict = "engine: no file"
        elif piece not in overlay.written(activity):
            verdict = "engine: not written yet"
        elif verdict == YOURS:
            overlay.module(activity)
            if activity in overlay.errors:
                verdict = f"engine: {str(overlay.errors[activity]).splitlines()[0]}"
        elif not verdict.startswith("engine: "):
            verdict = f"engine: {verdict}"
        status[exercise] = verdict
    return status


def _learner(overlay: "Overlay", exercise: str):
    activity, piece = exercise.split(".")
    return getattr(overlay.module(activity), piece)


def _carries(carriers: dict, cls, like: type) -> None:
    """A learner's class carries the slots of the engine's class it stands for."""
    if isinstance(cls, type) and cls is not like and like in carriers:
        carriers[cls] = carriers[like]


def _slot_functions(overlay: "Overlay", status: dict, exercises, kernels: str) -> tuple[dict, dict]:
    """({slot: (function, "yours" | "yours in Triton")}, {piece: (function or None, whether a
    learner's code runs in it, whether Triton does)}): the first for each slot where a learner's
    piece runs, at any depth: the learner's piece with each step it calls doing that step's job in
    this model; or the engine's written step by step around the learner's steps that pass; or,
    with kernels="triton", a learner's kernel in the package's launcher. Fills status with what
    does not run, and why."""
    jobs: dict[str, tuple] = {}

    def job(exercise: str) -> tuple:
        """(function or None for the slot's own, whether a learner's code runs in it, whether Triton does)."""
        if exercise in jobs:
            return jobs[exercise]
        if _kernel_does(exercise, status, kernels):
            kernel = TRITON_KERNELS[exercise]
            launcher = _launcher(exercise)
            if status.get(kernel) == YOURS:
                jobs[exercise] = (functools.partial(launcher, kernel=_learner(overlay, kernel)), True, True)
            else:
                jobs[exercise] = (launcher, False, True)
            where = _whose_kernel(kernel, status)
            if status.get(exercise) == YOURS:
                status[exercise] = f"{'not run' if jobs[exercise][1] else 'engine'}: kernels='triton' computes it with {where}"
            return jobs[exercise]
        parts = {step: job(step) for step in STEPS.get(exercise, ())}
        mine = status.get(exercise) == YOURS
        if mine:
            fn = _learner(overlay, exercise)
        elif any(m for _, m, _ in parts.values()) and exercise in ENGINE_BY_STEPS:
            activity, name = ENGINE_BY_STEPS[exercise]
            fn = getattr(pieces.module(activity), name)
        else:
            jobs[exercise] = (None, False, False)
            return jobs[exercise]
        names = {step.split(".")[1]: f if f is not None else _default(step, kernels) for step, (f, _, _) in parts.items()}
        jobs[exercise] = (_with_globals(fn, names), True, any(t for _, _, t in parts.values()))
        return jobs[exercise]

    out = {}
    for exercise in exercises:
        target = SLOTS.get(exercise)
        if isinstance(target, str):
            fn, mine, in_triton = job(exercise)
            if fn is not None and mine:
                out[target] = (fn, backends.YOURS_IN_TRITON if in_triton else backends.YOURS)
    return out, jobs


def _kernel_does(exercise: str, status: dict, kernels: str) -> bool:
    """Whether a Triton kernel does the whole of `exercise`'s job (its steps never run): with
    kernels="triton", a piece with a kernel row, and for TRITON_ONCE_YOURS only once the
    learner's kernel passes."""
    return kernels == "triton" and exercise in TRITON_KERNELS and (
        exercise not in TRITON_ONCE_YOURS or status.get(TRITON_KERNELS[exercise]) == YOURS)


def _whose_kernel(kernel: str, status: dict) -> str:
    """Which kernel runs in the package's launcher: "your kernels.<name>" once it passes, else the package's."""
    return f"your {kernel}" if status.get(kernel) == YOURS else "the package's Triton kernel"


def _kernel_above(exercise: str, status: dict, kernels: str) -> str | None:
    """The piece that calls `exercise` (at any depth, through STEPS) whose whole job a Triton
    kernel does, so that `exercise` never runs; or None."""
    for caller, steps in STEPS.items():
        if exercise in steps:
            if _kernel_does(caller, status, kernels):
                return caller
            above = _kernel_above(caller, status, kernels)
            if above is not None:
                return above
    return None


def _default(exercise: str, kernels: str):
    """What does a piece's job where no learner's code runs in it: its slot's back-end function,
    or the engine's piece."""
    slot = SLOTS.get(exercise)
    if isinstance(slot, str) and slot in backends.TABLE:
        return backends.op(slot, kernels)
    return pieces.get(*exercise.split("."))


def _launcher(exercise: str):
    """The package's launcher of the Triton kernel that does `exercise`'s job."""
    slot = SLOTS.get(exercise)
    if isinstance(slot, str) and slot in backends.TABLE:
        return backends.op(slot, "triton")
    from .engine.kernels.softmax import softmax
    return softmax


def _with_globals(fn, names: dict):
    """fn, reading the global names in `names` as those objects (a copy of a plain function;
    anything else, or nothing to change, as it is)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    changed = {k: v for k, v in names.items() if fn.__globals__.get(k) is not v}
    if not changed:
        return fn
    new = types.FunctionType(fn.__code__, {**fn.__globals__, **changed}, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__, new.__qualname__, new.__module__, new.__doc__ = (
        fn.__kwdefaults__, fn.__qualname__, fn.__module__, fn.__doc__)
    new.__dict__.update(fn.__dict__)
    return new


def _swap_modules(parent: nn.Module, classes: dict, cfg, status: dict) -> None:
    """Replace every module whose type is in `classes` by the learner's class, built for cfg with
    the engine's weights and marks copied in; a class that cannot take them stays the engine's."""
    for name, child in parent.named_children():
        if type(child) in classes and status[classes[type(child)][0]] == YOURS:
            exercise, cls = classes[type(child)]
            try:
                new = cls(cfg)
                new.load_state_dict(child.state_dict())
                for sub_name, sub in child.named_modules():
                    if engine.is_residual(sub):
                        engine.residual(new.get_submodule(sub_name))
            except Exception as exc:              # noqa: BLE001 - the learner's class, built for this model
                first = (str(exc).splitlines() or [""])[0]
                why = "its parameters differ from the engine's" if isinstance(exc, RuntimeError) else "it could not be built"
                status[exercise] = f"engine: {why} ({type(exc).__name__}: {first})"
                new = child
            setattr(parent, name, new)
            child = new
        _swap_modules(child, classes, cfg, status)


# ----------------------------------------------------------------------------- what ran
# The probe every built model runs once: a forward and backward pass on PROBE_TOKENS tokens, and one
# token generated (model.KVCache and model.sample_next are used only by generate).
PROBE_TOKENS = 2

# What computes a slot's or a step's job without calling it, by the last part of a call's name:
# a learner's code that calls one of these where it should call the slot is named by it. Every
# slot that a class learners write (or are given) carries has a row (tests/overlay/test_contracts.py).
DOES_THE_JOB: dict[str, tuple[str, ...]] = {
    "gelu": ("gelu", "gelu_tanh", "GELU", "tanh", "erf"),
    "layer_norm": ("layer_norm", "LayerNorm", "var", "std", "rsqrt"),
    "rms_norm": ("rms_norm", "RMSNorm", "rsqrt"),
    "swiglu": ("swiglu", "silu", "SiLU", "sigmoid"),
    "attention": ("attention", "scaled_dot_product_attention", "softmax", "MultiheadAttention"),
    "cross_entropy": ("cross_entropy", "log_softmax", "nll_loss", "logsumexp", "CrossEntropyLoss"),
    "rope_frequencies": ("rope_frequencies", "outer", "cos", "sin"),
    "apply_rope": ("apply_rope", "cos", "sin"),
    "rope_attention": ("rope_attention",),
    "attention.attention_scores": ("matmul", "einsum", "bmm"),
    "attention.scale_scores": ("sqrt", "rsqrt"),
    "attention.causal_mask": ("tril", "triu"),
    "attention.apply_causal_mask": ("masked_fill", "where", "tril", "triu"),
    "attention.softmax": ("softmax", "exp", "log_softmax"),
    "attention.weighted_sum": ("matmul", "einsum", "bmm"),
    "modern.apply_rope": ("cos", "sin", "cat"),
    "attention.attention": ("scaled_dot_product_attention", "softmax"),
}


class _Parts:
    """What the probe needs to know of a built model: the learner's folder (None: the engine
    alone), the pieces' statuses (which the probe turns into model.pieces), the carriers of the
    slots, the slots' declared who (backends.apply), the jobs (_slot_functions) and the learner's
    classes in it {class: piece}."""

    def __init__(self, folder, status, carriers, declared, jobs, classes):
        self.folder, self.status, self.carriers = folder, status, carriers
        self.declared, self.jobs, self.classes = declared, jobs, classes

    def mine(self, exercise: str):
        """The learner's function that does `exercise`'s job in this model, or None."""
        job = self.jobs.get(exercise)
        return job[0] if job and job[1] else None


def _observe(model: engine.ANDREA, parts: _Parts):
    """Run the probe and set model.slots, model.pieces and model.calls from what it counted.
    Returns None, or (piece, "engine: <why>", the exception) for the learner's piece that
    raised (the model is then built again without it). The caller's random draws and the
    model's gradients stay as they were."""
    marks = _marks(model, parts)
    device = _probe_device(model)
    calls = None
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.enable_grad(), \
                _on_device(model, device), backends.observe(model, parts.carriers, marks) as calls, \
                _steps_counted(parts, calls, marks), _generation_counted(model, calls, marks):
            _probe(model, device)
    except Exception as exc:                          # noqa: BLE001 - the learner's code, run for the first time here
        return _blame(exc, calls, parts)
    slots = _slot_report(model, calls, parts)
    counts = _piece_counts(model, calls, parts)
    model.slots = {slot: who for slot, (who, _) in slots.items()}
    model.pieces = _piece_report(model, parts, counts, slots, calls)
    model.calls = {"slots": {slot: n for slot, (_, n) in slots.items()}, "pieces": counts}
    return None


def _probe(model: engine.ANDREA, device: torch.device) -> None:
    """A forward pass with targets on PROBE_TOKENS tokens, its backward, and one generated token."""
    cfg = model.cfg
    T = min(PROBE_TOKENS, cfg.context_length)
    ids = torch.randint(0, cfg.vocab_size, (1, T), generator=torch.Generator().manual_seed(0)).to(device)
    embedded = []
    hook = (model.embed.register_forward_hook(lambda m, a, out: embedded.append(out))
            if isinstance(getattr(model, "embed", None), nn.Module) else None)
    try:
        out = model(ids, ids.roll(-1, dims=1))
    finally:
        if hook is not None:
            hook.remove()
    loss = out[1]
    if loss.requires_grad:        # through every block, without filling any parameter's .grad
        wrt = [t for t in embedded[:1] if isinstance(t, torch.Tensor) and t.requires_grad]
        torch.autograd.grad(loss, wrt or [p for p in model.parameters() if p.requires_grad], allow_unused=True)
    if cfg.context_length > 1:
        model.generate(ids[:, :1], 1, temperature=0)


def _probe_device(model: nn.Module) -> torch.device:
    """Where the probe runs: the model's device; a kernels="triton" model on the CPU of a machine
    whose Triton compiles for its GPU (no interpreter) runs it there."""
    p = next(model.parameters(), None)
    device = p.device if p is not None else torch.device("cpu")
    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if getattr(model, "kernels", "torch") == "triton" and device.type == "cpu" and not interpreted \
            and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


class _on_device:
    """The model on `device` while the block runs, then back where it was."""

    def __init__(self, model: nn.Module, device: torch.device):
        p = next(model.parameters(), None)
        self.model, self.device = model, device
        self.home = p.device if p is not None else device

    def __enter__(self):
        if self.home != self.device:
            self.model.to(self.device)

    def __exit__(self, *exc):
        if self.home != self.device:
            self.model.to(self.home)


def _marks(model: nn.Module, parts: _Parts) -> dict[int, str]:
    """{id(learner's function or module): its piece}: what Calls.last may name."""
    marks = {id(fn): e for e, (fn, mine, _) in parts.jobs.items() if fn is not None and mine}
    marks.update({id(m): parts.classes[type(m)] for m in model.modules() if type(m) in parts.classes})
    for exercise, attribute in (("model.KVCache", "kv_cache"), ("model.sample_next", "sampler")):
        if parts.status.get(exercise) == YOURS:
            marks[id(getattr(model, attribute))] = exercise
    return marks


class _steps_counted:
    """While the block runs, each step a learner's function (or the engine's written step by step)
    calls by name (STEPS) is read through a counting wrapper; the names are put back after."""

    def __init__(self, parts: _Parts, calls, marks):
        self.parts, self.calls, self.marks, self.saved = parts, calls, marks, []

    def __enter__(self):
        seen = set()
        for exercise, (fn, _, _) in self.parts.jobs.items():
            if not isinstance(fn, types.FunctionType):
                continue
            names = fn.__globals__
            for step in STEPS.get(exercise, ()):
                name = step.split(".")[1]
                if (id(names), name) in seen or not callable(names.get(name)):
                    continue
                seen.add((id(names), name))
                self.saved.append((names, name, names[name]))
                names[name] = self.calls.wrap(names[name], mark=self.marks.get(id(names[name])))
        return self

    def __exit__(self, *exc):
        for names, name, fn in reversed(self.saved):
            names[name] = fn


class _generation_counted:
    """While the block runs, the cache class and the sampler generate uses are counted."""

    ATTRIBUTES = ("kv_cache", "sampler")

    def __init__(self, model, calls, marks):
        self.model, self.calls, self.marks = model, calls, marks
        self.own = {a: self.model.__dict__[a] for a in self.ATTRIBUTES if a in self.model.__dict__}

    def __enter__(self):
        for a in self.ATTRIBUTES:
            fn = getattr(self.model, a)
            setattr(self.model, a, self.calls.wrap(fn, mark=self.marks.get(id(fn))))
        return self

    def __exit__(self, *exc):
        for a in self.ATTRIBUTES:
            if a in self.own:
                setattr(self.model, a, self.own[a])
            else:
                delattr(self.model, a)


# ----- what the counts say
def _slot_report(model: nn.Module, calls, parts: _Parts) -> dict[str, tuple[str, int]]:
    """{slot: (who runs it, its calls)}: the declared who where it ran in every module that
    carries it; "not run: <why>" where it never ran; "<who> in k of its n <Module>s: <why>"."""
    out = {}
    for slot, who in parts.declared.items():
        carriers = [(name, m) for name, m in model.named_modules() if slot in backends.slots_of(m, parts.carriers)]
        fn = getattr(carriers[0][1], slot)
        ran = {name: calls.modules[name] > 0 for name, _ in carriers}
        if fn is None:                                 # no function in it: its module's own steps run
            total, called = sum(calls.modules[name] for name, _ in carriers), sum(ran.values())
        else:
            total = calls.functions[id(fn)]
            called = sum(calls.slots[(name, slot)] > 0 for name, _ in carriers)
        problems = [_never_runs(model, name, calls, slot) if not ran[name] else _bypasses(model, m, slot)
                    for name, m in carriers
                    if not ran[name] or (fn is not None and not calls.slots[(name, slot)] and _learners_forward(m))]
        problems = list(dict.fromkeys(problems))
        if total == 0:
            why = problems[0] if problems else _step_skipped(slot, calls, parts) or "nothing in the model called it"
            out[slot] = (f"not run: {why}", 0)
        elif problems:
            out[slot] = (f"{who} in {called} of its {len(carriers)} {type(carriers[0][1]).__name__}s: {problems[0]}", total)
        else:
            out[slot] = (who, total)
    return out


def _piece_counts(model: nn.Module, calls, parts: _Parts) -> dict[str, int]:
    """{piece: how many times the learner's code of it ran} for each piece of theirs in the model."""
    counts = {}
    for exercise, status in parts.status.items():
        if status != YOURS:
            continue
        target = SLOTS.get(exercise)
        if target is engine.ANDREA:
            counts[exercise] = calls.modules[""]
        elif target is engine.KVCache:
            counts[exercise] = calls.functions[id(model.kv_cache)]
        elif target is engine.sample_next:
            counts[exercise] = calls.functions[id(model.sampler)]
        elif isinstance(target, type):
            counts[exercise] = sum(calls.modules[name] for name, m in model.named_modules()
                                   if parts.classes.get(type(m)) == exercise)
        else:
            job = next((e for e, k in TRITON_KERNELS.items() if k == exercise), exercise)
            fn = parts.mine(job)
            counts[exercise] = calls.functions[id(fn)] if fn is not None else 0
    return counts


def _piece_report(model, parts: _Parts, counts: dict, slots: dict, calls) -> dict[str, str]:
    """model.pieces: each piece's status, "not run: <why>" for a piece of theirs that never ran."""
    out = dict(parts.status)
    for exercise, n in counts.items():
        if n == 0:
            out[exercise] = f"not run: {_why_not_run(model, exercise, parts, slots, calls)}"
    for exercise, kernel in TRITON_KERNELS.items():    # "computes it with your kernel": only if it ran
        if out.get(exercise, "").startswith("not run: kernels=") and counts.get(kernel) == 0:
            out[exercise] = f"not run: {_why_not_run(model, exercise, parts, slots, calls)}"
    return out


def _why_not_run(model, exercise: str, parts: _Parts, slots: dict, calls) -> str:
    """Why a learner's piece that is in the model never ran: the slot it fills never ran, the
    piece that calls it computes its job itself, or the module that holds it is never called."""
    job = next((e for e, k in TRITON_KERNELS.items() if k == exercise), exercise)
    above = _kernel_above(job, parts.status, model.kernels)
    if above is not None:
        whose = _whose_kernel(TRITON_KERNELS[above], parts.status)
        return f"kernels='triton' computes {above} with {whose}: your {exercise} never runs"
    target = SLOTS.get(job)
    if isinstance(target, str) and slots.get(target, ("", 1))[1] == 0:
        return slots[target][0].removeprefix("not run: ")
    for caller, steps in STEPS.items():
        fn = parts.mine(caller)
        if job not in steps or fn is None:
            continue
        if calls.functions[id(fn)] == 0:
            return _why_not_run(model, caller, parts, slots, calls)
        found = _calls_to(fn, DOES_THE_JOB.get(job, ()) + (job.split(".")[1],))
        does = f" ({found[0]} does its job)" if found else ""
        owner = "your" if parts.status.get(caller) == YOURS else "the engine's"
        return f"{owner} {caller} never calls {job.split('.')[1]}{does}: your {exercise} never runs"
    names = [name for name, m in model.named_modules() if parts.classes.get(type(m)) == exercise]
    if names:
        return _never_runs(model, names[0], calls, "", then=f"your {exercise} never runs")
    return "nothing in the model called it"


def _step_skipped(slot: str, calls, parts: _Parts) -> str | None:
    """For a slot whose function is also a step of another piece (apply_rope in rope_attention):
    that piece ran and never called it."""
    exercise = next((e for e, t in SLOTS.items() if t == slot), None)
    for caller, steps in STEPS.items():
        fn = parts.mine(caller)
        if exercise in steps and fn is not None and calls.functions[id(fn)]:
            found = _calls_to(fn, DOES_THE_JOB.get(slot, ()))
            does = f" ({found[0]} does its job)" if found else ""
            return f"your {caller} never calls {exercise.split('.')[1]}{does}: the {slot} slot never runs"
    return None


def _learners_forward(module: nn.Module):
    """The learner's forward of a module (a learner's class, or the model with a learner's
    model.ANDREA), or None for the engine's."""
    forward = getattr(module, "forward", None)
    fn = getattr(forward, "__func__", forward)
    return fn if getattr(fn, "__module__", "").startswith("_andrea_learner_") else None


def _calls_to(fn, names: tuple[str, ...], slot: str | None = None) -> list[str]:
    """The calls in fn's source whose name ends in one of `names` (never self.<slot> itself), as written."""
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            own = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr == slot
            if last in names and not own:
                found.append(ast.unparse(f))
    return list(dict.fromkeys(found))


def _bypasses(model: nn.Module, module: nn.Module, slot: str) -> str:
    """Why a module with a learner's forward that ran never called its slot."""
    found = _calls_to(_learners_forward(module), DOES_THE_JOB.get(slot, (slot,)), slot)
    how = f"calls {found[0]} itself, not self.{slot}" if found else f"never calls self.{slot}"
    owner = f"your {type(module).__name__}" + ("'s forward" if module is model else "")
    return f"{owner} {how}: the {slot} slot, and any Triton kernel in it, never runs"


def _never_runs(model: nn.Module, name: str, calls, slot: str, then: str | None = None) -> str:
    """Why a module that carries a slot (or is a learner's class) never ran: the nearest module
    above it that ran never calls it; `then` what follows (default: the slot in it never runs)."""
    then = then or f"the {slot} slot in it never runs"
    parts = name.split(".")
    for cut in range(len(parts) - 1, -1, -1):
        above = ".".join(parts[:cut])
        module = model.get_submodule(above)
        if isinstance(module, (nn.ModuleList, nn.ModuleDict)) or (above and not calls.modules[above]):
            continue
        child = parts[cut]
        forward = _learners_forward(module)
        if forward is None:
            return f"{name} never runs"
        owner = f"your {type(module).__name__}" + ("'s forward" if module is model else "")
        found = _calls_to(forward, DOES_THE_JOB.get(slot, (slot,)))
        does = f" (it calls {found[0]} itself)" if found else ""
        return f"{owner} never calls its {child}{does}: {then}"
    return f"{name} never runs"


def _blame(exc: BaseException, calls, parts: _Parts):
    """(piece, "engine: <why>", exc) for the learner's piece a crash of the probe comes from: the
    innermost frame of the learner's code that is a piece of theirs in the model, else the piece of
    theirs that last finished before it. Nothing of theirs: ImplementationError, in one line."""
    first = (str(exc).splitlines() or [""])[0]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    said = f": {first}" if first else ""
    if parts.folder is None:
        return None, None, exc
    yours = {e for e, s in parts.status.items() if s == YOURS or s.startswith("not run: kernels=")}
    yours |= {k for e, k in TRITON_KERNELS.items() if parts.status.get(k) == YOURS}
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    for tb in reversed(frames):
        code = tb.tb_frame.f_code
        path = Path(code.co_filename)
        if path.parent != parts.folder:
            continue
        exercise = f"{path.stem}.{code.co_qualname.split('.')[0]}"
        if exercise in yours:
            return exercise, f"engine: yours raised {type(exc).__name__} in this model ({path.name}, line {tb.tb_lineno}{said})", exc
    if calls is not None and calls.last in yours:
        return calls.last, f"engine: this model failed right after yours ran ({what})", exc
    raise ImplementationError(f"the model built from your pieces failed its first forward pass ({what})") from exc
