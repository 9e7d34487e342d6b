"""Recording how a learner's pieces are called: by the notebooks (every piece the answer key's,
which passes every graded test) and by the graded tests; and the check that every call a notebook
makes is one a graded test of that piece makes too.

Two ways to run a notebook and record its calls:
- in this process, its code cells one after the other (run_notebook: tests/notebook/test_notebook_calls.py
  does it for the notebooks that run in a few seconds);
- in nbval's own run of every notebook (`make test`'s stage "notebooks with the answer key" loads
  this file as a pytest plugin, `-p piece_calls`): an IPython start-up file makes each kernel
  record its calls into a folder, and at the end of the session the calls are checked against the
  graded tests' (pytest_sessionfinish); a call no graded test makes fails the session.

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
from andrea_course.engine.config import ModelConfig
from andrea_course.grading.student import InProcessStudent
from andrea_course.paths import ROOT

# The given launchers that run a learner's Triton kernel: the graded tests and notebook 08 call
# them (kernel= picks which kernel they launch: what matters is how, not which).
LAUNCHERS = {"kernels": ("gelu", "layer_norm", "softmax", "flash_attention")}
IGNORED_KEYWORDS = {"kernel"}
# What a learner writes of a class: its construction, forward, a cache's update (the given methods,
# MultiHeadAttention.cache_and_share or ANDREA.generate, are the course's code).
LEARNERS_METHODS = ("__init__", "forward", "update")


# ----------------------------------------------------------------------------- signatures
# The options of a config that change what a learner's class must do (its other options, and every
# size, are the same code path): a block built for RMSNorm and SwiGLU is not one built for LayerNorm.
CONFIG_OPTIONS = {
    "embeddings.Embeddings": ("position",),
    "multihead.MultiHeadAttention": ("bias", "grouped", "position"),
    "mlp.MLP": ("bias",),
    "modern.SwiGLU": ("bias",),
    "block.Block": ("norm", "mlp", "bias", "grouped"),
    "block.PostNormBlock": ("norm", "mlp", "bias", "grouped"),
    "model.ANDREA": ("norm", "mlp", "bias", "grouped", "tied", "position"),
}


def _options(cfg: ModelConfig) -> dict:
    return {"norm": cfg.norm, "mlp": cfg.mlp, "bias": f"bias={cfg.bias}",
            "grouped": "G<H" if cfg.kv_heads < cfg.n_heads else "G=H", "tied": f"tied={cfg.tie_embeddings}",
            "position": cfg.position}


def describe(value, piece: str = "") -> str:
    """What a graded test must reproduce of one argument: a tensor's rank, dtype and layout, the
    options of a config that matter to `piece`, another value's type."""
    if isinstance(value, torch.Tensor):
        return f"tensor{value.dim()}d:{str(value.dtype).removeprefix('torch.')}" + \
            ("" if value.is_contiguous() or value.dim() < 2 else ":strided")
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    if isinstance(value, (int, float, str)):
        return type(value).__name__
    if isinstance(value, ModelConfig):
        options = _options(value)
        return f"config({','.join(options[k] for k in CONFIG_OPTIONS.get(piece.rsplit('.', 1)[0] if piece.count('.') > 1 else piece, ()))})"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{','.join(sorted({describe(v, piece) for v in value}))}]"
    if isinstance(value, dict):
        return f"dict[{','.join(sorted({describe(k, piece) + ':' + describe(v, piece) for k, v in value.items()}))}]"
    if isinstance(value, torch.Generator):
        return "Generator"
    if isinstance(value, (torch.dtype, torch.device)):
        return type(value).__name__
    return type(value).__name__


def signature(args, kwargs, piece: str = "") -> str:
    shown = [describe(a, piece) for a in args]
    shown += [f"{k}={describe(v, piece)}" for k, v in sorted(kwargs.items()) if k not in IGNORED_KEYWORDS]
    return "(" + ", ".join(shown) + ")"


def covers(tested: str, called: str) -> bool:
    """Whether a graded test's call `tested` exercises the notebook's call `called`: the same
    signature, where a strided tensor in the test may stand for a contiguous one (a piece that
    handles a strided tensor handles a contiguous one)."""
    if tested == called:
        return True
    t_args, c_args = _args(tested), _args(called)
    return len(t_args) == len(c_args) and all(t == c or t == c + ":strided" for t, c in zip(t_args, c_args))


def _args(sig: str) -> list[str]:
    return [a.strip() for a in sig.strip("()").split(", ")]


class Recorder:
    """{piece: {signature: where first seen}}."""

    def __init__(self):
        self.calls: dict[str, dict[str, str]] = defaultdict(dict)
        self.where = ""

    def note(self, piece: str, args, kwargs) -> None:
        self.calls[piece].setdefault(signature(args, kwargs, piece), self.where)


def recording(obj, piece: str, recorder: Recorder):
    """obj, recording every call: a function wrapped; a class subclassed so that its instances are
    still instances (of nn.Module, say), its construction and its own methods recorded. Anything
    else (a Triton kernel, launched with kernel[grid]) comes back as it is."""
    if isinstance(obj, type):
        own = {name: fn for name, fn in vars(obj).items() if inspect.isfunction(fn) and name in LEARNERS_METHODS}
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


def record_module(module: types.ModuleType, activity: str, recorder: Recorder) -> types.ModuleType:
    """The learner's module, its pieces (and a kernel's launchers) recording their calls, in place:
    calls from the module's own code (Embeddings calling embed_lookup) are recorded too. Done once
    per module."""
    if getattr(module, "_andrea_recording", False):
        return module
    for name, value in list(vars(module).items()):
        if name in pieces.names(activity) or name in LAUNCHERS.get(activity, ()):
            setattr(module, name, recording(value, f"{activity}.{name}", recorder))
    module._andrea_recording = True
    return module


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
    from andrea_course.paths import ACTIVITY_TESTS
    out = []
    for path in sorted(ACTIVITY_TESTS.glob("test_*.py")):
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
    import andrea_course.grading.passing as passing_module
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def use(activity, name, **_):
        return recording(InProcessStudent("solutions").overlay.isolated(activity, name), f"{activity}.{name}", recorder)

    real_module = overlay_module.Overlay.module

    def module(self, activity):
        return record_module(real_module(self, activity), activity, recorder)

    quiet = lambda *a, **k: None
    saved = [(nb, "use", nb.use), (checks, "use", checks.use), (nb, "check", nb.check), (checks, "check", checks.check),
             (nb, "quiz", nb.quiz), (nb, "hint", nb.hint), (nb, "reveal_piece", nb.reveal_piece),
             (overlay_module.Overlay, "module", real_module), (passing_module, "passing", passing_module.passing),
             (plt, "show", plt.show)]
    nb.use = checks.use = use
    nb.check = checks.check = nb.quiz = nb.hint = nb.reveal_piece = quiet
    overlay_module.Overlay.module = module
    passing_module.passing = lambda impl, exercises: {e: "yours" for e in exercises}
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
            if not any(covers(t, sig) for t in tested):
                out.append(f"{where}: {piece}{sig} (graded tests call it as: "
                           f"{'; '.join(sorted(tested)) or 'never'})")
    return out


# ----------------------------------------------------------------------------- inside an nbval kernel
RECORD_ENV = "ANDREA_NOTEBOOK_CALLS"          # the folder kernels write their calls to
STARTUP = """# written by tests/piece_calls.py: record the calls this kernel makes to a learner's pieces
import sys
sys.path.insert(0, {tests!r})
import piece_calls
piece_calls.install_in_kernel()
"""


def install_in_kernel() -> None:
    """In a notebook's kernel: use() and every learner module hand out recording pieces, and the
    calls so far are written to $ANDREA_NOTEBOOK_CALLS/<pid>.json after every cell."""
    folder = os.environ.get(RECORD_ENV)
    if not folder:
        return
    import andrea_course.notebook as nb
    import andrea_course.notebook.checks as checks
    from IPython import get_ipython
    recorder = Recorder()
    real_use, real_module = checks.use, overlay_module.Overlay.module

    def use(activity, name, **kwargs):
        return recording(real_use(activity, name, **kwargs), f"{activity}.{name}", recorder)

    def module(self, activity):
        return record_module(real_module(self, activity), activity, recorder)

    nb.use = checks.use = use
    overlay_module.Overlay.module = module
    out = Path(folder) / f"{os.getpid()}.json"

    def before(info):
        lines = [line for line in (getattr(info, "raw_cell", "") or "").splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
        recorder.where = f"the cell starting {lines[0].strip()[:60]!r}" if lines else "a cell"

    def after(result):
        out.write_text(json.dumps(recorder.calls), encoding="utf-8")

    shell = get_ipython()
    if shell is not None:
        shell.events.register("pre_run_cell", before)
        shell.events.register("post_run_cell", after)


# ----------------------------------------------------------------------------- the pytest plugin
def _active(config) -> bool:
    """Record when nbval runs notebooks with the answer key (a submission that passes every test)."""
    return (config.pluginmanager.hasplugin("nbval") and os.environ.get("ANDREA_IMPL") == "solutions"
            and (ROOT / "solutions").is_dir())


def pytest_configure(config):
    if not _active(config) or os.environ.get(RECORD_ENV):        # an xdist worker: the controller set it up
        return
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="andrea-notebook-calls-"))
    startup = folder / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-andrea-piece-calls.py").write_text(STARTUP.format(tests=str(Path(__file__).parent)),
                                                      encoding="utf-8")
    os.environ[RECORD_ENV] = str(folder / "calls")
    os.environ["IPYTHONDIR"] = str(folder / "ipython")          # kernels start with this environment
    (folder / "calls").mkdir()
    config._andrea_calls = folder


def pytest_sessionfinish(session, exitstatus):
    folder = getattr(session.config, "_andrea_calls", None)
    if folder is None or hasattr(session.config, "workerinput"):
        return
    asked = [Path(a.split("::")[0]) for a in session.config.args]          # (with xdist the items are the workers')
    if not any(p.suffix == ".ipynb" or p.is_dir() and any(p.rglob("*.ipynb")) for p in asked):
        return
    recorder = Recorder()
    for path in sorted((folder / "calls").glob("*.json")):
        for piece, calls in json.loads(path.read_text(encoding="utf-8")).items():
            for sig, where in calls.items():
                recorder.calls[piece].setdefault(sig, where)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else print
    if not recorder.calls:
        say("piece_calls: the notebooks' kernels recorded no call to a learner's piece (is the IPython "
            "start-up hook running?)", red=True) if reporter is not None else print("piece_calls: no calls recorded")
        session.exitstatus = 1
        return
    missing = gaps(recorder, record_graded())
    n = sum(len(c) for c in recorder.calls.values())
    if missing:
        say(f"piece_calls: {len(missing)} of the {n} calls the notebooks make to a learner's piece are made by "
            f"no graded test of that piece (a learner's piece could pass every test and break the notebook):")
        for line in missing:
            say("  " + line)
        session.exitstatus = 1
    else:
        say(f"piece_calls: each of the {n} calls the notebooks make to a learner's piece is made by a graded test")


if __name__ == "__main__":                              # a report, by hand
    graded = record_graded()
    for path in sorted((ROOT / "notebooks").glob(sys.argv[1] if len(sys.argv) > 1 else "*.ipynb")):
        rec = Recorder()
        seconds = run_notebook(path, rec)
        print(f"== {path.name}: {seconds:.1f} s, {sum(len(c) for c in rec.calls.values())} signatures")
        for line in gaps(rec, graded):
            print("  ", line[:400])
