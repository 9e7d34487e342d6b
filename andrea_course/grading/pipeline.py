"""The one way graded tests run, for every caller (docs/architecture.md, "Running graded tests"):

    got = run(Spec(tests=[...], folder=learner, isolation=iso, limit=30.0))
    got.collected, got.results         # {nodeid: records.Record}, as the plugin wrote them
    got.running, got.stopped           # the test running when the run stopped, and why
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..worker.process import FORK_LOCK, adopt, dumped_stack, end, start_pytest
from ..worker.tiers import Isolation
from .explain import where
from .records import Record, read

LIMIT_ENV = "ANDREA_CHECK_TIMEOUT"
DEFAULT_LIMIT = 30.0            # seconds per graded test in check(); the slowest course test takes a few
BOOT_LIMIT = 120.0              # seconds to start pytest and import the tests (no learner code runs then)
GRACE = 15.0                    # after the worker's own limit, the run stops a grader that hangs


def time_limit() -> float:
    """Seconds one graded test may run in check() and use(): $ANDREA_CHECK_TIMEOUT, else 30."""
    try:
        value = float(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT))
    except ValueError:
        value = DEFAULT_LIMIT
    return value if value > 0 else DEFAULT_LIMIT


@dataclass
class Spec:
    """What to run: the test files, whose code, how, and within which limits."""
    tests: list                       # test files (or folders)
    folder: Path                      # the learner's code
    isolation: Isolation | str       # str: "process" (forked from pytest) or "in-process"
    limit: float                      # seconds per test
    total: float | None = None        # seconds for the whole run
    exercises: list | None = None     # only these exercises' graded tests (None: every graded test)
    rootdir: Path | None = None       # default: the first test's folder's parent
    cwd: Path | None = None           # default: this process's
    env: dict | None = None           # default: this process's
    log: Path | None = None           # pytest's output; default: a temp file
    jobs: int = 1
    collect_only: bool = False
    hand_over: bool = False           # start the worker's parent here, while pytest imports
    prepare: tuple | None = None      # with hand_over: (entry point, argument) it runs before any fork;
                                      # the parent then outlives pytest, ours again (Run.parent)
    orphans: bool = False             # adopt and end the learner's orphans (no sandbox to hold them)
    names_in_impl: bool = False       # name the learner's files relative to `folder`, not to the course
    warm: object = None               # with hand_over: a batch's worker.warm.WarmStart to fork the parent from


@dataclass
class Run:
    """What one run found."""
    collected: dict = field(default_factory=dict)   # nodeid -> "collected" Record, in run order
    results: dict = field(default_factory=dict)     # nodeid -> "result" Record (the first one)
    errors: list = field(default_factory=list)      # "collect_error" Records
    running: Record | None = None    # the test that had started and not ended when the run stopped
    forged: int = 0                  # lines not signed with the run's key
    exit_code: int | None = None
    stopped: str | None = None       # None | "timeout" (a test) | "total" | "interrupt" | "crash"
    where: str = ""                  # at a timeout, the learner's line pytest's own stack was in (if any)
    log: str = ""                    # the end of pytest's output
    parent: object = None            # Spec.prepare: the worker's parent pytest used (an IsolatedStudent)

    def add(self, rec: Record) -> None:
        if rec.kind == "collected":
            self.collected.setdefault(rec.nodeid, rec)
        elif rec.kind == "start":
            self.running = rec
        elif rec.kind == "result":
            self.results.setdefault(rec.nodeid, rec)
            if self.running is not None and self.running.nodeid == rec.nodeid:
                self.running = None
        elif rec.kind == "collect_error" and all(e.name != rec.name for e in self.errors):
            self.errors.append(rec)


def run(spec: Spec) -> Run:
    """Run the graded tests of `spec`; an interrupt, a timeout or a crash is Run.stopped."""
    got, key = Run(), secrets.token_bytes(32)
    with tempfile.TemporaryDirectory(prefix="andrea-run-") as tmp:
        channel, stack, log = Path(tmp) / "records.jsonl", Path(tmp) / "stack.txt", spec.log or Path(tmp) / "pytest.log"
        starter, parent = _hand_over(spec)
        proc = before = None
        try:                                 # whatever happens, nothing started here is left running
            before = adopt() if spec.orphans else None
            warm(kernels=any(str(e).startswith("kernels.") for e in spec.exercises or ()),
                 every=spec.exercises is None)
            with open(log, "wb") as log_file, _interruptible():
                key_r, key_w = os.pipe()              # the key travels by a pipe: not argv, not environ
                os.write(key_w, key.hex().encode() + b"\n")
                os.close(key_w)
                try:
                    proc = start_pytest(arguments(spec, channel, key_r, parent), cwd=spec.cwd or os.getcwd(),
                                        env=spec.env or {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                                        log=log_file, pass_fds=(key_r, *parent[:1]), stack=stack)
                finally:
                    os.close(key_r)
                    if starter is not None and spec.prepare is None:
                        starter.let_go()                 # pytest's now
                _follow(proc, spec, channel, key, got)
                if got.stopped == "timeout":
                    got.where = _stuck_at(dumped_stack(proc, stack)[::-1], spec)
        finally:
            end(proc, before)
            kept = starter is not None and spec.prepare is not None and got.stopped in (None, "crash")
            if kept:
                starter.take_back()
            elif starter is not None:
                starter.close()
            got.parent = starter if kept else None
        got.log = log.read_bytes()[-4000:].decode("utf-8", "replace") if log.is_file() else ""
    return got


def _hand_over(spec: Spec) -> tuple:
    """(an IsolatedStudent whose worker's parent starts now, while pytest starts, and (its socket's
    fd, its pid) for the plugin to adopt), else (None, ()): not asked for, or it could not start
    (the plugin starts one then, and the first test says why)."""
    if not (spec.hand_over and spec.jobs <= 1 and not spec.collect_only):
        return None, ()
    from ..worker.client import IsolatedStudent, LearnerCodeError
    starter = IsolatedStudent(spec.folder, isolation=spec.isolation, prepare=spec.prepare, warm=spec.warm)
    try:
        return starter, tuple(int(n) for n in starter.hand_over().split(":"))
    except BaseException as exc:
        starter.close()
        if not isinstance(exc, LearnerCodeError):
            raise
        return None, ()


def arguments(spec: Spec, channel: Path, key_fd: int, parent: tuple = ()) -> list[str]:
    """pytest's command line (what follows `python -m pytest`): the plugin and its options; `parent`:
    (fd, pid) of the worker's parent handed over (IsolatedStudent.hand_over)."""
    tests = [Path(t) for t in spec.tests]
    folder = tests[0] if tests[0].is_dir() else tests[0].parent
    args = [*map(str, tests), "-c", os.devnull, "--rootdir", str(spec.rootdir or folder.parent),
            f"--confcutdir={folder}", "-o", "addopts=", "-o", "python_files=test_*.py",
            "-p", "andrea_course.grading.plugin", "-p", "no:cacheprovider", "--impl", str(spec.folder),
            "--isolation", spec.isolation if isinstance(spec.isolation, str) else spec.isolation.to_json(),
            "--timeout-per-test", str(spec.limit), "--results-jsonl", str(channel),
            "--results-key-fd", str(key_fd), "-m", "exercise", "--continue-on-collection-errors",
            "--capture=sys", "-q", "-W", "ignore", "--color=no", "--import-mode=importlib",
            # a failure's text is the plugin's: pytest's own long form and unraisable hook only cost time
            "--tb=native", "-p", "no:unraisableexception"]
    if spec.exercises is not None:
        args += ["--exercises", ",".join(spec.exercises)]
    args += ["--names-in-impl"] * spec.names_in_impl + ["--collect-only"] * spec.collect_only
    args += ["--worker-parent", ":".join(map(str, parent))] if parent else []
    if spec.jobs > 1:
        args += ["-p", "xdist.plugin", "-n", str(spec.jobs)]
    return args


def _follow(proc, spec: Spec, channel: Path, key: bytes, got: Run) -> None:
    """Read the records as pytest writes them until it ends or a limit or an interrupt stops it."""
    began = time.monotonic()
    deadline, offset, tail = began + max(BOOT_LIMIT, spec.limit + GRACE), 0, b""
    total = began + spec.total if spec.total is not None else float("inf")
    try:
        while True:
            ended = proc.poll() is not None
            if channel.is_file():
                with open(channel, "rb") as f:
                    f.seek(offset)
                    data = tail + f.read()
                offset += len(data) - len(tail)
                *lines, tail = data.split(b"\n")
                records, forged = read([line for line in lines if line.strip()], key)
                got.forged += forged
                for rec in records:
                    got.add(rec)
                    deadline = time.monotonic() + spec.limit + GRACE if rec.kind == "start" else deadline
            if ended:
                got.exit_code = proc.returncode
                if got.running is not None or got.exit_code < 0 or got.exit_code == 70:
                    got.stopped = "crash"            # killed, or pytest could not even start
                return
            now = time.monotonic()
            if now > total or now > deadline:
                got.stopped = "total" if now > total else "timeout"
                return
            time.sleep(0.05)
    except KeyboardInterrupt:        # Ctrl-C, the stop button, or SIGTERM (cli.py): report what finished
        got.stopped = "interrupt"


@contextlib.contextmanager
def _interruptible():
    """While a run goes, SIGINT raises KeyboardInterrupt in the main thread, whatever the process
    inherited (a background job of a non-interactive shell starts with SIGINT ignored)."""
    old = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else "-"
    swap = old in (signal.SIG_IGN, signal.SIG_DFL, None)
    if swap:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if swap:
            signal.signal(signal.SIGINT, old)


_warmed: set = set()


def warm(kernels: bool, every: bool) -> None:
    """Import, once and in this process, what every forked run would otherwise import again (never
    the learner's code); with kernels, Triton's interpreter warmed; with every (the grader), what
    the tests' first use of the meta device imports."""
    import importlib
    with FORK_LOCK:
        todo = {w for w, wanted in (("every", every), ("imports", True), ("kernels", kernels)) if wanted} - _warmed
        _warmed.update(todo)
        names = ["torch.fx.experimental.symbolic_shapes"] if "every" in todo else []
        if "imports" in todo:
            from _pytest.config import default_plugins
            names += ["pytest", *(f"_pytest.{name}" for name in default_plugins),
                      "andrea_course.grading.plugin", "andrea_course.engine.model"]
        for name in names:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        if todo & {"imports", "kernels"}:
            with contextlib.suppress(Exception):
                from ..worker.server import warm_up
                warm_up(kernels="kernels" in todo)


def _stuck_at(frames: list, spec: Spec) -> str:
    """The learner's innermost line in pytest's Python stack (frames outermost first), dumped when
    a test ran past its limit and the worker did not stop it."""
    from ..overlay import resolve
    try:
        folder = resolve(spec.folder)
    except Exception:                    # noqa: BLE001 - a bad name: nothing to name
        return ""
    return where(frames, folder, folder if spec.names_in_impl else None)
