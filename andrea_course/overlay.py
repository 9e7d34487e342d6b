"""A learner's pieces put into the engine: one factory above the model, and the folders it reads.

A learner's code is a folder shaped like exercises/: one file per activity (attention.py, ...),
each defining the pieces of that activity under the exercise's names. build() returns the
engine's model (model.py) with the learner's accepted pieces in it, each replacing exactly what
it teaches, at every level:

    model = build(cfg, "exercises", accept={"attention.softmax": "yours", ...})
    model.pieces        # {"attention.softmax": "yours", "mlp.MLP": "engine: not written yet", ...}
    model.slots         # {"attention": "yours", "gelu": "engine", ...}: which code runs each slot

Which pieces pass is not decided here: the grading layer runs their graded tests and hands the
verdict down (grading/passing.py: learner_model(cfg, impl) = build(cfg, impl, accept=passing(...))).
SLOTS lists what each piece fills: a module class (replaced by type, the engine's weights copied
in), a slot (backends.py: a function a module calls by the slot's name), or what generate() and
new_caches() use. A piece that calls other pieces (attention calls softmax, ...; STEPS) runs
with each of them the learner's where it passes: the learner's softmax runs inside the learner's
attention, or inside the engine's attention written step by step when the learner's attention
does not pass. With kernels="triton" the learner's Triton kernels run in the package's
launchers (TRITON_KERNELS).

The graded tests see each piece isolated: Overlay.isolated() runs the learner's piece with the
engine standing in for every other piece it calls, so one mistake costs points in one place only.

Whose code: an explicit impl, else $ANDREA_IMPL (read in impl_from_env, and only there),
"solutions" and "exercises" naming the course's folders. Nothing here reads solutions/ unless
asked to. The import hook that resolves a learner's relative imports is installed when a
learner's folder is first used (Overlay()), never by importing the package.
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

from . import authorship, backends, pieces
from . import model as engine
from .config import ModelConfig
from .paths import COURSE_FOLDERS, ROOT, STUB_MARK, WorkspaceError, course_folder  # noqa: F401  (STUB_MARK: read by older callers)

YOURS = "yours"

# What each of the learner's pieces fills in the model: the engine class it replaces (module by
# module, by type), the slot its function fills (backends.py; model.MODULE_SLOTS says which module
# types carry it), or, for model.py's pieces, the model's forward, the cache class new_caches
# builds (ANDREA.kv_cache) and the function generate draws each token with (ANDREA.sampler).
# A model lists the pieces whose class or slot it has (model_pieces).
SLOTS: dict[str, type | str | object] = {
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
    "modern.rope_frequencies":      "rope_frequencies",
    "modern.apply_rope":            "apply_rope",
    "modern.rope_attention":        "rope_attention",
    "model.ANDREA":                 engine.ANDREA,       # its forward runs the engine's model
    "model.KVCache":                engine.KVCache,      # the class model.new_caches builds
    "model.sample_next":            engine.sample_next,  # what model.generate draws each token with
}

# The pieces a piece calls by name: each is the learner's where it passes, wherever it is called
# from (the learner's piece, or the engine's, ENGINE_BY_STEPS, written step by step).
STEPS: dict[str, tuple[str, ...]] = {
    "attention.attention": ("attention.attention_scores", "attention.scale_scores", "attention.apply_causal_mask",
                            "attention.softmax", "attention.weighted_sum"),
    "attention.apply_causal_mask": ("attention.causal_mask",),
    "modern.rope_attention": ("modern.apply_rope", "attention.attention"),
}

# The engine's version of a piece with steps, written step by step so that a learner's steps can
# run in it when the learner's piece itself does not pass. (The engine's rotary attention takes
# its steps from its slots: model.Rotary.)
ENGINE_BY_STEPS = {
    "attention.attention": ("attention", "attention_by_steps"),
    "attention.apply_causal_mask": ("attention", "apply_causal_mask"),
}

# kernels="triton": the pieces whose job a Triton kernel does, and the learner's kernel that the
# package's launcher launches once it passes (the slot's Triton function in backends.TABLE; the
# softmax, inside attention, kernels/softmax.py's).
TRITON_KERNELS: dict[str, str] = {
    "mlp.gelu_tanh": "kernels.gelu_kernel",
    "block.layer_norm": "kernels.layer_norm_kernel",
    "attention.softmax": "kernels.softmax_kernel",
}

# Given classes of the exercise files that carry slots as the engine's class of the same name does.
GIVEN_CLASSES: dict[str, type] = {"block.LayerNorm": engine.LayerNorm, "modern.RMSNorm": engine.RMSNorm}

# What the learner's classes are written for: {config field: the value they compute}. In a model
# with another value the engine's class runs instead, and model.pieces says why (RoPE: the engine's
# Embeddings has no position table and its attention turns q and k; the learner's add learned
# positions). A model option a learner's class does not compute adds its field here.
WRITTEN_FOR: dict[str, dict[str, object]] = {
    "embeddings.Embeddings": {"position": "learned"},
    "multihead.MultiHeadAttention": {"position": "learned"},
}

_counter = itertools.count()


class ImplementationError(RuntimeError):
    """A learner's folder or file could not be used; the message says which and why."""


def impl_from_env(default: str | None = None) -> str | None:
    """Whose code runs when nobody says: $ANDREA_IMPL, else `default`. The one place it is read."""
    return os.environ.get("ANDREA_IMPL") or default


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

    model.pieces: {piece: "yours" | "engine: <why>" | "not run: <why>"} for every piece of
    model_pieces(cfg, kernels); model.slots: which code runs each slot ("engine", "yours",
    "Triton kernel", "yours in Triton")."""
    exercises = model_pieces(cfg, kernels)
    model = engine.ANDREA(cfg, init_std=init_std, dropout=dropout)
    if impl is None:
        if accept:
            raise ValueError("build(cfg, accept=...) without impl: name the learner's folder the accepted pieces are in")
        model.pieces = {e: "engine: no learner's folder given" for e in exercises}
        model.slots = backends.apply(model, kernels, engine.MODULE_SLOTS)
        model.kernels = kernels
        return model
    if accept is None:
        raise ValueError("build(cfg, impl) needs accept=, the pieces that pass their graded tests, from the "
                         "grading layer: grading.passing.learner_model(cfg, impl) runs them and builds the model")
    overlay = Overlay(impl)
    status = _statuses(overlay, exercises, accept)
    for exercise, written_for in WRITTEN_FOR.items():
        other = {k: v for k, v in written_for.items() if getattr(model.cfg, k) != v}
        if status.get(exercise) == YOURS and other:
            field, value = next(iter(other.items()))
            status[exercise] = (f"engine: {field}={getattr(model.cfg, field)!r} needs the engine's; "
                                f"yours computes {field}={value!r}")
    overlay = Overlay(overlay.folder, accept={e for e, s in status.items() if s == YOURS})
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
    for name, like in GIVEN_CLASSES.items():          # in the learner's files their classes loaded
        activity, cls = name.split(".")
        if f"{overlay.package}.{activity}" in sys.modules:
            _carries(carriers, getattr(sys.modules[f"{overlay.package}.{activity}"], cls, None), like)
    with torch.random.fork_rng(devices=[]):          # the learner's classes draw weights that are then
        _swap_modules(model, classes, model.cfg, status)   # replaced: the engine's draws stay the model's
    model.set_dropout(dropout)
    mine = _slot_functions(overlay, status, exercises, kernels)
    model.slots = backends.apply(model, kernels, carriers, mine)
    model.kernels = kernels
    model.pieces = status
    return model


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


def _slot_functions(overlay: "Overlay", status: dict, exercises, kernels: str) -> dict[str, tuple]:
    """{slot: (function, "yours" | "yours in Triton")} for each slot where a learner's piece
    runs, at any depth: the learner's piece with each step it calls doing that step's job in
    this model; or the engine's written step by step around the learner's steps that pass; or,
    with kernels="triton", a learner's kernel in the package's launcher. Fills status with what
    does not run, and why."""
    triton = kernels == "triton"
    jobs: dict[str, tuple] = {}

    def job(exercise: str) -> tuple:
        """(function or None for the slot's own, whether a learner's code runs in it, whether Triton does)."""
        if exercise in jobs:
            return jobs[exercise]
        if triton and exercise in TRITON_KERNELS:
            kernel = TRITON_KERNELS[exercise]
            launcher = _launcher(exercise)
            if status.get(kernel) == YOURS:
                jobs[exercise] = (functools.partial(launcher, kernel=_learner(overlay, kernel)), True, True)
                where = f"your {kernel}"
            else:
                jobs[exercise] = (launcher, False, True)
                where = "the package's Triton kernel"
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
    return out


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
    from .kernels.softmax import softmax
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
