"""What holds for every graded file at once: the reference passes every graded test, and the
untouched exercises fail every one with "not implemented yet" and the exercise's name, without an
error at collection; every mistake a graded test lists can be confirmed on a second input; both
runners (check() and the grader) say what a learner did; the identity submission scores 0; a
piece with the wrong gradient fails. Each graded file's own mutants sit beside this file, in
test_<activity>_mutants.py (README.md)."""
import functools
import importlib.util
import os
import subprocess
import sys
import types
import xml.etree.ElementTree as ET

import pytest
import torch

from andrea_course.grading.student import InProcessStudent
from andrea_course.exercises import exercise_pieces
from andrea_course import pieces
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.paths import ROOT, STUB_MARK

from mutant_checks import GRADED_FILES, HIDDEN, MODULES, TESTS, _graded_tests, _module


def test_every_graded_test_passes_with_the_reference():
    tests = _graded_tests()
    activities = [f[len("test_"):-len(".py")] for f in GRADED_FILES]
    assert {e for *_, e in tests} == {f"{a}.{p}" for a in activities for p in exercise_pieces(ROOT / "solutions" / f"{a}.py")}
    student = InProcessStudent("solutions")
    for file, name, _ in tests:
        getattr(MODULES[file], name)(student)


@pytest.mark.slow(seconds=15)
def test_the_untouched_exercises_fail_every_graded_test_by_name(tmp_path):
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(ANDREA_IMPL="exercises", OMP_NUM_THREADS="1")   # tiny tensors: more threads only contend
    run = subprocess.run([sys.executable, "-m", "pytest", "--impl", "exercises", "-p", "no:xdist",
                          "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:hypothesispytest",
                          # the plugin's failure text is what is read; pytest's long form would
                          # parse each failing test's file again, half of this run's time
                          "-q", "--tb=native", f"--junitxml={report}",
                          *[str(TESTS / f) for f in GRADED_FILES],
                          *[str(HIDDEN / f.replace("test_", "test_hidden_", 1)) for f in GRADED_FILES
                            if (HIDDEN / f.replace("test_", "test_hidden_", 1)).exists()]],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert report.exists(), f"pytest wrote no report:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    cases = {}
    for case in ET.parse(report).iter("testcase"):
        problems = [c for c in case if c.tag in ("failure", "error", "skipped")]
        text = " ".join((c.get("message") or "") + " " + (c.text or "") for c in problems)
        home = case.get("classname").rsplit(".", 1)[-1].replace("test_hidden_", "test_", 1) + ".py"
        cases[(home, case.get("name"))] = (problems, text)
    suite = next(ET.parse(report).iter("testsuite"))
    assert suite.get("errors") == "0", f"errors (at collection?) under --impl exercises:\n{run.stdout[-3000:]}"
    for file, name, exercise in _graded_tests():
        assert (file, name) in cases, f"{file}::{name} did not run under --impl exercises"
        problems, text = cases[(file, name)]
        assert [p.tag for p in problems] == ["failure"], f"{file}::{name} did not fail with the exercises"
        assert STUB_MARK in text and exercise in text, (
            f"{file}::{name} failed without saying that {exercise} is {STUB_MARK}:\n{text[:1500]}")


# ----- issue 23: a named mistake is confirmed on a second input, in every graded test -----

class _Catalogue:
    """Wraps expect_close / expect_equal / expect_runs while the answer key runs a graded test, and
    writes down every mistake catalogue that could never be confirmed: a mistake wrong on the test's
    input and wrong on no second input, two mistakes that agree on both inputs, a second input
    whose expected value is not what the answer key gives there."""

    def __init__(self):
        from andrea_course.grading import expect as judge
        self.judge, self.problems, self.test = judge, [], ""
        self.close, self.equal, self.runs = judge.expect_close, judge.expect_equal, judge.expect_runs

    def _check(self, kind, want, what, mistakes, second, same, right):
        if not mistakes:
            return
        where = f"{self.test}: {what}"
        if not second:
            self.problems.append(f"{where}: {len(mistakes)} typical mistakes and no second input")
            return
        seconds = [second] if isinstance(second, self.judge.Second) else list(second)
        match = self.judge._match
        if kind != "runs":
            for s in seconds:
                try:
                    got = s.got()
                except Exception as exc:            # noqa: BLE001
                    self.problems.append(f"{where}: the answer key raised on a second input: {exc!r}"[:300])
                    continue
                if not right(got, s.want):
                    self.problems.append(f"{where}: a second input's expected value is not the answer key's output")
        confirmed_on = {}
        for name, wrong in mistakes.items():
            if wrong is None or (kind != "runs" and match(same, wrong, want, want)):
                continue                            # no mistake on this input: never named here
            i = next((i for i, s in enumerate(seconds) if s.mistakes.get(name) is not None
                      and (kind == "runs" or not match(same, s.mistakes[name], s.want, s.want))), None)
            if i is None:
                self.problems.append(f"{where}: [{name[:60]}] gives a wrong answer on no second input")
            else:
                confirmed_on[name] = i
        if kind == "runs":
            return
        names = list(confirmed_on)
        for x, a in enumerate(names):
            for b in names[x + 1:]:
                s = seconds[confirmed_on[a]]
                if confirmed_on[a] == confirmed_on[b] and match(same, mistakes[a], mistakes[b], want) \
                        and match(same, s.mistakes[a], s.mistakes[b], s.want):
                    self.problems.append(f"{where}: [{a[:40]}] and [{b[:40]}] agree on both inputs")

    def expect_close(self, got, want, what, *, mistakes=None, second=None, hint="", atol=None, rtol=None, **more):
        judge = self.judge
        w = want if isinstance(want, torch.Tensor) else torch.as_tensor(want)

        def right(g, t):
            t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
            a, r = judge._tol(t, atol, rtol)
            return isinstance(g, torch.Tensor) and judge._close(g, t, a, r)
        self._check("close", w, what, mistakes, second, judge._loose(atol, rtol), right)
        return self.close(got, want, what, mistakes=mistakes, second=second, hint=hint, atol=atol, rtol=rtol, **more)

    def expect_equal(self, got, want, what, hint="", mistakes=None, second=None, **more):
        self._check("equal", want, what, mistakes, second, self.judge._same, self.judge._same)
        return self.equal(got, want, what, hint, mistakes=mistakes, second=second, **more)

    def expect_runs(self, call, what, *, mistakes=None, second=None, hint=""):
        self._check("runs", None, what, mistakes, second, None, None)
        return self.runs(call, what, mistakes=mistakes, second=second, hint=hint)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("file", [*GRADED_FILES, "test_kernels.py", "test_bpe.py"])
def test_every_named_mistake_can_be_confirmed_on_a_second_input(file, monkeypatch):
    """Every typical mistake a graded test lists, where it gives a wrong answer on the test's input,
    gives a wrong answer on a second input too (so that the judge can tell it from a mistake that
    agrees with it on one input), and no two mistakes agree on both."""
    import andrea_course.activity_tests.test_multihead as shared            # test_modern imports its check_with_cache
    catalogue = _Catalogue()
    module = _module(file)
    tests = [(name, fn) for name, fn in vars(module).items()
             if name.startswith("test_") and any(m.name == "exercise" for m in getattr(fn, "pytestmark", []))]
    assert tests
    namespaces = [vars(catalogue.judge), vars(shared), *(fn.__globals__ for _, fn in tests)]
    for namespace in {id(n): n for n in namespaces}.values():           # each graded file (and its hidden one) once
        for name in ("expect_close", "expect_equal", "expect_runs"):
            if name in namespace:
                monkeypatch.setitem(namespace, name, getattr(catalogue, name))
    student = InProcessStudent("solutions")
    for name, fn in tests:
        catalogue.test = name
        fn(student)
    assert not catalogue.problems, "\n".join(catalogue.problems)


# ----- issue 23: what both runners say for the natural mistakes learners made -----
# A learner's folder: the answer key with one piece rewritten the way a learner wrote it (the last
# definition of a name in a file is the one that counts). Both read the rows of
# grading/records.py's describe(): check() shows them in its box, the grader writes their text
# (grading/gradescope.py's text()).

LEARNERS = {
    "multihead": '''
def merge_heads(y):
    B, H, T, K = y.shape
    return y.transpose(1, 2).view(B, T, H * K)       # a view of a transposed tensor
''',
    "model": '''
def sample_next(logits, temperature, top_k, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
''',
    "embeddings": '''
def embed_lookup(table, ids):
    B, T = ids.shape                                    # written for (B, T) ids only
    return table[ids.reshape(-1)].reshape(B, T, table.shape[-1])
''',
    "attention": '''
def attention(q, k, v, causal=True):
    w = softmax(scale_scores(attention_scores(q, k), q.shape[-1]))
    if causal:
        w = w * causal_mask(q.shape[-2], k.shape[-2])  # masked after the softmax
    return weighted_sum(w, v)
''',
    "block": '''
def dropout(x, p, training, generator=None):
    if not training or p == 0:
        return x
    if p == 1:
        return x.zero_()
    keep = torch.rand(x.shape, generator=generator) >= p
    return x.mul_(keep).div_(1 - p)                     # in place
''',
    "bpe": '''
def pair_counts(words):
    counts = {}
    for word in words:                                  # each word once, not by its count
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts
''',
}
REWRITTEN = {  # activity: (a line of the answer key, the learner's line)
    "model": ("self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))",
              "self.blocks = [Block(cfg) for _ in range(cfg.n_layers)]"),      # a plain list: nn.ModuleList forgotten
}
EXERCISES = ["multihead.merge_heads", "model.sample_next", "model.ANDREA", "embeddings.embed_lookup",
             "attention.attention", "block.dropout", "bpe.pair_counts"]


@pytest.fixture(scope="module")
def learners_folder(tmp_path_factory):
    import shutil
    folder = tmp_path_factory.mktemp("learner") / "submission"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for activity, (line, learners) in REWRITTEN.items():
        path = folder / f"{activity}.py"
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        at = [i for i, code in enumerate(lines) if code.strip() == line]          # the code, not a hint quoting it
        assert len(at) == 1, f"solutions/{activity}.py no longer holds the line {line!r}"
        lines[at[0]] = lines[at[0]].replace(line, learners)
        path.write_text("".join(lines), encoding="utf-8")
    for activity, code in LEARNERS.items():
        with open(folder / f"{activity}.py", "a", encoding="utf-8") as f:
            f.write("\n" + code)
    return folder


@pytest.fixture(scope="module")
def boxes(learners_folder):
    """{test name: the text of its failure in check()'s box}, for every failing graded test of EXERCISES."""
    from andrea_course.notebook import run_graded_many
    out = {}
    for exercise, result in run_graded_many(EXERCISES, impl=str(learners_folder)).items():
        assert result.error is None, result.error
        for o in result.outcomes:
            if o.status != "passed":
                out[o.name] = "\n".join(f"{label}: {text}" for label, text in o.rows)
    return out


@pytest.fixture(scope="module")
def reports(learners_folder, tmp_path_factory):
    """{test name: the grader's output for it} from pytest with the grading plugin (make grade's path)."""
    import json
    jsonl = tmp_path_factory.mktemp("grade") / "results.jsonl"
    files = [str(ACTIVITY_TESTS / f"test_{a}.py") for a in sorted({e.split(".")[0] for e in EXERCISES})]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "--tb=native", "-p", "no:cacheprovider", "-p", "no:xdist",
                    "-p", "no:nbval", "--impl", str(learners_folder), "--results-jsonl", str(jsonl), *files],
                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    from andrea_course.grading.gradescope import text
    from andrea_course.grading.records import Record
    lines = [Record.of({k: v for k, v in json.loads(line).items() if k != "mac"}) for line in jsonl.read_text().splitlines()]
    return {r.name: text(r) for r in lines if r.kind == "result" and r.status != "passed"}


BOX_CASES = [  # (graded test, words its failure must say, words it must not say)
    ("test_merge_heads", ["non-contiguous", ".reshape"], ["this test looks for", "mixes positions and heads"]),
    ("test_sample_next_draws_what_the_engine_draws", ["keepdim", "do not broadcast"], ["this test looks for"]),
    ("test_andrea_has_the_reference_parameters", ["plain Python list", "nn.ModuleList"], []),
    ("test_andrea_logits", ["nn.ModuleList", "lacks 24 parameters under blocks."], []),
    ("test_embed_lookup_of_one_sequence", ["Unpacking a tensor's shape", "x.shape[-2:]"], []),
    ("test_causal_attention", ["masked after the softmax"], ["fix that one first"]),
    ("test_dropout_leaves_its_input_unchanged", ["changed its argument 'x' in place"], ["nothing dropped"]),
    ("test_pair_counts_counts_overlapping_pairs", ["each word counted once"], ["overlapping pairs skipped"]),
]


@pytest.mark.parametrize("test, says, never", BOX_CASES, ids=[c[0] for c in BOX_CASES])
def test_both_runners_say_what_the_learner_did(test, says, never, boxes, reports):
    for runner, texts in (("check()", boxes), ("the grader", reports)):
        assert test in texts, f"{test} did not fail in {runner}; failing there: {sorted(texts)}"
        text = texts[test]
        for words in says:
            assert words in text, f"{runner} for {test} does not say {words!r}:\n{text}"
        for words in never:
            assert words not in text, f"{runner} for {test} says {words!r}, which the learner did not do:\n{text}"
    assert reports[test].count("blocks.") <= 6 and boxes[test].count("blocks.") <= 6     # a few names, never a listing


def test_one_natural_mistake_fails_only_where_it_is(boxes):
    """Each rewritten piece fails the tests of what it got wrong, not its neighbours': the in-place
    dropout only dropout's own tests, each box naming the in-place write (every call writes into
    the caller's x, and the graded piece is stopped there), the plain-list ANDREA not the count, the
    (B, T)-only lookup only the one-sequence test."""
    dropout = {t for t in boxes if "dropout" in t}
    assert "test_dropout_leaves_its_input_unchanged" in dropout, dropout
    assert all(t.startswith("test_dropout_") and "changed its argument 'x' in place" in boxes[t] for t in dropout), dropout
    lookup = {t for t in boxes if "embed_lookup" in t}
    assert lookup == {"test_embed_lookup_of_one_sequence"}, lookup
    assert not any("count_parameters" in t for t in boxes)


# ----- issue 23: no points for a no-op -----

class _Nothing(torch.nn.Module):
    """A learner's class that does nothing: built from anything, it gives its first input back."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.args = args

    def forward(self, x=None, *args, **kwargs):
        return x

    def update(self, k=None, *args, **kwargs):
        return k


def _first_input(*args, **kwargs):
    return args[0] if args else next(iter(kwargs.values()), None)


class IdentityStudent(InProcessStudent):
    """The identity submission: every function returns its first input, every class does nothing."""

    def __init__(self):
        super().__init__("solutions")

    def piece(self, activity, name):
        real = super().piece(activity, name)
        return _Nothing if isinstance(real, type) else _first_input

    def source(self, activity, name):
        return "def %s(*args):\n    return args[0]\n" % name


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_the_identity_submission_scores_0():
    """Every graded test, each piece a no-op: none passes, so no point is earned for doing nothing
    (a property such as "does nothing outside training" or "scores depend on the distance only"
    also checks that the piece does something)."""
    files = [*GRADED_FILES, "test_bpe.py"] + (["test_kernels.py"] if importlib.util.find_spec("triton") else [])
    student, passed, total = IdentityStudent(), [], 0.0
    for file in files:
        for name, fn in vars(_module(file)).items():
            marks = {m.name: m for m in getattr(fn, "pytestmark", [])}
            if not name.startswith("test_") or "exercise" not in marks:
                continue
            points = float(marks["points"].args[0]) if "points" in marks else 1.0
            total += points
            try:
                fn(student)
            except Exception:                       # noqa: BLE001 - every way of failing counts as failing
                continue
            passed.append((f"{file}::{name}", points))
    assert total > 0
    assert not passed, (f"the identity submission earns {sum(p for _, p in passed):g} of {total:g} points: "
                        + ", ".join(n for n, _ in passed))


# ----- issue 30 item 4: a piece with the wrong gradient fails -----

def _function_pieces():
    """{piece: [(file, test)]}: the graded tests of every piece that is a function (not a class)."""
    found = {}
    for file, name, piece in _graded_tests():
        activity, fn_name = piece.split(".")
        if isinstance(getattr(pieces.module(activity), fn_name, None), types.FunctionType):
            found.setdefault(piece, []).append((file, name))
    return found


FUNCTION_PIECES = _function_pieces()


@functools.cache
def _trained_through(piece) -> bool:
    """Whether the reference piece, called as its graded tests call it but with its floating-point
    tensor arguments requiring grad, gives an output on autograd's graph: training goes through it."""
    from andrea_course.inputs import keeps_inputs
    activity, name = piece.split(".")
    ref, seen, tests = pieces.module(activity).__dict__[name], [], FUNCTION_PIECES[piece]

    @functools.wraps(ref)
    def probe(*args, **kwargs):
        grad = lambda a: a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        try:
            with torch.enable_grad():
                out = ref(*map(grad, args), **{k: grad(v) for k, v in kwargs.items()})
            seen.append(any(isinstance(t, torch.Tensor) and t.requires_grad
                            for t in (out if isinstance(out, tuple) else (out,))))
        except Exception:
            pass
        return ref(*args, **kwargs)
    student = InProcessStudent("solutions", overrides={(activity, name): keeps_inputs(probe, name)})
    for file, test in tests:
        try:
            getattr(MODULES[file], test)(student)
        except Exception:
            pass
        if any(seen):
            return True
    return False


GRADIENT_SLIPS = {  # what a piece's output becomes: the same values, another gradient
    "cut off": lambda t: t.detach(),                            # .detach(), .data, a trip through NumPy
    "half gradient": lambda t: t.detach() + (t - t.detach()) / 2,   # part of it hidden from autograd
}


@pytest.mark.parametrize("slip", sorted(GRADIENT_SLIPS))
@pytest.mark.parametrize("piece", sorted(FUNCTION_PIECES))
def test_a_piece_with_the_wrong_gradient_fails(piece, slip):
    """Every function piece that training goes through fails some graded test when its output is
    cut off from autograd, or keeps its values with another gradient (a statistic detached,
    padding_idx): a model built from it would learn wrongly or not at all, whatever its values."""
    from andrea_course.inputs import keeps_inputs
    tests = FUNCTION_PIECES[piece]
    if not _trained_through(piece):
        pytest.skip(f"{piece}: no output on autograd's graph")
    activity, name = piece.split(".")
    ref = pieces.module(activity).__dict__[name]

    @functools.wraps(ref)                    # ref's signature: keeps_inputs sees its arguments
    def wrong(*args, **kwargs):
        out = ref(*args, **kwargs)
        change = lambda t: GRADIENT_SLIPS[slip](t) if isinstance(t, torch.Tensor) and t.requires_grad else t
        return tuple(map(change, out)) if isinstance(out, tuple) else change(out)
    student = InProcessStudent("solutions", overrides={(activity, name): keeps_inputs(wrong, name)})
    for file, test in tests:
        try:
            getattr(MODULES[file], test)(student)
        except Exception:                                # noqa: BLE001 - any failure: the piece does not pass
            return
    pytest.fail(f"{piece}: every graded test passes a piece whose output has {slip}")
