"""The capstone's leaderboard (capstone/leaderboard.py): the learner's andrea-tiny, trained in their
own worker from the pieces that passed, measured by the grader with the engine's model on
held-out stories; forged weights refused; Gradescope's "leaderboard" field and the gradebook's
column; the held-out split's number only in the instructor's files.

The trainings here are short (6 steps on 100 stories, 20 held-out stories; the course's settings,
instructor/hidden_tests/leaderboard.json, train 30): what is checked is the path, not the loss a
real run reaches. Workers are forks of this process (Isolation start="fork"), which has tokenized
the training stories once (leaderboard.warm_up)."""
import csv
import json
import math
import os
import re
import shutil

import pytest
import torch

from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.grading import cli
from andrea_course.capstone import leaderboard as lb
from andrea_course.grading.gradescope import Results, TestResult, to_gradescope
from andrea_course.grading.runner import Course, grade
from andrea_course.worker.tiers import Isolation
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.engine.model import ANDREA
from andrea_course.paths import ROOT

from grading_helpers import sandboxed  # noqa: F401  (a fixture)

SMALL = dict(held_out_seed=4242, held_out_stories=20, steps=6, stories=100, timeout=60)
FORK = Isolation("process", timeout=60, start="fork")
COURSE_SETTINGS = ROOT / "instructor" / "hidden_tests" / lb.SETTINGS_FILE


@pytest.fixture(scope="module")
def settings():
    s = lb.Settings(**SMALL)
    lb.warm_up(s.for_worker())            # inherited by every forked worker
    return s


def verdict(exercises, passed=True):
    return [TestResult(f"t::{e}", "t", e, 1.0, passed=passed) for e in exercises]


# ----------------------------------------------------------------------------- trained and measured
def test_the_reference_learns_below_the_untrained_model_and_the_uniform_baseline(settings):
    cfg = settings.model_config()
    entry = lb.measure(SOLUTIONS, verdict(lb.considered(settings)), settings, FORK)
    torch.manual_seed(0)
    untrained = lb.validation_loss(ANDREA(cfg).state_dict(), settings)
    uniform = math.log(cfg.vocab_size)                           # 9.04 nats: every token equally likely
    assert entry.value is not None, entry.note
    # measured: reference 7.80 after 6 steps (6.79 after 10, 4.52 after 40), untrained 9.13
    assert math.isfinite(entry.value) and entry.value < uniform - 0.5 and entry.value < untrained - 0.5
    assert f"validation loss {entry.value:.4f}" in entry.note and "16 of your 16 pieces trained it" in entry.note


def test_the_untouched_exercises_get_no_value_and_no_training(settings):
    """No piece of the model or its training passes: the model would be the engine's alone, so
    nothing is trained (no worker is even started before the tests) and the output says why."""
    assert not lb.written_any(EXERCISES, settings) and lb.written_any(SOLUTIONS, settings)
    entry = lb.measure(EXERCISES, verdict(lb.considered(settings), passed=False), settings, FORK)
    assert entry.value is None and entry.gradescope() == []
    assert entry.note.startswith("Leaderboard: no value: none of your 16 pieces") and "\n" not in entry.note


def test_only_the_pieces_that_passed_train_and_the_engine_stands_in(settings):
    """The verdicts are the grader's: a piece whose graded tests failed in this run is the
    engine's in the trained model, whatever the file holds."""
    accept = lb.verdicts(verdict(["optim.lr_at", "mlp.MLP"]) + verdict(["mlp.MLP"], passed=False)
                         + verdict(["attention.softmax"]) + verdict(["no.such"]))
    assert accept == {"optim.lr_at": "yours", "mlp.MLP": "engine: 1 of its 2 graded tests fail",
                      "attention.softmax": "yours"}
    reply = lb.train(str(SOLUTIONS), accept, {**lb.Settings(**SMALL).for_worker(), "steps": 1})
    assert reply["pieces"]["mlp.MLP"].startswith("engine: 1 of its 2") and reply["pieces"]["attention.softmax"] == "yours"


# ----------------------------------------------------------------------------- forged weights
def _engine_weights(settings):
    with torch.random.fork_rng(devices=[]):
        return ANDREA(settings.model_config()).state_dict()


def _forge(weights, how):
    w = dict(weights)
    if how == "shape":
        w["head.weight"] = w["head.weight"][:10]
    elif how == "nan":
        w["head.weight"] = w["head.weight"].clone().fill_(float("nan"))
    elif how == "inf":
        w["embed.position_table"] = w["embed.position_table"].clone()
        w["embed.position_table"][3, 5] = float("inf")
    elif how == "dtype":
        w["head.weight"] = w["head.weight"].half()
    elif how == "missing":
        w.pop("head.weight")
    elif how == "extra":
        w["huge"] = torch.zeros(1 << 20)
    elif how == "not a tensor":
        w["head.weight"] = [0.0]
    elif how == "not a dict":
        return list(w.values())
    return w


@pytest.mark.parametrize("how, said", [
    ("shape", "has shape (10, 128), not (8449, 128)"), ("nan", "head.weight holds NaN or inf"),
    ("inf", "embed.position_table holds NaN or inf"),
    ("dtype", "is torch.float16, not torch.float32"), ("missing", "missing 'head.weight'"),
    ("extra", "an unknown 'huge'"), ("not a tensor", "is a list, not a tensor"), ("not a dict", "not a dict")])
def test_forged_weights_are_refused_with_one_line(settings, how, said):
    weights = _engine_weights(settings)
    assert set(lb.check_weights(weights, settings.model_config())) == set(weights)
    with pytest.raises(lb.LeaderboardError, match=r"^[^\n]*" + re.escape(said)):
        lb.validation_loss(_forge(weights, how), settings)


FORGING = '''

import os as _os
import torch as _torch

_plain_state_dict = _torch.nn.Module.state_dict


def _forged_state_dict(self, *args, **kwargs):
    """Hands the grader forged weights of the whole model (never of a module swapped into it)."""
    weights = _plain_state_dict(self, *args, **kwargs)
    how = open(_os.path.join(_os.path.dirname(__file__), "forge.txt")).read().strip()
    if type(self).__name__ != "ANDREA" or "head.weight" not in weights:
        return weights
    if how == "nan":
        weights["head.weight"] = _torch.full_like(weights["head.weight"], float("nan"))
    elif how == "huge":
        weights["huge"] = _torch.zeros(8 << 20)                # 32 MiB: more than andrea-tiny's weights
    elif how == "shape":
        weights["head.weight"] = weights["head.weight"][:, :64]
    return weights


_torch.nn.Module.state_dict = _forged_state_dict
'''


@pytest.fixture(scope="module")
def forger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forger")
    for path in SOLUTIONS.glob("*.py"):
        shutil.copy(path, folder / path.name)
    with open(folder / "model.py", "a") as f:
        f.write(FORGING)
    return folder


@pytest.mark.parametrize("how, said", [
    ("nan", "no value: the weights' head.weight holds NaN or inf"),
    ("huge", "no value: your code returned more than 12 MiB of data"),
    ("shape", "no value: the weights' head.weight has shape (8449, 64), not (8449, 128)")])
def test_weights_forged_by_the_learners_code_give_no_value(settings, forger, how, said):
    (forger / "forge.txt").write_text(how)
    entry = lb.measure(forger, verdict(lb.considered(settings)), settings, FORK)
    assert entry.value is None and entry.gradescope() == [] and "\n" not in entry.note
    assert entry.note.startswith(f"Leaderboard: {said}"), entry.note


def test_a_training_that_diverges_gives_no_value(settings, tmp_path):
    folder = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, folder)
    with open(folder / "optim.py", "a") as f:
        f.write("\n\ndef lr_at(step, lr, min_lr, warmup_steps, max_steps):\n    return float('inf')\n")
    entry = lb.measure(folder, verdict(["optim.lr_at"]), settings, FORK)
    assert entry.value is None
    assert entry.note.startswith("Leaderboard: no value: the training failed: FloatingPointError: the training "
                                 "loss became nan"), entry.note


@pytest.mark.slow(seconds=7)
def test_a_training_that_runs_out_of_time_gives_no_value(settings):
    slow = lb.Settings(**{**SMALL, "timeout": 6, "steps": 10_000})
    entry = lb.measure(SOLUTIONS, verdict(["optim.lr_at"]), slow, FORK)
    assert entry.value is None and entry.note.startswith("Leaderboard: no value: your code ran longer than 6 s")


# ----------------------------------------------------------------------------- where it appears
def test_results_json_carries_gradescopes_leaderboard_field():
    results = Results(tests=verdict(["mlp.MLP"]), leaderboard=lb.Entry(4.213456, "Leaderboard: ..."))
    data = to_gradescope(results)
    assert data["leaderboard"] == [{"name": "Validation loss", "value": 4.2135, "order": "asc"}]
    assert data["score"] == 1.0                                   # never in the score
    assert "leaderboard" not in to_gradescope(Results(tests=verdict(["mlp.MLP"]), leaderboard=lb.Entry(None, "no")))
    assert "leaderboard" not in to_gradescope(Results(tests=verdict(["mlp.MLP"])))


def _reduced_course(tmp_path):
    """The optimiser's graded tests alone, and a leaderboard.json next to them (as hidden tests)."""
    tests, hidden = tmp_path / "tests", tmp_path / "hidden"
    tests.mkdir()
    hidden.mkdir()
    for name in ("__init__.py", "test_optim.py"):
        shutil.copy(ACTIVITY_TESTS / name, tests / name)
    (hidden / lb.SETTINGS_FILE).write_text(json.dumps(SMALL))
    return tests, hidden


def test_grading_writes_gradescopes_field_and_one_line(tmp_path):
    """grade() with the leaderboard.json of the hidden tests folder: after the graded tests, the
    learner's model is trained from the pieces that passed; results.json has Gradescope's
    "leaderboard" field, the output one line; the score is the tests' alone."""
    tests, hidden = _reduced_course(tmp_path)
    results = grade(SOLUTIONS, tmp_path / "results.json", course=Course(tests=tests, hidden=hidden),
                    isolation="process", own_work=True)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["score"] == results.max_score > 0 and all(t["status"] == "passed" for t in data["tests"])
    assert results.leaderboard.value is not None, data["output"]
    assert data["leaderboard"] == [{"name": "Validation loss", "value": round(results.leaderboard.value, 4),
                                    "order": "asc"}]
    line, = [n for n in data["output"].splitlines() if n.startswith("Leaderboard:")]
    assert line.startswith("Leaderboard: validation loss ") and "2 of your 16 pieces trained it" in line


# ----------------------------------------------------------------------------- in the graded tests' worker parent
def _noting_parents(monkeypatch, log):
    """Note in `log` each worker parent started (in this process or in pytest, a fork of it: the
    entry point it prepares, or None) and each entry point a worker is asked to run."""
    from andrea_course.worker.client import IsolatedStudent
    plain_start, plain_run = IsolatedStudent._start_parent, IsolatedStudent.run

    def note(what):
        with open(log, "a") as f:
            f.write(json.dumps(what) + "\n")

    def start_parent(self, *args, **kwargs):
        note(self._prepare[0] if self._prepare else None)
        return plain_start(self, *args, **kwargs)

    def run(self, entry, *args, **kwargs):
        note(["run", entry])
        return plain_run(self, entry, *args, **kwargs)
    monkeypatch.setattr(IsolatedStudent, "_start_parent", start_parent)
    monkeypatch.setattr(IsolatedStudent, "run", run)


@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize("base, trained", [(SOLUTIONS, True), (EXERCISES, False)], ids=["reference", "untouched"])
def test_one_worker_parent_per_submission_forks_the_tests_and_the_training(tmp_path, monkeypatch, sandboxed,
                                                                             base, trained):
    """The graded tests' worker parent, prepared with the leaderboard's warm-up where the submission
    wrote a piece it trains with, also forks the training's worker: no second parent starts. One
    that wrote none gets a plain worker parent, and nothing is trained."""
    tests, hidden = _reduced_course(tmp_path)
    log = tmp_path / "parents.jsonl"
    _noting_parents(monkeypatch, log)
    results = grade(base, tmp_path / "results.json", course=Course(tests=tests, hidden=hidden))
    started = [json.loads(line) for line in log.read_text().splitlines()]
    assert results.isolation.startswith("isolation: sandbox")
    if trained:
        assert started == [lb.WARM_UP, ["run", lb.TRAIN]] and results.leaderboard.value is not None
        assert "2 of your 16 pieces trained it" in results.leaderboard.note
    else:
        assert started == [None] and results.leaderboard.value is None
        assert results.leaderboard.note.startswith("Leaderboard: no value: none of your 16 pieces")


HOSTILE_TESTS = '''

# A graded test's worker leaves a daemon and state behind, and notes itself in the sandbox's /tmp
# (every worker of the tier sees it); in the leaderboard's training, lr_at says what it finds.
import json as _json
import os as _os
import sys as _sys
import time as _time

import torch as _torch

_SEEN = "/tmp/hostile.json"
_fresh = not hasattr(_torch, "_hostile")           # what a worker that ran a test would carry
_torch._hostile = True


def _seen():
    try:
        with open(_SEEN) as f:
            return _json.load(f)
    except (OSError, ValueError):
        return {"workers": [], "parents": [], "daemon": None}


def _daemon():
    r, w = _os.pipe()
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _os.write(w, str(_os.getpid()).encode())
            while True:
                _time.sleep(1)
        _os._exit(0)
    _os.wait()
    _os.close(w)
    return int(_os.read(r, 32))


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


_plain_lr_at = lr_at


def lr_at(step, lr, min_lr, warmup_steps, max_steps):
    frame, training = _sys._getframe(1), False
    while frame is not None:
        training = training or frame.f_code.co_filename.endswith("trainer.py")
        frame = frame.f_back
    seen = _seen()
    if training:
        raise RuntimeError(_json.dumps({"fresh": _fresh, "daemon alive": _alive(seen["daemon"]),
                                        "ran a test": _os.getpid() in seen["workers"],
                                        "same parent": _os.getppid() in seen["parents"]}))
    seen["workers"].append(_os.getpid())
    seen["parents"].append(_os.getppid())
    seen["daemon"] = seen["daemon"] or _daemon()
    with open(_SEEN, "w") as f:
        _json.dump(seen, f)
    return _plain_lr_at(step, lr, min_lr, warmup_steps, max_steps)
'''


@pytest.mark.slow(seconds=15)
def test_the_training_worker_is_fresh_after_a_hostile_test(tmp_path, sandboxed):
    """The training's worker is a fresh fork of the graded tests' worker parent, never a worker that
    ran a test: the daemon a test's worker left is dead and the state it changed is not there."""
    tests, hidden = _reduced_course(tmp_path)
    folder = tmp_path / "hostile"
    shutil.copytree(SOLUTIONS, folder)
    with open(folder / "optim.py", "a") as f:
        f.write(HOSTILE_TESTS)
    results = grade(folder, tmp_path / "results.json", course=Course(tests=tests, hidden=hidden))
    assert all(t.passed for t in results.tests if t.exercise == "optim.lr_at")
    said = "Leaderboard: no value: the training failed: RuntimeError: "
    assert results.leaderboard.note.startswith(said), results.leaderboard.note
    assert json.loads(results.leaderboard.note[len(said):]) == {"fresh": True, "daemon alive": False,
                                                               "ran a test": False, "same parent": True}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_the_worker_parent_taken_back_drops_what_pytest_left(tmp_path):
    """pytest adopts the worker parent and never ends it (it closes its socket); it may end mid-test,
    its worker running and answers unread on the socket: take_back reads past them to the answer
    to its own greeting and has every process of the tier killed; the next worker is a fresh one."""
    from andrea_course.worker.client import IsolatedStudent
    iso = Isolation("process", timeout=30)
    starter = IsolatedStudent(SOLUTIONS, isolation=iso)
    try:
        for ends in ("cleanly", "mid-test"):
            fd, pid = starter.hand_over().split(":")
            adopter = IsolatedStudent(SOLUTIONS, isolation=iso, adopt=f"{os.dup(int(fd))}:{pid}")
            adopter.begin_test("optim")
            assert adopter.piece("optim", "lr_at")(0, 1.0, 0.1, 2, 10) == 0.5
            left = adopter.proc.pid
            if ends == "cleanly":
                adopter.end_test()                                 # its answer never read
                adopter.close()
            else:
                for request in ({"op": "poll", "pid": left}, {"op": "take"}, {"op": "hello"}):
                    adopter._pask(request, wait=False)             # answers never read
                adopter._psock.close()                             # gone, its worker never ended
                assert _alive(left)
            assert starter._parent.poll() is None                  # the adopter never ends it
            starter.take_back()
            assert not _alive(left) and starter._parent.poll() is None
            starter.begin_test("optim")
            assert starter.piece("optim", "lr_at")(0, 1.0, 0.1, 2, 10) == 0.5 and starter.proc.pid != left
            starter.end_test()
    finally:
        starter.close()


@pytest.mark.slow(seconds=45)
def test_a_batch_writes_the_gradebooks_column(tmp_path, capsys):
    """andrea-grade --batch --leaderboard FILE: the CSV has a "validation loss" column, a number
    for the reference, an empty cell for the untouched exercises (which keep their points)."""
    tests, hidden = _reduced_course(tmp_path)
    settings = hidden / lb.SETTINGS_FILE
    klass = tmp_path / "class"
    shutil.copytree(SOLUTIONS, klass / "ana")
    shutil.copytree(EXERCISES, klass / "bo")
    gradebook = tmp_path / "gradebook.csv"
    assert cli.main(["--batch", str(klass), "--csv", str(gradebook), "--tests", str(tests), "--leaderboard",
                     str(settings), "--own-work", "--jobs", "1"]) == 0
    rows = {r["student"]: r for r in csv.DictReader(gradebook.open())}
    assert list(rows["ana"])[:3] == ["student", "total", "validation loss"]
    assert float(rows["ana"]["validation loss"]) < math.log(8449) and rows["bo"]["validation loss"] == ""
    assert float(rows["ana"]["total"]) > 0 and float(rows["bo"]["total"]) == 0
    ana = json.loads((tmp_path / "gradebook-results" / "ana.json").read_text())
    assert ana["leaderboard"] == [{"name": "Validation loss", "value": float(rows["ana"]["validation loss"]),
                                   "order": "asc"}]
    assert "Leaderboard: validation loss" in ana["output"] and "2 of your 16 pieces trained it" in ana["output"]
    bo = json.loads((tmp_path / "gradebook-results" / "bo.json").read_text())
    assert "leaderboard" not in bo and "Leaderboard: no value: none of your" in bo["output"]
    assert "leaderboard: andrea-tiny trained 6 steps" in capsys.readouterr().out


# ----------------------------------------------------------------------------- settings and secrecy
def test_the_settings_are_checked_with_one_line(tmp_path):
    path = tmp_path / "leaderboard.json"
    for text, said in (("{", "not valid JSON"), ("[]", "must be a JSON object"),
                       ('{"steps": 3}', "has no held_out_seed"),
                       ('{"held_out_seed": 1, "step": 3}', "no leaderboard setting 'step' (did you mean 'steps'?)"),
                       ('{"held_out_seed": 2026}', "is the shipped stories' own"),
                       ('{"held_out_seed": 1, "steps": 0}', "steps must be a positive integer"),
                       ('{"held_out_seed": 1, "seq_len": 512}', "longer than andrea-tiny's context length 256")):
        path.write_text(text)
        with pytest.raises(lb.LeaderboardError, match=r"^[^\n]*" + re.escape(said)):
            lb.Settings.load(path)


def test_the_hidden_tests_folder_turns_it_on_and_keeps_it_to_the_grader(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / lb.SETTINGS_FILE).write_text(json.dumps(SMALL))
    course = Course(hidden=hidden)
    assert course.leaderboard.settings == lb.Settings(**SMALL) and lb.SETTINGS_FILE not in course.hidden
    assert Course(hidden=hidden, leaderboard=False).leaderboard is None
    assert Course().leaderboard is None
    assert not any(k.startswith("held_out") for k in lb.Settings(**SMALL).for_worker())    # the worker never has it


def test_the_held_out_split_is_not_in_the_learners_release():
    """The course's settings live with the hidden tests, which andrea-release leaves out; their
    number is in no file the release ships, and its stories are none of the shipped ones."""
    from andrea_course.release import INSTRUCTOR_ONLY, tracked_files
    from andrea_course.train.corpus import load_corpus
    if not COURSE_SETTINGS.is_file():
        pytest.skip("a learner's release has no leaderboard settings")
    settings = lb.Settings.load(COURSE_SETTINGS)
    assert COURSE_SETTINGS.relative_to(ROOT).as_posix().startswith(INSTRUCTOR_ONLY)
    number = str(settings.held_out_seed)
    for name in tracked_files():
        if name.startswith(INSTRUCTOR_ONLY) or not (ROOT / name).is_file():
            continue
        data = (ROOT / name).read_bytes()
        assert number.encode() not in data, f"{name} holds the held-out split's number"
    from andrea_course.train.corpus import generate
    assert not set(generate(settings.held_out_seed, settings.held_out_stories)) & set(load_corpus())


def test_the_class_report_shows_the_validation_loss():
    from andrea_course.grading import report
    board = {"ana": {"execution_time": 30, "tests": [], "leaderboard": lb.Entry(4.9623, "").gradescope()},
             "bo": {"execution_time": 12, "tests": []}}
    summary = report.summarize(board)
    assert {s.student: s.loss for s in summary.students} == {"ana": 4.9623, "bo": None}
    text = report.to_markdown(summary)
    assert "| student | score | seconds | validation loss |" in text and "| 4.9623 |" in text
    assert "<th>validation loss</th>" in report.to_html(summary) and '<td class="n">4.9623</td>' in report.to_html(summary)
    assert "validation loss" not in report.to_markdown(report.summarize({"bo": board["bo"]}))
