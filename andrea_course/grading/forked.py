"""pytest for one submission started as a fork of the grader, not a new interpreter.

The grader has imported torch, pytest and the course already; a new `python -m pytest` spends 3
to 4 s of CPU importing them again, per submission (a class of 20: over a minute of CPU). The
fork gets what the command would have got: its own session, the run's folder as its working
directory, the run's environment, its log as stdout and stderr, stdin at /dev/null, and no
descriptor but those passed. It runs the grader's side only (the tests and their expected values;
the learner's code runs in the isolation tier's workers, as before), so it holds no more than a
new interpreter would.

    proc = start(["-m", "exercise", ...], env=env, cwd=tmp, log=log_file, pass_fds=(key_fd,))
    proc.wait(timeout=...)      # poll(), wait(), kill(), pid, returncode: as subprocess.Popen's

Where fork is missing (not Linux), the command runs as a new interpreter instead (Popen).
"""
from __future__ import annotations

import gc
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading

from ..worker.process import Forked

_WARM = threading.Lock()
_warmed: list = []


def start(args: list[str], *, env: dict, cwd, log, pass_fds: tuple = ()):
    """pytest with `args` (what follows `python -m pytest`); a Popen or a Forked."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")):
        return subprocess.Popen([sys.executable, "-s", "-m", "pytest", *args], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True, pass_fds=pass_fds)
    with _WARM:                       # once: the child then imports nothing it could share
        if not _warmed:
            import pytest  # noqa: F401
            from . import plugin  # noqa: F401
            _warmed.append(True)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()        # nothing buffered here is written twice
            except (OSError, ValueError, AttributeError):
                pass
        pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = _child(args, env, os.fspath(cwd), log.fileno(), set(pass_fds))
        except BaseException:         # noqa: BLE001  (reported in the log, as a crashed pytest would)
            import traceback
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    return Forked(pid)


def _child(args: list[str], env: dict, cwd: str, log_fd: int, keep: set[int]) -> int:
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)      # a new interpreter's handlers
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD,
                signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.chdir(cwd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.dont_write_bytecode = True
    tempfile.tempdir = None                                      # $TMPDIR: the run's own
    # The run imports its test files by their names (test_attention, tests.test_attention, a
    # conftest): a module of such a name this process imported for anything else (the grader's
    # own test suite, say) would stand in for them, and pytest would refuse the file.
    for name in [n for n in sys.modules if _test_like(n)]:
        del sys.modules[name]
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)                 # tiny expected values; no thread pool after a fork
    gc.freeze()                                                  # the grader's objects: never copied by a collection
    import pytest
    return int(pytest.main(args))


def _test_like(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in ("tests", "hidden") or any(p.startswith("test_") or p == "conftest" for p in parts)
