"""A seccomp filter, assembled here as classic BPF and loaded with prctl (no library needed).

    why_not = install(LEARNER)          # None once loaded; else one line saying why it could not be

The learner's worker loads LEARNER before it imports anything of the learner's: system calls that
graded code never needs fail with EPERM (EACCES for a socket that is not a Unix one, ENOSYS for
clone3, so that libc falls back to clone, whose flags a filter can read):

- new namespaces and entering others: unshare, setns, clone with any CLONE_NEW* flag (nested user
  namespaces included);
- the kernel's more dangerous doors: ptrace, process_vm_readv/writev, pidfd_getfd, kcmp, bpf,
  perf_event_open, userfaultfd, io_uring, keyctl/add_key/request_key, module and kexec loading;
- the machine's state: mount and the new mount API, pivot_root, chroot, swap, reboot, clocks,
  host names, quotas, acct, syslog;
- the network: sockets of any family but AF_UNIX.

A policy is data (Policy); `program(policy, arch)` gives the bytes of the filter, so tests read it
and the course's CI builds a Docker-like filter from the same assembler. Architectures: x86_64 and
aarch64 (elsewhere install() says so and loads nothing). System call numbers: the kernel's
unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64); tests check them against libseccomp
where it is installed.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass

# ----- the system calls, by architecture
_X86_64 = {
    "ptrace": 101, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "quotactl": 179, "acct": 163, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "keyctl": 250, "add_key": 248,
    "request_key": 249, "unshare": 272, "setns": 308, "kexec_load": 246, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "process_vm_readv": 310, "process_vm_writev": 311, "syslog": 103,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "vhangup": 153, "lookup_dcookie": 212, "fanotify_init": 300, "kcmp": 312,
    "pidfd_getfd": 438, "iopl": 172, "ioperm": 173,
    "clone": 56, "clone3": 435, "socket": 41, "socketpair": 53,
}
_AARCH64 = {
    "ptrace": 117, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "swapon": 224,
    "swapoff": 225, "reboot": 142, "sethostname": 161, "setdomainname": 162, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "quotactl": 60, "acct": 89, "settimeofday": 170,
    "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "keyctl": 219, "add_key": 217,
    "request_key": 218, "unshare": 97, "setns": 268, "kexec_load": 104, "kexec_file_load": 294,
    "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "open_by_handle_at": 265,
    "name_to_handle_at": 264, "process_vm_readv": 270, "process_vm_writev": 271, "syslog": 116,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "vhangup": 58, "lookup_dcookie": 18, "fanotify_init": 262, "kcmp": 272,
    "pidfd_getfd": 438,
    "clone": 220, "clone3": 435, "socket": 198, "socketpair": 199,
}
# audit architecture, syscall table, numbers at or above which a call belongs to another ABI (x32)
ARCHES = {"x86_64": (0xC000003E, _X86_64, 0x40000000), "aarch64": (0xC00000B7, _AARCH64, None)}
SECCOMP_DATA_NR, SECCOMP_DATA_ARCH, SECCOMP_DATA_ARG0 = 0, 4, 16       # offsets in struct seccomp_data
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AF_UNIX = 1

NEVER_NEEDED = (
    "unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "mount", "umount2", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "pivot_root", "chroot", "swapon", "swapoff", "reboot", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "quotactl", "acct",
    "syslog", "vhangup", "lookup_dcookie", "fanotify_init", "open_by_handle_at", "name_to_handle_at",
    "iopl", "ioperm")


@dataclass(frozen=True)
class Policy:
    """What a filter refuses: `deny` (EPERM), clone with namespace flags (EPERM), clone3 (ENOSYS:
    its flags sit in memory a filter cannot read), sockets other than AF_UNIX (EACCES)."""
    deny: tuple[str, ...] = NEVER_NEEDED
    clone_namespaces: bool = True
    unix_sockets_only: bool = True


LEARNER = Policy()
# What Docker's default profile refuses a root process without CAP_SYS_ADMIN (the part that stops
# bubblewrap): the course's CI builds a simulated Gradescope container with it.
DOCKER_DEFAULT = Policy(deny=("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
                              "fsopen", "fsmount", "fspick", "fsconfig", "mount_setattr"),
                        unix_sockets_only=False)

# ----- classic BPF
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000


def _ret_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


def program(policy: Policy, arch: str) -> bytes:
    """The filter as the kernel reads it: struct sock_filter[] (code, jt, jf, k), little-endian."""
    audit, table, foreign_from = ARCHES[arch]
    missing = [n for n in policy.deny if n not in table]
    deny = [table[n] for n in policy.deny if n in table]
    if missing and arch == "x86_64":
        raise ValueError(f"no system call number for {missing} on {arch}")
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets
    ops: list[tuple[int, str | None, str | None, int]] = [
        (_LD_ABS, None, None, SECCOMP_DATA_ARCH),
        (_JEQ, "arch_ok", "kill", audit),
    ]
    labels: dict[str, int] = {}

    def label(name):
        labels[name] = len(ops)

    label("arch_ok")
    ops.append((_LD_ABS, None, None, SECCOMP_DATA_NR))
    if foreign_from is not None:
        ops.append((_JGE, "kill", None, foreign_from))
    if policy.clone_namespaces:
        ops.append((_JEQ, "clone", None, table["clone"]))
        ops.append((_JEQ, "enosys", None, table["clone3"]))
    if policy.unix_sockets_only:
        ops.append((_JEQ, "socket", None, table["socket"]))
        ops.append((_JEQ, "socket", None, table["socketpair"]))
    for nr in deny:
        ops.append((_JEQ, "eperm", None, nr))
    ops.append((_RET, None, None, RET_ALLOW))
    if policy.clone_namespaces:
        label("clone")
        ops.append((_LD_ABS, None, None, SECCOMP_DATA_ARG0))       # the flags' low 32 bits
        ops.append((_JSET, "eperm", None, CLONE_NAMESPACES))
        ops.append((_RET, None, None, RET_ALLOW))
    if policy.unix_sockets_only:
        label("socket")
        ops.append((_LD_ABS, None, None, SECCOMP_DATA_ARG0))       # the address family
        ops.append((_JEQ, None, "eacces", AF_UNIX))
        ops.append((_RET, None, None, RET_ALLOW))
        label("eacces")
        ops.append((_RET, None, None, _ret_errno(errno.EACCES)))
    label("eperm")
    ops.append((_RET, None, None, _ret_errno(errno.EPERM)))
    label("enosys")
    ops.append((_RET, None, None, _ret_errno(errno.ENOSYS)))
    label("kill")
    ops.append((_RET, None, None, RET_KILL_PROCESS))
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(ops):
        offsets = []
        for target in (jt, jf):
            rel = 0 if target is None else labels[target] - i - 1
            if not 0 <= rel <= 255:
                raise ValueError("a seccomp jump out of range")
            offsets.append(rel)
        out += struct.pack("<HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


def machine() -> str | None:
    """This machine's architecture as ARCHES names it, or None when the filter has no table for it."""
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    return arch if arch in ARCHES and struct.calcsize("P") == 8 else None


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install(policy: Policy = LEARNER) -> str | None:
    """Load the filter into this process (and every process it starts); sets no_new_privs first,
    as the kernel requires of an unprivileged process. None when loaded, else why not."""
    if not os.uname().sysname == "Linux":
        return f"seccomp needs Linux (this is {os.uname().sysname})"
    arch = machine()
    if arch is None:
        return f"no seccomp filter for this architecture ({platform.machine()})"
    code = program(policy, arch)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    except (OSError, AttributeError) as exc:
        return f"prctl is not available ({exc})"
    if prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        return f"no_new_privs could not be set ({os.strerror(ctypes.get_errno())})"
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        return f"the seccomp filter could not be loaded ({os.strerror(ctypes.get_errno())})"
    return None


def describe(policy: Policy = LEARNER) -> str:
    return ("a seccomp filter refusing new namespaces (unshare, setns, namespace clones), ptrace, mount, "
            "keyctl, bpf, io_uring, module loading" + (" and non-Unix sockets" if policy.unix_sockets_only else ""))
