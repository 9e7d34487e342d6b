"""The worker's side: the worker parent that imported torch and the course once (after
confining itself, confine.py) and forks a fresh worker per test, and the worker that serves a
client's requests (client.py) on the learner's objects.

Requests: "load" (a piece, the engine's own version of it refused from then on: authorship),
"call", "getattr", "getitem", "len", "list" on a handle, and "run" (an entry point of the course,
"andrea_course.<module>:<function>", called with the learner's folder and the request's
arguments: the capstone's leaderboard trains the learner's model this way). The worker parent
may prepare one entry point before it forks any worker (the client's `prepare`). The worker
parent's own requests: "hello" (its greeting, with the client's nonce back), "take" (the spare
worker), "end" (a test's worker and what it left), "poll", "dump" (a worker's stack), and "reset"
(a new owner of the worker parent: every process of the tier killed, a fresh spare). The worker wing
imports nothing of the grading pipeline, the notebooks or the capstone: an entry point is named,
never imported, until a request asks for it.
"""
from __future__ import annotations

import faulthandler
import gc
import importlib
import io
import itertools
import json
import os
import signal
import socket
import sys
import tempfile
import time
import traceback

import torch

from .. import authorship
from . import wire
from .process import Forked

ENTRY_PACKAGE = "andrea_course."
MAX_FRAMES = 40                     # the learner's frames kept with an exception


def entry_point(name: str):
    """The function an entry point names, "andrea_course.<module>:<function>" (the course's own
    code only)."""
    module, _, function = name.partition(":")
    if not module.startswith(ENTRY_PACKAGE) or not function:
        raise ValueError(f"not an entry point of the course: {name!r}")
    return getattr(importlib.import_module(module), function)


def warm_up(kernels: bool = False) -> None:
    """Import the engine and its version of every piece; with kernels, run each of the engine's
    graded kernels once in Triton's interpreter (its own set-up costs a few tenths of a second per
    process): a worker forked afterwards starts warm. Never the learner's code."""
    from .. import pieces
    for activity in pieces.ACTIVITIES:
        pieces.names(activity)
        try:
            pieces.module(activity)
        except ImportError:        # Triton or tokenizers missing: those activities cannot be graded
            pass
    if kernels and os.environ.get("TRITON_INTERPRET") == "1":
        try:
            from ..engine.kernels import gelu_tanh, layer_norm, softmax
            x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))   # not the caller's draws
            softmax(x), gelu_tanh(x), layer_norm(x, torch.ones(16), torch.zeros(16))
        except Exception:          # noqa: BLE001  (no Triton: its tests say so themselves)
            pass


def warm_meta() -> None:
    """Run one operation whose meta kernel PyTorch writes in Python (tril), on the meta device:
    the first such operation of a process imports torch._dynamo, sympy and the rest of PyTorch's
    compiler stack, which a graded test's worker would otherwise import again, several times
    slower under authorship's audit hook (a mask asked for on the meta device). The exec-started
    worker parent runs it (andrea-grade's tiers); a fork-started one has what its grader imported."""
    try:
        torch.ones(2, 2, dtype=torch.bool, device="meta").tril()
    except Exception:              # noqa: BLE001  (no meta kernel: the test that needs it says so)
        pass


def learner_pieces(folder: str):
    """The ONE place the worker turns a submission folder into the learner's pieces:
    `learner_pieces(folder).isolated(activity, name)` is the learner's piece, with the engine
    (andrea_course/pieces) standing in for every other piece it calls. Nothing here reads
    solutions/ (not mounted in the sandbox)."""
    from ..overlay import Overlay
    return Overlay(folder)


def _qualified(exc: BaseException) -> str:
    t = type(exc)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:   # noqa: BLE001  (a learner's exception whose __str__ fails)
        return "(the exception's message could not be read)"


def _frames(exc: BaseException, folder: str) -> list:
    """[path, line, function, code] of the learner's own frames in exc's traceback."""
    folder = os.path.abspath(folder)
    try:
        tb = traceback.extract_tb(exc.__traceback__)
    except Exception:                          # noqa: BLE001
        return []
    return [[f.filename, f.lineno or 0, f.name, (f.line or "")[:500]] for f in tb
            if os.path.dirname(os.path.abspath(f.filename)) == folder][-MAX_FRAMES:]


def _chain(exc: BaseException, folder: str, note: str = "") -> list:
    """[type, message, frames] of exc and its causes; `note` ends the first message (authorship's
    word on a refused route to the engine)."""
    out, seen = [], set()
    while exc is not None and id(exc) not in seen and len(out) < 5:
        seen.add(id(exc))
        out.append([_qualified(exc), (_text(exc) + (note if not out else ""))[:20000], _frames(exc, folder)])
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return out


def _precompile(folder: str, activity: str | None) -> None:
    """Compile the learner's `activity`.py now (never run it), while the worker waits for its
    test: loading it then skips the compile. Only this worker's import machinery is changed."""
    import importlib._bootstrap_external as external
    path = os.path.join(folder, f"{activity}.py")
    if not activity or not activity.isidentifier() or not os.path.isfile(path):
        return
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 21)
        code = compile(data, path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return                                 # loading it says what is wrong
    plain = external.SourceLoader.source_to_code

    def source_to_code(self, source, where, *, _optimize=-1):
        if where == path and source == data and _optimize == -1:
            return code
        return plain(self, source, where, _optimize=_optimize)

    external.SourceLoader.source_to_code = source_to_code


def _first_touch() -> None:
    """A few small torch operations and a message written, while the worker waits for its test: a
    forked process's first calls pay for the pages they write (copy-on-write) and for torch's
    per-process set-up; the learner's first call then does not."""
    try:
        x = torch.ones(4, 8)
        torch.softmax(x @ x.T, dim=-1).sum().item()
        w = wire.Writer()
        w.frame({"ok": w.value([x, 1.0, "s"])})
    except Exception:              # noqa: BLE001
        pass


def _worker(recv_fd: int, send_fd: int, dump_fd: int, folder: str, hint: str | None = None) -> None:
    """Serve one test's requests on the learner's objects (held here by handle) until the grader
    goes away; each answer carries what the learner printed and what their code changed in place."""
    faulthandler.register(signal.SIGUSR1, file=os.fdopen(dump_fd, "w", closefd=False), all_threads=False)
    impl = learner_pieces(folder)
    objects: dict[int, object] = {}
    counter = iter(range(1, 1 << 62))

    def handle_of(obj) -> int:
        hid = next(counter)
        objects[hid] = obj
        return hid

    def readinto(view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = os.readv(recv_fd, [view[got:got + (1 << 24)]])
            if not n:
                os._exit(0)              # the grader went away
            got += n

    reply = _replier(send_fd)
    reply({"ready": True})
    _precompile(folder, hint)
    _first_touch()
    while True:
        message = wire.read(readinto)
        fields = message.fields
        for d in fields.get("dead", []):
            objects.pop(d, None)
        out = io.StringIO()
        watch = None
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        try:
            args = wire.tree(message, fields["args"], lambda h, _kind: objects[h])
            watch = wire.Watch(message)
            target = objects[fields["hid"]] if fields["op"] not in ("load", "run") else None
            answer = {"ok": _do(fields["op"], args, target, impl, folder)}
        except BaseException as exc:   # noqa: BLE001  (the learner's exception, reported)
            answer = {"err": _chain(exc, folder, authorship.refused_note(exc))}
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        writer = wire.Writer(handle_of, aliases=watch.aliases() if watch else None, materialize=True,
                             keep_grad=True)
        try:
            fields_out = {"ok": writer.value(answer["ok"])} if "ok" in answer else {"err": answer["err"]}
        except BaseException as exc:   # noqa: BLE001
            writer = wire.Writer(handle_of, materialize=True)
            fields_out = {"err": [["ValueError", f"the value could not be sent back: {_text(exc)}", []]]}
        if watch is not None:
            fields_out.update(watch.changes(writer))
        fields_out["out"] = out.getvalue()[-wire.MAX_PRINTED:]
        reply(fields_out, writer)


def _replier(send_fd: int):
    """reply(fields, writer=None): one answer framed by wire.py and written to the grader."""
    def send(head: bytes, blobs) -> None:
        for view in (memoryview(head), *blobs):
            while view:
                view = view[os.write(send_fd, view[:1 << 20]):]

    def reply(fields: dict, writer: wire.Writer | None = None) -> None:
        writer = writer or wire.Writer()
        try:
            send(*writer.frame(fields))
        except BaseException as exc:       # noqa: BLE001  (an answer too large, say)
            send(*wire.Writer().frame({"err": [["ValueError", f"the value could not be sent back: {exc}", []]]}))
    return reply


def _do(op: str, args, target, impl, folder: str):
    """One request: load a piece (the engine's own version of it refused from then on), run an
    entry point of the course on the learner's folder, or use an object the test holds a handle to."""
    if op == "load":
        authorship.forbid_engine(*args)
        return impl.isolated(*args)
    if op == "run":
        return entry_point(args[0])(folder, *args[1:])
    if op == "call":
        return target(*args[0], **args[1])
    if op == "getattr":
        return getattr(target, args[0])
    if op == "getitem":
        return target[args[0]]
    if op == "len":
        return len(target)
    if op == "list":
        return list(target)
    raise ValueError(f"unknown request {op!r}")


# The exec-started worker parent: confine first (by the file's path: nothing of the course or torch is
# imported yet), then import the course as the unprivileged user, then serve.
BOOT = """
import importlib.util, json, sys
sys.dont_write_bytecode = True
config = json.loads(sys.argv[2])
spec = importlib.util.spec_from_file_location("andrea_course_confine", config["confine"])
confine = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(confine)
missing = confine.confine(config)
sys.path.insert(0, config["root"])
from andrea_course.worker.server import serve_worker_parent
serve_worker_parent(int(sys.argv[1]), config, missing)
"""


def fork_worker_parent(theirs: socket.socket, config: dict) -> Forked:
    """The process tier's worker parent as a fork of this process (which has imported torch and the
    course already): its own session, stdin/stdout/stderr at /dev/null, no other descriptor
    of ours, SIGKILL when we end."""
    fd = theirs.fileno()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            for entry in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
                n = int(entry)
                if n > 2 and n != fd:
                    try:
                        os.close(n)
                    except OSError:
                        pass
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            serve_worker_parent(fd, {**config, "preload": False, "parent": parent}, [])
        except BaseException:        # noqa: BLE001
            code = 70
        finally:
            os._exit(code)
    return Forked(pid)


def serve_worker_parent(fd: int, config: dict, missing: list) -> None:
    """The worker parent's life: set itself up as the config says (die with the grader, its own
    folder, torch and the course imported once, an entry point prepared), become the subreaper of
    its tier, and serve the grader until the socket closes (WorkerParent)."""
    if config.get("parent_death"):
        _prctl(1, signal.SIGKILL)                     # PR_SET_PDEATHSIG
        if config.get("parent") and os.getppid() != config["parent"]:
            os._exit(0)                               # the grader ended before we could notice
    if config.get("cwd"):
        os.chdir(config["cwd"])
    if config.get("preload", True):
        from .. import overlay  # noqa: F401  (imported once, here, for every worker)
        warm_up(kernels=True)
    if config.get("prepare"):
        name, argument = config["prepare"]
        entry_point(name)(argument)                   # what every worker needs, done once before any fork
    if config.get("preload", True):
        warm_meta()                                   # after a prepare that imported it already: milliseconds
    _prctl(36, 1)                                     # PR_SET_CHILD_SUBREAPER: orphans come to us
    WorkerParent(fd, config, missing).serve()


class WorkerParent:
    """Serve the grader: hand out a spare worker ("take"), fork the next while that one runs, and at
    a test's end ("end") kill its worker and every process it left behind (a subreaper, the
    worker parent sees them all: in the sandbox and container tiers, if they cannot be counted
    down, kill(-1) ends every process of the uid)."""

    def __init__(self, fd: int, config: dict, missing: list):
        self.config, self.missing = config, missing
        self.sock = socket.socket(fileno=fd)
        self.statuses: dict[int, int] = {}       # pid -> exit code, of the workers reaped
        self.runs = itertools.count(1)
        self.spare: dict = {}                    # the next test's worker: {"pid", "fds"} (the grader's ends)

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 65536, 4)
            except OSError:
                os._exit(0)
            if not data:
                os._exit(0)
            for f in fds:                        # the grader never sends descriptors
                os.close(f)
            request = json.loads(data)
            hint = request.get("hint") if isinstance(request.get("hint"), str) else None
            reply, passing, prefork = self.answer(request, hint)
            socket.send_fds(self.sock, [json.dumps(reply).encode()], passing)
            for f in passing:
                os.close(f)
            if prefork:
                self.reap()
                self.make_spare(hint)

    def answer(self, request: dict, hint: str | None) -> tuple[dict, list[int], bool]:
        """(the reply, the descriptors passed with it, whether to fork the next spare after it)."""
        op = request.get("op")
        if op == "hello":                        # the nonce comes back: what answers came before it are older
            return {"ready": True, "missing": self.missing, "nonce": request.get("nonce")}, [], False
        if op == "take":
            if not self.spare:
                self.make_spare(hint)
            reply, passing = {"pid": self.spare["pid"]}, list(self.spare["fds"])
            self.spare.clear()
            return reply, passing, True          # the next test's worker, while this one runs
        if op == "end":
            self.end(int(request["pid"]))
            if not self.spare:
                self.make_spare(hint)
            return {"ended": True}, [], False
        if op == "reset":                        # a new owner (client.take_back): nothing of the tier runs
            self.discard_spare()                 # but us, and the next worker is forked now
            self.end_strays(pause=0.01)
            self.make_spare(hint)
            return {"reset": True}, [], False
        if op == "poll":
            pid = int(request["pid"])
            if pid not in self.statuses:
                self.reap(pid)
            return {"status": self.statuses.get(pid)}, [], False
        if op == "dump":
            try:
                os.kill(int(request["pid"]), signal.SIGUSR1)
            except (ProcessLookupError, PermissionError):
                pass
            return {"asked": True}, [], False
        return {"error": f"unknown request {op!r}"}, [], False

    def reap(self, pid: int = -1) -> None:
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                if pid > 0:
                    self.statuses.setdefault(pid, -signal.SIGKILL)
                return
            if not done:
                return
            self.statuses[done] = os.waitstatus_to_exitcode(status)
            if pid > 0:
                return

    @staticmethod
    def kill(pid: int) -> None:
        for k in (os.killpg, os.kill):
            try:
                k(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    @staticmethod
    def children() -> set[int]:
        """Our children now (a subreaper: every process of the tier that outlived its parent)."""
        me = os.getpid()
        try:
            return {int(c) for t in os.listdir(f"/proc/{me}/task")
                    for c in open(f"/proc/{me}/task/{t}/children").read().split()}
        except OSError:
            found = set()
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        if int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) == me:
                            found.add(int(entry))
                    except (OSError, IndexError, ValueError):
                        pass
            return found

    def end(self, pid: int) -> None:
        """End a test: kill its worker and wait for it; then whatever it left running (end_strays)."""
        self.kill(pid)
        self.wait_for(pid)
        self.end_strays()

    def wait_for(self, pid: int, seconds: float = 5.0) -> None:
        """Reap `pid` (killed), waiting for it at most `seconds`."""
        deadline = time.monotonic() + seconds
        while pid not in self.statuses and time.monotonic() < deadline:
            self.reap(pid)
            if pid not in self.statuses:
                time.sleep(0.002)

    def end_strays(self, pause: float = 0.0) -> None:
        """Kill every process of the tier but us and the spare (daemons, pid-hoppers, fork bombs:
        all reparented to us), one by one while they can be counted, else (sandbox and container
        tiers) with kill(-1), the spare with them. pause: seconds the killed get to die before each
        count (a reset waits for them; a test's end goes on at once)."""
        for _ in range(50):
            strays = self.children() - {self.spare.get("pid")}
            if not strays:
                return
            for stray in strays:
                self.kill(stray)
            time.sleep(pause)
            self.reap()
        if self.config.get("kill_all"):
            try:
                os.kill(-1, signal.SIGKILL)     # everything of the uid we may signal, but us
            except ProcessLookupError:
                pass
            self.discard_spare()
            self.reap()

    def discard_spare(self) -> None:
        """Kill the spare worker (if any), wait for it, and close our ends of its pipes."""
        if self.spare:
            pid, fds = self.spare["pid"], self.spare["fds"]
            self.spare.clear()
            for f in fds:
                os.close(f)
            self.kill(pid)
            self.wait_for(pid)

    def make_spare(self, hint=None) -> None:
        """Fork the next worker: it sets itself up, greets the grader, compiles the file of the
        activity `hint` (the next test's, as the grader guesses it), then waits."""
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        dump_r, dump_w = os.pipe()
        gc.freeze()                      # the worker then copies none of these objects' pages
        work = os.path.join(os.getcwd(), f"run{os.getpid()}-{next(self.runs)}")   # a restarted parent: new names
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                self.sock.close()
                for f in (to_w, from_r, dump_r, *self.spare.get("fds", ())):
                    os.close(f)
                self._become_worker(work)
                _worker(to_r, from_w, dump_w, self.config["folder"], hint)
            except BaseException:   # noqa: BLE001
                traceback.print_exc()
                code = 70
            finally:
                os._exit(code)
        for f in (to_r, from_w, dump_w):
            os.close(f)
        self.spare.update(pid=pid, fds=(to_w, from_r, dump_r))

    def _become_worker(self, work: str) -> None:
        """In the forked child: a session of its own, not dumpable, its own private folder as
        home, temp and working directory, its output in that folder's output.log."""
        os.setsid()
        if self.config.get("parent_death"):
            _prctl(1, signal.SIGKILL)
        _prctl(4, 0)                  # PR_SET_DUMPABLE 0
        os.makedirs(work, mode=0o700)
        os.chdir(work)
        log = os.open("output.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.environ["HOME"] = os.environ["TMPDIR"] = work
        tempfile.tempdir = None
        if "torch" in sys.modules:
            torch.set_num_threads(1)


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass
