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
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from andrea_course.grading import cli, pipeline, runner, staging
from andrea_course.grading.gradescope import Results, TestResult, text, to_gradescope, write_json
from andrea_course.grading.gradescope import table as runner_table
from andrea_course.grading.markers import Credit
from andrea_course.grading.records import read, sign
from andrea_course.grading.runner import Course, grade
from andrea_course.grading.staging import snapshot
from andrea_course.worker.tiers import Limits
from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.paths import ROOT

from grading_helpers import FIXTURES, POINTS, TESTS, by_test, make_course, make_submission, sandboxed  # noqa: F401  (sandboxed: a fixture)


# ----------------------------------------------------------------------------- fast unit checks
def test_unsigned_result_lines_are_ignored(tmp_path):
    key = b"k" * 32

    def line(record, k):
        return json.dumps({**record, "mac": sign(k, record)})
    rec = {"kind": "result", "nodeid": "t.py::a", "status": "passed"}
    lines = [line(rec, b"x" * 32), "not json", line({**rec, "status": "failed"}, key), line(rec, key)]
    records, forged = read([x.encode() for x in lines], key)
    assert [r.status for r in records] == ["failed", "passed"] and forged == 2


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


@pytest.mark.slow(seconds=65)
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
    assert "Where: attention.py, line " in tests["test_scale_scores"]["output"], tests["test_scale_scores"]["output"]
    for name in HOSTILE:                   # the learner's files by their names, not the grader's copies
        for t in by_test(out / f"{name}.json")[1].values():
            assert str(tmp_path / "grader-tmp") not in t["output"] and "andrea-grade-" not in t["output"], \
                (name, t["output"])

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
    monkeypatch.setattr(staging, "probe", lambda *a: "bubblewrap is not installed")
    monkeypatch.setattr(staging, "probe_container", lambda *a: "the learner's code could reach /hidden (read as uid 7)")
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


def test_a_module_of_the_graders_process_never_stands_in_for_a_test_file(tmp_path, sandboxed, monkeypatch):
    """The grader's pytest is a fork of the grader (process.start_pytest): a module the grader's
    process imported under a test file's name (its own test suite's test_small, say) must not stand
    in for the course's file of that name, which pytest would then refuse to load."""
    import types
    monkeypatch.setitem(sys.modules, "test_small", types.ModuleType("test_small"))
    course = make_course(tmp_path)
    results = grade(make_submission(tmp_path / "ref"), tmp_path / "r.json", course=Course(course / "tests", guard=[]))
    assert sorted(t.name for t in results.tests) == sorted(TESTS[:-1]), results.notes
    assert all(t.passed for t in results.tests) and not any("failed to load" in n for n in results.notes)


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

    wrong = tmp_path / "wrong"          # the plugin, end to end (the learner's code in a worker process)
    wrong.mkdir()
    (wrong / "attention.py").write_text("import torch\n\ndef softmax(x):\n    return torch.softmax(x, -2)\n")
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(FIXTURES / "partial" / "fake_test_partial.py", suite / "test_partial.py")
    # pytest with the plugin, its signed records read back: pipeline.run, the one runner of
    # graded tests (a fork of this process, which has imported torch and pytest already)
    got = pipeline.run(pipeline.Spec(tests=[suite], folder=wrong, isolation="process", limit=30.0,
                                     exercises=["attention.softmax"], rootdir=tmp_path))
    (record,) = got.results.values()
    assert got.forged == 0 and record.fraction == 0.25 and record.status == "failed"
    assert "1 of 2 parts failed (partial credit 25%)" in text(record) and "values differ" in text(record)
    assert record.mistake == "softmax over the wrong axis (dim=-2)"        # the named mistake, as data


def test_a_failure_outside_the_test_body_says_so(tmp_path):
    """A graded test whose fixture fails: results.json's output starts with "setup: " (the
    learner's code never ran), as it always did; check()'s box rows do not carry the prefix."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_setup.py").write_text(
        "import pytest\nfrom andrea_course.grading import graded\n\n\n@pytest.fixture\ndef broken():\n"
        "    raise RuntimeError('the fixture broke')\n\n\n@graded('attention.softmax')\n"
        "def test_needs_it(broken):\n    pass\n")
    got = pipeline.run(pipeline.Spec(tests=[suite], folder=SOLUTIONS, isolation="in-process", limit=30.0,
                                     rootdir=tmp_path))
    (record,) = got.results.values()
    assert got.forged == 0 and record.status == "error" and record.when == "setup"
    assert text(record).startswith("setup: RuntimeError: the fixture broke"), text(record)
    assert record.rows[0] == ("problem", "RuntimeError: the fixture broke")
    assert "after your code returned" not in text(record)


@pytest.mark.slow(seconds=10)
def test_a_failure_names_the_learners_file_not_the_graders_copy(tmp_path):
    """results.json's output and andrea-grade's table name the learner's line as `mlp.py, line N`
    (relative to the submission), never the temporary folder the grader staged it in."""
    course = make_course(tmp_path)
    sub = make_submission(tmp_path / "sub")
    with open(sub / "mlp.py", "a") as f:
        f.write("\n\ndef gelu_tanh(x):\n    return undefined_name * x\n")
    with open(sub / "attention.py", "a") as f:
        f.write("\n\ndef scale_scores(scores, d_head):\n    import sys\n    sys.exit('done')\n")
    results = grade(sub, tmp_path / "results.json", course=Course(course / "tests", guard=[]),
                    isolation="process", own_work=True, timeout_per_test=30)
    data, tests = by_test(tmp_path / "results.json")
    gelu = _line_of(sub / "mlp.py", "return undefined_name * x")
    assert f"Where: mlp.py, line {gelu}, in gelu_tanh\n    return undefined_name * x" in tests["test_gelu_tanh"]["output"]
    exits = _line_of(sub / "attention.py", "sys.exit('done')")
    assert f"Where: attention.py, line {exits}, in scale_scores" in tests["test_scale_scores"]["output"]
    shown = runner_table(results)
    assert f"(mlp.py, line {gelu}, in gelu_tanh)" in shown and f"(attention.py, line {exits}, in scale_scores)" in shown
    for said in [t["output"] for t in data["tests"]] + [shown]:
        for temporary in (tempfile.gettempdir() + "/", str(tmp_path), "andrea-grade-", "/submission/"):
            assert temporary not in said, (temporary, said)


def _line_of(path: Path, needle: str) -> int:
    return max(i for i, row in enumerate(path.read_text().splitlines(), 1) if needle in row)


# Classes: pytest-xdist's loadscope gives each its own scope, so these long runs can share the cores.
@pytest.mark.slow(seconds=35)
class TestTotalTimeLimit:
    def test_total_time_limit_still_writes_results(self, tmp_path, sandboxed):
        """softmax loops forever and the per-test limit is longer than the total: the total ends it."""
        from andrea_course.worker.process import children_map
        before = set(children_map().get(os.getpid(), ()))   # another test's (check()'s worker parent, say)
        course = make_course(tmp_path)
        sub = make_submission(tmp_path / "looper", ["attention__sleeps_forever"])
        out = tmp_path / "out" / "results.json"
        results = grade(sub, out, course=Course(course / "tests", guard=[]), timeout_per_test=600,
                        timeout_total=8)
        data, tests = by_test(out)
        assert "total time limit of 8 s" in data["output"] and data["score"] == results.score <= 2
        assert tests["test_softmax"]["status"] == "failed"
        assert "total time limit" in tests["test_softmax"]["output"]
        for name, t in tests.items():        # what finished before softmax may pass; nothing after it
            assert t["status"] == "passed" or "total time limit" in t["output"], (name, t["output"])
        assert not set(children_map().get(os.getpid(), ())) - before      # the run's processes are all gone
