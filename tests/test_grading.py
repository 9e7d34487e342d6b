"""The autograder: a submission cannot raise its own score, every failure costs only the
exercise it happens in (or its activity, when it happens at import), results.json is always
written, and the reference scores full marks.

The evil submissions are copies of solutions/ (or exercises/) with code from
tests/grading_fixtures/evil/ appended to one activity file; they are graded against a small
fixture suite (tests/grading_fixtures/) so that each run takes seconds.
"""
import json
import shutil
from pathlib import Path

import pytest
import torch

from andrea_course import ModelConfig
from andrea_course.grading import cli
from andrea_course.grading.gradescope import Results, TestResult, to_gradescope
from andrea_course.grading.plugin import sign
from andrea_course.grading.isolated import LearnerCodeError, _rebuild, decode, dumps, encode, loads
from andrea_course.grading.runner import Course, grade, read_jsonl
from andrea_course.exercises import EXERCISES, SOLUTIONS

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
def test_values_cross_the_pipe_and_nothing_else():
    cfg = ModelConfig.preset("andrea-tiny")
    value = {"x": torch.arange(6.0).reshape(2, 3)[:, 1], "n": [1, 2.5, True, None, "s"],
             "t": (torch.float16, torch.device("cpu")), "cfg": cfg, 3: slice(1, None)}
    back = decode(loads(dumps(encode(value))))
    assert torch.equal(back["x"], torch.tensor([1.0, 4.0])) and back["x"].untyped_storage().nbytes() == 8
    assert back["n"] == [1, 2.5, True, None, "s"] and back["t"] == (torch.float16, torch.device("cpu"))
    assert back["cfg"] == cfg and back[3] == slice(1, None)
    with pytest.raises(TypeError, match="can pass only"):
        encode(object())
    for bad in [("int", 1.5), ("bool", 1), ("config", ("str", "x")), ("handle", 3), ("eval", "1"), ()]:
        with pytest.raises(ValueError):
            decode(bad)


def test_learner_exceptions_keep_builtin_types_and_never_exit_the_grader():
    assert type(_rebuild("NotImplementedError", "attention.softmax: not implemented yet", "")) is NotImplementedError
    assert type(_rebuild("ValueError", "bad", "attention.py, line 3, in f")) is ValueError
    for name in ("SystemExit", "KeyboardInterrupt", "MyOwnError", "Skipped"):
        assert isinstance(_rebuild(name, "", ""), LearnerCodeError)
    assert "sys.exit" in str(_rebuild("SystemExit", "0", ""))
    assert "out of memory" in str(_rebuild("RuntimeError", "DefaultCPUAllocator: can't allocate memory", ""))


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


# ----------------------------------------------------------------------------- evil submissions
def test_a_class_of_evil_submissions(tmp_path):
    """One batch: two evil students, one who did nothing, and the reference."""
    course = make_course(tmp_path)
    out = tmp_path / "results"
    students = tmp_path / "class"
    original_test = (course / "tests" / "test_small.py").read_text()
    make_submission(students / "a_cheater", ["attention__cheats_at_import", "embeddings__os_exit_at_import",
                                             "mlp__edits_tests_and_sys_exit_at_import"],
                    out=out / "a_cheater.json", tests=course / "tests")
    make_submission(students / "b_crasher", ["attention__loop_and_sys_exit_in_calls",
                                             "mlp__os_exit_and_50GB_in_calls", "embeddings__segfault_in_call"])
    make_submission(students / "c_untouched", base=EXERCISES)
    make_submission(students / "d_reference")
    csv_path = tmp_path / "gradebook.csv"
    rc = cli.main(["--batch", str(students), "--csv", str(csv_path), "--out", str(out),
                   "--tests", str(course / "tests"), "--hidden-tests", str(course / "hidden"),
                   "--timeout-per-test", "4", "--quiet"])
    assert rc == 0
    # The cheater did reach the course's tests folder, and it did not matter.
    assert (course / "tests" / "test_small.py").read_text() != original_test

    data, tests = by_test(out / "d_reference.json")
    assert data["score"] == 8 and sorted(tests) == sorted(TESTS)
    assert all(t["status"] == "passed" and t["score"] == POINTS[n] for n, t in tests.items())
    assert tests["test_rms_norm_hidden"]["visibility"] == "hidden"
    assert tests["test_mlp_module"]["visibility"] == "after_due_date"

    data, tests = by_test(out / "a_cheater.json")    # the daemon it left kept writing a fake here
    passed = {n for n, t in tests.items() if t["status"] == "passed"}
    assert passed == {"test_scale_scores", "test_rms_norm_hidden"} and data["score"] == 2
    assert "values differ" in tests["test_softmax"]["output"]                  # allclose patched: no effect
    assert "ended the process" in tests["test_embed_lookup"]["output"]        # os._exit at import
    for name in ("test_gelu_tanh", "test_mlp_module"):                        # sys.exit at import
        assert "SystemExit" in tests[name]["output"], tests[name]["output"]
    assert "TAMPERING" in data["output"] and "not written by the grader" in data["output"]
    assert "test_small.py" in data["output"]                                  # the edit is reported

    data, tests = by_test(out / "b_crasher.json")
    assert data["score"] == 1 and tests["test_rms_norm_hidden"]["status"] == "passed"
    expected = {"test_embed_lookup": "signal 11", "test_softmax": "ran longer than 4 s",
                "test_scale_scores": "called sys.exit", "test_gelu_tanh": "ended the process",
                "test_mlp_module": "out of memory"}
    for name, why in expected.items():
        assert tests[name]["status"] == "failed" and why in tests[name]["output"], tests[name]["output"]

    data, tests = by_test(out / "c_untouched.json")
    assert data["score"] == 0 and len(tests) == 6
    for name, t in tests.items():
        assert "not implemented yet" in t["output"], t["output"]
    assert "attention.softmax: not implemented yet" in tests["test_softmax"]["output"]

    rows = csv_path.read_text().splitlines()
    assert rows[0].split(",")[:2] == ["student", "total"] and len(rows[0].split(",")) == 2 + 6
    assert [r.split(",")[:2] for r in rows[1:]] == [["a_cheater", "2"], ["b_crasher", "1"],
                                                    ["c_untouched", "0"], ["d_reference", "8"]]


def test_missing_submission_still_writes_results(tmp_path):
    out = tmp_path / "results.json"
    assert cli.main([str(tmp_path / "nowhere"), "--out", str(out), "--tests", str(FIXTURES / "hidden")]) == 2
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["tests"] == [] and "the grader failed" in data["output"]


# Classes: pytest-xdist's loadscope gives each its own scope, so these long runs can share the cores.
class TestTotalTimeLimit:
    def test_total_time_limit_still_writes_results(self, tmp_path):
        """softmax loops forever and the per-test limit is longer than the total: the total ends it."""
        import os
        from andrea_course.grading.runner import _children_map
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
        assert not _children_map().get(os.getpid())      # the run's processes are all gone


# ----------------------------------------------------------------------------- the real suite
@pytest.mark.slow
class TestRealSuite:
    def test_reference_scores_full_marks(self, tmp_path):
        out = tmp_path / "results.json"
        assert cli.main(["solutions", "--out", str(out), "--quiet"]) == 0
        data = json.loads(out.read_text())
        failed = [(t["name"], t["output"]) for t in data["tests"] if t["status"] != "passed"]
        assert not failed
        assert len(data["tests"]) >= 40
        assert data["score"] == sum(t["max_score"] for t in data["tests"]) > 0
