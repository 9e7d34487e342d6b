"""A graded piece must be the learner's own: the engine's pieces ship with the package (the
grader needs them), and handing one in is refused with a message saying why (authorship.py):
the plain cases by the source and object checks, every route by the grading worker's guard."""
import dis
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from andrea_course import authorship, pieces
from andrea_course.exercises import SOLUTIONS
from andrea_course.grading import cli
from andrea_course.grading.runner import Course
from andrea_course.grading.student import InProcessStudent
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.paths import ROOT
from andrea_course.overlay import ImplementationError, Overlay
from grading_helpers import sandboxed  # noqa: F401  (the fixture: skip without a sandbox, check nothing is left)

EXERCISES = ROOT / "exercises"

CHEATS = {
    "imports the engine's piece": "from andrea_course.pieces.attention import softmax\n",
    "reaches the engine's piece through the package": "import andrea_course.pieces as p\nsoftmax = p.get('attention', 'softmax')\n",
    "names it through an engine module": "import andrea_course.engine.model as m\nsoftmax = m.MultiHeadAttention\n",
    "imports it dynamically": "softmax = __import__('andrea_course.pieces.attention').pieces.attention.softmax\n",
    "digs in sys.modules": "import sys\nsoftmax = sys.modules['andrea_course.pieces.attention'].softmax\n",
    "reads the answer key": "from solutions.attention import softmax\n",
    "aliases a library function": "import torch\nsoftmax = torch.softmax\n",
}


def _submission(tmp_path, tail):
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    (folder / "attention.py").write_text((EXERCISES / "attention.py").read_text() + "\n" + tail)
    return folder


@pytest.mark.parametrize("tail", CHEATS.values(), ids=CHEATS.keys())
def test_a_piece_that_is_not_the_learners_is_refused(tmp_path, tail):
    overlay = Overlay(_submission(tmp_path, tail))
    with pytest.raises(ImplementationError, match="not yours to hand in|not defined in attention.py|write it in your file"):
        overlay.isolated("attention", "softmax")


def test_a_subclass_that_inherits_the_engines_forward_is_refused(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    text = (EXERCISES / "mlp.py").read_text().replace("class MLP(nn.Module):", "class MLP(_Engine):")
    (folder / "mlp.py").write_text("from andrea_course.engine.model import make_mlp as _mk\n_Engine = type(_mk.__globals__['MLP'])\n" + text)
    with pytest.raises(ImplementationError):
        Overlay(folder).isolated("mlp", "MLP")


def test_honest_work_with_pytorchs_own_ops_passes(tmp_path):
    honest = "def softmax(scores):\n    return torch.softmax(scores, dim=-1)\n"
    student = InProcessStudent(_submission(tmp_path, honest))
    s = torch.randn(2, 3)
    torch.testing.assert_close(student.piece("attention", "softmax")(s), torch.softmax(s, -1))


def _model_submission(tmp_path, text):
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    (folder / "model.py").write_text(text)
    return Overlay(folder)


def test_the_engines_kv_cache_handed_in_as_ones_own_is_refused(tmp_path):
    """model.KVCache is a piece: model.py may not import the engine's (multihead.py and block.py
    are given it), nor subclass it and inherit its update."""
    exercise = (EXERCISES / "model.py").read_text()
    imported = _model_submission(tmp_path, "from andrea_course.engine.model import KVCache as _K\n" + exercise
                                 + "\nKVCache = _K\n")
    with pytest.raises(ImplementationError, match="not yours to hand in"):
        imported.isolated("model", "KVCache")
    without_update = exercise[:exercise.index("    def update(")]          # update ends the file
    inherited = _model_submission(tmp_path, without_update.replace("class KVCache:", "class KVCache(_Engine):")
                                  .replace("import torch\n", "import torch\nfrom andrea_course.engine.model import given_model_methods as _g\n"
                                           "_Engine = _g()[4]\n", 1))
    with pytest.raises(ImplementationError, match="does not define its own methods"):
        inherited.isolated("model", "KVCache")


# ----------------------------------------------------------------------------- while the tests run
# The engine's own version of the piece being graded is unusable in the grading worker, by any
# route (authorship.forbid_engine). The routes are hostile fixtures: tests/grading_fixtures/
# authorship_routes/<route>.py, each a module that reaches the engine's attention pieces its own
# way (the source check never reads it) and binds them as E (or a function _call(name, ...)).
ROUTES = Path(__file__).parents[1] / "grading_fixtures" / "authorship_routes"
REFUSED = ("not yours to", "Write the piece in your file", "write it in your file", "is refused while")
WHY = {"libc_read_source": ("Errno 13",)}      # native code: the kernel's "permission denied" (Landlock)


def _route_module(route: str) -> dict[str, str]:
    """{file name: text} of one route: `_route_<name>.py` (and any file it brings along, after a
    '# === file: NAME ===' line), with a default _call."""
    text = (ROUTES / f"{route}.py").read_text()
    first, *others = text.split("# === file: ")
    files = {f"_route_{route}.py": first + "\n\n_call = globals().get('_call') or "
             "(lambda name, *args, **kwargs: getattr(E, name)(*args, **kwargs))\n"}
    for other in others:
        head, _, body = other.partition("\n")
        files[head.split(" ===")[0].strip()] = body
    return files


def _handing_in(piece: str, route: str) -> str:
    """The learner's `piece`, written as a call of the engine's through `route` (imported when
    the piece is called, so a route refused at import costs only its own piece)."""
    if isinstance(pieces.get("attention", piece), type):
        return textwrap.dedent(f"""
            class {piece}(nn.Module):
                def __init__(self, *args, **kwargs):
                    super().__init__()
                    from ._route_{route} import E
                    self.inner = getattr(E, "{piece}")(*args, **kwargs)

                def forward(self, *args, **kwargs):
                    return self.inner(*args, **kwargs)
            """)
    return textwrap.dedent(f"""
        def {piece}(*args, **kwargs):
            from ._route_{route} import _call
            return _call("{piece}", *args, **kwargs)
        """)


def route_submissions(into: Path, honest: int = 2) -> dict[str, dict[str, str]]:
    """Submissions that hand in the engine's attention pieces through the routes, every route
    once, `honest` pieces of each left as the learner wrote them (the answer key's, when this
    checkout has it, which each student should then score exactly): {student: {piece: route}}."""
    routes = sorted(p.stem for p in ROUTES.glob("*.py"))
    names = list(pieces.names("attention"))
    per = len(names) - honest
    base = (SOLUTIONS if SOLUTIONS.is_dir() else EXERCISES) / "attention.py"
    plan = {}
    for j, i in enumerate(range(0, len(routes), per)):
        turned = names[3 * j % len(names):] + names[:3 * j % len(names)]     # each piece routed in turn
        chosen = dict(zip(turned, routes[i:i + per]))
        folder = into / f"routes_{j}"
        folder.mkdir(parents=True)
        text = base.read_text() + "\n\n# ---- handed in through the routes ----\n"
        for piece, route in chosen.items():
            text += _handing_in(piece, route)
            for name, body in _route_module(route).items():
                (folder / name).write_text(body)
        (folder / "attention.py").write_text(text)
        plan[folder.name] = chosen
    return plan


def test_every_route_fixture_is_a_module_the_source_check_never_reads():
    routes = sorted(p.stem for p in ROUTES.glob("*.py"))
    assert len(routes) >= 28, routes                      # the fourteen, and as many more
    for route in routes:
        for name, text in _route_module(route).items():
            assert "E" in text and name.endswith(".py")


def test_the_guard_reads_no_global_name():
    """The audit hook and what it calls bind everything as defaults: rebinding a name in
    authorship.py or in builtins cannot change what they do."""
    for fn in (authorship._guard_hook, authorship._code_keys, authorship._spawn_check):
        loads = [i.argval for i in dis.get_instructions(fn) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        assert not loads, (fn.__name__, loads)


def _labels(activity, name):
    return [label for label, _ in authorship.engine_versions(activity, name)]


def test_the_engine_versions_of_a_piece():
    assert _labels("attention", "softmax")[0] == "softmax"
    assert "MultiHeadAttention.forward" in _labels("multihead", "MultiHeadAttention")
    assert "MultiHeadAttention.cache_and_share" not in _labels("multihead", "MultiHeadAttention")   # given
    model = _labels("model", "ANDREA")
    assert "ANDREA.forward" in model and "ANDREA.__init__" in model
    assert not {"ANDREA.generate", "ANDREA.new_caches", "ANDREA.reset_parameters", "ANDREA.output_weight"} & set(model)
    assert "_count_tensors" in _labels("model", "count_parameters")          # its private helper
    from andrea_course.train import schedule
    assert dict(authorship.engine_versions("optim", "lr_at"))["lr_at"] is schedule.lr_at   # the trainer's own
    attention = dict(authorship.engine_versions("attention", "attention"))
    from andrea_course.engine import ops
    assert attention["attention"] is ops.attention
    if importlib.util.find_spec("triton") is not None:                        # every back-end of its op slot
        assert "engine.kernels.attention.attention_reference" in attention
        assert "engine.kernels.softmax.softmax_reference" in _labels("attention", "softmax")
    assert authorship.engine_versions("kernels", "softmax") == []            # a launcher, not a piece
    assert authorship.forbid_engine("block", "KVCache") is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_in_process_the_guard_refuses_only_the_learners_calls(tmp_path):
    """In a process that also computes the expected values, the engine's softmax runs for the
    grader and is refused from the learner's file (or a thread); lift() undoes it all."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "attention.py").write_text(
        "import threading\nfrom . import attention as E\n\n"
        "def softmax(scores):\n    return E.softmax(scores)\n\n"
        "def attention(q, k, v, causal=True):\n    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(E.softmax(q)))\n    t.start()\n    t.join()\n"
        "    return out[0] if out else None\n")
    engine, x = pieces.get("attention", "softmax"), torch.randn(2, 3)
    with authorship.forbid_engine("attention", "softmax", learner=folder) as guard:
        torch.testing.assert_close(engine(x), torch.softmax(x, -1))            # the grader's own call
        overlay = Overlay(folder)
        with pytest.raises(authorship.EngineRefused, match="the engine's softmax is not yours to hand in"):
            overlay.isolated("attention", "softmax")(x)
        assert overlay.isolated("attention", "attention")(x, x, x) is None     # refused in its thread
        assert "softmax" in guard.labels
    assert engine.__code__.co_filename.endswith("attention.py")               # lifted
    torch.testing.assert_close(Overlay(folder).isolated("attention", "softmax")(x), torch.softmax(x, -1))


_WORKER_SCRIPT = r"""
import builtins, ctypes, json, types
import torch
from andrea_course import authorship, pieces
pieces.module("attention")
path = pieces.module("attention").__file__
text = open(path).read()                                # read before the guard, as a learner could not
guard = authorship.forbid_engine("attention", "softmax")
out = {"kernel": guard.kernel}

def attempt(name, fn):
    try:
        fn()
        out[name] = "ran"
    except BaseException as exc:
        out[name] = f"{type(exc).__name__}: {exc}"

engine = pieces.get("attention", "softmax")
attempt("call", lambda: engine(torch.zeros(2)))
real = builtins.isinstance
authorship._code_keys = lambda code: (None, None)       # rebinding names changes nothing
builtins.isinstance = lambda *a: False
copy = "\n\n\n" + text.replace("from ..engine import ops", "from andrea_course.engine import ops")
attempt("exec_shifted", lambda: exec(compile(copy, "mine.py", "exec"), {}))
builtins.isinstance = real
src = "def softmax(scores: torch.Tensor) -> torch.Tensor:\n    return torch.softmax(scores, dim=-1)\n"
module = compile("\n" * 40 + src, "x.py", "exec")
code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
attempt("function_from_code", lambda: types.FunctionType(code, {"torch": torch})(torch.zeros(2)))
attempt("open_source", lambda: open(path).read())
attempt("swap_code_back", lambda: setattr(engine, "__code__", (lambda s: s).__code__))
libc = ctypes.CDLL(None, use_errno=True)
out["libc_open"] = libc.open(path.encode(), 0)
print(json.dumps(out))
"""


def test_the_worker_guard_cannot_be_undone_from_python(tmp_path):
    """forbid_engine as the worker runs it (for good): the engine's softmax refused, a copy of
    its text refused however it is compiled (the hook's names rebound first), its source
    unreadable even through libc where Landlock exists, its code not restorable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _WORKER_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "not yours to hand in" in out["call"]
    assert out["exec_shifted"].startswith(("EngineRefused", "PermissionError")), out["exec_shifted"]
    assert out["function_from_code"].startswith("EngineRefused"), out["function_from_code"]
    assert "not yours to read" in out["open_source"], out["open_source"]
    assert "cannot be changed" in out["swap_code_back"], out["swap_code_back"]
    if out["kernel"] == "landlock":
        assert out["libc_open"] < 0                                           # the kernel refuses


def _course(tmp: Path, files) -> Course:
    (tmp / "course").mkdir()
    for name in files:
        shutil.copy(ACTIVITY_TESTS / name, tmp / "course" / name)
    return Course(tmp / "course")


def _batch(tmp: Path, students: Path, course: Course, shortcuts: str = "refuse") -> dict:
    """andrea-grade --batch; `shortcuts`: its --library-shortcuts (the engine's PyTorch versions
    typed in are library shortcuts by that policy, and honest work as far as authorship goes)."""
    options = dict(timeout_per_test=60, timeout_total=1200, isolation="auto", own_work=False, uid=None,
                   library_shortcuts=shortcuts)
    assert cli.batch(students, tmp / "gradebook.csv", tmp / "results", course, options, quiet=True, jobs=2) == 0
    return {p.stem: json.loads(p.read_text()) for p in (tmp / "results").glob("*.json")}


@pytest.mark.slow(seconds=50)
def test_every_route_to_the_engine_scores_only_the_learners_own_work(tmp_path, sandboxed):
    """andrea-grade --batch over the route submissions: each piece a route hands in fails every
    one of its tests, saying why; the pieces the learner wrote (the answer key's here) keep their
    points. (The answer key itself keeps every point of test_attention.py under andrea-grade
    --batch in the sandbox: tests/grading/test_report.py::test_andrea_grade_batch_writes_the_class_report.)"""
    plan = route_submissions(tmp_path / "class")
    results = _batch(tmp_path, tmp_path / "class", _course(tmp_path, ["test_attention.py"]))
    assert all(len(set(pieces.names("attention")) - set(chosen)) >= 2 for name, chosen in plan.items())
    assert {route for chosen in plan.values() for route in chosen.values()} == {p.stem for p in ROUTES.glob("*.py")}
    for student, chosen in plan.items():
        for test in results[student]["tests"]:
            exercise = test["name"].split(": ")[0]
            piece = exercise.split(".")[1]
            if piece in chosen:
                why = WHY.get(chosen[piece], REFUSED)
                assert test["score"] == 0 and any(w in test["output"] for w in why), \
                    (chosen[piece], test["name"], test["output"])
            elif SOLUTIONS.is_dir():
                assert test["status"] == "passed", (student, test["name"], test["output"])


def _typed_in(exercise: str) -> str:
    """The engine's PyTorch version of a function piece, as a learner would type it into their
    file (named as the exercise names it)."""
    activity, name = exercise.split(".")
    source = textwrap.dedent(inspect.getsource(authorship.python_function(pieces.get(activity, name))))
    head, _, rest = source.partition("(")
    return f"def {name}(" + rest if head.startswith("def ") else source


TYPED_IN = ["embeddings.embed_lookup", "embeddings.add_positions", "embeddings.cosine_similarity",
            "attention.average_past", "attention.causal_average_weights", "attention.attention_scores",
            "attention.scale_scores", "attention.causal_mask", "attention.apply_causal_mask", "attention.softmax",
            "attention.weighted_sum", "attention.attention", "multihead.split_heads", "multihead.merge_heads",
            "mlp.gelu_tanh", "mlp.gelu_erf", "block.layer_norm", "modern.rms_norm", "modern.swiglu",
            "modern.swiglu_hidden_dim", "modern.rope_attention"]
PRELUDE = ("\n\n# ---- correct variants ----\nimport math\nimport torch\nimport torch.nn.functional as F\n"
           "from andrea_course.engine import ops\n")


@pytest.mark.slow(seconds=50)
@pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="a student release has no answer key")
def test_honest_work_keeps_full_marks_under_the_guard(tmp_path, sandboxed):
    """The answer key with correct variants in place of its pieces (the engine's PyTorch versions
    typed in, tests/feedback/test_variants.py's other ways) gets every point from andrea-grade: the guard
    refuses the engine's objects, never a learner's equal code. (The answer key itself: tests/grading/test_report.py.)
    Graded with --library-shortcuts allow: typed-in torch.softmax is the shortcut policy's to judge
    (tests/grading/test_shortcuts.py), not authorship's."""
    import test_variants
    variants, taken = {}, {}                          # student -> {activity: [appended text]}, -> {exercise}
    written = [(exercise, textwrap.dedent(inspect.getsource(fn)).replace(f"def {fn.__name__}(",
                                                                        f"def {exercise.split('.')[1]}(", 1))
               for _, exercise, fn in test_variants.MORE_VARIANTS]
    written += [(exercise, _typed_in(exercise)) for exercise in TYPED_IN]
    for exercise, text in written:
        if not text.startswith("def "):               # a lambda wrapped by a helper of the tests
            continue
        student = next(f"variants_{i}" for i in range(len(written)) if exercise not in taken.get(f"variants_{i}", ()))
        taken.setdefault(student, set()).add(exercise)
        variants.setdefault(student, {}).setdefault(exercise.split(".")[0], []).append(text)
    files = ["test_embeddings.py", "test_attention.py", "test_multihead.py", "test_mlp.py", "test_block.py",
             "test_modern.py"]
    # variants_0 holds a variant of every piece: graded on every file. The others hold the second
    # variants of a few pieces, the rest of their files the answer key's: graded on the files
    # holding those pieces' graded tests (markers.graded_files), in a batch of their own, at once.
    from concurrent.futures import ThreadPoolExecutor
    from andrea_course.grading.markers import graded_files
    batches: dict[tuple, list[str]] = {}
    for student, exercises in taken.items():
        mine = files if student == "variants_0" else [f for f in files if f in
                                                      {p.name for e in exercises for p in graded_files(e)}]
        batches.setdefault(tuple(mine), []).append(student)
    assert set(batches.get(tuple(files), ())) == {"variants_0"}, batches

    def graded(i: int, course_files: tuple, group: list[str]) -> dict:
        students = tmp_path / f"batch_{i}" / "class"
        for student in group:
            shutil.copytree(SOLUTIONS, students / student)
            for activity, texts in variants[student].items():
                with open(students / student / f"{activity}.py", "a") as f:
                    f.write(PRELUDE + "\n\n".join(texts))
        got = _batch(students.parent, students, _course(students.parent, course_files), shortcuts="allow")
        assert set(got) == set(group), (got.keys(), group)
        return got
    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        done = list(pool.map(graded, range(len(batches)), batches.keys(), batches.values()))
    results = {student: data for got in done for student, data in got.items()}
    assert set(results) == set(variants)
    for student, data in results.items():
        tested = {t["name"].split(": ")[0] for t in data["tests"]}
        assert taken[student] <= tested, (student, taken[student] - tested)       # every variant was graded
        failed = [(t["name"], t["output"][:300]) for t in data["tests"] if t["status"] != "passed"]
        assert not failed and data["score"] == sum(t["max_score"] for t in data["tests"]), (student, failed)
