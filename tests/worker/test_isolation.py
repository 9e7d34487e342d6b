"""The walls around the learner's worker (andrea_course/worker/tiers.py, confine.py,
seccomp.py): the seccomp filter's numbers are the kernel's and it refuses what learner code never
needs (new namespaces, nested user namespaces included, ptrace, mount, keyctl, bpf, sockets other
than Unix ones) and nothing the course needs; the worker in the sandbox has an empty capability
bounding set, no_new_privs and the filter, whether its parent was started in it or forked from a
batch's warm process and then confined (and two students forked from one share nothing); the runner picks the strongest tier the machine
allows and refuses only where nothing keeps the hidden tests and results out of reach; the
container tier's clean-up leaves no process and no file of its uid.

The container tier itself, end to end, runs in tests/grading/test_gradescope.py (TestGradescopeBundle, in a
simulated Docker-default container). Tests that need root or bubblewrap say so and skip."""
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import socket
import threading
import time

import pytest
import torch

from andrea_course.grading import staging
from andrea_course.paths import ROOT
from andrea_course.worker import seccomp
from andrea_course.worker.client import IsolatedStudent
from andrea_course.worker.tiers import UID_BASE, Container, Isolation, Limits, kill_uid, pids_of, sweep_uid
from andrea_course.worker.warm import WarmStart
from grading_helpers import make_submission, need_sandbox

needs_linux = pytest.mark.skipif(seccomp.machine() is None, reason="a seccomp table for this machine")


def test_the_filters_numbers_are_the_kernels():
    """Each system call number in the filter's tables, against libseccomp's resolver."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed (the filter does not need it; this check does)")
    lib = ctypes.CDLL(name)
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    for arch, (audit, table, _) in seccomp.ARCHES.items():
        for call, nr in table.items():
            assert lib.seccomp_syscall_resolve_name_arch(audit, call.encode()) == nr, (arch, call)


def test_policies_assemble_for_every_architecture():
    for arch in seccomp.ARCHES:
        for policy in (seccomp.LEARNER, seccomp.DOCKER_DEFAULT):
            code = seccomp.program(policy, arch)
            assert len(code) % 8 == 0 and 10 < len(code) // 8 < 255


def _in_a_child(body) -> dict:
    """Run body() in a forked child (a filter cannot be unloaded) and return what it returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            out = json.dumps(body())
        except BaseException as exc:       # noqa: BLE001
            out = json.dumps({"error": repr(exc)})
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def _errno(call) -> int:
    ctypes.set_errno(0)
    return 0 if call() == 0 else ctypes.get_errno()


@needs_linux
def test_the_filter_refuses_what_learner_code_never_needs():
    libc = ctypes.CDLL(None, use_errno=True)
    table = seccomp.ARCHES[seccomp.machine()][1]
    CLONE_NEWUSER, SIGCHLD = 0x10000000, 17

    def body():
        why = seccomp.install(seccomp.LEARNER)
        found = {"installed": why}
        found["unshare user"] = _errno(lambda: libc.unshare(CLONE_NEWUSER))
        found["unshare mount"] = _errno(lambda: libc.unshare(0x00020000))
        found["clone user"] = _errno(lambda: libc.syscall(table["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
        found["clone3"] = _errno(lambda: libc.syscall(table["clone3"], 0, 0))
        found["setns"] = _errno(lambda: libc.setns(0, 0))
        found["ptrace"] = _errno(lambda: libc.ptrace(0, 0, 0, 0))
        found["mount"] = _errno(lambda: libc.mount(b"none", b"/mnt", b"tmpfs", 0, None))
        found["keyctl"] = _errno(lambda: libc.syscall(table["keyctl"], 0, 0, 0, 0, 0))
        found["bpf"] = _errno(lambda: libc.syscall(table["bpf"], 0, 0, 0))
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
            found["inet"] = 0
        except OSError as exc:
            found["inet"] = exc.errno
        # what learner code and the course do need
        a, b = socket.socketpair()
        a.close(), b.close()
        got = []
        t = threading.Thread(target=lambda: got.append(torch.ones(3).sum().item()))
        t.start(), t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        found["thread"] = got
        found["status"] = open("/proc/self/status").read()
        return found

    found = _in_a_child(body)
    assert found.get("installed") is None, found
    for call in ("unshare user", "unshare mount", "clone user", "setns", "ptrace", "mount", "keyctl", "bpf"):
        assert found[call] == errno.EPERM, (call, found[call])
    assert found["clone3"] == errno.ENOSYS and found["inet"] == errno.EACCES
    assert found["fork"] == 7 and found["thread"] == [3.0]
    assert "Seccomp:\t2" in found["status"] and "NoNewPrivs:\t1" in found["status"]


# A helper appended to the answer key's attention.py: what the worker can do, from inside.
CONFINEMENT = '''

def confinement():
    import os, socket, subprocess
    status = open("/proc/self/status").read()
    field = lambda name: status.split(name + ":")[1].split()[0]
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        inet = True
    except OSError:
        inet = False
    nested = subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode == 0
    return {"uid": os.getuid(), "CapBnd": int(field("CapBnd"), 16), "CapEff": int(field("CapEff"), 16),
            "NoNewPrivs": field("NoNewPrivs"), "Seccomp": field("Seccomp"), "inet": inet, "nested_userns": nested}
'''


@pytest.mark.parametrize("warm", [False, True], ids=["started", "forked from a batch's warm process"])
def test_the_sandboxed_worker_has_no_capabilities_no_new_privileges_and_the_filter(tmp_path, warm):
    """Inside bubblewrap: an empty bounding set, no_new_privs, the seccomp filter, no nested user
    namespace (`unshare -U` fails), no network socket, and (as root) a uid of its own; the same
    where the worker parent was forked from a batch's warm process (warm.py) and then confined."""
    if shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is needed to try a nested user namespace")
    uid = UID_BASE + 99 if os.geteuid() == 0 else None
    need_sandbox(tmp_path, uid)
    sub = make_submission(tmp_path / "sub")
    with open(sub / "attention.py", "a") as f:
        f.write(CONFINEMENT)
    starts = WarmStart() if warm else None
    student = IsolatedStudent(sub, isolation=Isolation("sandbox", uid=uid, timeout=60), warm=starts)
    try:
        student.begin_test()
        found = student.piece("attention", "confinement")()
        assert not warm or os.geteuid() != 0 or student.warm_pid is not None       # forked, not started
    finally:
        student.close()
        if starts is not None:
            starts.close()
    assert found["CapBnd"] == 0 and found["CapEff"] == 0, found
    assert found["NoNewPrivs"] == "1" and found["Seccomp"] == "2", found
    assert not found["nested_userns"] and not found["inet"], found
    if os.geteuid() == 0:
        assert found["uid"] == uid


# What a learner's code sees of its sandbox, and leaves in it (a helper appended to attention.py).
SEEN = '''

def seen(mark):
    import os, sys
    before = getattr(sys, "_andrea_mark", None)
    sys._andrea_mark = mark
    with open("/tmp/mark", "a") as f:
        f.write(mark)
    return {"root": sorted(os.listdir("/")), "pids": len([p for p in os.listdir("/proc") if p.isdigit()]),
            "fds": sorted(os.listdir("/proc/self/fd")), "host": os.uname().nodename, "before": before,
            "tmp": open("/tmp/mark").read(), "course": sys.modules["andrea_course"].__file__}
'''


def test_two_students_forked_from_one_warm_process_share_nothing(tmp_path):
    """A root grader's batch forks each student's sandboxed worker parent from one warm process: each
    sees only its own sandbox (its root, its pid namespace, no descriptor of the warm process), the
    course the grader runs, and nothing another student's code left in memory or in /tmp."""
    if os.geteuid() != 0:
        pytest.skip("the warm start is a root grader's")
    need_sandbox(tmp_path, UID_BASE + 97)
    cold, found = {}, {}
    starts = WarmStart()
    try:
        for name, uid, warm in (("cold", UID_BASE + 96, None), ("a", UID_BASE + 97, starts), ("b", UID_BASE + 98, starts)):
            sub = make_submission(tmp_path / name)
            with open(sub / "attention.py", "a") as f:
                f.write(SEEN)
            student = IsolatedStudent(sub, isolation=Isolation("sandbox", uid=uid, timeout=60), warm=warm)
            try:
                student.begin_test()
                (cold if warm is None else found)[name] = student.piece("attention", "seen")(name)
            finally:
                student.close()
    finally:
        starts.close()
    for name in ("a", "b"):
        assert found[name]["root"] == cold["cold"]["root"] and "submission" in found[name]["root"]
        assert found[name]["host"] == "sandbox" and found[name]["pids"] <= 6      # its own pid namespace
        assert len(found[name]["fds"]) == len(cold["cold"]["fds"]) and found[name]["course"] == cold["cold"]["course"]
        assert found[name]["before"] is None and found[name]["tmp"] == name
    assert cold["cold"]["course"].startswith(str(ROOT))


def test_a_warm_start_that_cannot_fork_leaves_the_worker_parent_started_as_before(tmp_path):
    """Where the batch's warm process cannot give a worker parent, one is started in the sandbox as
    without it, and the test sees no difference."""
    uid = UID_BASE + 95 if os.geteuid() == 0 else None
    need_sandbox(tmp_path, uid)

    class Broken:
        def spawn(self, *args):
            raise OSError("no warm process here")

    student = IsolatedStudent(make_submission(tmp_path / "sub"), isolation=Isolation("sandbox", uid=uid, timeout=60),
                              warm=Broken())
    try:
        student.begin_test()
        assert float(student.piece("attention", "softmax")(torch.zeros(1, 2)).sum()) == pytest.approx(1.0)
        assert student.warm_pid is None and student._plog is not None
    finally:
        student.close()


# ----------------------------------------------------------------------------- choosing a tier
def test_the_runner_chooses_the_strongest_tier_and_refuses_only_where_nothing_holds(monkeypatch, tmp_path):
    as_root = os.geteuid() == 0
    args = ("auto", tmp_path, UID_BASE if as_root else None, {}, Limits(), False)
    monkeypatch.setattr(staging, "probe", lambda *a: None)
    assert staging.choose_tier(*args) == ("sandbox", [])
    monkeypatch.setattr(staging, "probe", lambda *a: "bwrap: Creating new namespace failed: Operation not permitted")
    monkeypatch.setattr(staging, "probe_container", lambda *a: None)
    tier, why = staging.choose_tier(*args)
    assert tier == ("container" if as_root else None) and "Creating new namespace failed" in why[0]
    monkeypatch.setattr(staging, "probe_container", lambda *a: "the learner's code could reach /hidden")
    tier, why = staging.choose_tier(*args)
    assert tier is None and len(why) == 2
    assert staging.choose_tier("process", *args[1:]) == ((None if as_root else "process"),
                                                          (["--isolation process as root would run the learner's "
                                                            "code as root (a learner grading their own work passes "
                                                            "--own-work)"] if as_root else []))
    assert staging.choose_tier("process", *args[1:5], True) == ("process", [])


def test_isolation_is_one_configuration():
    iso = Isolation("container", uid=UID_BASE + 1, box="/tmp/box", timeout=5, limits=Limits(memory=1 << 30),
                    cgroup={"memory": "/sys/fs/cgroup/x"})
    assert Isolation.parse(iso.to_json()) == iso
    assert Isolation.parse("process", timeout=3).timeout == 3
    for bad in (dict(tier="jail"), dict(tier="sandbox", start="fork"), dict(tier="container"), dict(timeout=0)):
        with pytest.raises(ValueError):
            Isolation(**bad)
    for tier, words in (("sandbox", "namespaces"), ("container", "Not given here"), ("process", "your own work")):
        assert words in Isolation(tier, uid=1, box="/b").describe()


# ----------------------------------------------------------------------------- the container tier's clean-up
def test_the_container_tiers_cleanup_leaves_nothing_of_its_uid(tmp_path):
    """Processes of the uid (a pid-hopping daemon among them) and its files in the shared temp
    folders are gone after Container.cleanup; the box too."""
    if os.geteuid() != 0:
        pytest.skip("the container tier needs root")
    uid = UID_BASE + 98
    box = Container.make_box(tmp_path, uid)
    assert (box / "home").stat().st_uid == uid and (box / "submission").stat().st_mode & 0o007 == 0
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for place in ("/tmp", "/dev/shm"):
                with open(os.path.join(place, f"left-{uid}"), "w") as f:
                    f.write("x")
            os.makedirs(f"/tmp/dir-{uid}/sub")
            if os.fork() == 0:
                os.setsid()
                while True:                       # a new pid twenty times a second
                    time.sleep(0.05)
                    if os.fork() != 0:
                        os._exit(0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)
    assert pids_of(uid)
    assert Container.cleanup(box, uid) == []
    assert not pids_of(uid) and not box.exists()
    assert not any(os.path.exists(p) for p in (f"/tmp/left-{uid}", f"/dev/shm/left-{uid}", f"/tmp/dir-{uid}"))
    assert kill_uid(uid) and sweep_uid(uid) == []


# ----------------------------------------------------------------------------- the authorship guard
def test_the_guard_and_every_helper_bound_in_it_read_no_global_name():
    """The worker's audit hook calls its helpers through its defaults: each of them, as bound,
    must read no global name either, or rebinding that name would change what the guard does."""
    import dis
    import types
    from andrea_course import authorship
    hook = authorship._hook_for("attention.softmax", set(), set(), set(), set(),
                                authorship._spawn_rule("attention.softmax"))
    todo, names = [hook], set()
    while todo:
        fn = todo.pop()
        names.add(fn.__name__)
        loads = [i.argval for i in dis.get_instructions(fn) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        assert not loads and fn.__globals__ == {"__builtins__": {}}, (fn.__name__, loads)
        todo += [d for d in fn.__defaults__ or ()         # its own helpers, not the library's (os.get_exec_path)
                 if isinstance(d, types.FunctionType) and d.__code__.co_filename == authorship.__file__]
    assert {"_guard_hook", "_code_keys", "_compiled_from_its_file", "_spawn_check"} <= names, names
