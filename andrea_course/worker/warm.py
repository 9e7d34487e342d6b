"""A batch's warm start: one process that imported torch and the course once (and ran the
worker parent's preparation) and forks, per submission, the worker parent of that submission's
tier, which only then confines itself.

    warm = WarmStart()                      # andrea-grade --batch: one for the whole class
    pid = warm.spawn(python, prepare, request, [sock_fd, log_fd])
    warm.close()

A request says what the forked worker parent becomes: {"config": its worker parent's config
(server.py, confine.py), "join": the pid of a sandbox's first process whose namespaces it
joins (pid, mount, network, IPC, UTS, cgroup) or None, "cgroup": the tier's cgroup.procs files
it enters, "cwd", "env"}. In the forked child, in this order: a session of its own, stdout and
stderr the grader's log, every other descriptor of the warm process closed, the cgroup entered,
the sandbox's namespaces joined (then a second fork: the worker parent is inside the sandbox's
pid namespace, which ends with the sandbox's first process), its folder and
environment, then confine.py (limits, the uid, no capabilities, no_new_privs, seccomp), then the
worker parent's life (server.serve_worker_parent); the spawn returns once it is confined (where
it could not be, spawn raises and the grader starts a worker parent afresh, client.py). Nothing
is confined, joined or entered before
the fork, so no two submissions share any of it; no learner code ever runs in the warm process.

The warm process runs as the grader's user, outside any sandbox (it must join namespaces and
drop to each submission's uid): it is used by a root grader only (client.py), and reads nothing
of the grader's but what its start gives it (the course, the preparation's settings).
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..paths import ROOT
from .tiers import worker_env

BOOT_TIMEOUT = 180.0                 # seconds for the warm process to import torch and the course
SPAWN_TIMEOUT = 30.0                 # seconds for one fork, its namespaces joined
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")     # the mount namespace last: it moves the root

BOOT = """
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, json.loads(sys.argv[2])["root"])
from andrea_course.worker.warm import serve
serve(int(sys.argv[1]), json.loads(sys.argv[2]))
"""


# ----------------------------------------------------------------------------- the grader's side
class WarmProcess:
    """One warm process (its config's preparation run), and asking it for a worker parent."""

    def __init__(self, python: str, prepare):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"root": str(ROOT), "prepare": prepare, "parent": os.getpid()}
        self.home = tempfile.mkdtemp(prefix="andrea-warm-")        # its home, temp and working folder
        try:
            self.proc = subprocess.Popen([python, "-I", "-c", BOOT, str(theirs.fileno()), json.dumps(config)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), cwd=self.home,
                                         env=worker_env(self.home), start_new_session=True)
        except OSError:
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.sock.settimeout(BOOT_TIMEOUT)
        try:
            if json.loads(self.sock.recv(65536) or b"{}").get("ready") is not True:
                raise OSError("the warm worker process did not start")
        except (OSError, ValueError):
            self.close()
            raise

    def alive(self) -> bool:
        return self.sock is not None and self.proc.poll() is None

    def spawn(self, request: dict, fds: list[int]) -> int:
        """The pid of a worker parent forked as `request` says, `fds` its socket and its log."""
        self.sock.settimeout(SPAWN_TIMEOUT)
        socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
        data = self.sock.recv(65536)
        reply = json.loads(data) if data else {"error": "the warm worker process ended"}
        if type(reply.get("pid")) is not int:
            raise OSError(f"the warm worker process could not fork: {reply.get('error')}")
        return reply["pid"]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        for kill in (os.killpg, os.kill):
            try:
                kill(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


class WarmStart:
    """A batch's warm processes, one per (python, preparation), each started when first asked for."""

    def __init__(self):
        self._lock = threading.Lock()
        self._processes: dict[str, WarmProcess] = {}

    def spawn(self, python: str, prepare, request: dict, fds: list[int]) -> int:
        key = json.dumps([python, prepare])
        with self._lock:
            process = self._processes.get(key)
            if process is None or not process.alive():
                if process is not None:
                    process.close()
                process = self._processes[key] = WarmProcess(python, prepare)
            try:
                return process.spawn(request, fds)
            except (OSError, ValueError):
                process.close()
                del self._processes[key]
                raise

    def close(self) -> None:
        with self._lock:
            for process in self._processes.values():
                process.close()
            self._processes.clear()


# ----------------------------------------------------------------------------- the warm process
def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def serve(fd: int, config: dict) -> None:
    """The warm process's life: die with the grader, import and prepare what every worker parent
    needs, then fork one per request until the grader's socket closes."""
    from .server import entry_point, warm_meta, warm_up
    _prctl(1, signal.SIGKILL)                             # PR_SET_PDEATHSIG
    if os.getppid() != config["parent"]:
        os._exit(0)
    from .. import overlay  # noqa: F401  (imported once, here, for every worker parent)
    warm_up(kernels=True)
    if config.get("prepare"):
        name, argument = config["prepare"]
        entry_point(name)(argument)
    warm_meta()
    _prctl(36, 1)                                         # PR_SET_CHILD_SUBREAPER: the sandboxes' worker parents
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)         # reaped as they end: none outlives its sandbox
    sock = socket.socket(fileno=fd)
    sock.send(json.dumps({"ready": True}).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        try:
            if len(fds) != 2:
                raise ValueError("a request needs a socket and a log")
            reply = {"pid": _fork(json.loads(data), fds)}
        except Exception as exc:          # noqa: BLE001  (the grader starts the worker parent itself)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for f in fds:
                os.close(f)
        sock.send(json.dumps(reply).encode())


def _fork(request: dict, fds: list[int]) -> int:
    """Fork the worker parent of `request`; its pid (inside a sandbox: the fork in between waited for)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _become(request, fds, w)
        finally:
            os._exit(70)
    os.close(w)
    said, deadline = b"", time.monotonic() + SPAWN_TIMEOUT
    try:
        while not said.endswith(b"ok\n") and select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(r, 64)
            if not chunk:
                break
            said += chunk
    finally:
        os.close(r)
    if request.get("join"):
        try:
            os.waitpid(pid, 0)                            # the fork in between (reaped by the kernel)
        except ChildProcessError:
            pass
    words = said.split()
    if words[-1:] != [b"ok"]:
        raise OSError("the worker parent could not join its tier or confine itself")
    return int(words[0]) if request.get("join") else pid


def _setns(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def _join(pid: int) -> None:
    """Join every namespace of process `pid` (a sandbox's first process) this one can."""
    libc = ctypes.CDLL(None, use_errno=True)
    opened = [_setns(f"/proc/{pid}/ns/{ns}") for ns in NAMESPACES if os.path.exists(f"/proc/{pid}/ns/{ns}")]
    try:
        for f in opened:
            if libc.setns(f, 0) != 0:
                raise OSError(ctypes.get_errno(), "setns failed")
    finally:
        for f in opened:
            os.close(f)


def _become(request: dict, fds: list[int], report: int) -> None:
    """In the forked child: become the worker parent `request` describes (the module docstring's
    order), and serve; never returns."""
    sock_fd, log_fd = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)         # the worker parent reaps its workers itself
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for entry in os.listdir("/proc/self/fd"):
        if int(entry) > 2 and int(entry) not in (sock_fd, report):
            try:
                os.close(int(entry))
            except OSError:
                pass
    for procs in request.get("cgroup") or ():
        Path(procs).write_text(str(os.getpid()))
    expected = os.getppid()
    if request.get("join"):
        _join(int(request["join"]))
        pid = os.fork()                                   # into the sandbox's pid namespace
        if pid:
            os.write(report, f"{pid}\n".encode())
            os._exit(0)
        os.setsid()
        expected = None                                   # the sandbox's pid namespace ends with its first process
    _live(request, sock_fd, expected, report)


def _live(request: dict, sock_fd: int, expected_parent: int | None, report: int) -> None:
    """Confine this process as the request's config says, say so on `report`, then serve as its
    worker parent."""
    from . import confine
    from .server import serve_worker_parent
    config = request["config"]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("join"):
        os.environ["PWD"] = request["cwd"]               # as bwrap sets it for its command
    tempfile.tempdir = None
    missing = confine.confine({**config, "parent_death": False})
    if config.get("parent_death") and expected_parent is not None:
        _prctl(1, signal.SIGKILL)                         # PR_SET_PDEATHSIG: with the warm process
        if os.getppid() != expected_parent:
            os._exit(0)
    os.write(report, b"ok\n")
    os.close(report)
    serve_worker_parent(sock_fd, {**config, "preload": False, "prepare": None, "parent_death": False}, missing)
