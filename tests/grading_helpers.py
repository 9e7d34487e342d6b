"""What the autograder's tests share: a small fixture course, submissions made from the answer key
with hostile code appended (tests/grading_fixtures/evil/), results.json read per test, and the
`sandboxed` fixture (need_sandbox(): skip, or with ANDREA_REQUIRE_SANDBOX=1 fail, without a sandbox;
then check that nothing is left behind). Imported by test_grading.py, test_gradescope.py,
test_one_verdict.py, test_authorship.py, test_report.py, test_isolation.py and test_small_machine.py.
"""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from andrea_course.grading.runner import Course
from andrea_course.worker.tiers import UID_BASE, Cgroup, probe
from andrea_course.exercises import SOLUTIONS

FIXTURES = Path(__file__).parent / "grading_fixtures"

TESTS = ["test_embed_lookup", "test_softmax", "test_scale_scores", "test_gelu_tanh", "test_mlp_module",
         "test_rms_norm_hidden"]
POINTS = dict(zip(TESTS, [2, 2, 1, 1, 1, 1]))



def make_course(tmp: Path) -> Course:
    (tmp / "course" / "tests").mkdir(parents=True)
    (tmp / "course" / "hidden").mkdir()
    shutil.copy(FIXTURES / "fake_test_small.py", tmp / "course" / "tests" / "test_small.py")
    shutil.copy(FIXTURES / "hidden" / "fake_test_hidden.py", tmp / "course" / "hidden" / "test_hidden.py")
    return tmp / "course"


def make_submission(folder: Path, evils=(), base: Path = SOLUTIONS, **placeholders) -> Path:
    folder.mkdir(parents=True)
    for path in base.glob("*.py"):
        shutil.copy(path, folder / path.name)
    for evil in evils:
        activity = evil.split("__")[0]
        code = (FIXTURES / "evil" / f"{evil}.py").read_text()
        for name, value in placeholders.items():
            code = code.replace(f"__{name.upper()}__", str(value))
        with open(folder / f"{activity}.py", "a") as f:
            f.write(code)
    return folder


def by_test(results_json: Path) -> dict:
    data = json.loads(results_json.read_text())
    return data, {t["name"].split(": ", 1)[1]: t for t in data["tests"]}



# ----------------------------------------------------------------------------- sandbox helpers
def need_sandbox(submission: Path, uid: int | None) -> None:
    """Skip the test (or, with ANDREA_REQUIRE_SANDBOX=1, fail it) where no bubblewrap sandbox
    starts on this machine (sandbox.probe says why)."""
    why = probe(submission, uid)
    if why:
        if os.environ.get("ANDREA_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"no sandbox on this machine: {why}")
        pytest.skip(f"no sandbox on this machine: {why}")


@pytest.fixture
def sandboxed(tmp_path, monkeypatch):
    """Skip (or, with ANDREA_REQUIRE_SANDBOX=1, fail) without a sandbox; give the grader a
    private temp folder, and check after the test that nothing was left behind."""
    need_sandbox(FIXTURES, UID_BASE if os.geteuid() == 0 else None)
    grader_tmp = tmp_path / "grader-tmp"
    grader_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(grader_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield
    monkeypatch.undo()
    tempfile.tempdir = None
    assert not list(grader_tmp.iterdir()), "the grader left files in its temp folder"
    assert not leftovers(), leftovers()


def our_uids() -> range:
    """The sandbox uids grade() gives this process's runs (staging.sandbox_uid)."""
    low = UID_BASE + (os.getpid() % 1_000_000) * 100
    return range(low, low + 100)


def leftovers() -> list[str]:
    """Processes and files of this process's sandboxes, and their cgroups (root only: as
    another user the sandbox runs under one's own uid)."""
    if os.geteuid() != 0:
        return []
    uids, found = our_uids(), []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        if uid in uids:
            found.append(f"process {pid} of uid {uid}")
    for top in ("/tmp", "/dev/shm", "/var/tmp"):
        for folder, dirs, files in os.walk(top):
            keep = []
            for name in dirs + files:
                try:
                    st = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                if st.st_uid in uids:
                    found.append(f"file {os.path.join(folder, name)}")
                if name in dirs and (st.st_uid in uids or st.st_mode & 0o002):
                    keep.append(name)
            # a worker's uid can put a file only in a folder it may write: its own, or one every
            # user may (other tests' private temp folders hold thousands of files, none of its)
            dirs[:] = keep
    for parent in Cgroup.parents().values():
        found += [f"cgroup {p}" for p in parent.glob(f"andrea-grade-{os.getpid()}-*")]
    return found




# ----------------------------------------------------------------------------- a small machine
class SmallMachine:
    """A cgroup of `memory` bytes and `cpus` CPUs (v1 or v2), standing for a small grading
    machine such as Gradescope's default (768 MB, half a vCPU): `enter(argv)` runs argv in it,
    `peak()` is the most memory it held, `remove()` ends what is left and deletes it."""

    PERIOD = 100_000                                  # microseconds: the CPU quota's window

    def __init__(self, memory: int, cpus: float, name: str):
        self.dirs: list[Path] = []
        self.memory = None
        for controller, parent in _cgroup_parents().items():
            d = parent / name
            d.mkdir()
            self.dirs.append(d)
            quota = f"{int(cpus * self.PERIOD)}"
            if controller == "":                          # v2: one folder for both
                (d / "memory.max").write_text(str(memory))
                (d / "cpu.max").write_text(f"{quota} {self.PERIOD}")
                self.memory = d
            elif controller == "memory":
                (d / "memory.limit_in_bytes").write_text(str(memory))
                self.memory = d
            else:
                (d / "cpu.cfs_period_us").write_text(str(self.PERIOD))
                (d / "cpu.cfs_quota_us").write_text(quota)

    def enter(self, argv: list[str]) -> list[str]:
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 111; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *argv]

    def peak(self) -> int:
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            if (self.memory / name).exists():
                return int((self.memory / name).read_text())
        return 0

    def remove(self) -> None:
        for d in self.dirs:
            for pid in (d / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    __import__("time").sleep(0.1)


def _cgroup_parents() -> dict[str, Path]:
    """{controller: where this process may make a cgroup of it}: v2's one tree ("") or v1's
    memory and cpu trees."""
    parents = Cgroup.parents()
    if "" in parents:
        return {"": parents[""]}
    own = {ctl: path.strip() for _, ctls, path in (l.split(":", 2) for l in Path("/proc/self/cgroup").read_text().splitlines())
           for ctl in ctls.split(",")}
    cpu = Path("/sys/fs/cgroup/cpu") / own.get("cpu", "/").lstrip("/")
    return {"memory": parents["memory"], "cpu": cpu}


@pytest.fixture
def small_machine():
    """SmallMachine(memory, cpus): made as root where cgroups can be written, else the test skips."""
    made = []

    def make(memory: int, cpus: float) -> SmallMachine:
        if os.geteuid() != 0:
            pytest.skip("a small machine's cgroup needs root")
        try:
            made.append(SmallMachine(memory, cpus, f"andrea-small-{os.getpid()}-{len(made)}"))
        except (OSError, KeyError) as exc:
            pytest.skip(f"no cgroup can be made here ({exc})")
        return made[-1]
    yield make
    for machine in made:
        machine.remove()
