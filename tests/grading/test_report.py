"""The class report (grading/report.py, andrea-grade --batch ... --report): for each piece how
many learners got it, the named mistakes most common first with an example, the similar
pieces, the time per student; HTML escaped and self-contained, Markdown alike."""
import inspect
import json
import re
import shutil
import time

import pytest

from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.grading import cli, report
from andrea_course.grading.similarity import Pair, Report as SimilarityReport
from andrea_course.paths import ACTIVITY_TESTS
from grading_helpers import sandboxed  # noqa: F401  (the fixture: skip without a sandbox)
import test_attention_mutants


def _test(exercise, name, points, passed, output="", mistake=None):
    t = {"name": f"{exercise}: {name}", "score": points if passed else 0, "max_score": points,
         "status": "passed" if passed else "failed", "output": output, "tags": [exercise.split(".")[0], exercise]}
    if mistake is not None:
        t["mistake"] = mistake
    return t


def _named(mistake):
    return f"attention(q, k, v): 3 of 96 values differ\nLooks like a typical mistake: {mistake}\nHint: look again"


CLASS = {
    "ana": {"execution_time": 41, "tests": [
        _test("attention.softmax", "test_softmax", 2, True), _test("attention.attention", "test_causal", 3, True),
        _test("attention.attention", "test_unmasked", 1, True)]},
    "bo<b>": {"execution_time": 63, "tests": [
        _test("attention.softmax", "test_softmax", 2, True),
        _test("attention.attention", "test_causal", 3, False, _named("scores not divided by sqrt(K) & <such>")),
        _test("attention.attention", "test_unmasked", 1, True)]},
    "cy|d": {"execution_time": 12, "tests": [
        _test("attention.softmax", "test_softmax", 2, False, _named("wrong axis")),
        _test("attention.attention", "test_causal", 3, False, _named("scores not divided by sqrt(K) & <such>")),
        _test("attention.attention", "test_unmasked", 1, False, "NotImplementedError: not implemented yet")]},
    "dee": {"execution_time": 20, "tests": [
        _test("attention.softmax", "test_softmax", 2, False, "shape (2,)", mistake="a field the grader wrote"),
        _test("attention.attention", "test_causal", 3, False, "attention.attention: not implemented yet"),
        _test("attention.attention", "test_unmasked", 1, False, "attention.attention: not implemented yet")]},
}


def test_the_summary_counts_pieces_orders_mistakes_and_times():
    similar = SimilarityReport(pairs=[Pair("attention.attention", "ana", "engine", 0.97)], threshold=0.8)
    s = report.summarize(CLASS, similar)
    rows = {r.exercise: r for r in s.pieces}
    assert [r.exercise for r in s.pieces] == ["attention.softmax", "attention.attention"]      # the course's order
    assert (rows["attention.softmax"].got, rows["attention.softmax"].partly, rows["attention.softmax"].none) == (2, 0, 2)
    assert (rows["attention.attention"].got, rows["attention.attention"].partly, rows["attention.attention"].none) == (1, 1, 2)
    assert rows["attention.attention"].points == 4 and rows["attention.attention"].mean == pytest.approx((4 + 1) / 4)
    first, *rest = s.mistakes
    assert first.mistake == "scores not divided by sqrt(K) & <such>" and first.students == ["bo<b>", "cy|d"]
    assert "Looks like a typical mistake" in first.example and first.test.endswith("test_causal")
    assert {m.mistake for m in rest} == {"wrong axis", "a field the grader wrote"}          # the field wins
    assert [st.student for st in s.students] == sorted(CLASS)
    assert {st.student: st.seconds for st in s.students}["bo<b>"] == 63


def test_html_is_escaped_and_self_contained_and_markdown_alike():
    s = report.summarize(CLASS, SimilarityReport(pairs=[Pair("attention.attention", "bo<b>", "cy|d", 0.91)],
                                                 threshold=0.8))
    page = report.to_html(s)
    assert "<b>" not in page.replace("<body>", "") and "bo&lt;b&gt;" in page and "&amp; &lt;such&gt;" in page
    assert not re.search(r"<script|https?://|src=|@import", page)                          # nothing loads
    assert page.index("scores not divided") < page.index("wrong axis")                      # most common first
    assert page.index('bo&lt;b&gt;</td><td class="n">3 / 6</td><td class="n">63') < page.index("<td>ana</td>")  # slowest first
    md = report.to_markdown(s)
    assert "cy\\|d" in md and "bo\\<b\\>" in md and "| attention.attention | 1 of 4 | 1 | 2 | 1.25 / 4 |" in md
    assert md.index("scores not divided") < md.index("wrong axis")
    assert "Median 41 s, longest 63 s, 136 s in all." in md


def test_a_mistake_is_read_from_the_field_or_the_output():
    assert report.mistake_of({"output": _named("upper triangle")}) == "upper triangle"
    assert report.mistake_of({"output": "shape (2,), expected (3,)"}) is None
    assert report.mistake_of({"mistake": "named", "output": _named("other")}) == "named"


def test_the_report_file_name_says_its_format(tmp_path):
    s = report.summarize(CLASS)
    assert report.write_report(tmp_path / "c.md", s).read_text().startswith("# Class report")
    assert report.write_report(tmp_path / "c.html", s).read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match=".html or a .md"):
        report.write_report(tmp_path / "c.pdf", s)
    with pytest.raises(SystemExit):
        cli.parse(["--batch", str(tmp_path), "--csv", "g.csv", "--report", "class.pdf"])
    with pytest.raises(SystemExit):
        cli.parse([str(tmp_path), "--report", "class.html"])                                # not a batch


def _mutant(fn, name: str) -> str:
    """A mutant of tests/activity_tests/test_attention_mutants.py as a learner's file has it: the
    engine's module `att.` becomes the file's own functions."""
    source = inspect.getsource(fn).replace("att.", "")
    return source.replace(f"def {fn.__name__}(", f"def {name}(", 1)


NO_MAX = "def softmax(scores):\n    return scores.exp() / scores.exp().sum(dim=-1, keepdim=True)\n"


@pytest.mark.slow(seconds=45)
@pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="a student release has no answer key")
def test_andrea_grade_batch_writes_the_class_report(tmp_path, sandboxed):
    """The answer key, the untouched exercises and three mutants graded by andrea-grade --batch
    with --report and --similarity: the counts, the mistakes most common first, the times. The
    answer key keeps every point under the sandbox's authorship guard (tests/overlay/test_authorship.py's
    route submissions are graded beside no answer key of their own)."""
    students = tmp_path / "class"
    shutil.copytree(SOLUTIONS, students / "answer_key")
    shutil.copytree(EXERCISES, students / "untouched")
    mutants = {"unscaled": [_mutant(test_attention_mutants.attention_unscaled, "attention")],
               "unscaled_no_max": [_mutant(test_attention_mutants.attention_unscaled, "attention"), NO_MAX],
               "softmax_over_queries": [_mutant(test_attention_mutants.attention_softmax_dim0, "attention")]}
    for name, texts in mutants.items():
        shutil.copytree(SOLUTIONS, students / name)
        with open(students / name / "attention.py", "a") as f:
            f.write("\n\n" + "\n\n".join(texts))
    (tmp_path / "tests").mkdir()
    shutil.copy(ACTIVITY_TESTS / "test_attention.py", tmp_path / "tests" / "test_attention.py")
    csv, html, out = tmp_path / "gradebook.csv", tmp_path / "class.html", tmp_path / "results"
    assert cli.main(["--batch", str(students), "--csv", str(csv), "--out", str(out), "--tests",
                     str(tmp_path / "tests"), "--jobs", "2", "--quiet", "--similarity", "--report", str(html)]) == 0
    assert csv.read_text().splitlines()[0].endswith(",similar")
    key = json.loads((out / "answer_key.json").read_text())
    assert key["tests"] and all(t["status"] == "passed" for t in key["tests"]), \
        [(t["name"], t["output"][:300]) for t in key["tests"] if t["status"] != "passed"]
    assert key["score"] == sum(t["max_score"] for t in key["tests"]) and "isolation: sandbox" in key["output"]
    started = time.perf_counter()
    s = report.summarize(report.load_results(out))
    md = report.to_markdown(s)
    built = time.perf_counter() - started
    rows = {r.exercise: r for r in s.pieces}
    assert (rows["attention.attention"].got, rows["attention.attention"].none) == (1, 4)
    assert (rows["attention.softmax"].got, rows["attention.softmax"].partly, rows["attention.softmax"].none) == (3, 1, 1)
    assert rows["attention.causal_mask"].got == 4 and rows["attention.causal_mask"].none == 1
    first = s.mistakes[0]
    assert "not divided by sqrt(K)" in first.mistake and first.students == ["unscaled", "unscaled_no_max"]
    named = {m.mistake: m.students for m in s.mistakes}
    assert any("wrong axis" in m and st == ["softmax_over_queries"] for m, st in named.items()), named
    assert any("maximum" in m and st == ["unscaled_no_max"] for m, st in named.items()), named
    assert [st.student for st in s.students] == sorted(["answer_key", "untouched", *mutants])
    assert all(st.seconds > 0 for st in s.students)
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "not divided by sqrt(K)" in page and "Students and time" in page
    assert "Similar pieces" in page and "Not computed" not in page
    assert md.count("\n| attention.") == len(s.pieces)
    print(f"report of {len(s.students)} students built in {built * 1000:.1f} ms")
