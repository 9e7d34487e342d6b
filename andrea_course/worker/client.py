"""IsolatedStudent: the learner's code runs in a worker process; the graded test sees values.

The `student` fixture of every runner (check() in a notebook, `make grade`, andrea-grade): the
same interface as InProcessStudent (`piece(activity, name)`, `is_reference`, `close()`). A piece
is a proxy; using it sends a request to a worker process that holds the learner's objects:

    grader (pytest)                                  worker (learner code)
    softmax = student.piece("attention", "softmax")  -> load attention.softmax
    softmax(scores)                                  -> call handle(args)    -> the answer
    mlp = student.piece("mlp", "MLP")(cfg)           -> call ...             -> a new handle
    mlp.fc.weight                                    -> getattr ... twice

Values cross as wire.py writes them: a tensor with its strides, offset and the storage it views;
what the learner's code changes in place comes back into the test's own tensors and generators;
anything that is not a value stays in the worker and comes back as a handle (a proxy again).
Comparisons (`==`) on a proxy never reach the learner's code. The learner's prints come back
with each answer (the test's output shows them); its exceptions come back with their type (a
NotImplementedError stays one), their causes and the learner's own frames (`exc.frames`).

Where the worker runs (tiers.py: the Isolation tiers): the worker parent (server.py), a process that
imported torch and the course once, after confining itself (confine.py: uid, capabilities,
no_new_privs, seccomp, limits); every test gets a fresh worker forked from it (a spare, forked
while the previous test ran), and at a test's end the worker parent, a subreaper, kills its worker and
everything that worker left running (in the sandbox and container tiers, if they cannot be
counted down, every process of the uid).
The grader never opens a path the worker can write: it talks to the worker parent over a socket and to
the worker over pipes. In the process tier the worker parent may be a fork of the grader itself
(Isolation.start == "fork": check() and plain pytest), which costs no interpreter start.

Each test has a time budget for all its calls. A timeout (the worker's stack is read first, to
name the learner's line), a crash (a segfault, an abort, os._exit, exit at import) or a memory
blow-up fails that test with a plain message (LearnerCodeError, whose `kind` says which) and
kills the worker; the next test gets a new one.
"""
from __future__ import annotations

import ast
import builtins
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..overlay import ImplementationError, resolve
from ..paths import ROOT
from . import wire
from .process import Adopted, Spawned, WorkerChild, dumped_frames
from .server import BOOT, fork_worker_parent
from .tiers import SANDBOX_ROOT, Cgroup, Container, Isolation, Limits, Sandbox, worker_env

DEFAULT_TIMEOUT = 60.0              # seconds of learner time per test
BOOT_TIMEOUT = 180.0                # starting Python, torch and the course (not the learner's time)
DUMP_WAIT = 1.0                     # seconds to wait for a timed-out worker's stack
MAX_FRAMES = 40
HOLDER = ["/bin/sh", "-c", "echo ready && exec sleep infinity"]    # a warm-started sandbox's one process


class LearnerCodeError(Exception):
    """The learner's code failed in a way that is not an ordinary exception: a timeout, a crash,
    sys.exit, too much memory, or a value the grader cannot read. The message says which;
    `kind` is one of "timeout", "crash", "exit", "memory", "start", "value", "error"; `frames`
    the learner's lines involved, as (path, line, function, code)."""

    def __init__(self, message: str, kind: str = "error", frames=None):
        super().__init__(message)
        self.kind, self.frames = kind, list(frames or [])


# ----------------------------------------------------------------------------- grader side
MAX_SOURCE = 1 << 20          # bytes of a learner's file read for student.source


def source_of(path: Path, name: str) -> str:
    """The text of the top-level function or class `name` in the file at `path` (decorators
    included), read and parsed, never run; '' when the file or the name is missing or the file
    does not parse."""
    try:
        if path.stat().st_size > MAX_SOURCE:
            return ""
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return ""
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1:node.end_lineno])
    return ""


class Proxy:
    """A learner object that lives in the worker: call it, read its attributes, iterate it."""

    __slots__ = ("_student", "_hid", "_kind", "_generation", "__weakref__")

    def __init__(self, student, hid: int, kind: str, generation: int):
        object.__setattr__(self, "_student", student)
        object.__setattr__(self, "_hid", hid)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_generation", generation)

    @staticmethod
    def _wire_handle(proxy) -> int:          # wire.Writer sends a proxy as its handle
        return object.__getattribute__(proxy, "_hid")

    def _ask(self, op, *args):
        return object.__getattribute__(self, "_student")._request(op, self, *args)

    def __call__(self, *args, **kwargs):
        return self._ask("call", list(args), kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name)

    def __setattr__(self, name, value):
        raise TypeError("graded tests may call, construct and read the learner's objects, "
                        f"not set their attributes (tried to set {name!r})")

    def __getitem__(self, key):
        return self._ask("getitem", key)

    def __len__(self):
        n = self._ask("len")
        if type(n) is not int or n < 0:
            raise LearnerCodeError(f"len() of your {self._kind} did not give a non-negative int", "value")
        return n

    def __iter__(self):
        items = self._ask("list")
        if not isinstance(items, list):
            raise LearnerCodeError(f"your {self._kind} could not be iterated", "value")
        return iter(items)

    def __eq__(self, other):          # never ask the learner's __eq__
        return self is other

    def __hash__(self):
        return id(self)

    def __bool__(self):
        return True

    def __repr__(self):
        return f"<learner's {object.__getattribute__(self, '_kind')} (in the grading worker)>"

    def __del__(self):
        try:
            object.__getattribute__(self, "_student")._release(self)
        except Exception:
            pass


class IsolatedStudent:
    """The learner's pieces, run in a worker process (see the module docstring)."""

    def __init__(self, impl=None, overrides: dict | None = None, *, isolation: Isolation | None = None,
                 python: str | None = None, adopt: str | None = None, prepare: tuple | None = None,
                 warm=None):
        if overrides:
            raise ValueError("IsolatedStudent does not take overrides: they are objects of this "
                             "process; use InProcessStudent for mutation tests")
        self.isolation = iso = isolation or Isolation()
        if iso.tier == "in-process":
            raise ValueError("the in-process tier is InProcessStudent's")
        self.folder = resolve(impl if impl is not None else "solutions")
        self.timeout = float(iso.timeout)
        if iso.tier == "sandbox":
            self.worker_folder = SANDBOX_ROOT
        else:
            self.worker_folder = str(self.folder)
        self.python = python or sys.executable
        self.proc = None
        self.generation = 0
        self.left = self.timeout             # seconds of learner time left in this test
        self._dead: list[int] = []
        self._import_failures: dict[str, str] = {}   # activity -> why loading it killed the worker
        self._tmp = None                     # process tier, exec start: the worker parent's private folder
        self._parent = self._psock = self._plog = None
        self._send_fd = self._recv_fd = self._dump_fd = None
        self._booted = False
        self._pending = 0                    # answers of the worker parent not read yet (wait=False)
        self._hint = None                    # the activity the next test loads (begin_test)
        self._limit = iso.limits.reply       # the largest reply read (run() sets its own)
        self._prepare = prepare              # (entry point, argument) the worker's parent calls before any fork
        self._warm = warm                    # a batch's warm.WarmStart: the worker's parent forked from it
        self.warm_pid = None                 # the pid of a worker parent forked from it
        if adopt:                            # a worker's parent another process started for us
            fd, pid = (int(v) for v in str(adopt).split(":"))
            self._psock, self._parent = socket.socket(fileno=fd), Adopted(pid)

    @property
    def is_reference(self) -> bool:
        return self.folder == ROOT / "solutions"

    # ----- the fixture's hooks -----
    def boot(self) -> None:
        """Start the worker's parent now without waiting for it (it imports torch while pytest
        collects the tests); the first request waits for it."""
        if self._parent is None:
            self._start_parent(wait=False)

    def hand_over(self) -> str:
        """Start the worker's parent now and give it to another process (the runner starts it
        before pytest, so that both import torch at once): "fd:pid" for that process's
        IsolatedStudent(adopt=...), the fd to pass it. That process never ends it (it closes its
        socket); this object may then only close() it, or take_back() it once that process ended."""
        self.boot()
        self._drop_pending()                 # answers to this object's requests: never the adopter's
        return f"{self._psock.fileno()}:{self._parent.pid}"

    def let_go(self) -> None:
        """Close this object's end of the socket handed over (hand_over): the process it was
        handed to holds its own copy and the worker's parent answers only it; this object may
        then only close() it."""
        if self._psock is not None:
            self._psock.close()
            self._psock = None

    def take_back(self) -> None:
        """The worker's parent handed over is this object's again (the process it was handed to
        has ended): the answers that process left unread are read and dropped, up to the answer to
        a greeting of our own, and the worker parent kills every process of its tier and forks a
        fresh spare ("reset"), so no worker that ran a test, nor anything one left, runs on. One
        that no longer answers is stopped: the next request starts a new one; an interrupt closes it."""
        try:
            if self._parent is None or self._parent.poll() is not None:
                raise OSError("the grading worker's parent process ended")
            nonce = os.urandom(16).hex()
            self._psock.settimeout(BOOT_TIMEOUT)
            socket.send_fds(self._psock, [json.dumps({"op": "hello", "nonce": nonce}).encode()], [])
            reply = {}
            while reply.get("nonce") != nonce:
                reply, fds = self._precv()
                for fd in fds:
                    os.close(fd)
            self._pending, self._booted = 0, reply.get("ready") is True
            if self._pask({"op": "reset"}).get("reset") is not True:
                raise ValueError("unexpected answer to reset")
        except (OSError, ValueError, AttributeError):
            self._stop_parent()
        except BaseException:                # an interrupt while it drains: nothing is left running
            self.close()
            raise

    def begin_test(self, activity: str | None = None) -> None:
        """Start one test: a fresh worker (forked on the first request), with `timeout` seconds
        of waiting for the learner's code (the grader's own work and worker start-up do not count).
        activity: the file the test will load, which the next worker compiles while it waits."""
        self._hint = activity if isinstance(activity, str) and activity.isidentifier() else None
        self._kill()
        self.left = self.timeout

    def source(self, activity: str, name: str) -> str:
        """The code of a piece as written, read from the learner's file in this process (never run)."""
        return source_of(self.folder / f"{activity}.py", name)

    def end_test(self) -> None:
        """The test is over: its worker ends (and what it left running), while the grader goes on."""
        self._kill()

    def piece(self, activity: str, name: str) -> Proxy:
        """A proxy for the learner's own function or class."""
        if activity in self._import_failures:
            raise LearnerCodeError(self._import_failures[activity], "crash")
        try:
            return self._request("load", None, activity, name)
        except LearnerCodeError as exc:
            if getattr(exc, "during_load", False) and exc.kind in ("crash", "exit", "memory"):
                self._import_failures[activity] = (
                    f"{exc} (while loading {activity}.py: its top-level code, or a file it imports)")
                raise LearnerCodeError(self._import_failures[activity], exc.kind, exc.frames) from None
            raise

    def run(self, entry: str, *args, timeout: float | None = None, limit: int = wire.MAX_MESSAGE):
        """entry(folder, *args) in a fresh worker, for an entry point of the course
        ("andrea_course.<module>:<function>", server.entry_point), with `timeout` seconds (default:
        the isolation's per-test time): its reply as it came back, a reply over `limit` bytes
        refused unread; every failure a LearnerCodeError, as in a test."""
        per_test = self.timeout
        self.timeout = float(timeout) if timeout is not None else per_test
        self.begin_test()
        self._limit = limit
        try:
            return self._request("run", None, entry, *args)
        finally:
            self._limit, self.timeout = self.isolation.limits.reply, per_test
            self.end_test()

    def close(self) -> None:
        self._kill()
        self._stop_parent()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # ----- the worker's parent -----
    def _parent_config(self) -> dict:
        return {**self.isolation.worker_config(), "confine": str(Path(__file__).with_name("confine.py")),
                "root": str(ROOT), "folder": self.worker_folder, "prepare": self._prepare}

    def _start_parent(self, wait: bool = True) -> None:
        """A process that imported torch and the course once (inside the tier's wall); every
        worker is a fork of it, so a fresh worker costs milliseconds, not seconds."""
        self._stop_parent()
        if self._start_warm():
            if wait:
                self._await_parent()
            return
        iso = self.isolation
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = self._parent_config()
        try:
            if iso.start == "fork":
                self._tmp = self._tmp or tempfile.mkdtemp(prefix="andrea-worker-")
                self._parent = fork_worker_parent(theirs, {**config, "cwd": self._tmp})
            else:
                self._plog = tempfile.TemporaryFile(prefix="andrea-worker-parent-")     # the grader's, unnamed
                command = [self.python, "-I", "-c", BOOT, str(theirs.fileno()), json.dumps(config)]
                kwargs = dict(stdin=subprocess.DEVNULL, stdout=self._plog, stderr=self._plog,
                              pass_fds=(theirs.fileno(),))
                cgroup = Cgroup({k: Path(v) for k, v in iso.cgroup.items()}) if iso.cgroup else None
                if iso.tier == "sandbox":
                    box = Sandbox(iso.limits, submission=self.folder, uid=iso.uid, cgroup=cgroup)
                    self._parent = box.popen(command, env=worker_env("/tmp"), **kwargs)
                elif iso.tier == "container":
                    box = Container(iso.limits, box=iso.box, uid=iso.uid, cgroup=cgroup)
                    home = str(Path(iso.box) / "home")
                    self._parent = box.popen(command, env=worker_env(home), **kwargs)
                else:
                    self._tmp = self._tmp or tempfile.mkdtemp(prefix="andrea-worker-")
                    self._parent = subprocess.Popen(command, cwd=self._tmp, start_new_session=True,
                                                    env=worker_env(self._tmp), **kwargs)
        except OSError as exc:
            mine.close()
            raise LearnerCodeError(f"the grading worker could not start: {exc}", "start") from None
        finally:
            theirs.close()
        self._psock = mine
        self._booted = False
        if wait:
            self._await_parent()

    def _start_warm(self) -> bool:
        """A root grader's sandbox or container worker parent, forked from the batch's warm process
        (warm.py: it confines itself after the fork, in this tier's cgroup, namespaces and uid);
        False where there is none, or it could not (the caller then starts one afresh)."""
        iso = self.isolation
        if self._warm is None or iso.tier not in ("sandbox", "container") or os.geteuid() != 0:
            return False
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._plog = tempfile.TemporaryFile(prefix="andrea-worker-parent-")     # the grader's, unnamed
        cgroup = Cgroup({k: Path(v) for k, v in iso.cgroup.items()}) if iso.cgroup else None
        box = None
        try:
            if iso.tier == "sandbox":
                box, join = self._sandbox_holder(cgroup)
                home = "/tmp"
            else:
                join, home = None, str(Path(iso.box) / "home")
            request = {"config": self._parent_config(), "join": join, "cwd": home, "env": worker_env(home),
                       "cgroup": cgroup.procs_files() if cgroup else []}
            pid = self._warm.spawn(self.python, self._prepare, request, [theirs.fileno(), self._plog.fileno()])
        except (OSError, ValueError):
            if box is not None:
                _end(box)
            mine.close()
            self._plog.close()
            self._plog = None
            return False
        finally:
            theirs.close()
        self._parent, self._psock, self._booted = box or Spawned(pid), mine, False
        self.warm_pid = pid                  # the worker parent itself (in a sandbox: not bwrap's child)
        return True

    def _sandbox_holder(self, cgroup) -> tuple[subprocess.Popen, int]:
        """A sandbox whose one process waits (HOLDER), ready: bwrap, and the pid of the sandbox's first
        process (whose namespaces the warm process's fork joins)."""
        iso = self.isolation
        box = Sandbox(iso.limits, submission=self.folder, uid=iso.uid, cgroup=cgroup)
        info_r, info_w = os.pipe()
        ready_r, ready_w = os.pipe()
        try:
            proc = box.popen(HOLDER, info_fd=info_w, stdin=subprocess.DEVNULL, stdout=ready_w, stderr=self._plog,
                             pass_fds=(info_w,), env=worker_env("/tmp"))
        finally:
            os.close(info_w)
            os.close(ready_w)
        try:
            ready = os.read(ready_r, 16) if select.select([ready_r], [], [], BOOT_TIMEOUT)[0] else b""
            pid = json.loads(os.read(info_r, 4096)).get("child-pid") if ready == b"ready\n" else None
            if type(pid) is not int:
                raise OSError("the sandbox did not start")
        except (OSError, ValueError, AttributeError):
            _end(proc)
            raise OSError("the sandbox did not start") from None
        finally:
            os.close(info_r)
            os.close(ready_r)
        return proc, pid

    def _await_parent(self) -> None:
        if self._booted:
            return
        self._psock.settimeout(BOOT_TIMEOUT)
        try:
            if self._pask({"op": "hello"}).get("ready") is not True:
                raise OSError("unexpected greeting")
        except (OSError, ValueError, AttributeError) as exc:
            log = self._parent_log()
            self._stop_parent()
            raise LearnerCodeError(f"the grading worker failed to start ({exc}): {log}", "start") from None
        self._booted = True

    def _parent_log(self) -> str:
        if self._plog is None:
            return ""
        self._plog.seek(0)
        lines = self._plog.read(1 << 16).decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:])

    def _pask(self, request: dict, fds=(), *, wait: bool = True, with_fds: bool = False):
        """Send the worker parent a request; its answer (and, with_fds, the descriptors it passed). With
        wait=False the answer is read (and dropped) before the next request's."""
        if self._psock is None:
            raise OSError("the grading worker's parent process is not running")
        socket.send_fds(self._psock, [json.dumps(request).encode()], list(fds))
        if not wait:
            self._pending += 1
            return None
        self._drop_pending()
        reply, got = self._precv()
        if with_fds:
            return reply, got
        for fd in got:
            os.close(fd)
        return reply

    def _drop_pending(self) -> None:
        """Read the answers of requests sent with wait=False, and drop them."""
        while self._pending:
            self._pending -= 1
            for fd in self._precv()[1]:
                os.close(fd)

    def _precv(self) -> tuple[dict, list[int]]:
        data, fds, _, _ = socket.recv_fds(self._psock, 65536, 4)
        if not data:
            for fd in fds:
                os.close(fd)
            raise OSError("the grading worker's parent process ended")
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise ValueError("a malformed answer from the grading worker's parent")
        return reply, list(fds)

    def _stop_parent(self) -> None:
        """End the tier's processes (killing bwrap ends everything inside it); a worker parent
        adopted from the process that started it is that process's to end: only its socket closes."""
        parent, self._parent = self._parent, None
        self._pending, self.warm_pid = 0, None
        if self._psock is not None:
            self._psock.close()
            self._psock = None
        if parent is not None and not isinstance(parent, Adopted):
            _end(parent)
        if self._plog is not None:
            self._plog.close()
            self._plog = None

    # ----- one worker per test -----
    def _start(self) -> None:
        """Take the worker parent's spare worker (made at the end of the previous test, while the grader
        went on): its pipes come over the socket, its greeting is waiting in them."""
        if self._parent is None or self._parent.poll() is not None:
            self._start_parent()
        self._await_parent()
        try:
            try:
                reply, fds = self._pask({"op": "take", "hint": self._hint}, with_fds=True)
            except (OSError, ValueError):                 # the worker parent died (a learner killed it?)
                self._start_parent()
                reply, fds = self._pask({"op": "take", "hint": self._hint}, with_fds=True)
            if len(fds) != 3 or type(reply.get("pid")) is not int:
                for fd in fds:
                    os.close(fd)
                raise OSError(f"unexpected answer {reply!r}")
        except (OSError, ValueError, LearnerCodeError) as exc:
            raise LearnerCodeError(f"the grading worker failed to start ({exc})", "start") from None
        self.proc = WorkerChild(self, reply["pid"])
        self.generation += 1
        self._send_fd, self._recv_fd, self._dump_fd = fds
        os.set_blocking(self._send_fd, False)
        os.set_blocking(self._dump_fd, False)
        self._dead.clear()
        hello = self._receive(time.monotonic() + BOOT_TIMEOUT, booting=True)
        if hello.fields.get("ready") is not True:
            self._kill()
            raise LearnerCodeError("the grading worker failed to start", "start")

    def _kill(self) -> None:
        """End the test's worker: the worker parent kills it (in the sandbox and container tiers,
        every other process of the uid too) and forks the next test's spare, while we go on."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for fd in (self._send_fd, self._recv_fd, self._dump_fd):
            try:
                os.close(fd)
            except (OSError, TypeError):
                pass
        self._send_fd = self._recv_fd = self._dump_fd = None
        try:
            self._pask({"op": "end", "pid": proc.pid, "hint": self._hint}, wait=False)
        except (OSError, ValueError, AttributeError):
            self._stop_parent()

    def _release(self, proxy: Proxy) -> None:
        if object.__getattribute__(proxy, "_generation") == self.generation and self.proc is not None:
            self._dead.append(object.__getattribute__(proxy, "_hid"))

    def _proxy(self, hid: int, kind: str) -> Proxy:
        return Proxy(self, hid, kind, self.generation)

    def _request(self, op: str, proxy: Proxy | None, *args):
        if proxy is not None and object.__getattribute__(proxy, "_generation") != self.generation:
            raise LearnerCodeError("this object belonged to a grading worker that was stopped "
                                   "(an earlier timeout or crash): construct it again", "value")
        if self.proc is None:
            self._start()
        hid = None if proxy is None else object.__getattribute__(proxy, "_hid")
        sent = wire.Writer(keep_grad=True)
        head, blobs = sent.frame({"op": op, "hid": hid, "args": sent.value(list(args)), "dead": list(self._dead)})
        self._dead.clear()
        started = time.monotonic()
        deadline = started + max(self.left, 0.0)
        try:
            self._send([memoryview(head), *blobs], deadline)
            reply = self._receive(deadline)
        except LearnerCodeError as exc:
            exc.during_load = op == "load"
            raise
        finally:
            self.left -= time.monotonic() - started
        try:
            wire.apply_changes(reply, sent)
            printed = reply.fields.get("out")
            if isinstance(printed, str) and printed:
                sys.stdout.write(printed[-wire.MAX_PRINTED:])
            if "ok" in reply.fields:
                return wire.tree(reply, reply.fields["ok"], self._proxy, strict=True,
                                 args=wire.argument_spans(sent))
            error = reply.fields["err"]
        except (wire.WireError, KeyError, TypeError) as exc:
            self._kill()
            raise LearnerCodeError(f"the grader could not read the value your code returned ({exc})",
                                   "value") from None
        raise self._rebuild_chain(error)

    def _send(self, views: list[memoryview], deadline: float) -> None:
        for view in views:
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._timeout()
                _, writable, _ = select.select([], [self._send_fd], [], min(left, 0.5))
                if writable:
                    try:
                        view = view[os.write(self._send_fd, view[:1 << 20]):]
                    except (BrokenPipeError, OSError):
                        self._crashed()
                elif self.proc is not None and self.proc.poll() is not None:
                    self._crashed()

    def _receive(self, deadline: float, booting: bool = False) -> wire.Message:
        fd = self._recv_fd

        def readinto(view: memoryview) -> None:
            got = 0
            while got < len(view):
                left = deadline - time.monotonic()
                if left <= 0:
                    self._timeout(booting)
                readable, _, _ = select.select([fd], [], [], min(left, 0.5))
                if not readable:
                    if self.proc is not None and self.proc.poll() is not None:
                        self._crashed(booting)     # dead, though a child of it may hold the pipe open
                    continue
                n = os.readv(fd, [view[got:got + (1 << 24)]])
                if not n:
                    self._crashed(booting)
                got += n

        try:
            return wire.read(readinto, limit=self._limit)
        except wire.WireError as exc:
            self._kill()
            if "at most" in str(exc) and "MiB" in str(exc):
                raise LearnerCodeError(f"your code returned more than {self._limit >> 20} MiB of data "
                                       f"({exc})", "value") from None
            raise LearnerCodeError(f"the grader could not read what your code sent back ({exc})", "value") from None

    def _dump_stack(self) -> list:
        """The worker's Python stack, asked for at a timeout (faulthandler, which works inside
        native calls too): the learner's frames in it, innermost first."""
        if self.proc is None or self._dump_fd is None:
            return []
        try:
            self._pask({"op": "dump", "pid": self.proc.pid})
        except (OSError, ValueError, AttributeError):
            return []
        text, end = b"", time.monotonic() + DUMP_WAIT
        while time.monotonic() < end and len(text) < 1 << 16:
            readable, _, _ = select.select([self._dump_fd], [], [], 0.05)
            if readable:
                try:
                    chunk = os.read(self._dump_fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                text += chunk
            elif b"File " in text:
                break
        return dumped_frames(text.decode("utf-8", "replace"), self._local_path)

    def _local_path(self, path: str) -> str | None:
        """A worker's path of the learner's file as the grader names it (None for other files)."""
        if not isinstance(path, str):
            return None
        folder = self.worker_folder.rstrip("/") + "/"
        if not path.startswith(folder) or "/" in path[len(folder):]:
            return None
        return str(self.folder / path[len(folder):])

    def _timeout(self, booting: bool = False):
        if booting:
            self._kill()
            raise LearnerCodeError(f"the grading worker took longer than {BOOT_TIMEOUT:.0f} s to start", "start")
        frames = self._dump_stack()
        self._kill()
        raise LearnerCodeError(f"your code ran longer than {self.timeout:g} s: an infinite loop? "
                               f"(each test gives your code {self.timeout:g} s in all)", "timeout", frames)

    def _crashed(self, booting: bool = False):
        proc = self.proc
        code = proc.wait(timeout=1.0) if proc is not None else None
        self._kill()
        if code is None:
            raise LearnerCodeError("your code closed the grader's connection to its process", "crash")
        where = " while the grading worker started" if booting else ""
        if code < 0:
            sig = -code
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = "unknown"
            why = {signal.SIGSEGV: ": a segmentation fault, memory read or written out of bounds (a Triton "
                                   "kernel's load or store without its mask?)",
                   signal.SIGBUS: ": memory read or written out of bounds",
                   signal.SIGKILL: ": killed, out of memory?",
                   signal.SIGABRT: ": aborted, often memory written out of bounds (a Triton kernel's store "
                                   "without its mask, or with the wrong row stride?)",
                   signal.SIGSYS: ": a system call the grader does not allow"}.get(sig, "")
            raise LearnerCodeError(f"your code crashed the process{where} (signal {sig}, {name}{why})", "crash")
        raise LearnerCodeError(f"your code ended the process{where} (exit status {code}): "
                               f"did it call os._exit or sys.exit?", "crash")

    def _rebuild_chain(self, error) -> BaseException:
        """The learner's exception and its causes, as the grader raises them."""
        if not (isinstance(error, list) and error):
            return LearnerCodeError("your code raised an exception the grader could not read", "value")
        built = []
        for item in error[:5]:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[1], str)
                    and isinstance(item[2], list)):
                return LearnerCodeError("your code raised an exception the grader could not read", "value")
            frames = []
            for f in item[2][:MAX_FRAMES]:
                if isinstance(f, list) and len(f) == 4 and type(f[1]) is int and all(isinstance(x, str) for x in (f[0], f[2], f[3])):
                    local = self._local_path(f[0])
                    if local:
                        frames.append((local, f[1], f[2][:200], f[3][:500]))
            exc = rebuild(item[0], item[1][:20000])
            try:
                exc.frames = frames
            except AttributeError:
                pass
            built.append(exc)
        for outer, inner in zip(built, built[1:]):
            outer.__cause__ = inner
        return built[0]


def _end(proc) -> None:
    """SIGKILL a process we started (its process group too: bwrap and its sandbox) and wait for it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.kill()
    proc.wait()


_PASS_THROUGH = {name for name, obj in vars(builtins).items()
                 if isinstance(obj, type) and issubclass(obj, Exception)}
_TRUSTED_MODULES = ("torch", "triton", "numpy")


def _built(cls: type, text: str) -> BaseException:
    """cls(text); for a type built from other arguments (UnicodeDecodeError takes five), its nearest
    base that takes a message (UnicodeError, still a ValueError)."""
    for base in cls.__mro__:
        try:
            return base(text)
        except TypeError:
            continue
    return LearnerCodeError(f"{cls.__name__}: {text}")


def rebuild(type_name: str, text: str) -> BaseException:
    """The learner's exception, as the grader raises it: builtin types keep their type
    (NotImplementedError stays NotImplementedError), and so do torch's, Triton's and numpy's
    (when the grader has imported them); others become LearnerCodeError."""
    short = type_name.rsplit(".", 1)[-1]
    if short == "ImplementationError":
        return ImplementationError(text)
    if short in ("SystemExit", "KeyboardInterrupt") and type_name in (short, f"builtins.{short}"):
        return LearnerCodeError(f"your code called sys.exit ({short}{': ' + text if text else ''})", "exit")
    if short == "MemoryError" or "can't allocate memory" in text or "not enough memory" in text:
        first = text.splitlines()[0] if text else ""
        return LearnerCodeError(f"your code ran out of memory: the grader allows {Limits().memory >> 20} MiB "
                                f"({short}: {first})", "memory")
    if type_name in (short, f"builtins.{short}") and short in _PASS_THROUGH:
        return _built(getattr(builtins, short), text)
    module, _, qual = type_name.rpartition(".")
    if module.split(".")[0] in _TRUSTED_MODULES and module in sys.modules:
        cls = sys.modules[module]
        for part in qual.split("."):
            cls = getattr(cls, part, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(text)
            except Exception:                  # noqa: BLE001  (an exception type with another signature)
                pass
    return LearnerCodeError(f"{short}: {text}")


