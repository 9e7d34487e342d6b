"""The Gradescope bundle: make_zip.sh's autograder.zip, set up as Gradescope sets it up, grading on
this machine (the sandbox tier, nightly) and in a simulated Docker-default container (the
container tier: no namespaces) with the reference, the untouched exercises and a hostile
submission."""
import json
import re
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from andrea_course.grading.staging import snapshot
from andrea_course.worker.tiers import UID_BASE
from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.paths import ROOT

from grading_helpers import FIXTURES, make_submission, sandboxed  # noqa: F401  (sandboxed: a fixture)


# ----------------------------------------------------------------------------- Gradescope
@pytest.fixture(scope="class")
def bundle(tmp_path_factory):
    """make_zip.sh, unpacked into a fake /autograder; setup.sh's steps run into a fresh venv that
    sees the test venv's packages through a .pth (no downloads: pip finds every requirement
    installed). All of it in a folder every user can traverse, as /autograder and /opt/andrea
    are on Gradescope (the container tier's worker must read Python and the course). The zip
    holds the learner's release: this is also grading without the answer key."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("make_zip.sh archives the git repository")
    top = Path(tempfile.mkdtemp(prefix="andrea-bundle-", dir="/tmp"))
    os.chmod(top, 0o755)
    try:
        yield _build_bundle(top, tmp_path_factory.mktemp("zip"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


# A short leaderboard (6 steps): the bundle carries it and the reference gets a value.
BUNDLE_LEADERBOARD = dict(held_out_seed=4242, held_out_stories=20, steps=6, stories=100)


def _build_bundle(top: Path, scratch: Path) -> dict:
    hidden = scratch / "hidden"
    hidden.mkdir()
    shutil.copy(FIXTURES / "hidden" / "fake_test_hidden.py", hidden / "test_hidden_rms.py")
    (hidden / "leaderboard.json").write_text(json.dumps(BUNDLE_LEADERBOARD))     # the leaderboard, on
    zip_path = scratch / "autograder.zip"
    subprocess.run(["bash", str(ROOT / "docs/gradescope/make_zip.sh"), str(hidden), str(zip_path)],
                   check=True, capture_output=True, env={**os.environ, "PYTHON": sys.executable})
    autograder = top / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(autograder / "source")
    source = autograder / "source"
    for name in ("setup.sh", "run_autograder", "pyproject.toml", "andrea_course/__init__.py",
                 "andrea_course/activity_tests/test_attention.py", "hidden_tests/test_hidden_rms.py",
                 "hidden_tests/leaderboard.json"):
        assert (source / name).is_file(), name
    for name in ("solutions", "instructor", "tests"):
        assert not (source / name).exists(), f"the autograder zip holds {name}/"
    for name in ("setup.sh", "run_autograder"):
        (source / name).chmod(0o755)
    venv = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_dir,) = venv.glob("lib/python*/site-packages")
    (site_dir / "zz_test_venv.pth").write_text("\n".join(__import__("site").getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ANDREA_"))}   # Gradescope's
    env.update(AUTOGRADER=str(autograder), ANDREA_VENV=str(venv), ANDREA_SKIP_APT="1", ANDREA_REUSE_VENV="1",
               ANDREA_PIP_OPTS="--no-index --no-build-isolation", ANDREA_BIN="")
    done = subprocess.run(["bash", str(source / "setup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "train" in (source / "setup.sh").read_text().split("-e \"$SOURCE[")[1].split("]")[0]
    where = subprocess.run([str(venv / "bin/python"), "-c", "import andrea_course; print(andrea_course.__file__)"],
                           capture_output=True, text=True, check=True, cwd=top, env=env).stdout
    assert where.startswith(str(source)), where
    if os.geteuid() == 0:
        assert (source / "hidden_tests").stat().st_mode & 0o077 == 0
    env["ANDREA_GRADE"] = str(venv / "bin/andrea-grade")
    return {"autograder": autograder, "source": source, "venv": venv, "env": env}


def _autograde(bundle, files, container: bool = False, machine=None) -> tuple[dict, dict]:
    """run_autograder on `files`, on this machine or in a simulated Docker-default container
    (inside `machine`'s cgroup where one is given: grading_helpers.small_machine); (results.json,
    what the container's processes and temp folders held of the workers' uids afterwards)."""
    autograder = bundle["autograder"]
    shutil.rmtree(autograder / "submission", ignore_errors=True)
    shutil.rmtree(autograder / "results", ignore_errors=True)
    (autograder / "submission").mkdir()
    for path in files:
        shutil.copy(path, autograder / "submission" / path.name)
    run = str(bundle["source"] / "run_autograder")
    if not container:
        subprocess.run([run], capture_output=True, env=bundle["env"])
        return json.loads((autograder / "results" / "results.json").read_text()), {}
    sys.path.insert(0, str(FIXTURES))
    try:
        from docker_default import docker_default
    finally:
        sys.path.remove(str(FIXTURES))
    after = f"{sys.executable} -I -c {shlex.quote(LEFTOVERS)} {UID_BASE} > {autograder}/leftovers.json"
    readable = [sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                *__import__("site").getsitepackages(), str(ROOT)]
    argv, keep = docker_default(["bash", "-c", f"{run}; {after}"], readable=readable,
                                writable=[autograder.parent])
    argv = machine.enter(argv) if machine is not None else argv
    for fd in keep:
        os.set_inheritable(fd, True)
    try:
        done = subprocess.run(argv, pass_fds=keep, capture_output=True, text=True, timeout=1500, env=bundle["env"])
    finally:
        for fd in keep:
            os.close(fd)
    assert (autograder / "results" / "results.json").is_file(), (done.stdout[-3000:], done.stderr[-3000:])
    assert "Creating new namespace failed" in (autograder / "results" / "results.json").read_text() \
        or done.returncode == 0, done.stderr[-2000:]
    assert (autograder / "leftovers.json").read_text().strip(), done.stderr[-3000:]
    return (json.loads((autograder / "results" / "results.json").read_text()),
            json.loads((autograder / "leftovers.json").read_text()))


# Run in the container after run_autograder: processes and files of any worker uid.
LEFTOVERS = """
import json, os, sys
low = int(sys.argv[1])

def owner(path):
    try:
        return os.lstat(path).st_uid
    except OSError:
        return -1


def writable(path):
    try:
        return bool(os.lstat(path).st_mode & 0o002)
    except OSError:
        return False

procs = [p for p in os.listdir("/proc") if p.isdigit() and owner(f"/proc/{p}") >= low]
files = []
for top in ("/tmp", "/dev/shm", "/var/tmp"):
    for folder, dirs, names in os.walk(top):
        files += [os.path.join(folder, n) for n in dirs + names if owner(os.path.join(folder, n)) >= low]
        # only a folder a worker's uid may write can hold its files: its own, or everyone's
        dirs[:] = [d for d in dirs if owner(os.path.join(folder, d)) >= low or writable(os.path.join(folder, d))]
print(json.dumps({"processes": procs, "files": files}))
"""


@pytest.mark.slow(seconds=150)      # the container test below; its bundle fixture's set-up
@pytest.mark.usefixtures("bundle")
class TestGradescopeBundle:
    @pytest.mark.nightly
    def test_the_zip_builds_installs_and_grades(self, bundle, sandboxed):
        """Nightly (two minutes; the container test below grades the same bundle in CI).
        run_autograder on this machine (the sandbox tier): the reference gets full marks on the
        real suite, hidden test included; the untouched exercises 0; an empty submission 0."""
        reference, _ = _autograde(bundle, sorted(SOLUTIONS.glob("*.py")))
        failed = [(t["name"], t["output"]) for t in reference["tests"] if t["status"] != "passed"]
        assert not failed and len(reference["tests"]) >= 40
        assert reference["score"] == sum(t["max_score"] for t in reference["tests"]) > 0
        assert any("test_rms_norm_hidden" in t["name"] and t["visibility"] == "hidden" for t in reference["tests"])
        assert "isolation: sandbox" in reference["output"]
        assert [e["name"] for e in reference["leaderboard"]] == ["Validation loss"], reference["output"]
        untouched, _ = _autograde(bundle, sorted(EXERCISES.glob("*.py")))
        assert untouched["score"] == 0 and len(untouched["tests"]) == len(reference["tests"])
        assert "leaderboard" not in untouched and "Leaderboard: no value" in untouched["output"]
        empty, _ = _autograde(bundle, [FIXTURES / "README.md"])
        assert empty["score"] == 0 and "has no .py file" in empty["output"]
        assert len(empty["tests"]) == len(reference["tests"])

    def test_in_a_docker_default_container(self, bundle, tmp_path):
        """Gradescope's default container (root without CAP_SYS_ADMIN, a seccomp filter refusing
        new namespaces, a read-only /sys): bubblewrap cannot start there, so the container tier
        grades: the reference gets full marks, and a hostile submission (the untouched
        exercises, which score 0, with two hostile files) its honest points only (scale_scores,
        whose canary passes only if its worker is confined), having read no hidden test, forged
        no result, killed no grader, left nothing behind; results.json names the isolation and
        what it does not give."""
        if os.geteuid() != 0 or shutil.which("bwrap") is None:
            pytest.skip("the simulated container needs root and bubblewrap")
        hidden = bundle["source"] / "hidden_tests"
        hidden_before = snapshot(hidden)
        reference, left = _autograde(bundle, sorted(SOLUTIONS.glob("*.py")), container=True)
        failed = [(t["name"], t["output"]) for t in reference["tests"] if t["status"] != "passed"]
        assert not failed and len(reference["tests"]) >= 40, failed[:3]
        assert reference["score"] == sum(t["max_score"] for t in reference["tests"]) > 0
        assert "isolation: container" in reference["output"] and "Not given here" in reference["output"]
        assert "Creating new namespace failed" in reference["output"]             # why not the sandbox
        assert [e["name"] for e in reference["leaderboard"]] == ["Validation loss"], reference["output"]
        assert left == {"processes": [], "files": []}

        # The hostile submission is the untouched exercises with two hostile files: every test but
        # the canary's fails, so it also shows the untouched exercises getting 0 here.
        hostile = make_submission(tmp_path / "hostile", ["attention__container_escape", "embeddings__kills_every_process"],
                                  base=EXERCISES, hidden=hidden, results=bundle["autograder"] / "results")
        data, left = _autograde(bundle, sorted(hostile.glob("*.py")), container=True)
        honest = {t["name"]: t["max_score"] for t in reference["tests"] if "attention.scale_scores" in t["name"]}
        got = {t["name"]: t for t in data["tests"]}
        assert honest and all(got[n]["status"] == "passed" for n in honest), [got[n]["output"] for n in honest]
        assert data["score"] == sum(honest.values()) and len(data["tests"]) == len(reference["tests"])
        assert "isolation: container" in data["output"] and "TAMPERING" not in data["output"]
        assert left == {"processes": [], "files": []} and snapshot(hidden) == hidden_before


# ----------------------------------------------------------------------------- hidden tests, shown later
def test_hidden_tests_come_after_the_due_date_and_the_output_says_how_many_points():
    """A hidden folder's test left "visible" by its @graded is written after_due_date; one marked
    hidden stays hidden; the visible output gives the score on the tests shown now and the points
    still to come, never the total (Gradescope hides the total while a test is hidden)."""
    from andrea_course.grading.gradescope import Results, TestResult, table, to_gradescope
    r = Results(tests=[TestResult("tests/test_a.py::test_a", "test_a", "attention.softmax", 2, passed=True),
                       TestResult("tests/hidden/test_h.py::test_h", "test_h", "attention.attention", 3),
                       TestResult("tests/hidden/test_h.py::test_k", "test_k", "mlp.MLP", 1, "hidden", passed=True),
                       TestResult("tests/test_b.py::test_b", "test_b", "mlp.gelu_tanh", 4, "after_published")])
    data = to_gradescope(r)
    assert [t["visibility"] for t in data["tests"]] == ["visible", "after_due_date", "hidden", "after_published"]
    assert data["output"].splitlines()[:2] == [
        "Score on the 1 test(s) shown now: 2 / 2.",
        "Still to come: 8 more point(s) from 3 test(s) not shown before the due date (1 shown after the due date, "
        "1 never shown, 1 shown when grades are published); your final score counts them."]
    assert data["score"] == 3 and "3 /" not in data["output"]
    assert re.search(r"of which +1 / 8 +from 3 test\(s\) learners do not see", table(r)), table(r)
    alone = to_gradescope(Results(tests=r.tests[:1]))
    assert alone["output"] == "Score: 2 / 2" and alone["tests"][0]["visibility"] == "visible"
