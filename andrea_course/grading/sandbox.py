"""The learner's sandbox: Linux namespaces (bubblewrap), an unprivileged user, limits.

    limits = Limits()                                  # memory, processes, files, disk, CPU time
    box = Sandbox(limits, uid=uid, cgroup=cgroup)      # uid: only when the grader is root
    proc = box.popen([python, ...], pass_fds=(fd,))    # the command, inside the sandbox

What one sandbox is (everything the learner's code can reach):
- its own pid namespace: it sees only its own processes, cannot signal the grader, and when its
  first process dies (bwrap's --die-with-parent: when the grader dies) the kernel kills the rest;
- no network (its own empty net namespace), its own IPC and UTS namespaces;
- a fresh root filesystem holding, read-only, only the system's /usr (and /lib, /bin), Python,
  the installed packages and the course folders the worker needs (`course_mounts`), plus the
  submission's files at /submission; writable: a private /tmp and /dev/shm (tmpfs of
  `limits.disk` bytes each), gone with the sandbox's mount namespace;
- an unprivileged user: as root, the grader starts bwrap privileged (no user namespace, so it
  can bind paths only root can read) and the command drops to `uid` with setpriv before Python
  starts (no capabilities, no_new_privs); run as another user, bwrap maps that user onto itself
  in a user namespace;
- limits: memory and processes for the whole sandbox when the grader can make a cgroup
  (Cgroup, made by the runner), else per process (RLIMIT_AS) and per user (RLIMIT_NPROC);
  open files, file size and CPU time per process (set by the worker's zygote, isolated.py).
"""
from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..paths import ROOT

UID_BASE = 2_000_000_000          # sandbox uids (root grader): UID_BASE + the grading run's pid
SANDBOX_ROOT = "/submission"      # where the submission's files appear inside


@dataclass(frozen=True)
class Limits:
    memory: int = 6 << 30          # bytes: the whole sandbox (cgroup), else each process (RLIMIT_AS)
    processes: int = 256           # the whole sandbox (cgroup), else the sandbox user (RLIMIT_NPROC)
    open_files: int = 1024         # per process
    disk: int = 512 << 20          # bytes: /tmp and /dev/shm each; also the largest file
    cpu_seconds: int = 3600        # per process (the per-test and total timeouts come first)

    def as_dict(self) -> dict:
        return asdict(self)


def course_mounts() -> list[Path]:
    """The course folders the worker reads: the package, and the untouched exercises (stand-ins
    for a missing file). The answer key (solutions/) is left out: learner code cannot read it."""
    return [p for p in (ROOT / "andrea_course", ROOT / "exercises") if p.is_dir()]
    # While the worker still needs the reference, adding  ROOT / "solutions"  here
    # would make it readable by every submission.


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

    def argv(self, command: list[str]) -> list[str]:
        exe = bwrap()
        if exe is None:
            raise OSError("bubblewrap (bwrap) is not installed")
        args = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        if not self.as_root:
            args += ["--unshare-user", "--disable-userns"]
        # The private tmpfs first: binds of paths under /tmp (a venv there, say) go on top of it.
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(self.limits.disk), "--perms", "1777", "--tmpfs", "/tmp",
                 "--size", str(self.limits.disk), "--perms", "1777", "--tmpfs", "/dev/shm"]
        args += _system_mounts()
        args += _ro_binds([*python_mounts(), *course_mounts()])
        args += ["--ro-bind", str(self.submission), SANDBOX_ROOT, "--chdir", "/tmp"]
        if self.as_root:      # privileged bwrap: keep only what setpriv needs to drop to `uid`
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                     shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={self.uid}",
                     f"--regid={self.uid}", "--clear-groups", "--no-new-privs"]
        return args + ["--", *command]

    def popen(self, command: list[str], **kwargs) -> subprocess.Popen:
        """Start `command` inside; with a cgroup, bwrap enters it before it starts anything."""
        argv = self.argv(command)
        if self.cgroup is not None:
            argv = self.cgroup.enter_then(argv)
        return subprocess.Popen(argv, start_new_session=True, **kwargs)

    def describe(self) -> str:
        who = f"uid {self.uid} (not root)" if self.as_root else "your own uid, in a user namespace"
        mem = (f"{self.limits.memory >> 20} MiB of memory and {self.limits.processes} processes for "
               f"the whole sandbox (cgroup)" if self.cgroup else
               f"{self.limits.memory >> 20} MiB of address space per process and "
               f"{self.limits.processes} processes per user (no cgroup available)")
        return (f"isolation: bubblewrap (pid, network, IPC, UTS and mount namespaces) as {who}; "
                f"course and Python read-only, the answer key not mounted; {mem}; "
                f"/tmp and /dev/shm {self.limits.disk >> 20} MiB each")


_PROBED: dict[bool, str | None] = {}


def probe(submission: str | os.PathLike, uid: int | None) -> str | None:
    """None when a sandbox starts here, else why not (one line); a success is remembered."""
    if _PROBED.get(uid is None, "no") is None:
        return None
    _PROBED[uid is None] = why = _probe(submission, uid)
    return why


def _probe(submission, uid) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"sandboxing needs Linux namespaces (this is {sys.platform})"
    if bwrap() is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    try:
        box = Sandbox(submission=submission, uid=uid)
        done = subprocess.run(box.argv([sys.executable, "-I", "-c", "import os; print(os.getuid())"]),
                              capture_output=True, text=True, timeout=60)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"bubblewrap could not start a sandbox here: {why}"
    if box.as_root and done.stdout.strip() != str(uid):
        return f"the sandbox did not run as uid {uid}"
    return None


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
