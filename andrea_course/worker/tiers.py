"""Where the learner's code runs: the isolation tiers, and what each gives.

    iso = Isolation("sandbox", uid=uid, cgroup=cgroup.dirs)    # the runner's choice, as data
    iso.describe()                                             # what it gives, what it does not
    box = Sandbox(limits, submission=..., uid=uid, cgroup=cgroup)   # bubblewrap's command line
    box = Container(limits, box=folder, uid=uid, cgroup=cgroup)     # the same without namespaces
    with tier_for("sandbox", staged, name=..., uid=uid, limits=limits, timeout=60.0, notes=notes) as (iso, folder):
        ...                                                    # one grading run's tier, taken down after

Every tier runs the learner's code in a worker process (client.py, server.py) that gets values only
(wire.py); what differs is the wall around the worker:

- "sandbox": bubblewrap. Its own pid namespace (it sees and signals only its own processes; when
  its first process dies, the kernel kills the rest), no network (an empty net namespace), its
  own IPC and UTS namespaces; a fresh root holding, read-only, only /usr (and /lib, /bin),
  Python and its packages, the course package and the untouched exercises (`course_mounts`),
  and the submission at /submission; a private /tmp and /dev/shm of `limits.disk` bytes each.
  As root, bwrap runs privileged and the worker drops to `uid` itself (confine.py); as another
  user, bwrap maps that user onto itself in a user namespace.
- "container": for containers where no namespace can be made (Docker's defaults, Gradescope,
  most CI: root without CAP_SYS_ADMIN, a seccomp profile refusing unshare and namespace clones).
  The grader is root; the worker runs as a uid of its own, in a process group of its own, with
  no capabilities, no_new_privs, the seccomp filter, rlimits, a private writable folder; it reads
  its copy of the submission through a folder only that uid's group may read. What it does not
  give: the machine's world-readable files are readable (the course, Python, /etc: never the
  hidden tests, the results or the grader's folders, which the runner checks before it starts),
  its processes are visible in /proc, disk use is bounded per file only, and files it leaves in
  /tmp, /var/tmp or /dev/shm are removed after the run.
- "process": a worker process as the grading user, nothing more: a learner grading their own
  work (check() in a notebook, `make grade`, andrea-grade --own-work).
- "in-process": the learner's code runs in the tests' own process (InProcessStudent): the
  course's mutation tests, and check() where there is no fork (macOS, Windows).

Every tier but "in-process" has the same limits: memory and processes for the whole tier when
the grader can make a cgroup (Cgroup, made by the runner), else per process (RLIMIT_DATA) and per
user (RLIMIT_NPROC); open files, file size and CPU time per process (confine.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..paths import ROOT

UID_BASE = 2_000_000_000          # worker uids (root grader): UID_BASE + the grading run's pid
SANDBOX_ROOT = "/submission"      # where the submission's files appear inside the sandbox
TIERS = ("sandbox", "container", "process", "in-process")


MEMORY_CAP = 6 << 30              # the learner tier's memory on a large machine
GRADER_ROOM = 384 << 20           # what the grader keeps for itself: Python, torch, pytest, one answer
MEMORY_FLOOR = 256 << 20          # below this the learner's worker cannot import torch


def machine_memory(cgroup_root: Path = Path("/sys/fs/cgroup"), meminfo: Path = Path("/proc/meminfo"),
                   own_cgroups: Path = Path("/proc/self/cgroup")) -> int:
    """Bytes this process may use: the machine's memory, or less where its cgroup (v1 or v2,
    the process's own and every one above it) says so, as in a container."""
    try:
        total = int(next(l for l in meminfo.read_text().splitlines() if l.startswith("MemTotal:")).split()[1]) << 10
    except (OSError, StopIteration, ValueError, IndexError):
        total = MEMORY_CAP + GRADER_ROOM
    try:
        own = [line.split(":", 2) for line in own_cgroups.read_text().splitlines()]
    except OSError:
        own = []
    for _, controllers, path in (parts for parts in own if len(parts) == 3):
        if controllers == "":
            base, name = cgroup_root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = cgroup_root / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder = base / path.strip().lstrip("/")
        for d in (folder, *folder.parents):
            try:
                text = (d / name).read_text().strip()
            except OSError:
                text = ""
            if text.isdigit():
                total = min(total, int(text))
            if d == base:
                break
    return total


def default_memory(jobs: int = 1) -> int:
    """The learner tier's memory: what the machine (or its cgroup) has, less the grader's room,
    shared by `jobs` gradings at once (andrea-grade --batch --jobs)."""
    return max(MEMORY_FLOOR, min(MEMORY_CAP, machine_memory() // jobs - GRADER_ROOM))


@dataclass(frozen=True)
class Limits:
    memory: int = field(default_factory=default_memory)   # bytes: the whole tier (cgroup), else each process (RLIMIT_DATA)
    processes: int = 256           # the whole tier (cgroup), else the worker's uid (RLIMIT_NPROC)
    open_files: int = 1024         # per process
    disk: int = 512 << 20          # bytes: /tmp and /dev/shm each (sandbox); also the largest file
    cpu_seconds: int = 3600        # per process (the per-test and total timeouts come first)
    reply: int = 32 << 20          # bytes the grader holds for one answer of the learner's code

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Isolation:
    """How the learner's code runs: the one configuration every runner passes (check(),
    `make grade`, andrea-grade and the plugin's --isolation option all read this).

    tier: one of TIERS. timeout: seconds of learner time per test. uid: the worker's uid (a root
    grader; sandbox and container). cgroup: {controller: dir} the runner made for the tier.
    box: the container tier's folder (submission/ and home/, made by Container.make_box).
    start: "exec" (a fresh interpreter; always in the sandbox and container tiers) or "fork"
    (the worker's parent is a fork of this process: check() and plain pytest, where it costs
    milliseconds instead of an interpreter's start).
    """
    tier: str = "process"
    timeout: float = 60.0
    limits: Limits = field(default_factory=Limits)
    uid: int | None = None
    cgroup: dict | None = None
    box: str | None = None
    start: str = "exec"

    def __post_init__(self):
        if self.tier not in TIERS:
            raise ValueError(f"isolation tier must be one of {', '.join(TIERS)}, not {self.tier!r}")
        if self.start not in ("exec", "fork") or (self.start == "fork" and self.tier != "process"):
            raise ValueError(f"start={self.start!r} (only the process tier may fork its worker's parent)")
        if self.tier == "container" and (self.uid is None or self.box is None):
            raise ValueError("the container tier needs a uid and a box (Container.make_box)")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout:g}")

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "limits": self.limits.as_dict()})

    @classmethod
    def parse(cls, text: str, **defaults) -> "Isolation":
        """A tier's name ("process", "in-process", ...) or the JSON of to_json()."""
        text = str(text).strip()
        if not text.startswith("{"):
            return cls(tier=text, **defaults)
        fields = json.loads(text)
        fields["limits"] = Limits(**fields.get("limits", {}))
        return cls(**fields)

    @classmethod
    def chosen(cls, text: str, timeout: float) -> "Isolation":
        """A tier asked for where no runner set one up (pytest's --isolation, check()): "process"
        (its worker's parent forked from this process where it can: no interpreter to start) or
        "in-process"; the runner's own, set up for its tier (to_json), as it is."""
        iso = cls.parse(text, timeout=timeout)
        if str(text).strip().startswith("{"):
            return iso
        if iso.tier not in ("process", "in-process"):
            raise ValueError(f"{iso.tier!r} needs the runner's set-up (a uid, a folder, the probe): "
                             f"use andrea-grade --isolation {iso.tier}; pytest takes process or in-process")
        forks = iso.tier == "process" and sys.platform.startswith("linux") and hasattr(os, "fork")
        return iso.with_(start="fork") if forks else iso

    def with_(self, **changes) -> "Isolation":
        return replace(self, **changes)

    def worker_config(self) -> dict:
        """What the worker's parent does to itself (confine.py) in this tier."""
        strong = self.tier in ("sandbox", "container")
        return {"uid": self.uid if strong else None, "limits": self.limits.as_dict(),
                "whole_tier_bounded": self.cgroup is not None, "seccomp": strong, "parent_death": True,
                "kill_all": strong}

    def describe(self) -> str:
        """One paragraph: which isolation ran, what it gives and what it does not give."""
        lim = self.limits
        if self.cgroup:
            mem = f"{lim.memory >> 20} MiB of memory and {lim.processes} processes in all (a cgroup)"
        else:
            mem = (f"{lim.memory >> 20} MiB of address space per process and {lim.processes} processes "
                   f"for its uid (no cgroup could be made)")
        who = f"uid {self.uid}, no capabilities, no_new_privs" if self.uid is not None and os.geteuid() == 0             else "your own uid in a user namespace, no capabilities, no_new_privs"
        if self.tier == "sandbox":
            return (f"isolation: sandbox (bubblewrap: pid, network, IPC, UTS and mount namespaces) as {who}; "
                    f"a seccomp filter refusing new namespaces, ptrace, mount, keyctl, bpf and non-Unix sockets; "
                    f"course and Python read-only, the answer key and the tests not mounted; {mem}; "
                    f"/tmp and /dev/shm {lim.disk >> 20} MiB each")
        if self.tier == "container":
            return (f"isolation: container (no namespaces could be made here: {who}, its own process group, "
                    f"a seccomp filter refusing new namespaces, ptrace, mount, keyctl, bpf and all sockets but Unix "
                    f"ones; {mem}; files of at most {lim.disk >> 20} MiB; a private writable folder; the hidden "
                    f"tests, the results and the grader's folders unreadable to it). Not given here: it can read "
                    f"the machine's world-readable files (the course, Python, /etc) and see its processes; disk "
                    f"use is bounded per file only (files it leaves in /tmp, /var/tmp, /dev/shm are removed)")
        if self.tier == "process":
            return ("isolation: a worker process as you (your own work: no sandbox): the tests get values only, "
                    "a crash or a timeout costs one test; your code can read and write whatever you can")
        return "isolation: none (the learner's code ran in the tests' own process)"


def course_mounts() -> list[Path]:
    """The course folders the worker reads: the package, and the untouched exercises (stand-ins
    for a missing file). The answer key (solutions/) is left out: learner code cannot read it."""
    return [p for p in (ROOT / "andrea_course", ROOT / "exercises") if p.is_dir()]


def python_mounts() -> list[Path]:
    """Python and its packages: the venv, the interpreter it points to, and every
    site-packages folder on sys.path (never another sys.path entry: the tests' folder is one)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages(),
             *(p for p in sys.path if {"site-packages", "dist-packages"} & set(Path(p).parts))}
    return sorted(Path(p) for p in paths if p and os.path.isdir(p))


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    return args


def _ro_binds(paths) -> list[str]:
    """--ro-bind for each path (innermost-first duplicates dropped), with its parent folders
    made world-traversable inside (bwrap would copy /root's 0700 and lock the user out)."""
    paths = sorted({Path(p).resolve() for p in paths})
    kept = [p for p in paths if not any(q != p and q in p.parents for q in paths)]
    args, made = [], {Path("/"), Path("/usr"), Path("/tmp")}
    for p in kept:
        if p == Path("/usr") or Path("/usr") in p.parents:
            continue
        for parent in reversed(p.parents):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", str(p), str(p)]
    return args


def bwrap() -> str | None:
    return shutil.which("bwrap")


class Sandbox:
    """bubblewrap's command line for one sandbox, and starting a command in it."""

    def __init__(self, limits: Limits = Limits(), *, submission: str | os.PathLike,
                 uid: int | None = None, cgroup: "Cgroup | None" = None):
        self.limits, self.submission, self.cgroup = limits, Path(submission), cgroup
        self.as_root = os.geteuid() == 0
        if self.as_root and uid is None:
            raise ValueError("a root grader needs an unprivileged uid for the sandbox")
        self.uid = uid if self.as_root else os.getuid()

    def argv(self, command: list[str], info_fd: int | None = None) -> list[str]:
        """bwrap's command line running `command`; with info_fd, bwrap writes its first process's
        pid there as JSON ({"child-pid": N}: the process whose namespaces warm.py joins)."""
        exe = bwrap()
        if exe is None:
            raise OSError("bubblewrap (bwrap) is not installed")
        args = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        if not self.as_root:
            args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        # The private tmpfs first: binds of paths under /tmp (a venv there, say) go on top of it.
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(self.limits.disk), "--perms", "1777", "--tmpfs", "/tmp",
                 "--size", str(self.limits.disk), "--perms", "1777", "--tmpfs", "/dev/shm"]
        args += _system_mounts()
        args += _ro_binds([*python_mounts(), *course_mounts()])
        args += ["--ro-bind", str(self.submission), SANDBOX_ROOT, "--chdir", "/tmp"]
        if self.as_root:      # privileged bwrap: keep only what the worker needs to drop to `uid`
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                     "--cap-add", "CAP_SETPCAP"]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        return args + ["--", *command]

    def popen(self, command: list[str], info_fd: int | None = None, **kwargs) -> subprocess.Popen:
        """Start `command` inside; with a cgroup, bwrap enters it before it starts anything."""
        argv = self.argv(command, info_fd)
        if self.cgroup is not None:
            argv = self.cgroup.enter_then(argv)
        return subprocess.Popen(argv, start_new_session=True, **kwargs)


class Container:
    """The container tier (see the module docstring): no namespaces; the worker's parent is
    started as root in `box`/home and drops to `uid` itself (confine.py) before it imports anything.

    make_box() (root) makes the run's folder: `box`/submission (root-owned, readable by the
    uid's group only: other uids, classmates in a batch included, cannot read it) and `box`/home
    (the uid's, mode 0700: its only writable folder of its own). cleanup() ends every process of
    the uid, removes the box, and removes what the uid left in /tmp, /var/tmp and /dev/shm."""

    def __init__(self, limits: Limits = Limits(), *, box: str | os.PathLike, uid: int,
                 cgroup: "Cgroup | None" = None):
        if os.geteuid() != 0:
            raise ValueError("the container tier needs a root grader (it runs the worker as another uid)")
        self.limits, self.box, self.uid, self.cgroup = limits, Path(box), int(uid), cgroup

    @staticmethod
    def make_box(submission: Path, uid: int) -> Path:
        box = Path(tempfile.mkdtemp(prefix="andrea-box-"))
        os.chmod(box, 0o711)                                 # traversable, not listable
        sub, home = box / "submission", box / "home"
        sub.mkdir(mode=0o750)
        for f in submission.iterdir():
            if f.is_file() and not f.is_symlink():
                shutil.copyfile(f, sub / f.name)
                os.chown(sub / f.name, 0, uid)
                os.chmod(sub / f.name, 0o640)
        os.chown(sub, 0, uid)
        os.chmod(sub, 0o750)
        home.mkdir(mode=0o700)
        os.chown(home, uid, uid)
        return box

    def popen(self, command: list[str], **kwargs) -> subprocess.Popen:
        argv = list(command)
        if self.cgroup is not None:
            argv = self.cgroup.enter_then(argv)
        return subprocess.Popen(argv, start_new_session=True, cwd=self.box / "home", **kwargs)

    @staticmethod
    def cleanup(box: str | os.PathLike | None, uid: int) -> list[str]:
        """End the uid's processes, remove the box and the uid's files in the shared temp
        folders; returns what could not be cleaned (empty when all was)."""
        left = []
        if not kill_uid(uid):
            left.append(f"processes of uid {uid} survived")
        if box is not None:
            shutil.rmtree(box, ignore_errors=True)
            if Path(box).exists():
                left.append(f"{box} could not be removed")
        sweep_uid(uid)
        return left


def pids_of(uid: int) -> list[int]:
    """The living processes of `uid`. A zombie is left out: it runs nothing, and it stays until its
    parent reaps it (a grader that became a subreaper adopts a killed daemon's last pid)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid and not _dead(entry):
                    out.append(int(entry))
            except OSError:
                pass
    return out


DEAD = ("Z", "X")          # a process's state once it has ended: a zombie, not yet reaped, or dead


def proc_stat(pid: int | str) -> tuple[str, int] | None:
    """(state, parent pid) of a process from /proc/<pid>/stat; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    state, ppid = stat[stat.rfind(b")") + 2:].split()[:2]      # after "pid (name) "
    return state.decode(), int(ppid)


def _dead(pid: str) -> bool:
    """Whether a process has ended (killed, not yet reaped) or is gone."""
    found = proc_stat(pid)
    return found is None or found[0] in DEAD


def kill_uid(uid: int, timeout: float = 10.0) -> bool:
    """SIGKILL every process of `uid` (root only): a child becomes the uid and calls kill(-1),
    which reaches all of them at once (a pid-hopping daemon cannot outrun it); repeated until
    none is left. True when none is."""
    if uid == 0 or os.geteuid() != 0:
        raise ValueError("kill_uid needs a root grader and an unprivileged uid")
    end = time.monotonic() + timeout
    while pids_of(uid):
        if time.monotonic() > end:
            return False
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    return True


SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")


def sweep_uid(uid: int, places=SHARED_TEMP) -> list[str]:
    """Remove what `uid` left where everyone may write: entries it owns, looked for in the
    shared temp folders and in their world-writable subfolders (it can write nowhere else)."""
    removed = []
    todo = [Path(p) for p in places if os.path.isdir(p)]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                info = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid == uid:
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    try:
                        os.unlink(e.path)
                    except OSError:
                        pass
                removed.append(e.path)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                todo.append(Path(e.path))
    return removed


# ----------------------------------------------------------------------------- probes
_PROBED: dict[tuple, str | None] = {}


def probe(submission: str | os.PathLike, uid: int | None) -> str | None:
    """None when a bubblewrap sandbox starts here (and its worker confines itself), else why
    not (one line); a success is remembered."""
    key = ("sandbox", uid is None)
    if _PROBED.get(key, "no") is None:
        return None
    _PROBED[key] = why = _probe_sandbox(submission, uid)
    return why


def _probe_sandbox(submission, uid) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"sandboxing needs Linux namespaces (this is {sys.platform})"
    if bwrap() is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    try:
        box = Sandbox(submission=submission, uid=uid)
        iso = Isolation("sandbox", uid=box.uid if box.as_root else None)
        done = subprocess.run(box.argv(probe_command(iso)), capture_output=True, text=True, timeout=120)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"bubblewrap could not start a sandbox here: {why}"
    return _read_probe(done.stdout, box.uid if box.as_root else None, {})


def probe_container(uid: int, forbidden: dict[str, str], limits: Limits = Limits()) -> str | None:
    """None when the container tier works here: a process that confines itself to `uid`
    finds and reads torch and the course and can reach none of `forbidden` ({path: "read" or "write"}:
    the hidden tests, the results' folder); else why not (one line)."""
    if os.geteuid() != 0:
        return "the container tier needs a root grader"
    iso = Isolation("container", uid=uid, box="/", limits=limits)
    try:
        done = subprocess.run(probe_command(iso, forbidden), capture_output=True, text=True, timeout=120,
                              cwd="/", env=worker_env("/"), start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the worker could not start as uid {uid}: {exc}"
    finally:
        if os.geteuid() == 0:
            kill_uid(uid)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"a worker running as uid {uid} could not start Python, torch and the course ({why}): install "                f"them where every user can read them (docs/gradescope/setup.sh does)"
    return _read_probe(done.stdout, uid, forbidden)


PROBE = """
import importlib.util, json, os, sys
cfg = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("andrea_course_confine", cfg["confine"])
confine = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(confine)
missing = confine.confine(cfg["worker"])
sys.path.insert(0, cfg["root"])
for name in ("torch", "andrea_course"):          # found and readable, not imported (seconds)
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise ImportError(f"No module named {name!r}")
    open(spec.origin, "rb").close()
    os.listdir(os.path.dirname(spec.origin))
for path in (os.__file__, json.__file__, os.path.realpath(sys.executable)):   # the standard library, Python
    open(path, "rb").close()
os.listdir(os.path.dirname(os.__file__))
reached = []
for path, how in cfg["forbidden"].items():
    try:
        if how == "write":
            fd = os.open(os.path.join(path, ".andrea-probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(os.path.join(path, ".andrea-probe"))
        else:
            os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
        reached.append(path)
    except OSError:
        pass
print(json.dumps({"uid": os.getuid(), "missing": missing, "reached": reached}))
"""


def probe_command(iso: Isolation, forbidden: dict | None = None, python: str | None = None) -> list[str]:
    cfg = {"confine": str(Path(__file__).with_name("confine.py")), "root": str(ROOT),
           "worker": iso.worker_config(), "forbidden": forbidden or {}}
    return [python or sys.executable, "-I", "-c", PROBE, json.dumps(cfg)]


def _read_probe(stdout: str, uid: int | None, forbidden: dict) -> str | None:
    try:
        found = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"the worker's check printed nothing readable ({stdout[-200:]!r})"
    if uid is not None and found.get("uid") != uid:
        return f"the worker did not run as uid {uid}"
    if found.get("reached"):
        paths = ", ".join(found["reached"])
        return (f"the learner's code could reach {paths} ({' or '.join(sorted(set(forbidden[p] for p in found['reached'])))}"
                f" as uid {uid}): make the hidden tests and the results folder root's only (chmod go-rwx)")
    if found.get("missing") and uid is not None and any("seccomp" not in m for m in found["missing"]):
        return "the worker could not confine itself: " + "; ".join(found["missing"])
    return None


def worker_env(home: str) -> dict:
    """The worker's whole environment: nothing of the grader's but the locale and Triton's mode."""
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TRITON_INTERPRET") if k in os.environ}
    env.update(HOME=home, TMPDIR=home, USER="learner", OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    return env


# ----------------------------------------------------------------------------- cgroups
class Cgroup:
    """A memory and a pids cgroup for one grading run (v2, or v1's two hierarchies), made by
    the root grader; `kill()` ends every process in it; `remove()` deletes it."""

    def __init__(self, dirs: dict[str, Path]):
        self.dirs = dirs                   # {"memory": dir, "pids": dir} (v2: the same dir twice)

    @staticmethod
    def parents() -> dict[str, Path]:
        """{controller: the folder this process's cgroups of it are made in} (v2: "" only)."""
        base = Path("/sys/fs/cgroup")
        try:
            own = {line.split(":", 2)[1]: line.split(":", 2)[2].strip()
                   for line in Path("/proc/self/cgroup").read_text().splitlines()}
        except (OSError, IndexError):
            return {}
        if (base / "cgroup.controllers").exists():
            return {"": base / own.get("", "/").lstrip("/")}
        return {ctl: base / ctl / own.get(ctl, "/").lstrip("/") for ctl in ("memory", "pids")}

    @classmethod
    def make(cls, name: str, limits: Limits) -> "Cgroup | None":
        """None when this process cannot make one (not root, no controllers, read-only /sys)."""
        parents = cls.parents() if os.geteuid() == 0 else {}
        if not parents:
            return None
        dirs: dict[str, Path] = {}
        try:
            if "" in parents:                                           # v2
                d = parents[""] / name
                d.mkdir()
                dirs = {"memory": d, "pids": d}
                (d / "memory.max").write_text(str(limits.memory))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(limits.processes))
            else:                                                       # v1
                for ctl in ("memory", "pids"):
                    d = parents[ctl] / name
                    d.mkdir()
                    dirs[ctl] = d
                (dirs["memory"] / "memory.limit_in_bytes").write_text(str(limits.memory))
                if (dirs["memory"] / "memory.memsw.limit_in_bytes").exists():
                    try:
                        (dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
                    except OSError:
                        pass
                (dirs["pids"] / "pids.max").write_text(str(limits.processes))
        except OSError:
            Cgroup(dirs).remove()
            return None
        return cls(dirs)

    def procs_files(self) -> list[str]:
        return sorted({str(d / "cgroup.procs") for d in self.dirs.values()})

    def enter_then(self, argv: list[str]) -> list[str]:
        """argv run by a shell that first moves itself into the cgroup (then execs argv)."""
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 111; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *self.procs_files(), "--", *argv]

    def pids(self) -> set[int]:
        out = set()
        for f in self.procs_files():
            try:
                out |= {int(p) for p in Path(f).read_text().split()}
            except OSError:
                pass
        return out

    def kill(self, timeout: float = 10.0) -> bool:
        """SIGKILL everything in the cgroup until it is empty; True when it is."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        return not self.pids()

    def remove(self) -> None:
        for d in set(self.dirs.values()):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)

    def describe(self) -> str:
        return ", ".join(sorted({str(d) for d in self.dirs.values()}))


# ----------------------------------------------------------------------------- one grading run's tier
@contextlib.contextmanager
def tier_for(tier: str | None, staged: Path, *, name: str, uid: int | None, limits: Limits, timeout: float,
             notes: list[str]):
    """One grading run's tier, set up and taken down (the runner's): yields (its Isolation, the
    folder its worker reads the submission from), (None, `staged`) where no tier runs. The sandbox
    and container tiers get a cgroup named `name` (where this process can make one), the container
    tier its box (Container.make_box); on the way out, whatever happened, every process in them is
    killed and they are removed, and what could not be is a WARNING appended to `notes`."""
    walled = tier in ("sandbox", "container")
    cgroup, box = Cgroup.make(name, limits) if walled else None, None
    try:
        box = Container.make_box(staged, uid) if tier == "container" else None
        iso = None if tier is None else Isolation(
            tier, timeout=timeout, limits=limits, uid=uid if walled else None, box=str(box) if box else None,
            cgroup={k: str(v) for k, v in cgroup.dirs.items()} if cgroup else None)
        yield iso, box / "submission" if box is not None else staged
    finally:
        if cgroup is not None and not cgroup.kill():
            notes.append(f"WARNING: processes of the sandbox outlived it ({cgroup.describe()})")
        left = Container.cleanup(box, uid) if tier == "container" else []
        if left:
            notes.append("WARNING: " + "; ".join(left))
        if cgroup is not None:
            cgroup.remove()
