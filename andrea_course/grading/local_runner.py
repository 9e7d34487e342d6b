"""Running graded tests for the notebook, each test under a time limit, as the grader runs them.

On Linux ("fork" mode) pytest runs in a forked child of the kernel (the fork costs about 15 ms
and shares everything already imported), and the learner's code runs where andrea-grade runs
it: in a worker process (worker/client.py, the "process" tier: a fork of that child, one
fresh worker per test) that gets the test's values over the same wire. So a check gives the
grader's verdict, and a timeout, a crash (a Triton store out of bounds included), sys.exit or
running out of memory fails the test it happens in and the next test runs; at a timeout the
worker's stack is read first (faulthandler), to say which line was running. The child streams
one message per test back through a pipe; an outer limit stops the child if the grader itself
hangs. Elsewhere ("thread" mode: macOS, Windows, where forking a process that holds torch's
thread pools is not safe) the tests and the learner's code run in this process and a watchdog
thread interrupts a test that runs past the limit, which works for Python loops but waits for a
native call to return.

The learner's interrupt (Ctrl-C, the stop button) ends the run: Run.stopped says so and the
caller re-raises KeyboardInterrupt after showing what it has.
"""
from __future__ import annotations

import ast
import contextlib
import faulthandler
import gc
import inspect
import io
import os
import pickle
import re
import select
import signal
import struct
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import _thread
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import ROOT, STUB_MARK
from ..overlay import resolve

LIMIT_ENV = "ANDREA_CHECK_TIMEOUT"
DEFAULT_LIMIT = 30.0            # seconds per graded test; the slowest course test takes a few
BOOT_LIMIT = 120.0              # seconds to start pytest and import the tests (no learner code runs then)
MODE_ENV = "ANDREA_CHECK_MODE"  # "fork" or "thread"; default: fork on Linux, thread elsewhere
MAX_PRINTED = (12, 1200)        # lines, characters of a failing test's prints shown
WORKER_GRACE = 15.0             # fork mode: the worker stops the learner's code at the limit; the
                                # outer limit (limit + this) stops a grader that hangs


def time_limit() -> float:
    """Seconds one graded test may run in check() and use(): $ANDREA_CHECK_TIMEOUT, else 30."""
    try:
        value = float(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT))
    except ValueError:
        value = DEFAULT_LIMIT
    return value if value > 0 else DEFAULT_LIMIT


def mode() -> str:
    chosen = os.environ.get(MODE_ENV, "").strip().lower()
    if chosen in ("fork", "thread"):
        return chosen if hasattr(os, "fork") or chosen == "thread" else "thread"
    return "fork" if sys.platform.startswith("linux") and hasattr(os, "fork") else "thread"


@dataclass
class Outcome:
    """One graded test's result, as plain data (it crosses a process boundary)."""
    name: str
    status: str                      # passed | failed | unwritten | error | skipped | timeout
    message: str = ""                # the failure in one short text (empty when passed)
    rows: list = field(default_factory=list)   # [(label, value)] for the box
    hint: str = ""                   # an unwritten stub's hint
    taught: str = ""                 # the activity whose notebook teaches what it checks


@dataclass
class Run:
    """What one run of graded tests found."""
    outcomes: dict = field(default_factory=dict)    # exercise -> {nodeid: Outcome}
    collected: dict = field(default_factory=dict)   # exercise -> [nodeid, ...] in run order
    taught: dict = field(default_factory=dict)      # nodeid -> the activity whose notebook teaches its idea
    collect_errors: list = field(default_factory=list)
    exit_code: int | None = None
    log: str = ""
    stopped: str | None = None       # None | "timeout" | "interrupt" | "crash"
    running: tuple | None = None     # (exercise, nodeid, name) of the test running when stopped
    where: str = ""                  # the learner's line running at a timeout, when known

    def apply(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "collected":
            for exercise, nodeid in msg[1]:
                self.collected.setdefault(exercise, []).append(nodeid)
        elif kind == "taught":
            self.taught.update(msg[1])
        elif kind == "start":
            self.running = msg[1:]
        elif kind == "outcome":
            _, exercise, nodeid, outcome = msg
            self.outcomes.setdefault(exercise, {})[nodeid] = outcome
            if self.running and self.running[1] == nodeid:
                self.running = None
        elif kind == "collect_error":
            self.collect_errors.append(msg[1])
        elif kind == "done":
            self.exit_code, self.log = msg[1], msg[2]


# ------------------------------------------------------------------ describing a failure
def _learner_path(path: str, folder: Path) -> str | None:
    """`path` shown relative to the course (exercises/attention.py) when it is the learner's."""
    try:
        p = Path(path).resolve()
        p.relative_to(folder)
    except (ValueError, OSError):
        return None
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def syntax_error_text(exc: SyntaxError, folder: Path | None = None) -> str:
    """`exercises/attention.py, line 12` then the line and a caret under the column."""
    shown = (_learner_path(exc.filename, folder) if folder is not None and exc.filename else None) \
        or exc.filename or "your file"
    lines = [f"{shown}, line {exc.lineno}"]
    if exc.text:
        code = exc.text.rstrip("\n")
        stripped = code.lstrip()
        lines.append("    " + stripped)
        if exc.offset:
            lines.append("    " + " " * max(0, exc.offset - 1 - (len(code) - len(stripped))) + "^")
    return "\n".join(lines)


def _where(tb_entries, folder: Path) -> str:
    """The innermost line of the learner's own code in a traceback, as `file, line N, in f: code`."""
    for path, lineno, func, code in reversed(tb_entries):
        shown = _learner_path(path, folder)
        if shown:
            return f"{shown}, line {lineno}, in {func}" + (f"\n    {code.strip()}" if code else "")
    return ""


def _test_advice(fn) -> tuple[list[str], list[str]]:
    """(hints, typical mistakes) written in a graded test's expect_*() calls, read from its source
    without running it: shown when the learner's code raises before the test can judge it."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return [], []
    glob = getattr(fn, "__globals__", {})

    def text(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and isinstance(glob.get(node.id), str):
            return glob[node.id]
        return None

    hints, mistakes = [], []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
        if name not in ("expect_close", "expect_equal", "expect_true", "expect_runs"):
            continue
        kws = {k.arg: k.value for k in call.keywords if k.arg}
        hint = kws.get("hint") or (call.args[3] if name in ("expect_equal", "expect_true") and len(call.args) > 3
                                   else None)
        if hint is not None and text(hint):
            hints.append(text(hint))
        if isinstance(kws.get("mistakes"), ast.Dict):
            mistakes += [t for t in map(text, kws["mistakes"].keys) if t]
        if kws.get("mistake") is not None and text(kws["mistake"]):
            mistakes.append(text(kws["mistake"]))
    return list(dict.fromkeys(h for h in hints if h)), list(dict.fromkeys(mistakes))


def _clip(text: str) -> str:
    lines, chars = MAX_PRINTED
    rows = text.rstrip().splitlines()
    shown = "\n".join(rows[:lines])
    if len(shown) > chars:
        shown = shown[:chars] + "…"
    if len(rows) > lines:
        shown += f"\n… ({len(rows) - lines} more lines)"
    return shown


def _stub_error(exc: BaseException | None) -> NotImplementedError | None:
    """The generated exercise stub's error, when that is what raised (possibly wrapped by the
    test, or by Triton's interpreter, whose InterpreterError carries it as its cause)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, NotImplementedError) and STUB_MARK in str(exc):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if isinstance(shape, (tuple, list)) else str(shape)


def _remote_frames(exc) -> list:
    """The learner's frames of an exception that came from the grading worker (its `frames`:
    (path, line, function, code), outermost first), else []."""
    frames = getattr(exc, "frames", None)
    return [tuple(f) for f in frames] if isinstance(frames, list) else []


def _entry(e) -> tuple:
    """(path, 1-based line, function, code) of a pytest traceback entry."""
    try:
        code = str(e.statement).strip()
    except Exception:                                       # noqa: BLE001 - source may be gone
        code = ""
    return str(e.path), e.lineno + 1, e.name, code


def describe(item, call, rep, folder: Path) -> Outcome:
    """An Outcome from pytest's report of a failed test: the rows a learner reads, never a
    traceback through the grader."""
    from .expect import NO_KNOWN_MISTAKE, Mismatch
    from .explain import _kind_and_text, explain

    exc = call.excinfo.value if call.excinfo is not None else None
    name = item.name
    printed = _clip((getattr(rep, "capstdout", "") or "") + (getattr(rep, "capstderr", "") or ""))
    stub = _stub_error(exc)
    if stub is not None:
        msg = str(stub)
        return Outcome(name, "unwritten", msg, [], msg.split("Hint:", 1)[1].strip() if "Hint:" in msg else "")
    hints, mistakes = _test_advice(getattr(item, "function", None))
    if isinstance(exc, Mismatch):
        rows = [("problem", f"{exc.what}: {exc.problem}")]
        if exc.__cause__ is not None and exc.__cause__.__traceback__ is not None:   # expect_runs named an error
            where = _where(_remote_frames(exc.__cause__) or
                           [(f.filename, f.lineno, f.name, f.line or "")
                            for f in traceback.extract_tb(exc.__cause__.__traceback__)], folder)
            if where:
                rows.append(("where", where))
        if getattr(exc, "meaning", None):
            rows.append(("what it means", exc.meaning))
        if exc.max_error is not None:
            rows.append(("largest error", f"{exc.max_error:.3g}"))
        if exc.shape_found is not None or exc.shape_expected is not None:
            rows.append(("shape", f"found {_fmt_shape(exc.shape_found)}, expected {_fmt_shape(exc.shape_expected)}"))
        if getattr(exc, "differences", None):
            rows.append(("where they differ", exc.differences))
        if getattr(exc, "relation", None):
            rows.append(("how it relates", exc.relation))
        if exc.mistake:
            rows.append(("typical mistake", exc.mistake))
        elif getattr(exc, "unmatched", False):
            rows.append(("typical mistake", NO_KNOWN_MISTAKE))
        if exc.hint:
            rows.append(("hint", exc.hint))
        status = "failed"
    elif isinstance(exc, SyntaxError):
        rows = [("problem", f"SyntaxError: {exc.msg}"), ("where", syntax_error_text(exc, folder))]
        status = "error"
    elif isinstance(exc, AssertionError):
        msg = str(exc).strip().split("\nassert ")[0].strip() or "an assertion failed"
        rows = [("problem", "\n".join(msg.splitlines()[:6]))]
        rows += [("hint", h) for h in hints if h not in msg]
        status = "failed"
    elif exc is not None:
        entries = _remote_frames(exc) or [_entry(e) for e in call.excinfo.traceback]
        where = _where(entries, folder)
        kind, text = _kind_and_text(exc)          # a worker's LearnerCodeError: the learner's own error
        first = "\n".join((text.strip() or kind).splitlines()[:4])
        rows = [("problem", f"your code raised {kind}: {first}" if where else f"{kind}: {first}")]
        rows.append(("where", where or f"in the test {name}, after your code returned"))
        meaning = explain(exc, where.split("\n", 1)[1].strip() if "\n" in where else None)
        if meaning:
            rows.append(("what it means", meaning))
        rows += [("hint", h) for h in hints]
        if mistakes and not meaning:
            rows.append(("this test looks for", "\n".join(f"• {m}" for m in mistakes[:4])))
        status = "error"
    else:
        rows, status = [("problem", rep.longreprtext.strip().splitlines()[-1] if rep.longreprtext else "failed")], "error"
    if printed:
        rows.append(("your prints", printed))
    return Outcome(name, status, str(exc) if exc is not None else "", rows)


# ------------------------------------------------------------------ the pytest run
def exercise_of(item):
    mark = item.get_closest_marker("exercise")
    return mark.args[0] if mark is not None and mark.args else None


def taught_in(item) -> str | None:
    """The activity whose notebook teaches what a graded test checks: its @graded(taught=...),
    else the exercise's own activity."""
    mark = item.get_closest_marker("taught")
    if mark is not None and mark.args:
        return mark.args[0]
    exercise = exercise_of(item)
    return exercise.split(".")[0] if exercise else None


def _worker_outcome(item, exc, folder: Path, limit: float) -> Outcome | None:
    """The box rows of a failure the worker reported (isolated.LearnerCodeError): a timeout with
    the learner's line running at that moment, a crash, sys.exit, memory; None for others."""
    from ..worker.client import LearnerCodeError
    if not isinstance(exc, LearnerCodeError) or exc.kind == "error":
        return None
    where = _where([tuple(f) for f in reversed(exc.frames)], folder) if exc.frames else ""
    if exc.kind == "timeout":
        rows = [("problem", f"your code ran longer than {limit:g} s: an infinite loop? (the check stopped it)")]
        if where:
            rows.append(("where", f"{where}\n(the line running when it was stopped)"))
        return Outcome(item.name, "timeout", f"ran longer than {limit:g} s", rows)
    rows = [("problem", str(exc))]
    if exc.kind == "crash":
        rows[0] = ("problem", f"the process running your code ended abruptly: {exc}")
    return Outcome(item.name, "error", str(exc), rows)


def _hooks(exercises, folder: Path, emit, limit: float = DEFAULT_LIMIT):
    """A pytest plugin object: keeps every test of `exercises` (a notebook shows those it has
    taught, but the verdict is all of them: local.CheckResult) and emits one message per event."""
    import pytest

    class Hooks:
        def pytest_collection_modifyitems(self, session, config, items):
            keep = [i for i in items if exercise_of(i) in exercises]
            drop = [i for i in items if exercise_of(i) not in exercises]
            items[:] = keep
            if drop:
                config.hook.pytest_deselected(items=drop)
            emit(("collected", [(exercise_of(i), i.nodeid) for i in keep]))
            emit(("taught", [(i.nodeid, taught_in(i)) for i in keep]))

        def pytest_collectreport(self, report):
            if report.failed:
                emit(("collect_error", report.longreprtext))

        def pytest_runtest_logstart(self, nodeid, location):
            emit(("start", self.exercises.get(nodeid), nodeid, nodeid.rsplit("::", 1)[-1]))

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session):
            self.exercises = {i.nodeid: exercise_of(i) for i in session.items}

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            rep = outcome.get_result()
            exercise, key = exercise_of(item), item.nodeid
            if rep.passed and rep.when != "call":
                return
            if rep.skipped:
                reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
                emit(("outcome", exercise, key, Outcome(item.name, "skipped", f"skipped: {reason}")))
            elif rep.passed:
                emit(("outcome", exercise, key, Outcome(item.name, "passed")))
            elif key not in self.failed:                 # keep the first failure (setup before teardown)
                self.failed.add(key)
                exc = call.excinfo.value if call.excinfo is not None else None
                outcome = _worker_outcome(item, exc, folder, limit) or describe(item, call, rep, folder)
                emit(("outcome", exercise, key, outcome))

    hooks = Hooks()
    hooks.failed = set()
    hooks.exercises = {}
    return hooks


@contextlib.contextmanager
def _environ(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _isolated_modules(*stems: str):
    """Hide any module named like the test files (or a conftest) while pytest imports them, so a
    check always reads the tests afresh and never picks up a same-named module from elsewhere
    (an outer pytest's, a previous check's); put the old ones back afterwards."""
    def ours(name):
        return any(name == s or name.endswith("." + s) for s in stems)

    saved = {n: sys.modules.pop(n) for n in [n for n in sys.modules if ours(n)]}
    try:
        yield
    finally:
        for n in [n for n in sys.modules if ours(n)]:
            del sys.modules[n]
        sys.modules.update(saved)


def _pytest(paths: list[Path], exercises, impl_name: str, tests_dir: Path, emit,
            isolation: str = "process", limit: float = DEFAULT_LIMIT) -> None:
    """Run the graded tests of `exercises` in `paths` with pytest, in this process; the learner's
    code in a worker process (isolation "process") or here ("in-process", thread mode)."""
    import pytest

    hooks = _hooks(set(exercises), resolve(impl_name), emit, limit)
    args = [*map(str, paths), "-p", "andrea_course.grading.plugin", "-p", "no:cacheprovider", "--impl", impl_name,
            "--isolation", isolation, "--timeout-per-test", str(limit),
            "-o", "addopts=", "-o", "python_files=test_*.py", "--capture=sys", "-q", "--tb=native",
            "-p", "no:unraisableexception",
            "--color=no", "-W", "ignore", "--import-mode=importlib",
            f"--rootdir={tests_dir.parent}", f"--confcutdir={tests_dir}", "-c", os.devnull]
    out = io.StringIO()
    with _environ(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), \
            _isolated_modules(*(p.stem for p in paths), "conftest"), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = pytest.main(args, plugins=[hooks])
    emit(("done", int(code), out.getvalue()[-4000:]))


def run_tests(paths, exercises, impl_name: str, tests_dir: Path, limit: float | None = None) -> Run:
    """Run every graded test of `exercises`, each under `limit` seconds (time_limit() by default),
    noting which notebook teaches each (Run.taught). Never raises: a timeout, a crash or the learner's interrupt are reported in
    Run.stopped."""
    limit = time_limit() if limit is None else float(limit)
    forked = mode() == "fork"
    work = lambda emit: _pytest(list(paths), exercises, impl_name, Path(tests_dir), emit,  # noqa: E731
                                "process" if forked else "in-process", limit)
    with _interruptible():
        if forked:
            _warm(kernels=any(str(e).startswith("kernels.") for e in exercises))
            return _forked(work, limit + WORKER_GRACE, resolve(impl_name))
        return _here(work, limit, resolve(impl_name))


_warmed: set = set()


def _warm(kernels: bool = False) -> None:
    """Import, once and in this process, what every forked run would otherwise import again:
    pytest's own plugins, the grading plugin, the engine and its pieces (never the learner's
    code); with kernels, Triton's interpreter warmed on the engine's kernels. Halves the cost of a
    check that builds a model; a kernel check's worker starts in milliseconds, not half a second."""
    if "imports" not in _warmed:
        _warmed.add("imports")
        import importlib

        import pytest  # noqa: F401
        with contextlib.suppress(Exception):
            from _pytest.config import default_plugins
            for name in default_plugins:
                with contextlib.suppress(Exception):
                    importlib.import_module(f"_pytest.{name}")
        with contextlib.suppress(Exception):
            import andrea_course.grading.plugin  # noqa: F401
            import andrea_course.model  # noqa: F401
            from ..worker.server import warm_up
            warm_up()
    if kernels and "kernels" not in _warmed:
        _warmed.add("kernels")
        with contextlib.suppress(Exception):
            from ..worker.server import warm_up
            warm_up(kernels=True)


# ---- in a forked child
_HEADER = struct.Struct("!Q")


def _send(fd: int, msg) -> None:
    data = pickle.dumps(msg)
    data = _HEADER.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _child(work, w: int, dump) -> None:
    code = 1
    try:
        gc.freeze()              # the kernel's objects: no collection walks them again (pytest collects)
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent handles the learner's interrupt
        faulthandler.register(signal.SIGUSR1, file=dump, all_threads=False)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)       # the parent's OpenMP pool does not survive a fork
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        work(lambda msg: _send(w, msg))
        code = 0
    except BaseException as exc:                          # noqa: BLE001 - report anything, then leave
        with contextlib.suppress(BaseException):
            _send(w, ("collect_error", f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(code)


def _forked(work, limit: float, folder: Path) -> Run:
    run = Run()
    r, w = os.pipe()
    dump = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(work, w, dump)
    os.close(w)
    buf, deadline, done = b"", time.monotonic() + max(limit, BOOT_LIMIT), False
    try:
        while not done:
            # short waits: a signal delivered to another thread of the kernel still gets its
            # KeyboardInterrupt raised here within a fraction of a second
            ready, _, _ = select.select([r], [], [], min(0.2, max(0.0, deadline - time.monotonic())))
            if not ready:
                if time.monotonic() < deadline:
                    continue
                run.stopped = "timeout"
                run.where = _dump_stack(pid, dump, folder)
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= _HEADER.size and len(buf) >= _HEADER.size + _HEADER.unpack_from(buf)[0]:
                n = _HEADER.unpack_from(buf)[0]
                msg, buf = pickle.loads(buf[_HEADER.size:_HEADER.size + n]), buf[_HEADER.size + n:]
                run.apply(msg)
                if msg[0] == "start":
                    deadline = time.monotonic() + limit
                done = msg[0] == "done"
        if not done and run.stopped is None:
            run.stopped = "crash"
    except KeyboardInterrupt:
        run.stopped = "interrupt"
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
        os.close(r)
        dump.close()
    return run


def _dump_stack(pid: int, dump, folder: Path) -> str:
    """Ask the child for its Python stack (faulthandler, works inside native calls too) and
    return the learner's innermost line in it."""
    try:
        os.kill(pid, signal.SIGUSR1)
        for _ in range(20):
            time.sleep(0.025)
            dump.seek(0)
            text = dump.read().decode("utf-8", "replace")
            if "File " in text:
                break
    except OSError:
        return ""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', text)
    # faulthandler lists the innermost frame first
    for path, lineno, func in frames:
        shown = _learner_path(path, folder)
        if shown:
            try:
                code = Path(path).read_text(encoding="utf-8").splitlines()[int(lineno) - 1].strip()
            except (OSError, IndexError, UnicodeDecodeError):
                code = ""
            return f"{shown}, line {lineno}, in {func}" + (f"\n    {code}" if code else "")
    return ""


# ---- in this process, with a watchdog thread
REARM = 1.0          # seconds between the watchdog's interrupts when learner code swallows one


def _raise_in(thread_id: int, exc: type) -> bool:
    """Raise `exc` in another thread at its next Python instruction (CPython's
    PyThreadState_SetAsyncExc): what stops a loop when no signal can reach the main thread."""
    try:
        import ctypes
        done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
    except (ImportError, AttributeError, OSError):
        return False
    return done == 1


@contextlib.contextmanager
def _interruptible():
    """While a check runs, SIGINT raises KeyboardInterrupt in the main thread, whatever the process
    inherited: a background job of a non-interactive shell (`nohup ... &`, some CI agents) starts
    with SIGINT ignored, and then `_thread.interrupt_main()` would do nothing. Put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGINT)
    swap = old in (signal.SIG_IGN, signal.SIG_DFL, None)
    if swap:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if swap:
            signal.signal(signal.SIGINT, old)


def _runs_code_in(thread_id: int, folder: Path) -> bool:
    """Whether a frame of the thread's current stack runs a file under `folder` (the learner's)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if _learner_path(frame.f_code.co_filename, folder):
            return True
        frame = frame.f_back
    return False


def _here(work, limit: float, folder: Path) -> Run:
    run = Run()
    state = {"deadline": time.monotonic() + max(limit, BOOT_LIMIT), "fired": False, "over": False}
    lock = threading.Lock()
    target = threading.get_ident()              # the thread that runs the tests (and the learner's code)
    on_main = threading.current_thread() is threading.main_thread()

    def emit(msg):
        with lock:
            run.apply(msg)
            if msg[0] == "start":
                state["deadline"] = time.monotonic() + limit

    def stop():
        """Interrupt the tests' thread: a signal on the main thread (it also breaks a blocking
        sleep), else an exception raised at the thread's next Python instruction."""
        if on_main:
            _thread.interrupt_main()
        else:
            _raise_in(target, KeyboardInterrupt)

    def watchdog():
        # Fires at the deadline, then again every REARM seconds while the tests' thread is still
        # in the learner's code: one interrupt can be swallowed (an `except BaseException` in a
        # loop). Never again once it has left: an interrupt landing in pytest's own reporting
        # (inside its compile() or ast calls, say) would break the report, not stop the learner.
        while True:
            time.sleep(0.05)
            with lock:
                if state["over"]:
                    return
                if time.monotonic() > state["deadline"]:
                    state["deadline"] = time.monotonic() + REARM
                    if not state["fired"] or _runs_code_in(target, folder):
                        state["fired"] = True
                        stop()

    dog = threading.Thread(target=watchdog, daemon=True)
    dog.start()
    try:
        try:
            work(emit)
        finally:
            with lock:
                state["over"] = True
    except KeyboardInterrupt:
        pass
    if state["fired"]:
        run.stopped = "timeout"
    elif run.exit_code == 2 or (run.exit_code is None and run.stopped is None):
        run.stopped = "interrupt"                   # pytest turns an interrupt into exit code 2
    return run
