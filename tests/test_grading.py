"""The autograder: a submission cannot raise its own score, every failure costs only the
exercise it happens in (or its activity, when it happens at import), results.json is always
written, the reference scores full marks, and the sandbox holds: every hostile submission
scores what its honest work earns and leaves no process and no file behind.

The evil submissions are copies of solutions/ (or exercises/) with code from
tests/grading_fixtures/evil/ appended to one activity file; they are graded against a small
fixture suite (tests/grading_fixtures/) so that each run takes seconds.

Sandbox tests need bubblewrap (CI installs it and runs as root, as Gradescope does); where it is
missing they are skipped, unless ANDREA_REQUIRE_SANDBOX=1 (set by .ci/run) makes that a failure.
"""
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

from andrea_course import ModelConfig
from andrea_course.grading import cli, runner
from andrea_course.grading.gradescope import Results, TestResult, to_gradescope, write_json
from andrea_course.grading.plugin import Credit, sign
from andrea_course.grading.runner import Course, grade, read_jsonl, snapshot
from andrea_course.grading.sandbox import UID_BASE, Cgroup, Limits, probe
from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.graded import GRADED
from andrea_course.paths import ROOT

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


# ----------------------------------------------------------------------------- fast unit checks
def test_unsigned_result_lines_are_ignored(tmp_path):
    key = b"k" * 32

    def line(record, k):
        return json.dumps({**record, "mac": sign(k, record)})
    rec = {"kind": "result", "nodeid": "t.py::a", "passed": True}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([line(rec, b"x" * 32), "not json", line({**rec, "passed": False}, key),
                               line(rec, key)]) + "\n")
    collected, finished, errors, forged = read_jsonl(path, key)
    assert finished["t.py::a"]["passed"] is False and forged == 2


def test_gradescope_results_fields():
    r = Results(tests=[TestResult("f::a", "a", "attention.softmax", 2, "hidden", passed=True),
                       TestResult("f::b", "b", "mlp.MLP", 1.5, output="MLP(x): shape (2,), expected (3,)")],
                notes=["a note"], execution_time=3.4)
    data = to_gradescope(r)
    assert data["score"] == 2 and data["execution_time"] == 3 and "a note" in data["output"]
    assert {"visibility", "stdout_visibility"} <= set(data)
    a, b = data["tests"]
    assert (a["status"], a["score"], a["max_score"], a["visibility"], a["number"]) == ("passed", 2, 2, "hidden", "1")
    assert (b["status"], b["score"], b["max_score"], b["tags"]) == ("failed", 0, 1.5, ["mlp", "mlp.MLP"])


# ----------------------------------------------------------------------------- sandbox helpers
@pytest.fixture
def sandboxed(tmp_path, monkeypatch):
    """Skip (or, with ANDREA_REQUIRE_SANDBOX=1, fail) without a sandbox; give the grader a
    private temp folder, and check after the test that nothing was left behind."""
    why = probe(FIXTURES, UID_BASE if os.geteuid() == 0 else None)
    if why:
        if os.environ.get("ANDREA_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"no sandbox on this machine: {why}")
        pytest.skip(f"no sandbox on this machine: {why}")
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
    """The sandbox uids grade() gives this process's runs (runner.sandbox_uid)."""
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
            for name in dirs + files:
                try:
                    if os.lstat(os.path.join(folder, name)).st_uid in uids:
                        found.append(f"file {os.path.join(folder, name)}")
                except OSError:
                    pass
    for parent in Cgroup.parents().values():
        found += [f"cgroup {p}" for p in parent.glob(f"andrea-grade-{os.getpid()}-*")]
    return found


# ----------------------------------------------------------------------------- hostile submissions
HOSTILE = {   # student: (base, evil fixtures appended, the score its honest work earns of 8)
    # a_cheater's attention.py reaches into the grader (andrea_course.grading): every piece of
    # that file is refused as not the learner's own (authorship.py), its honest ones too
    "a_cheater": (SOLUTIONS, ["attention__cheats_at_import", "embeddings__os_exit_at_import",
                              "mlp__edits_tests_and_sys_exit_at_import"], 1),
    "b_crasher": (SOLUTIONS, ["attention__loop_and_sys_exit_in_calls", "mlp__os_exit_and_50GB_in_calls",
                              "embeddings__segfault_in_call"], 1),
    "c_untouched": (EXERCISES, [], 0),
    "d_reference": (SOLUTIONS, [], 8),
    "e_key_thief_injector": (EXERCISES, ["attention__answer_key_import", "mlp__injects_the_grader",
                                         "mlp__symlinks_in_its_temp"], 0),
    "f_forger_killer": (EXERCISES, ["attention__forges_results_and_kills"], 0),
    "g_daemons_disk_forks": (SOLUTIONS, ["embeddings__leaves_daemons", "embeddings__fills_disk_and_shm",
                                         "mlp__fork_bomb"], 8),
    "h_copier": (EXERCISES, ["attention__copies_classmates"], 0),
}
SMALL = Limits(memory=2 << 30, processes=128, disk=32 << 20)


@pytest.mark.slow
def test_a_class_of_hostile_submissions(tmp_path, sandboxed):
    """One batch in parallel: a student for every kind of attack, one who did nothing, and the
    reference (whom the copier tries to rob and overwrite)."""
    course = make_course(tmp_path)
    out, students = tmp_path / "results", tmp_path / "class"
    original_tests = snapshot(course)
    for name, (base, evils, _) in HOSTILE.items():
        make_submission(students / name, evils, base=base, out=out / f"{name}.json",
                        outdir=out, tests=course / "tests", root=ROOT, **{"class": students})
    original_students = snapshot(students)
    csv_path = tmp_path / "gradebook.csv"
    options = dict(timeout_per_test=6, timeout_total=300, isolation="auto", own_work=False, uid=None, limits=SMALL)
    assert cli.batch(students, csv_path, out, Course(course / "tests", course / "hidden"), options,
                     quiet=True, jobs=2) == 0

    scores = {name: by_test(out / f"{name}.json")[0]["score"] for name in HOSTILE}
    assert scores == {name: want for name, (_, _, want) in HOSTILE.items()}
    for name in HOSTILE:
        data, tests = by_test(out / f"{name}.json")
        assert sorted(tests) == sorted(TESTS), name                    # no forged test
        assert "isolation: sandbox" in data["output"] and "could not be written" not in data["output"]
        assert "course files changed" not in data["output"], (name, data["output"])
        assert (out / f"{name}.json").stat().st_uid == os.getuid()
    assert snapshot(course) == original_tests and snapshot(students) == original_students
    assert out.stat().st_uid == os.getuid() and (out.stat().st_mode & 0o777) != 0o777
    for planted in ("andrea_course/grading/pprint_hook.py", "sitecustomize.py"):
        assert not (ROOT / planted).exists()

    _, tests = by_test(out / "d_reference.json")
    assert all(t["status"] == "passed" and t["score"] == POINTS[n] for n, t in tests.items())
    assert tests["test_rms_norm_hidden"]["visibility"] == "hidden"
    assert tests["test_mlp_module"]["visibility"] == "after_due_date"

    _, tests = by_test(out / "a_cheater.json")
    assert "not yours to hand in" in tests["test_softmax"]["output"]          # reaches into the grader: refused
    assert "ended the process" in tests["test_embed_lookup"]["output"]       # os._exit at import
    for name in ("test_gelu_tanh", "test_mlp_module"):                       # sys.exit at import
        assert "SystemExit" in tests[name]["output"], tests[name]["output"]

    _, tests = by_test(out / "b_crasher.json")
    expected = {"test_embed_lookup": "signal 11", "test_softmax": "ran longer than 6 s",
                "test_scale_scores": "called sys.exit", "test_gelu_tanh": "ended the process",
                "test_mlp_module": "out of memory"}
    for name, why in expected.items():
        assert tests[name]["status"] == "failed" and why in tests[name]["output"], tests[name]["output"]

    _, tests = by_test(out / "c_untouched.json")                             # stubs
    assert "attention.softmax: not implemented yet" in tests["test_softmax"]["output"]
    for name in ("e_key_thief_injector", "h_copier"):                        # what they took is refused, saying why
        _, tests = by_test(out / f"{name}.json")
        assert "write it in your file" in tests["test_softmax"]["output"] or \
            "Write the piece in your file" in tests["test_softmax"]["output"], (name, tests["test_softmax"]["output"])

    rows = csv_path.read_text().splitlines()
    assert rows[0].split(",")[:2] == ["student", "total"] and len(rows[0].split(",")) == 2 + 6
    assert [r.split(",")[:2] for r in rows[1:]] == [[n, str(w)] for n, (_, _, w) in HOSTILE.items()]


def test_no_isolation_means_nothing_is_run(tmp_path, monkeypatch):
    """Where neither the sandbox nor the container tier can hold (no namespaces, and not root or
    the hidden tests within reach), the grader refuses (results.json says why, exit 2); as root,
    --unsafe-no-sandbox is refused too; a submission without .py files gets 0 and a reason."""
    course = make_course(tmp_path)
    sub = make_submission(tmp_path / "sub")
    out = tmp_path / "results.json"
    monkeypatch.setattr(runner, "probe", lambda *a: "bubblewrap is not installed")
    monkeypatch.setattr(runner, "probe_container", lambda *a: "the learner's code could reach /hidden (read as uid 7)")
    assert cli.main([str(sub), "--out", str(out), "--tests", str(course / "tests"), "--quiet"]) == 2
    data = json.loads(out.read_text())
    assert data["score"] == 0 and "REFUSED: no isolation" in data["output"] and data["tests"] == []
    assert "bubblewrap is not installed" in data["output"]
    if os.geteuid() == 0:
        assert "could reach /hidden" in data["output"]
        assert cli.main([str(sub), "--out", str(out), "--tests", str(course / "tests"),
                         "--unsafe-no-sandbox", "--quiet"]) == 2
        assert "would run the learner's code as root" in json.loads(out.read_text())["output"]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("my answers are in the zip")
    os.symlink(SOLUTIONS / "attention.py", empty / "attention.py")          # a link is never followed
    assert cli.main([str(empty), "--out", str(out), "--tests", str(course / "tests"), "--quiet"]) == 0
    data, tests = by_test(out)
    assert data["score"] == 0 and "has no .py file" in data["output"] and "attention.py (a link)" in data["output"]
    assert len(tests) == 5 and all("not graded" in t["output"] for t in tests.values())


def test_no_graded_test_exits_1(tmp_path, capsys):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    assert cli.main(["solutions", "--tests", str(tmp_path / "tests"), "--quiet"]) == 1
    assert "no graded test was collected" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["solutions", "--jobs", "0"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and "andrea-grade 0." in capsys.readouterr().out


def test_results_are_written_even_where_the_rename_fails(tmp_path, capsys):
    target = tmp_path / "results.json"
    target.mkdir()                                     # a folder where results.json should be
    written = write_json(target, {"score": 3, "output": "Score: 3 / 8"})
    data = json.loads(Path(written).read_text())
    assert written != str(target) and data["score"] == 3 and "could not be written atomically" in data["output"]
    assert "could not be written atomically" in capsys.readouterr().err
    assert write_json(tmp_path / "ok.json", {"score": 1}) == str(tmp_path / "ok.json")


def test_partial_credit(tmp_path):
    """A test in parts scores the parts that pass: softmax over the wrong axis has the right
    shape (1 of 4 points)."""
    credit = Credit()
    with credit.part(1, "shape"):
        pass
    with credit.part(3, "values"):
        raise NotImplementedError("attention.softmax: not implemented yet")
    assert credit.fraction == 0.25 and credit.failures() == ["values: attention.softmax: not implemented yet"]
    assert TestResult("n", "t", "attention.softmax", 4, fraction=0.25).score == 1
    assert TestResult("n", "t", "attention.softmax", 4, passed=True, fraction=0.25).score == 4
    assert TestResult("n", "t", "a.b", 4, skipped=True, fraction=0.25).score == 0

    wrong = tmp_path / "wrong"          # the plugin, end to end (in-process student)
    wrong.mkdir()
    (wrong / "attention.py").write_text("import torch\n\ndef softmax(x):\n    return torch.softmax(x, -2)\n")
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(FIXTURES / "partial" / "fake_test_partial.py", suite / "test_partial.py")
    jsonl, key = tmp_path / "results.jsonl", b"k" * 32
    key_r, key_w = os.pipe()
    os.write(key_w, key.hex().encode() + b"\n")
    os.close(key_w)
    subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
                    "-p", "andrea_course.grading.plugin", "--rootdir", str(suite), "--impl", str(wrong),
                    "--results-jsonl", str(jsonl), "--results-key-fd", str(key_r)],
                   pass_fds=(key_r,), capture_output=True, cwd=suite)
    os.close(key_r)
    _, finished, _, forged = read_jsonl(jsonl, key)
    (record,) = finished.values()
    assert forged == 0 and record["fraction"] == 0.25 and not record["passed"]
    assert "1 of 2 parts failed (partial credit 25%)" in record["output"] and "values differ" in record["output"]
    assert record["mistake"] == "softmax over the wrong axis (dim=-2)"        # the named mistake, as data


# Classes: pytest-xdist's loadscope gives each its own scope, so these long runs can share the cores.
class TestTotalTimeLimit:
    def test_total_time_limit_still_writes_results(self, tmp_path, sandboxed):
        """softmax loops forever and the per-test limit is longer than the total: the total ends it."""
        from andrea_course.grading.runner import _children_map
        before = set(_children_map().get(os.getpid(), ()))   # another test's (check()'s worker parent, say)
        course = make_course(tmp_path)
        sub = make_submission(tmp_path / "looper", ["attention__sleeps_forever"])
        out = tmp_path / "out" / "results.json"
        results = grade(sub, out, course=Course(course / "tests", guard=[]), timeout_per_test=600,
                        timeout_total=30)
        data, tests = by_test(out)
        assert "total time limit of 30 s" in data["output"] and data["score"] == results.score <= 2
        assert tests["test_softmax"]["status"] == "failed"
        assert "total time limit" in tests["test_softmax"]["output"]
        for name, t in tests.items():        # what finished before softmax may pass; nothing after it
            assert t["status"] == "passed" or "total time limit" in t["output"], (name, t["output"])
        assert not set(_children_map().get(os.getpid(), ())) - before      # the run's processes are all gone


# ----------------------------------------------------------------------------- make grade and the docs
def _collected(folder: Path, tmp_path: Path) -> tuple[int, float]:
    """(graded tests, points) in a folder, as the grader collects them."""
    jsonl = tmp_path / f"{folder.name}.jsonl"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "-m", "exercise",
                    "-o", "addopts=", "-p", "andrea_course.grading.plugin", "--results-jsonl", str(jsonl), str(folder)],
                   capture_output=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, cwd=tmp_path)
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    records = {r["nodeid"]: r for r in records if r["kind"] == "collected"}
    return len(records), sum(r["points"] for r in records.values())


def test_the_instructors_guide_counts_the_suite(tmp_path):
    text = (ROOT / "docs" / "instructors.md").read_text()
    for tag, folder in (("suite", GRADED), ("hidden", ROOT / "instructor" / "hidden_tests")):
        if not folder.is_dir():
            continue                                          # a learner's release has no hidden tests
        n, points = _collected(folder, tmp_path)
        said = re.search(rf"<!-- {tag} -->(\d+) (?:graded )?tests worth (\d+) points<!-- /{tag} -->", text)
        assert said, f"docs/instructors.md does not say how many {tag} tests there are"
        assert (int(said.group(1)), float(said.group(2))) == (n, points), \
            f"docs/instructors.md says {said.group(0)}; the {tag} tests are {n}, worth {points:g} points"


def test_the_help_says_the_defaults():
    import contextlib
    import io
    out = io.StringIO()
    with pytest.raises(SystemExit), contextlib.redirect_stdout(out):
        cli.parse(["--help"])
    text = " ".join(out.getvalue().split())
    assert "andrea_course/graded/" in text and "course's tests/" not in text
    for words in ("--isolation", "auto", "sandbox", "container", "--own-work", "(default: 60.0)"):
        assert words in text, words


@pytest.mark.slow
def test_make_grade_prints_what_a_learner_needs(tmp_path):
    """`make grade` (its recipe, run as the Makefile runs it): for the untouched exercises, the score
    table and one line per failing test, no traceback, exit 0 (it graded)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(["make", "-n", "-s", "grade", "LAB_STAMP=", "BIN=BIN"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert recipe == "BIN/andrea-grade exercises --own-work", recipe
    done = subprocess.run([sys.executable, "-m", "andrea_course.grading.cli", *recipe.split()[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")})
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    n, points = _collected(GRADED, tmp_path)
    assert "Traceback" not in out, out
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert re.search(rf"TOTAL +0 / {points:g}\b", out), out[-500:]
    failing = [line for line in out.splitlines() if line.startswith("      x ")]
    assert len(failing) == n and all("not implemented yet" in line for line in failing), failing[:3]
    assert "isolation: a worker process as you (your own work" in out and "graded in" in out
    assert len(out.splitlines()) < n + 30


# ----------------------------------------------------------------------------- one verdict
# Student mistakes that once got full marks from andrea-grade while pytest and check() caught
# them: (file, the answer key's line, the mistaken line) or code appended to the file.
KERNEL_LOAD = '    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)'
KERNEL_STORE = "    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)"
ONE_VERDICT = {
    # the test's own tensor overwritten: the test's expected values change with it, in one process
    "dropout_in_place": ("block.py", None, """

def dropout(x, p, training, generator=None):
    if not training or p == 0:
        return x
    if p == 1:
        return x.zero_()
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return x.mul_(keep).div_(1 - p)
"""),
    # rows read n_cols apart: wrong only where x is a slice of a wider matrix
    "softmax_loads_rows_n_cols_apart": ("kernels.py", KERNEL_LOAD, KERNEL_LOAD.replace("row * x_row_stride", "row * n_cols")),
    # y stepped by x's row stride: writes past y where x is a slice (in one process: abort)
    "softmax_stores_with_x_stride": ("kernels.py", KERNEL_STORE, KERNEL_STORE.replace("row * y_row_stride", "row * x_row_stride")),
}
ONE_VERDICT_EXERCISES = ["block.dropout", "kernels.softmax_kernel"]


def _mistaken(folder: Path, file: str, old, new) -> Path:
    make_submission(folder)
    text = (folder / file).read_text()
    if old is None:
        text += new
    else:
        assert old in text, old
        text = text.replace(old, new)
    (folder / file).write_text(text)
    return folder


def _pytest_verdicts(impl: Path, isolation: str) -> dict:
    """{test name: passed} of the two test files' dropout and softmax-kernel tests, by plain pytest."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           str(GRADED / "test_block.py"), str(GRADED / "test_kernels.py"),
                           "-k", "dropout or softmax_kernel", "--impl", str(impl), "--isolation", isolation,
                           "-o", "addopts=", "-p", "andrea_course.grading.plugin", "--rootdir", str(impl)],
                          capture_output=True, text=True, cwd=impl, timeout=900,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    found = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and "::" in rest:
            found[rest.split("::")[1].split(" ")[0]] = word == "PASSED"
    assert found, done.stdout[-3000:] + done.stderr[-2000:]
    return found


@pytest.mark.slow
def test_one_verdict_in_every_runner(tmp_path, sandboxed):
    """The dropout done in place and the two row-stride mistakes of the softmax kernel fail the
    same tests under andrea-grade (sandbox), plain pytest (its worker), check() and, where the
    learner's code cannot crash the process, in one process; the reference passes them all."""
    from andrea_course.notebook import run_graded_many
    subs = {name: _mistaken(tmp_path / "class" / name, *spec) for name, spec in ONE_VERDICT.items()}
    subs["reference"] = make_submission(tmp_path / "class" / "reference")
    tests = tmp_path / "graded"
    tests.mkdir()
    for name in ("test_block.py", "test_kernels.py"):
        shutil.copy(GRADED / name, tests / name)
    out = tmp_path / "results"
    options = dict(timeout_per_test=60, timeout_total=900, isolation="auto", own_work=False, uid=None, limits=Limits())
    assert cli.batch(tmp_path / "class", tmp_path / "book.csv", out, Course(tests, guard=[]), options,
                     quiet=True, jobs=2) == 0
    for name, sub in subs.items():
        _, graded = by_test(out / f"{name}.json")
        checked = run_graded_many(ONE_VERDICT_EXERCISES, impl=sub)
        in_check = {o.name: o.status == "passed" for r in checked.values() for o in r.outcomes}
        ours = lambda verdicts: {n: v for n, v in verdicts.items() if n in in_check}     # noqa: E731
        grader = ours({n: t["status"] == "passed" for n, t in graded.items()})
        in_worker = ours(_pytest_verdicts(sub, "process"))
        assert len(in_check) >= 10 and grader == in_worker == in_check, (name, grader, in_worker, in_check)
        if name != "softmax_stores_with_x_stride":          # this one may abort a process it runs in
            assert ours(_pytest_verdicts(sub, "in-process")) == grader, name
        failed = sorted(n for n, ok in grader.items() if not ok)
        if name == "reference":
            assert not failed
        else:
            assert failed and all(("dropout" in n) == (name == "dropout_in_place") for n in failed), (name, failed)
            assert name == "dropout_in_place" or failed == ["test_softmax_kernel_strided_rows"], (name, failed)


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
                 "andrea_course/graded/test_attention.py", "hidden_tests/test_hidden_rms.py",
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


def _autograde(bundle, files, container: bool = False) -> tuple[dict, dict]:
    """run_autograder on `files`, on this machine or in a simulated Docker-default container;
    (results.json, what the container's processes and temp folders held of the workers' uids
    afterwards)."""
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
    for fd in keep:
        os.set_inheritable(fd, True)
    try:
        done = subprocess.run(argv, pass_fds=keep, capture_output=True, text=True, timeout=1500, env=bundle["env"])
    finally:
        for fd in keep:
            os.close(fd)
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

procs = [p for p in os.listdir("/proc") if p.isdigit() and owner(f"/proc/{p}") >= low]
files = []
for top in ("/tmp", "/dev/shm", "/var/tmp"):
    for folder, dirs, names in os.walk(top):
        files += [os.path.join(folder, n) for n in dirs + names if owner(os.path.join(folder, n)) >= low]
print(json.dumps({"processes": procs, "files": files}))
"""


@pytest.mark.slow
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
        grades: the reference gets full marks, the untouched exercises 0, and a hostile
        submission its honest points only (scale_scores, whose canary passes only if its worker
        is confined), having read no hidden test, forged no result, killed no grader, left
        nothing behind; results.json names the isolation and what it does not give."""
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
        untouched, _ = _autograde(bundle, sorted(EXERCISES.glob("*.py")), container=True)
        assert untouched["score"] == 0 and len(untouched["tests"]) == len(reference["tests"])

        hostile = make_submission(tmp_path / "hostile", ["attention__container_escape", "embeddings__kills_every_process"],
                                  base=EXERCISES, hidden=hidden, results=bundle["autograder"] / "results")
        data, left = _autograde(bundle, sorted(hostile.glob("*.py")), container=True)
        honest = {t["name"]: t["max_score"] for t in reference["tests"] if "attention.scale_scores" in t["name"]}
        got = {t["name"]: t for t in data["tests"]}
        assert honest and all(got[n]["status"] == "passed" for n in honest), [got[n]["output"] for n in honest]
        assert data["score"] == sum(honest.values()) and len(data["tests"]) == len(reference["tests"])
        assert "isolation: container" in data["output"] and "TAMPERING" not in data["output"]
        assert left == {"processes": [], "files": []} and snapshot(hidden) == hidden_before
