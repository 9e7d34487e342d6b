"""Handles on the worker wing's processes, each seen as subprocess.Popen sees its child (pid,
returncode, poll(), wait(timeout), kill()):

- Forked: a process this one forked (a worker parent forked from the grader; the pipeline's
  pytest forked from the grader);
- Adopted: a worker parent another process started and handed over (client.hand_over), alive
  while its pid is, and ended by the process that started it, never by the one that adopted it;
- Spawned: a container tier's worker parent forked by a batch's warm process (warm.py): not
  our child (that process reaps it), ended by us;
- WorkerChild: a worker forked by the worker parent, which reaps it and says how it ended.

start_pytest starts the graded tests' pytest (a Forked where this process can fork), whose Python
stack dumped_stack reads (dumped_frames: a worker's too, client.py); adopt and end reap what a run
leaves behind.
"""
from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .tiers import DEAD, proc_stat


class Forked:
    """A process this one forked (the graded run's pytest; the process tier's fork-started worker
    parent, server.py), seen as subprocess.Popen sees its child."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -signal.SIGKILL            # reaped elsewhere: it is gone
            else:
                if done:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None):
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(["pytest"], timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL its process group (it leads a session of its own) and itself."""
        if self.returncode is None:
            for kill in (os.killpg, os.kill):
                try:
                    kill(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


class ByPid:
    """A process that is not our child: alive while its pid is (a zombie has ended)."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            try:
                with open(f"/proc/{self.pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                state = "gone"
            if state in ("Z", "X", "gone"):          # ended (a zombie until its parent reaps it)
                self.returncode = -signal.SIGKILL
        return self.returncode

    def kill(self):
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait(self, timeout=None):
        end = time.monotonic() + (10.0 if timeout is None else timeout)
        while self.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        return self.returncode


class Adopted(ByPid):
    """A worker's parent that another process started (IsolatedStudent.hand_over). Its starter
    ends it (and may use it again: take_back), so the adopter only closes its socket
    (client._stop_parent); kill() is by pid (the grader's processes run as one user)."""


class Spawned(ByPid):
    """A container tier's worker parent that a batch's warm process forked for us (warm.py): the
    leader of its own session, ours to end (client._stop_parent); the warm process reaps it."""


class WorkerChild:
    """A worker forked by the worker parent: not our child (in a sandbox, in another pid namespace),
    so the worker parent reaps it, tells us how it ended, and ends it for us ("end")."""

    def __init__(self, student, pid: int):
        self.student, self.pid, self.returncode = student, pid, None

    def poll(self):
        if self.returncode is None:
            try:
                self.returncode = self.student._pask({"op": "poll", "pid": self.pid})["status"]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                self.returncode = -signal.SIGKILL          # its parent is gone: so is it
        return self.returncode

    def wait(self, timeout: float | None = None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                return None
            time.sleep(0.005)
        return self.returncode


def adopt() -> set[int]:
    """Become a subreaper, so the run's orphans (a learner's double fork) reparent to us and can be
    ended; returns our children now."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)     # PR_SET_CHILD_SUBREAPER
    return set(children_map(zombies=True).get(os.getpid(), []))


def children_map(zombies: bool = False) -> dict[int, list[int]]:
    """{ppid: [its living children]}; zombies only when asked for (they cannot be killed)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        found = proc_stat(entry) if entry.isdigit() else None
        if found is not None and (zombies or found[0] not in DEAD):
            kids.setdefault(found[1], []).append(int(entry))
    return kids


def end(proc, orphans_since: set[int] | None, rounds: int = 20) -> None:
    """SIGKILL `proc` and every process below it; with `orphans_since` (adopt()'s) also our
    children that were not there then (orphans reparented to us), then reap them."""
    if proc is None:
        return
    me = os.getpid()
    for _ in range(rounds):
        kids = children_map()
        new = [c for c in kids.get(me, []) if c not in orphans_since] if orphans_since is not None else []
        todo, found = new + [proc.pid], set(new) | ({proc.pid} if proc.poll() is None else set())
        while todo:
            for child in kids.get(todo.pop(), []):
                found.add(child)
                todo.append(child)
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        proc.poll()
        time.sleep(0.05)
    proc.wait()
    for pid in children_map(zombies=True).get(me, []) if orphans_since is not None else ():
        if pid not in orphans_since and pid != proc.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


# ----------------------------------------------------------------------------- pytest, forked
FORK_LOCK = threading.Lock()    # held while this process forks, and by imports a fork must not split
_STACK_FILE = None              # the forked pytest's file for its stack, kept open for faulthandler


def start_pytest(args: list[str], *, env: dict, cwd, log, pass_fds: tuple = (), stack: Path | None = None):
    """pytest with `args` in a fork of this process (a Forked), else a new interpreter (a Popen).
    The fork gets what a new process would: its own session, `cwd`, `env`, `log` as stdout and
    stderr, no descriptor but `pass_fds`; with `stack`, SIGUSR1 writes its Python stack there."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")):
        return subprocess.Popen([sys.executable, "-s", "-m", "pytest", *args], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True, pass_fds=pass_fds)
    with FORK_LOCK:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()        # nothing buffered here is written twice
        pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = _child(args, env, os.fspath(cwd), log.fileno(), set(pass_fds), stack)
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


def _child(args: list[str], env: dict, cwd: str, log_fd: int, keep: set[int], stack: Path | None = None) -> int:
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)      # a new interpreter's handlers
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD,
                signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.chdir(cwd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    if stack is not None:
        global _STACK_FILE
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            _STACK_FILE = open(stack, "wb")                      # kept open: faulthandler writes to its fd
            faulthandler.register(signal.SIGUSR1, file=_STACK_FILE, all_threads=True)
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.dont_write_bytecode = True
    tempfile.tempdir = None                                      # $TMPDIR: the run's own
    # a test module this process imported before (an outer pytest's) would stand in for the run's own
    for name in list(sys.modules):
        parts = name.split(".")
        if parts[0] in ("tests", "hidden") or any(p.startswith("test_") or p == "conftest" for p in parts):
            del sys.modules[name]
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)                 # tiny expected values; no thread pool after a fork
    gc.freeze()                                                  # the grader's objects: never copied by a collection
    import pytest
    return int(pytest.main(args))


def dumped_stack(proc, stack: Path) -> list[tuple]:
    """The frames (dumped_frames) of a forked pytest's Python stack, dumped now into start_pytest's
    `stack` (SIGUSR1: faulthandler, which works inside native calls too); [] when it has ended or
    is no fork of this process."""
    if not isinstance(proc, Forked) or proc.poll() is not None:
        return []
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except OSError:
        return []
    text = ""
    for _ in range(20):
        time.sleep(0.025)
        with contextlib.suppress(OSError):
            text = stack.read_text(encoding="utf-8", errors="replace")
        if "File " in text:
            break
    return dumped_frames(text)


def dumped_frames(text: str, path_of=str) -> list[tuple]:
    """(path, line, function, code) of each frame, innermost first, of a Python stack faulthandler
    dumped: those of the files path_of(path) names (None: a file left out), the code read there."""
    frames = []
    for path, lineno, func in re.findall(r'File "([^"]+)", line (\d+) in (\S+)', text):
        local = path_of(path)
        if local:
            frames.append((local, int(lineno), func, source_line(local, int(lineno))))
    return frames


def source_line(path: str, lineno: int) -> str:
    """Line `lineno` of the file at `path` as it is now, stripped ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                if i == lineno:
                    return line.strip()[:500]
    except OSError:
        pass
    return ""
