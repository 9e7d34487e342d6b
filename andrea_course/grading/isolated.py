"""IsolatedStudent: the learner's code runs in a worker process, the grader only sees values.

The autograder's `student` fixture (`pytest --isolate`). Same interface as InProcessStudent:
`piece(activity, name)`, `is_reference`, `close()`. A piece is a proxy; using it sends a
request over a pipe to a worker subprocess that holds the learner's objects:

    grader (pytest)                                worker (learner code)
    softmax = student.piece("attention", "softmax")  -> ("load", "attention", "softmax")
    softmax(scores)                                  -> ("call", handle, args, kwargs)
    mlp = student.piece("mlp", "MLP")(cfg)           -> ("call", ...)  returns a new handle
    mlp.fc.weight                                    -> ("getattr", ...) twice

Values cross the pipe as tagged trees of tensors, numbers, strings, None, dtypes, devices,
random generators (by their state: the other side draws from a copy), ModelConfig (rebuilt
from its dict) and lists, tuples and dicts of these, written with
torch.save and read back with torch.load(weights_only=True): the grader never unpickles an
object the learner made. Anything else the learner returns stays in the worker and comes back
as a handle (a proxy again). Comparisons (`==`) on a handle never reach the learner's code.

Messages are torch.save zips whose entries must be stored, not compressed (nothing the grader
reads inflates), of at most 1 GiB; a tensor may not be a view larger than its storage.

Where the worker runs (sandbox.py): a zygote process, started inside a bubblewrap sandbox as an
unprivileged user (own pid, network, IPC and mount namespaces; the course and Python read-only;
the submission read-only at /submission; a private /tmp; limits on memory, processes, open
files, disk and CPU), imports torch once; every test gets a fresh worker forked from it, and
before each fork the zygote kills every other process in the sandbox. The grader never opens a
path inside the sandbox: it talks to the zygote over a socket and to the worker over pipes.
`sandbox=False` (andrea-grade --unsafe-no-sandbox) runs the zygote as the grader's own user
in a private temp folder: a learner grading their own work, never as root.

Each test has a time budget for all its calls. A timeout, a crash (segfault, os._exit, exit at
import) or a memory blow-up fails that test with a plain message and kills the worker.
"""
from __future__ import annotations

import builtins
import io
import itertools
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile

import torch

from .. import authorship
from ..config import ModelConfig
from ..paths import ROOT
from ..overlay import ImplementationError, resolve
from .sandbox import SANDBOX_ROOT, Cgroup, Limits, Sandbox

HEADER = struct.Struct("<Q")
MAX_MESSAGE = 1 << 30               # 1 GiB: a bigger answer is refused, not read
DEFAULT_TIMEOUT = 60.0              # seconds of learner time per test
BOOT_TIMEOUT = 180.0                # starting Python, torch and the course (not the learner's time)


class LearnerCodeError(Exception):
    """The learner's code failed in a way that is not an ordinary exception: a timeout, a crash,
    sys.exit, too much memory, or a value the grader cannot read. The message says which."""


# ----------------------------------------------------------------------------- values
_SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}


def encode(value, handle_of=None, depth: int = 0):
    """A tagged tree that torch.load(weights_only=True) reads back. `handle_of(obj)` (worker
    side) turns anything else into a handle id; without it (grader side) anything else is an
    error: graded tests may pass only values to learner code."""
    if depth > 64:
        raise ValueError("value nested more than 64 levels deep")
    kind = type(value)
    if value is None:
        return ("none",)
    if kind in _SCALARS:
        return (_SCALARS[kind], value)
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if type(t) is not torch.Tensor:
            t = t.as_subclass(torch.Tensor)
        return ("tensor", t.clone())        # clone: never ship a view's whole storage
    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, torch.Generator):     # by its state: the worker draws from a copy
        return ("generator", str(value.device), value.get_state())
    if isinstance(value, ModelConfig):
        return ("config", encode(value.to_dict(), handle_of, depth + 1))
    if isinstance(value, Proxy):
        return ("handle", object.__getattribute__(value, "_hid"))
    if kind in (list, tuple) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        tag = "list" if kind is list else "tuple"
        return (tag, [encode(v, handle_of, depth + 1) for v in value])
    if isinstance(value, dict):
        return ("dict", [(encode(k, handle_of, depth + 1), encode(v, handle_of, depth + 1))
                         for k, v in value.items()])
    if isinstance(value, slice):
        return ("slice", [encode(v, handle_of, depth + 1) for v in (value.start, value.stop, value.step)])
    if handle_of is not None:
        return ("handle", handle_of(value))
    raise TypeError(f"a graded test can pass only tensors, numbers, strings, None, dtypes, "
                    f"generators, ModelConfig and lists/tuples/dicts of these to learner code, "
                    f"not {type(value).__name__}")


def decode(tree, proxy_of=None, depth: int = 0):
    """The value a tagged tree stands for; a malformed tree raises ValueError."""
    if depth > 66 or not isinstance(tree, tuple) or not tree or not isinstance(tree[0], str):
        raise ValueError("malformed value")
    tag, rest = tree[0], tree[1:]
    if tag == "none" and not rest:
        return None
    if tag in ("bool", "int", "float", "str") and len(rest) == 1:
        want = getattr(builtins, tag)
        if type(rest[0]) is not want:
            raise ValueError(f"malformed {tag}")
        return rest[0]
    if tag == "tensor" and len(rest) == 1 and type(rest[0]) is torch.Tensor:
        t = rest[0]
        if t.numel() * t.element_size() > max(t.untyped_storage().nbytes(), 0) and t.numel() > 0:
            raise ValueError("a tensor larger than its storage (a stride-0 view): send real values")
        return t
    if tag == "dtype" and len(rest) == 1 and isinstance(getattr(torch, str(rest[0]), None), torch.dtype):
        return getattr(torch, rest[0])
    if tag == "device" and len(rest) == 1 and type(rest[0]) is str:
        return torch.device(rest[0])
    if tag == "generator" and len(rest) == 2 and type(rest[0]) is str and type(rest[1]) is torch.Tensor:
        try:
            generator = torch.Generator(device=rest[0])
            generator.set_state(rest[1])
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed generator: {exc}") from None
        return generator
    if tag == "config" and len(rest) == 1:
        fields = decode(rest[0], proxy_of, depth + 1)
        if not isinstance(fields, dict):
            raise ValueError("malformed config")
        return ModelConfig.from_dict(fields)
    if tag in ("list", "tuple") and len(rest) == 1 and type(rest[0]) is list:
        items = [decode(v, proxy_of, depth + 1) for v in rest[0]]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and len(rest) == 1 and type(rest[0]) is list:
        out = {}
        for pair in rest[0]:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError("malformed dict")
            key = decode(pair[0], proxy_of, depth + 1)
            if isinstance(key, (torch.Tensor, list, dict, Proxy)):
                raise ValueError("unhashable dict key")
            out[key] = decode(pair[1], proxy_of, depth + 1)
        return out
    if tag == "slice" and len(rest) == 1 and type(rest[0]) is list and len(rest[0]) == 3:
        return slice(*(decode(v, proxy_of, depth + 1) for v in rest[0]))
    if tag == "handle" and proxy_of is not None and len(rest) in (1, 2) and type(rest[0]) is int:
        return proxy_of(rest[0], rest[1] if len(rest) == 2 and type(rest[1]) is str else "object")
    raise ValueError(f"malformed value (tag {tag!r})")


def dumps(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads(data: bytes):
    """torch.load(weights_only=True) of a message, refusing one that would inflate: every entry
    of torch.save's zip must be stored uncompressed, so nothing read grows past `data`."""
    try:
        entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ValueError(f"not a torch.save message ({exc})") from None
    if any(e.compress_type != zipfile.ZIP_STORED or e.file_size != e.compress_size for e in entries) \
            or sum(e.file_size for e in entries) > len(data):
        raise ValueError("a compressed message (the grader never inflates what learner code sends)")
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


# ----------------------------------------------------------------------------- grader side
class Proxy:
    """A learner object that lives in the worker: call it, read its attributes, iterate it."""

    __slots__ = ("_student", "_hid", "_kind", "_generation", "__weakref__")

    def __init__(self, student, hid: int, kind: str, generation: int):
        object.__setattr__(self, "_student", student)
        object.__setattr__(self, "_hid", hid)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_generation", generation)

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
            raise LearnerCodeError(f"len() of your {self._kind} did not give a non-negative int")
        return n

    def __iter__(self):
        items = self._ask("list")
        if not isinstance(items, list):
            raise LearnerCodeError(f"your {self._kind} could not be iterated")
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
    """The learner's pieces, run in a worker subprocess (see the module docstring)."""

    def __init__(self, impl=None, overrides: dict | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 limits: Limits = Limits(), sandbox: bool = True, uid: int | None = None,
                 cgroup: Cgroup | None = None, python: str | None = None):
        if overrides:
            raise ValueError("IsolatedStudent does not take overrides: they are objects of this "
                             "process; use InProcessStudent for mutation tests")
        self.folder = resolve(impl)
        self.timeout, self.limits = float(timeout), limits
        self.sandboxed, self.uid, self.cgroup = sandbox, uid, cgroup
        if not sandbox and os.geteuid() == 0:
            raise LearnerCodeError("refused: without a sandbox the learner's code would run as root")
        self.python = python or sys.executable
        self.proc = None
        self.generation = 0
        self.left = float(timeout)         # seconds of learner time left in this test
        self._dead: list[int] = []
        self._import_failures: dict[str, str] = {}   # activity -> why loading it killed the worker
        self._tmp = None                   # without a sandbox: the zygote's private folder
        self._zygote = self._zsock = self._zlog = None

    @property
    def is_reference(self) -> bool:
        return self.folder == ROOT / "solutions"

    # ----- the fixture's hooks -----
    def begin_test(self) -> None:
        """Start one test: a fresh worker (forked on the first request; in a sandbox the zygote
        first ends every other process in it), with `timeout` seconds of waiting for the
        learner's code (the grader's own work and worker start-up do not count)."""
        self._kill()
        self.left = self.timeout

    def source(self, activity: str, name: str) -> str:
        """The code of a piece as written, read from the learner's file in this process (never run)."""
        from .student import source_of
        return source_of(self.folder / f"{activity}.py", name)

    def piece(self, activity: str, name: str) -> Proxy:
        """A proxy for the learner's own function or class."""
        if activity in self._import_failures:
            raise LearnerCodeError(self._import_failures[activity])
        try:
            return self._request("load", None, activity, name)
        except LearnerCodeError as exc:
            if getattr(exc, "during_load", False):
                self._import_failures[activity] = (
                    f"{exc} (while loading {activity}.py: its top-level code, or a file it imports)")
                raise LearnerCodeError(self._import_failures[activity]) from None
            raise

    def close(self) -> None:
        self._kill()
        self._stop_zygote()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # ----- the worker -----
    def _env(self) -> dict:
        """The worker's whole environment: nothing of the grader's but the locale and Triton's mode."""
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TRITON_INTERPRET") if k in os.environ}
        home = "/tmp" if self.sandboxed else self._tmp
        env.update(HOME=home, TMPDIR=home, USER="learner", OMP_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
        return env

    def _start_zygote(self) -> None:
        """A process that imported torch and the course once (inside the sandbox); every worker
        is a fork of it, so a fresh worker costs milliseconds, not seconds."""
        self._stop_zygote()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = ("import sys; sys.dont_write_bytecode = True; "
                f"sys.path.insert(0, {str(ROOT)!r}); "
                "from andrea_course.grading.isolated import _zygote; _zygote(int(sys.argv[1]), sys.argv[2])")
        config = json.dumps({**self.limits.as_dict(), "sandbox": self.sandboxed,
                             "whole_sandbox_limits": self.cgroup is not None})
        command = [self.python, "-I", "-c", boot, str(theirs.fileno()), config]
        self._zlog = tempfile.TemporaryFile(prefix="andrea-zygote-")     # the grader's, unnamed
        kwargs = dict(stdin=subprocess.DEVNULL, stdout=self._zlog, stderr=self._zlog, env=self._env(),
                      pass_fds=(theirs.fileno(),))
        try:
            if self.sandboxed:
                box = Sandbox(self.limits, submission=self.folder, uid=self.uid, cgroup=self.cgroup)
                self._zygote = box.popen(command, **kwargs)
            else:
                self._tmp = self._tmp or tempfile.mkdtemp(prefix="andrea-worker-")
                self._zygote = subprocess.Popen(command, cwd=self._tmp, start_new_session=True, **kwargs)
        except OSError as exc:
            mine.close()
            raise LearnerCodeError(f"the grading worker could not start: {exc}") from None
        finally:
            theirs.close()
        self._zsock = mine
        mine.settimeout(BOOT_TIMEOUT)
        try:
            if self._zask({"op": "hello"}) != {"ready": True}:
                raise OSError("unexpected greeting")
        except (OSError, ValueError) as exc:
            log = self._zygote_log()
            self._stop_zygote()
            raise LearnerCodeError(f"the grading worker failed to start ({exc}): {log}") from None

    def _zygote_log(self) -> str:
        if self._zlog is None:
            return ""
        self._zlog.seek(0)
        lines = self._zlog.read(1 << 16).decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:])

    def _zask(self, request: dict, fds=()) -> dict:
        socket.send_fds(self._zsock, [json.dumps(request).encode()], list(fds))
        reply = self._zsock.recv(65536)
        if not reply:
            raise OSError("the grading worker's parent process ended")
        return json.loads(reply)

    def _stop_zygote(self) -> None:
        """End the sandbox (or the zygote's session): killing bwrap kills everything inside."""
        zygote, self._zygote = self._zygote, None
        if self._zsock is not None:
            self._zsock.close()
            self._zsock = None
        if zygote is not None:
            try:
                os.killpg(zygote.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            zygote.kill()
            zygote.wait()
        if self._zlog is not None:
            self._zlog.close()
            self._zlog = None

    def _start(self) -> None:
        if self._zygote is None or self._zygote.poll() is not None:
            self._start_zygote()
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        folder = SANDBOX_ROOT if self.sandboxed else str(self.folder)
        request = {"op": "fork", "folder": folder}
        try:
            try:
                pid = self._zask(request, [to_worker_r, from_worker_w])["pid"]
            except (OSError, ValueError, KeyError):       # the zygote died (a learner killed it?)
                self._start_zygote()
                pid = self._zask(request, [to_worker_r, from_worker_w])["pid"]
        except (OSError, ValueError, KeyError, LearnerCodeError) as exc:
            for fd in (to_worker_w, from_worker_r):
                os.close(fd)
            raise LearnerCodeError(f"the grading worker failed to start ({exc})") from None
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.proc = _Forked(self, pid)
        self.generation += 1
        self._send_fd, self._recv_fd = to_worker_w, from_worker_r
        os.set_blocking(self._send_fd, False)
        self._dead.clear()
        hello = self._receive(time.monotonic() + BOOT_TIMEOUT, booting=True)
        if hello != ("ready",):
            self._kill()
            raise LearnerCodeError(f"the grading worker failed to start: {hello!r}")

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for fd in (self._send_fd, self._recv_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.kill()
        proc.wait()

    def _release(self, proxy: Proxy) -> None:
        if object.__getattribute__(proxy, "_generation") == self.generation and self.proc is not None:
            self._dead.append(object.__getattribute__(proxy, "_hid"))

    def _proxy(self, hid: int, kind: str) -> Proxy:
        return Proxy(self, hid, kind, self.generation)

    def _request(self, op: str, proxy: Proxy | None, *args):
        if proxy is not None and object.__getattribute__(proxy, "_generation") != self.generation:
            raise LearnerCodeError("this object belonged to a grading worker that was stopped "
                                   "(an earlier timeout or crash): construct it again")
        if self.proc is None:
            self._start()
        hid = None if proxy is None else object.__getattribute__(proxy, "_hid")
        message = dumps((op, hid, encode(list(args)), list(self._dead)))
        self._dead.clear()
        started = time.monotonic()
        deadline = started + max(self.left, 0.0)
        try:
            self._send(HEADER.pack(len(message)) + message, deadline)
            reply = self._receive(deadline)
        except LearnerCodeError as exc:
            exc.during_load = op == "load"
            raise
        finally:
            self.left -= time.monotonic() - started
        if reply[0] == "ok":
            try:
                return decode(reply[1], self._proxy)
            except Exception as exc:
                raise LearnerCodeError(f"the grader could not read the value your code returned "
                                       f"({exc})") from None
        _, type_name, text, where = reply
        raise _rebuild(type_name, text, where)

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self._timeout()
            _, writable, _ = select.select([], [self._send_fd], [], left)
            if writable:
                try:
                    view = view[os.write(self._send_fd, view[:1 << 20]):]
                except (BrokenPipeError, OSError):
                    self._crashed()

    def _read_exactly(self, n: int, deadline: float, booting: bool) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                self._timeout(booting)
            readable, _, _ = select.select([self._recv_fd], [], [], min(left, 0.5))
            if not readable:
                if self.proc is not None and self.proc.poll() is not None:
                    self._crashed(booting)     # dead, though a child of it may hold the pipe open
                continue
            chunk = os.read(self._recv_fd, min(n - got, 1 << 20))
            if not chunk:
                self._crashed(booting)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _receive(self, deadline: float, booting: bool = False):
        (n,) = HEADER.unpack(self._read_exactly(HEADER.size, deadline, booting))
        if n > MAX_MESSAGE:
            self._kill()
            raise LearnerCodeError(f"your code returned more than {MAX_MESSAGE >> 20} MiB of data")
        data = self._read_exactly(n, deadline, booting)
        try:
            reply = loads(data)
        except Exception as exc:
            self._kill()
            raise LearnerCodeError(f"the grader could not read what your code sent back ({exc})") from None
        if not (isinstance(reply, tuple) and reply and reply[0] in ("ok", "err", "ready")
                and len(reply) == {"ok": 2, "err": 4, "ready": 1}[reply[0]]):
            self._kill()
            raise LearnerCodeError("the grader could not read what your code sent back")
        if reply[0] == "err" and not all(isinstance(x, str) for x in reply[1:]):
            self._kill()
            raise LearnerCodeError("the grader could not read the error your code raised")
        return reply

    def _timeout(self, booting: bool = False):
        self._kill()
        if booting:
            raise LearnerCodeError(f"the grading worker took longer than {BOOT_TIMEOUT:.0f} s to start")
        raise LearnerCodeError(f"your code ran longer than {self.timeout:g} s: an infinite loop? "
                               f"(each test gives your code {self.timeout:g} s in all)")

    def _crashed(self, booting: bool = False):
        proc = self.proc
        code = proc.wait(timeout=1.0) if proc is not None else None
        self._kill()
        if code is None:
            raise LearnerCodeError("your code closed the grader's connection to its process")
        where = " while the grading worker started" if booting else ""
        if code is not None and code < 0:
            sig = -code
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = "unknown"
            why = {signal.SIGSEGV: ": a segmentation fault", signal.SIGKILL: ": killed, out of memory?",
                   signal.SIGABRT: ": aborted"}.get(sig, "")
            raise LearnerCodeError(f"your code crashed the process{where} (signal {sig}, {name}{why})")
        raise LearnerCodeError(f"your code ended the process{where} (exit status {code}): "
                               f"did it call os._exit or sys.exit?")


_PASS_THROUGH = {name for name, obj in vars(builtins).items()
                 if isinstance(obj, type) and issubclass(obj, Exception)}


def _rebuild(type_name: str, text: str, where: str) -> Exception:
    """The learner's exception, as the grader raises it: builtin types keep their type
    (NotImplementedError stays NotImplementedError), others become LearnerCodeError."""
    suffix = f" ({where})" if where else ""
    if type_name == "ImplementationError":
        return ImplementationError(text)
    if type_name in ("SystemExit", "KeyboardInterrupt"):
        return LearnerCodeError(f"your code called sys.exit ({type_name}{': ' + text if text else ''})"
                                f"{suffix}")
    if type_name == "MemoryError" or "can't allocate memory" in text or "not enough memory" in text:
        return LearnerCodeError(f"your code ran out of memory: the grader allows "
                                f"{Limits().memory >> 30} GB ({type_name}: {text.splitlines()[0] if text else ''})"
                                f"{suffix}")
    if type_name in _PASS_THROUGH:
        return getattr(builtins, type_name)(text + suffix)
    return LearnerCodeError(f"{type_name}: {text}{suffix}")


# ----------------------------------------------------------------------------- worker side
def learner_pieces(folder: str):
    """The ONE place the worker turns a submission folder into the learner's pieces:
    `learner_pieces(folder).isolated(activity, name)` is the learner's piece, with the engine
    (andrea_course/pieces) standing in for every other piece it calls. Nothing here reads
    solutions/ (not mounted in the sandbox)."""
    from ..overlay import Overlay
    return Overlay(folder)


def _worker(recv_fd: int, send_fd: int, folder: str) -> None:
    impl = learner_pieces(folder)
    objects: dict[int, object] = {}
    counter = iter(range(1, 1 << 62))
    reader = os.fdopen(recv_fd, "rb", buffering=0)
    writer = os.fdopen(send_fd, "wb", buffering=0)

    def handle_of(obj) -> int:
        hid = next(counter)
        objects[hid] = obj
        return hid

    def reply(message) -> None:
        data = dumps(message)
        writer.write(HEADER.pack(len(data)) + data)

    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = reader.read(n - len(data))
            if not chunk:
                os._exit(0)              # the grader went away
            data += chunk
        return data

    def kind_of(obj) -> str:
        return f"class {obj.__name__}" if isinstance(obj, type) else type(obj).__name__

    def wrap(value):
        tree = encode(value, handle_of)
        return ("handle", tree[1], kind_of(value)) if tree[0] == "handle" else tree

    reply(("ready",))
    while True:
        (n,) = HEADER.unpack(read(HEADER.size))
        op, hid, args, dead = loads(read(n))
        for d in dead:
            objects.pop(d, None)
        try:
            args = decode(args, lambda h, _kind: objects[h])
            if op == "load":
                authorship.forbid_engine(*args)     # the engine's own version of this piece: refused from here on
                result = impl.isolated(*args)
            else:
                target = objects[hid]
                if op == "call":
                    result = target(*args[0], **args[1])
                elif op == "getattr":
                    result = getattr(target, args[0])
                elif op == "getitem":
                    result = target[args[0]]
                elif op == "len":
                    result = len(target)
                elif op == "list":
                    result = list(target)
                else:
                    raise ValueError(f"unknown request {op!r}")
            message = ("ok", wrap(result) if op != "list" else ("list", [wrap(v) for v in result]))
        except BaseException as exc:   # noqa: BLE001  (the learner's exception, reported)
            message = ("err", type(exc).__name__, _text(exc) + authorship.refused_note(exc), _where(exc, folder))
        try:
            reply(message)
        except BaseException as exc:   # noqa: BLE001
            reply(("err", type(exc).__name__, f"the value could not be sent back: {exc}", ""))


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:   # noqa: BLE001  (a learner's exception whose __str__ fails)
        return "(the exception's message could not be read)"


def _where(exc: BaseException, folder: str) -> str:
    """'attention.py, line 12, in softmax': the learner's innermost frame, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.dirname(os.path.abspath(f.filename)) == os.path.abspath(folder)]
    if not frames or isinstance(exc, NotImplementedError):
        return ""
    f = frames[-1]
    return f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}"


class _Forked:
    """A worker forked by the zygote: not our child (and, in a sandbox, in another pid
    namespace), so the zygote reaps it, tells us how it ended, and kills it for us."""

    def __init__(self, student: IsolatedStudent, pid: int):
        self.student, self.pid, self.returncode = student, pid, None

    def poll(self):
        if self.returncode is None:
            try:
                self.returncode = self.student._zask({"op": "poll", "pid": self.pid})["status"]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                self.returncode = -signal.SIGKILL          # its parent is gone: so is it
        return self.returncode

    def wait(self, timeout: float | None = None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                return None
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            if self.student._zask({"op": "kill", "pid": self.pid}).get("killed") is not True:
                raise OSError("the zygote did not kill the worker")
        except (OSError, ValueError, AttributeError):
            self.student._stop_zygote()                    # unresponsive: end the whole sandbox
            self.returncode = -signal.SIGKILL


def _limit_self(config: dict) -> None:
    """The zygote's limits, inherited by every worker and whatever it starts."""
    import resource
    disk = int(config["disk"])
    wanted = {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: disk,
              resource.RLIMIT_NOFILE: int(config["open_files"]), resource.RLIMIT_CPU: int(config["cpu_seconds"])}
    if not config["whole_sandbox_limits"]:
        wanted[resource.RLIMIT_AS] = int(config["memory"])
        if config["sandbox"]:       # the sandbox's own uid; never the grading user's
            wanted[resource.RLIMIT_NPROC] = int(config["processes"])
    for which, value in wanted.items():
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _zygote(fd: int, config_json: str) -> None:
    """Wait for fork requests from the grader; each child becomes one worker. In a sandbox,
    every fork first ends every other process in it (kill(-1): stray daemons, fork bombs)."""
    config = json.loads(config_json)
    _limit_self(config)
    _prctl(4, 0)                       # PR_SET_DUMPABLE 0: learner processes cannot ptrace the zygote
    from .. import overlay, pieces  # noqa: F401  (imported once, here, for every worker)
    for activity in pieces.ACTIVITIES:
        try:
            pieces.module(activity)
        except ImportError:        # Triton or tokenizers missing: those activities cannot be graded
            pass
    sock = socket.socket(fileno=fd)
    statuses: dict[int, int] = {}
    runs = itertools.count(1)

    def reap(pid: int = -1) -> None:
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                if pid > 0:
                    statuses.setdefault(pid, -signal.SIGKILL)
                return
            if not done:
                return
            statuses[done] = os.waitstatus_to_exitcode(status)
            if pid > 0:
                return

    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        request = json.loads(data)
        op = request.get("op")
        if op == "hello":
            reply = {"ready": True}
        elif op == "fork" and len(fds) == 2:
            if config["sandbox"]:
                try:
                    os.kill(-1, signal.SIGKILL)     # everything we may signal here, but us and init
                except ProcessLookupError:
                    pass
                reap()
            work = os.path.join(os.getcwd(), f"run{next(runs)}")
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    sock.close()
                    os.setsid()
                    _prctl(4, 1)
                    os.makedirs(work, mode=0o700)
                    os.chdir(work)
                    log = os.open("output.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                    os.environ["HOME"] = os.environ["TMPDIR"] = work
                    tempfile.tempdir = None
                    _worker(fds[0], fds[1], request["folder"])
                except BaseException:   # noqa: BLE001
                    traceback.print_exc()
                    code = 70
                finally:
                    os._exit(code)
            for f in fds:
                os.close(f)
            reply = {"pid": pid}
        elif op == "poll":
            pid = int(request["pid"])
            if pid not in statuses:
                reap(pid)
            reply = {"status": statuses.get(pid)}
        elif op == "kill":
            pid = int(request["pid"])
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            reply = {"killed": True}
        else:
            for f in fds:
                os.close(f)
            reply = {"error": f"unknown request {op!r}"}
        sock.send(json.dumps(reply).encode())
