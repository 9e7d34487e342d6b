"""What the learner's worker does to itself before it imports anything: limits, an unprivileged
user, no capabilities, no new privileges, and the seccomp filter.

    why_not = confine(config)     # {"uid", "limits", "seccomp", ...}; returns what could not be done

Run first thing by the worker parent (worker/server.py), in every isolation tier that has one, so
that torch, the course and the learner's code are all imported as the unprivileged user, under
the filter. Only the standard library: the worker parent loads this file by its path before the course
package (and torch) is imported.

Steps, in order (each one that applies; `confine` reports any that failed):
1. rlimits: core dumps off, largest file, open files, CPU seconds; data (memory written) per process and
   processes per user when no cgroup bounds the whole tier;
2. as root with a uid to become: the capability bounding set emptied (PR_CAPBSET_DROP), no
   supplementary groups, then real, effective and saved gid and uid set to it;
3. no_new_privs; not dumpable (learner processes cannot ptrace or read the worker parent's memory);
4. the parent-death signal: SIGKILL when the process that started it ends;
5. the seccomp filter (seccomp.py) refusing what learner code never needs.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

try:
    from . import seccomp
except ImportError:                        # loaded by path, before the package may be imported
    import importlib.util
    _spec = importlib.util.spec_from_file_location(
        "andrea_course_seccomp", os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py"))
    seccomp = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(seccomp)

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38


def _prctl(option: int, value: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc.prctl(option, value, 0, 0, 0)


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def set_limits(limits: dict, whole_tier_bounded: bool, own_uid: bool) -> None:
    wanted = {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: int(limits["disk"]),
              resource.RLIMIT_NOFILE: int(limits["open_files"]), resource.RLIMIT_CPU: int(limits["cpu_seconds"])}
    if not whole_tier_bounded:
        wanted[resource.RLIMIT_DATA] = int(limits["memory"])     # memory written, not address space mapped
        if own_uid:                # a uid of the worker's own; never the grading user's
            wanted[resource.RLIMIT_NPROC] = int(limits["processes"])
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def drop_to(uid: int) -> None:
    """As root: an empty bounding set, no groups, then uid (and gid = uid) for good."""
    for cap in range(_last_cap() + 1):
        if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() not in (22,):      # EINVAL: no such cap
            raise OSError(ctypes.get_errno(), f"the capability bounding set could not be emptied (cap {cap})")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid):
        raise OSError(f"the worker did not become uid {uid}")


def bounding_set() -> int:
    """The capability bounding set of this process (/proc/self/status CapBnd), as a bit mask."""
    try:
        with open("/proc/self/status") as f:
            return int(next(line.split()[1] for line in f if line.startswith("CapBnd:")), 16)
    except (OSError, StopIteration, ValueError):
        return -1


def confine(config: dict) -> list[str]:
    """Confine this process as `config` says ({"uid", "limits", "whole_tier_bounded",
    "seccomp": bool, "parent_death": bool}); returns the steps that could not be done (empty
    when all were). A failed uid drop raises: nothing may run as root."""
    missing = []
    uid = config.get("uid")
    set_limits(config["limits"], bool(config.get("whole_tier_bounded")), own_uid=uid is not None)
    if uid is not None and os.geteuid() == 0:
        drop_to(int(uid))
    if uid is not None and os.geteuid() == 0:
        raise OSError("the worker is still root")
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        missing.append("no_new_privs")
    _prctl(PR_SET_DUMPABLE, 0)
    if config.get("parent_death"):
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if bounding_set() not in (0, -1):
        if uid is None and os.geteuid() != 0:          # unprivileged: empty it if allowed, else say so
            for cap in range(_last_cap() + 1):
                _prctl(PR_CAPBSET_DROP, cap)
        if bounding_set() not in (0, -1):
            missing.append("an empty capability bounding set")
    if config.get("seccomp"):
        why = seccomp.install(seccomp.LEARNER)
        if why:
            missing.append(f"the seccomp filter ({why})")
    return missing
