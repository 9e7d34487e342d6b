"""A simulated Docker-default container, as Gradescope runs its autograder in: root without
CAP_SYS_ADMIN (Docker's default capabilities only), a seccomp filter refusing unshare, setns,
mount and clone with namespace flags, a read-only /sys (so no cgroup can be made), its own pid,
IPC and UTS namespaces, the machine's network, and temp folders of its own (/tmp, /var/tmp,
/dev/shm start empty and vanish with it, as a container's do: what an earlier, killed run left in
this machine's /tmp is not seen, and nothing the grader leaves outlives the container unseen).
Built with bubblewrap from a root shell:

    argv, keep = docker_default(["bash", "run_autograder"], readable=[venv, course], writable=[bundle])
    subprocess.run(argv, pass_fds=keep)

`readable`: paths that the container's image would have where every user can read them
(Gradescope's images install Python in /usr; here it may sit under /root, mode 0700): each
closed parent folder is replaced, inside, by an open one holding only the way to that path.
`writable`: paths the container shares with this machine (a bind mount, as `docker run -v`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from andrea_course.worker import seccomp
from andrea_course.worker.tiers import SHARED_TEMP

DOCKER_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
               "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
               "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")


def _openings(paths) -> dict[Path, set[str]]:
    """{a closed folder (no search permission for others): the names under it on the way to a path}."""
    out: dict[Path, set[str]] = {}
    for p in map(lambda q: Path(q).resolve(), paths):
        for parent in reversed(p.parents):
            if parent == Path("/"):
                continue
            if not os.stat(parent).st_mode & 0o001:
                out.setdefault(parent, set()).add(p.relative_to(parent).parts[0])
                break
    return out


def _in_temp(path: Path) -> bool:
    return any(path == Path(t) or Path(t) in path.parents for t in SHARED_TEMP)


def docker_default(command: list[str], readable=(), writable=(), env: dict | None = None
                   ) -> tuple[list[str], tuple[int, ...]]:
    """(bwrap's argv, the descriptors to pass: the seccomp program's)."""
    exe = shutil.which("bwrap")
    if exe is None or os.geteuid() != 0:
        raise OSError("the simulated container needs bubblewrap and root")
    arch = seccomp.machine()
    if arch is None:
        raise OSError("no seccomp table for this machine")
    program = tempfile.TemporaryFile()
    program.write(seccomp.program(seccomp.DOCKER_DEFAULT, arch))
    program.seek(0)
    fd = os.dup(program.fileno())
    program.close()
    args = [exe, "--bind", "/", "/", "--ro-bind", "/sys", "/sys", "--dev-bind", "/dev", "/dev",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "gradescope", "--proc", "/proc",
            "--die-with-parent"]
    for temp in SHARED_TEMP:
        args += ["--perms", "1777", "--tmpfs", temp]
    for folder, names in sorted(_openings(readable).items()):
        args += ["--perms", "0755", "--tmpfs", str(folder)]
        for name in sorted(names):
            args += ["--bind", str(folder / name), str(folder / name)]
    for path in map(lambda q: Path(q).resolve(), readable):
        if _in_temp(path):                      # hidden by the container's own temp folders
            for parent in reversed(path.parents):   # the way there open to every user, as in an image
                if _in_temp(parent) and parent not in map(Path, SHARED_TEMP):
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", str(path), str(path)]
    for path in map(lambda q: Path(q).resolve(), writable):
        args += ["--bind", str(path), str(path)]
    args += ["--cap-drop", "ALL"]
    for cap in DOCKER_CAPS:
        args += ["--cap-add", cap]
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    # Docker also empties the capability bounding set of everything but its defaults
    bounding = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in DOCKER_CAPS)])
    args += ["--seccomp", str(fd), "--", shutil.which("setpriv") or "/usr/bin/setpriv",
             f"--bounding-set={bounding}", "--", *command]
    return args, (fd,)
