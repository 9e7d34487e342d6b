"""Recording how a learner's pieces are called: by the notebooks (run in this process, every piece
the answer key's, which passes every graded test) and by the graded tests. For
tests/test_notebook_calls.py.

A call is recorded as (piece, signature): the piece is "activity.name" (a class's methods as
"activity.Class.method"), the signature the rank and dtype of each tensor argument (and whether it
is strided), the type of every other argument, and the keywords used. A notebook call whose
signature no graded test of that piece makes is a call that a learner's piece can pass every
graded test and still fail: a green box the notebook can break.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import os
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn as nn

from andrea_course import overlay as overlay_module
from andrea_course import pieces
from andrea_course.config import ModelConfig
from andrea_course.grading.student import InProcessStudent
from andrea_course.paths import ROOT

# Launchers (given code that launches the learner's Triton kernel) take kernel= to run another
# kernel: what matters is how the kernel is launched, not which one.
IGNORED_KEYWORDS = {"kernel"}


# ----------------------------------------------------------------------------- signatures
def describe(value) -> str:
    """What a graded test must reproduce of one argument: a tensor's rank, dtype and layout, a
    config's options, another value's type."""
    if isinstance(value, torch.Tensor):
        return f"tensor{value.dim()}d:{str(value.dtype).removeprefix('torch.')}" + \
            ("" if value.is_contiguous() or value.dim() < 2 else ":strided")
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    if isinstance(value, (int, float, str)):
        return type(value).__name__
    if isinstance(value, ModelConfig):
        return (f"config({value.norm},{value.mlp},bias={value.bias},"
                f"{'G<H' if value.kv_heads < value.n_heads else 'G=H'},tied={value.tie_embeddings},{value.position})")
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{','.join(sorted({describe(v) for v in value}))}]"
    if isinstance(value, dict):
        return f"dict[{','.join(sorted({describe(k) + ':' + describe(v) for k, v in value.items()}))}]"
    if isinstance(value, torch.Generator):
        return "Generator"
    if isinstance(value, (torch.dtype, torch.device)):
        return type(value).__name__
    return type(value).__name__


def signature(args, kwargs) -> str:
    shown = [describe(a) for a in args]
    shown += [f"{k}={describe(v)}" for k, v in sorted(kwargs.items()) if k not in IGNORED_KEYWORDS]
    return "(" + ", ".join(shown) + ")"


class Recorder:
    """{piece: {signature: where first seen}}."""

    def __init__(self):
        self.calls: dict[str, dict[str, str]] = defaultdict(dict)
        self.where = ""

    def note(self, piece: str, args, kwargs) -> None:
        self.calls[piece].setdefault(signature(args, kwargs), self.where)


def recording(obj, piece: str, recorder: Recorder):
    """obj, recording every call: a function wrapped; a class subclassed so that its instances are
    still instances (of nn.Module, say), its construction and its own methods recorded. Anything
    else (a Triton kernel, launched with kernel[grid]) comes back as it is."""
    if isinstance(obj, type):
        own = {name: fn for name, fn in vars(obj).items()
               if inspect.isfunction(fn) and (not name.startswith("_") or name == "__init__")}
        body = {}
        for name, fn in own.items():
            key = piece if name == "__init__" else f"{piece}.{name}"
            body[name] = _method(fn, key, recorder)
        return type(obj.__name__, (obj,), {**body, "__module__": obj.__module__, "__qualname__": obj.__qualname__})
    if inspect.isfunction(obj) or isinstance(obj, functools.partial):
        @functools.wraps(obj)
        def call(*args, **kwargs):
            recorder.note(piece, args, kwargs)
            return obj(*args, **kwargs)
        return call
    return obj


def _method(fn, key, recorder):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        recorder.note(key, args, kwargs)
        return fn(self, *args, **kwargs)
    return method


class RecordingModule(types.ModuleType):
    """A learner's module whose pieces (and the functions its file defines, a kernel's launcher
    say) record their calls."""

    def __init__(self, real: types.ModuleType, activity: str, recorder: Recorder):
        super().__init__(real.__name__)
        self.__dict__.update(vars(real))
        for name, value in vars(real).items():
            defined_here = getattr(value, "__module__", None) == real.__name__
            if name in pieces.names(activity) or (defined_here and not name.startswith("_")
                                                   and (inspect.isfunction(value) or isinstance(value, type))):
                setattr(self, name, recording(value, f"{activity}.{name}", recorder))


class RecordingStudent(InProcessStudent):
    """The answer key's pieces, each recording how the graded tests call it."""

    def __init__(self, recorder: Recorder):
        super().__init__("solutions")
        self.recorder = recorder
        self._made = {}

    def piece(self, activity: str, name: str):
        if (activity, name) not in self._made:
            self._made[(activity, name)] = recording(super().piece(activity, name), f"{activity}.{name}", self.recorder)
        return self._made[(activity, name)]


# ----------------------------------------------------------------------------- the graded tests
def graded_tests():
    """(activity file, name, function) of every graded test shipped with the package."""
    from andrea_course.graded import GRADED
    out = []
    for path in sorted(GRADED.glob("test_*.py")):
        if path.stem == "test_kernels" and importlib.util.find_spec("triton") is None:
            continue
        spec = importlib.util.spec_from_file_location(f"_calls_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, fn in vars(module).items():
            if name.startswith("test_") and any(m.name == "exercise" for m in getattr(fn, "pytestmark", [])):
                out.append((path.name, name, fn))
    return out


def record_graded() -> Recorder:
    recorder = Recorder()
    student = RecordingStudent(recorder)
    for file, name, fn in graded_tests():
        recorder.where = f"{file}::{name}"
        fn(student)
    return recorder


# ----------------------------------------------------------------------------- the notebooks
def code_cells(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


@contextlib.contextmanager
def notebook_patches(recorder: Recorder):
    """While a notebook runs: use() hands out the answer key's piece, recording (the graded tests
    are not run: the answer key passes them all); check(), hint() and quizzes do nothing; every
    learner module a notebook or ANDREA(impl=...) reads records its pieces."""
    import andrea_course.notebook as nb
    import andrea_course.notebook.checks as checks
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def use(activity, name, **_):
        return recording(InProcessStudent("solutions").overlay.isolated(activity, name), f"{activity}.{name}", recorder)

    real_module = overlay_module.Overlay.module

    def module(self, activity):
        return RecordingModule(real_module(self, activity), activity, recorder)

    quiet = lambda *a, **k: None
    saved = [(nb, "use", nb.use), (checks, "use", checks.use), (nb, "check", nb.check), (checks, "check", checks.check),
             (nb, "quiz", nb.quiz), (nb, "hint", nb.hint), (nb, "reveal_piece", nb.reveal_piece),
             (overlay_module.Overlay, "module", real_module), (overlay_module, "passing", overlay_module.passing),
             (plt, "show", plt.show)]
    nb.use = checks.use = use
    nb.check = checks.check = nb.quiz = nb.hint = nb.reveal_piece = quiet
    overlay_module.Overlay.module = module
    overlay_module.passing = lambda impl, exercises: {e: "yours" for e in exercises}
    plt.show = quiet
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        plt.close("all")


def run_notebook(path: Path, recorder: Recorder) -> float:
    """Run a notebook's code cells top to bottom in this process, recording its calls; the seconds taken."""
    start = time.perf_counter()
    namespace = {"__name__": "__main__"}
    with notebook_patches(recorder), open(os.devnull, "w") as sink, \
            contextlib.redirect_stdout(sink):
        for index, source in code_cells(path):
            recorder.where = f"{path.name} cell {index}"
            exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)
    return time.perf_counter() - start


def gaps(notebook: Recorder, graded: Recorder) -> list[str]:
    """The notebook's calls that no graded test of the piece makes, in words."""
    out = []
    for piece, calls in sorted(notebook.calls.items()):
        tested = graded.calls.get(piece, {})
        for sig, where in sorted(calls.items()):
            if sig not in tested:
                out.append(f"{where}: {piece}{sig} (graded tests call it as: "
                           f"{'; '.join(sorted(tested)) or 'never'})")
    return out


if __name__ == "__main__":                              # a report, by hand
    graded = record_graded()
    for path in sorted((ROOT / "notebooks").glob(sys.argv[1] if len(sys.argv) > 1 else "*.ipynb")):
        rec = Recorder()
        seconds = run_notebook(path, rec)
        print(f"== {path.name}: {seconds:.1f} s, {sum(len(c) for c in rec.calls.values())} signatures")
        for line in gaps(rec, graded):
            print("  ", line[:400])
