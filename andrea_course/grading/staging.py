"""What a grading run sets up before any learner code runs (runner.py runs it): the course read
once (its tests, hidden tests and guarded files, snapshot before any learner code ran), the
submission staged in a private folder, the tests copied next to it with pytest's environment
(stage_tests), and the isolation tier chosen for it.
"""
from __future__ import annotations

import errno
import itertools
import os
import stat
from pathlib import Path

from ..paths import ACTIVITY_TESTS, ROOT
from ..worker.tiers import UID_BASE, Limits, probe, probe_container
from . import hooks
from .gradescope import Results

SKIP_NAMES = {"__pycache__", ".pytest_cache", "grading_fixtures"}


def snapshot(folder: str | os.PathLike) -> dict[str, bytes]:
    """{relative path: bytes} of every file under `folder` (caches left out)."""
    folder = Path(folder)
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in SKIP_NAMES or part.startswith(".") for part in rel.parts) or path.suffix == ".pyc":
            continue
        if path.is_file() and not path.is_symlink():
            out[rel.as_posix()] = path.read_bytes()
    return out


def materialize(files: dict[str, bytes], folder: Path) -> None:
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class Course:
    """What grading compares against, read once: the tests, the hidden tests, and fingerprints
    of the course files whose change during a run is reported."""

    def __init__(self, tests: str | os.PathLike = ACTIVITY_TESTS, hidden: str | os.PathLike | None = None,
                 guard: list[str | os.PathLike] | None = None, leaderboard: str | os.PathLike | bool | None = None):
        """leaderboard: the capstone leaderboard's settings file (an after-test hook, hooks.py); None: the
        hidden tests folder's leaderboard.json when it has one; False: no leaderboard."""
        self.tests_dir = Path(tests).resolve()
        self.hidden_dir = Path(hidden).resolve() if hidden else None
        if not self.tests_dir.is_dir():
            raise FileNotFoundError(f"tests folder {self.tests_dir} does not exist")
        if self.hidden_dir and not self.hidden_dir.is_dir():
            raise FileNotFoundError(f"hidden tests folder {self.hidden_dir} does not exist")
        self.tests = snapshot(self.tests_dir)
        self.hidden = snapshot(self.hidden_dir) if self.hidden_dir else {}
        for name in hooks.AFTER_TESTS:
            self.hidden.pop(name, None)               # read here, never copied next to the tests
        if leaderboard is None and self.hidden_dir and (self.hidden_dir / hooks.LEADERBOARD_FILE).is_file():
            leaderboard = self.hidden_dir / hooks.LEADERBOARD_FILE
        self.leaderboard_file = Path(leaderboard).resolve() if leaderboard not in (None, False, True) else None
        if leaderboard is True:
            raise ValueError("leaderboard=True: name the leaderboard's settings file (leaderboard.json)")
        self.leaderboard = hooks.load(self.leaderboard_file) if self.leaderboard_file else None
        if self.hidden:
            ours = {Path(p).name for p in self.tests if p.endswith(".py")}
            clash = sorted({Path(p).name for p in self.hidden if p.endswith(".py")} & ours)
            if clash:
                raise ValueError(f"hidden test files must not share a name with the course's tests "
                                 f"(pytest cannot import both): rename {', '.join(clash)}")
            if any(Path(p).name == "conftest.py" for p in self.hidden):
                raise ValueError("the hidden tests folder must not have a conftest.py: the `student` "
                                 "fixture and `graded` come from andrea_course.grading")
        default_guard = [self.tests_dir, ROOT / "andrea_course", ROOT / "solutions"]
        if self.hidden_dir:
            default_guard.append(self.hidden_dir)
        guarded = [Path(g).resolve() for g in (guard if guard is not None else default_guard)]
        self.guard = {g: snapshot(g) if g.is_dir() else {} for g in guarded}

    def changes(self) -> list[str]:
        """Guarded files that differ from when the Course was read."""
        out = []
        for folder, before in self.guard.items():
            now = snapshot(folder) if folder.is_dir() else before
            out += [str(folder / p) for p in sorted(set(now) | set(before)) if now.get(p) != before.get(p)]
        return out


MAX_FILE = 1 << 20          # bytes per submitted .py file
MAX_FILES = 100


def stage_submission(submission: Path, into: Path) -> list[str]:
    """Copy the submission's top-level .py files (regular files only, never through a link,
    at most MAX_FILES of MAX_FILE bytes) into a folder of the grader's; returns what was
    left out and why."""
    into.mkdir(mode=0o755)
    skipped = []
    names = sorted(e for e in os.listdir(submission) if e.endswith(".py"))
    for name in names:
        if len(os.listdir(into)) >= MAX_FILES:
            skipped.append(f"{name} (more than {MAX_FILES} files)")
            continue
        try:
            fd = os.open(submission / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            skipped.append(f"{name} ({'a link' if exc.errno == errno.ELOOP else exc.strerror})")
            continue
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                skipped.append(f"{name} (not a regular file)")
                continue
            data = f.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            skipped.append(f"{name} (larger than {MAX_FILE >> 10} KiB)")
            continue
        (into / name).write_bytes(data)
        os.chmod(into / name, 0o644)
    return skipped


def stage_tests(course: Course, tmp: Path) -> tuple[Path, dict]:
    """(the course's tests, copied into the run's folder `tmp`: tests/, the hidden ones in
    tests/hidden/; pytest's environment there: the grader's less its ANDREA_, PYTEST_ and PYTHON
    settings, temporary files in tmp/tmp)."""
    tests = tmp / "tests"
    materialize(course.tests, tests)
    if course.hidden:
        materialize(course.hidden, tests / "hidden")
    (tmp / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDREA_", "PYTEST_", "PYTHON"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", TMPDIR=str(tmp / "tmp"),
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return tests, env


_RUNS = itertools.count()


def sandbox_uid() -> int:
    """A uid of its own for each grading run of this process (root grader only)."""
    return UID_BASE + (os.getpid() % 1_000_000) * 100 + next(_RUNS) % 100


ISOLATIONS = ("auto", "sandbox", "container", "process")


def choose_tier(isolation: str, staged: Path, uid: int | None, forbidden: dict, limits: Limits,
                own_work: bool) -> tuple[str | None, list[str]]:
    """(the tier to run in, or None; why each stronger tier could not be used)."""
    as_root = os.geteuid() == 0
    why = []
    if isolation == "process":
        if as_root and not own_work:
            return None, ["--isolation process as root would run the learner's code as root (a learner "
                          "grading their own work passes --own-work)"]
        return "process", why
    if isolation in ("auto", "sandbox"):
        reason = probe(staged, uid)
        if reason is None:
            return "sandbox", why
        why.append(f"sandbox: {reason}")
    if isolation in ("auto", "container"):
        reason = probe_container(uid, forbidden, limits) if as_root else "the container tier needs a root grader"
        if reason is None:
            return "container", why
        why.append(f"container: {reason}")
    return None, why


def choose(results: Results, submission: Path, staged: Path, tmp: Path, course: Course, isolation, uid,
            limits: Limits, own_work, out) -> tuple[str | None, str | None]:
    """(the isolation tier, or None; why nothing runs, or None): a submission without a .py file,
    or a machine where no tier keeps the learner's code from what it must not read or write."""
    if not any(staged.iterdir()):
        return None, (f"the submission has no .py file (looked in {submission.name}/): upload "
                      f"your activity files (attention.py, mlp.py, ...), not a zip or a folder")
    forbidden = {str(tmp): "read"}
    if course.hidden_dir:
        forbidden[str(course.hidden_dir)] = "read"
    if course.leaderboard_file:
        forbidden[str(course.leaderboard_file)] = "read"
    if out is not None:
        forbidden[os.path.dirname(os.path.abspath(out))] = "write"
    tier, why = choose_tier(isolation, staged, uid, forbidden, limits, own_work)
    if tier is None:
        refused = ("REFUSED: no isolation on this machine keeps the learner's code from the hidden "
                   "tests and the results; nothing was run (" + "; ".join(why) + ")")
        if isolation == "auto" and os.geteuid() != 0:
            refused += ". A learner grading their own work may pass --own-work"
        return None, refused
    if why:
        results.notes.append("stronger isolation unavailable: " + "; ".join(why))
    return tier, None
