"""Library shortcuts (grading/shortcuts.py): a piece written as the library call that is the
piece is found, with the line it is on; the answer key, the untouched exercises and every
correct variant of the suite use none; andrea-grade's policy takes the points or keeps them."""
import shutil
from pathlib import Path

import pytest

from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.grading import shortcuts
from andrea_course.grading.gradescope import Results, TestResult
from andrea_course.lessons import LESSONS

# (piece, code appended to the answer key's file: the piece again, as a shortcut)
WRITTEN_AS_THE_LIBRARY = [
    ("attention.softmax", "def softmax(scores):\n    return torch.softmax(scores, dim=-1)\n", "torch.softmax"),
    ("attention.softmax", "def softmax(scores):\n    return scores.softmax(-1)\n", "scores.softmax"),
    ("attention.softmax", "import torch.nn.functional as Fn\n\ndef softmax(scores):\n    return Fn.log_softmax(scores, -1).exp()\n",
     "Fn.log_softmax"),
    ("attention.softmax", "def _rows(s):\n    return torch.nn.Softmax(dim=-1)(s)\n\ndef softmax(scores):\n    return _rows(scores)\n",
     "torch.nn.Softmax"),
    ("attention.attention", "import torch.nn.functional as F\n\ndef attention(q, k, v, causal=True):\n"
     "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)\n", "F.scaled_dot_product_attention"),
    ("block.layer_norm", "from torch.nn.functional import layer_norm as ln\n\n"
     "def layer_norm(x, weight, bias, eps=1e-5):\n    return ln(x, x.shape[-1:], weight, bias, eps)\n", "ln"),
    ("mlp.gelu_tanh", "import torch.nn.functional as F\n\ndef gelu_tanh(x):\n    return F.gelu(x, approximate='tanh')\n",
     "F.gelu"),
    ("embeddings.embed_lookup", "import torch.nn.functional as F\n\ndef embed_lookup(table, ids):\n    return F.embedding(ids, table)\n",
     "F.embedding"),
    ("embeddings.cosine_similarity", "from torch.nn import functional as F\n\ndef cosine_similarity(u, v, eps=1e-8):\n"
     "    return F.cosine_similarity(u, v, dim=-1, eps=eps)\n", "F.cosine_similarity"),
    ("modern.rms_norm", "def rms_norm(x, weight, eps=1e-5):\n    return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, eps)\n",
     "torch.nn.functional.rms_norm"),
    ("block.dropout", "def dropout(x, p, training, generator=None):\n    return torch.nn.functional.dropout(x, p, training)\n",
     "torch.nn.functional.dropout"),
    ("optim.adamw_step", "def adamw_step(*args, **kwargs):\n    return torch.optim.adamw.adamw(*args, **kwargs)\n",
     "torch.optim.adamw.adamw"),
]


def _folder(tmp_path: Path, piece: str, code: str) -> Path:
    folder = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, folder)
    activity = piece.split(".")[0]
    with open(folder / f"{activity}.py", "a") as f:
        f.write("\n\n" + code)
    return folder


@pytest.mark.parametrize("piece, code, call", WRITTEN_AS_THE_LIBRARY, ids=[c[2] for c in WRITTEN_AS_THE_LIBRARY])
def test_a_piece_written_as_the_library_call_is_found(tmp_path, piece, code, call):
    folder = _folder(tmp_path, piece, code)
    found = shortcuts.find(folder / f"{piece.split('.')[0]}.py", piece)
    assert [s.call for s in found] == [call], found
    line = (folder / f"{piece.split('.')[0]}.py").read_text().splitlines()[found[0].line - 1]
    assert call.split(".")[-1] in line
    assert found[0].teach().startswith(f"{call} (line {found[0].line}) is this exercise: write {piece} from ")


def test_the_answer_key_and_the_untouched_exercises_use_no_shortcut():
    for folder in (SOLUTIONS, EXERCISES):
        for lesson in LESSONS:
            for piece in lesson.exercises:
                assert shortcuts.find(folder / f"{lesson.activity}.py", piece) == [], (folder.name, piece)


def test_every_row_names_a_piece_of_the_course():
    pieces = {p for lesson in LESSONS for p in lesson.exercises}
    assert set(shortcuts.SHORTCUTS) <= pieces, set(shortcuts.SHORTCUTS) - pieces


def test_the_library_for_what_a_piece_does_not_teach_is_fine(tmp_path):
    """einsum in attention_scores, torch.softmax in sample_next, SDPA inside rope_attention,
    torch.special.erf in gelu_erf, autograd for gelu_grad's slope: none is a shortcut of its piece."""
    cases = [("attention.attention_scores", "def attention_scores(q, k):\n    return torch.einsum('...tk,...sk->...ts', q, k)\n"),
             ("model.sample_next", "def sample_next(logits, temperature, top_k, generator=None):\n"
              "    return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)\n"),
             ("modern.rope_attention", "def rope_attention(q, k, v, cos, sin, start=0, past_k=None, past_v=None):\n"
              "    return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"),
             ("mlp.gelu_erf", "def gelu_erf(x):\n    return 0.5 * x * (1 + torch.special.erf(x / 2 ** 0.5))\n"),
             ("mlp.gelu_grad", "def gelu_grad(x):\n    x = x.detach().requires_grad_()\n"
              "    return torch.autograd.grad(gelu_erf(x).sum(), x)[0]\n")]
    for piece, code in cases:
        folder = _folder(tmp_path / piece, piece, code)
        assert shortcuts.find(folder / f"{piece.split('.')[0]}.py", piece) == [], piece


def test_the_policy_takes_the_points_or_keeps_them(tmp_path):
    folder = _folder(tmp_path, "attention.softmax", WRITTEN_AS_THE_LIBRARY[0][1])

    def results():
        return Results(tests=[TestResult("a", "test_softmax", "attention.softmax", 2.0, passed=True),
                              TestResult("b", "test_scores", "attention.attention_scores", 1.0, passed=True)])
    refused = results()
    assert [s.call for s in shortcuts.apply(refused, folder, "refuse")] == ["torch.softmax"]
    assert refused.score == 1.0 and "is this exercise" in refused.tests[0].output and not refused.tests[1].output
    assert "no points" in refused.tests[0].output
    warned = results()
    shortcuts.apply(warned, folder, "warn")
    assert warned.score == 3.0 and "is this exercise" in warned.tests[0].output
    allowed = results()
    assert shortcuts.apply(allowed, folder, "allow") == [] and allowed.tests[0].output == ""
    with pytest.raises(ValueError, match="must be one of refuse, warn, allow"):
        shortcuts.apply(results(), folder, "ignore")


@pytest.mark.slow(seconds=20)
def test_andrea_grade_applies_the_policy(tmp_path):
    """torch.softmax as attention.softmax, graded by andrea-grade on the learner's own work:
    refused by default (the softmax tests score nothing and say why), kept with --library-shortcuts
    warn; the other pieces' tests are untouched. (The course's test files that hold
    attention.softmax's graded tests, and those of another activity: the policy is decided
    per test, from the test's exercise.)"""
    import json
    from andrea_course.grading import cli
    from andrea_course.grading.markers import graded_files
    from andrea_course.paths import ACTIVITY_TESTS
    folder = _folder(tmp_path, "attention.softmax", WRITTEN_AS_THE_LIBRARY[0][1])
    tests = tmp_path / "tests"
    tests.mkdir()
    for path in [*graded_files("attention.softmax"), ACTIVITY_TESTS / "test_embeddings.py"]:
        shutil.copy(path, tests / path.name)
    scores = {}
    for policy in ("refuse", "warn"):
        out = tmp_path / f"{policy}.json"
        assert cli.main([str(folder), "--own-work", "--quiet", "--no-leaderboard", "--out", str(out), "--tests",
                         str(tests)] + (["--library-shortcuts", policy] if policy != "refuse" else [])) == 0   # refuse: the default
        data = json.loads(out.read_text())
        softmax = [t for t in data["tests"] if t["name"].startswith("attention.softmax:")]
        assert softmax and all("torch.softmax (line " in t["output"] for t in softmax), softmax[:1]
        others = [t for t in data["tests"] if not t["name"].startswith("attention.softmax:")]
        assert all(t["status"] == "passed" for t in others), [t["name"] for t in others if t["status"] != "passed"][:3]
        assert {t["name"].split(".")[0] for t in others} >= {"attention", "embeddings"}, others[:1]
        scores[policy] = (sum(t["score"] for t in softmax), sum(t["max_score"] for t in softmax))
        assert "library shortcuts (policy: " + policy in data["output"]
    assert scores["refuse"][0] == 0 and scores["warn"][0] == scores["warn"][1] > 0, scores


@pytest.mark.slow(seconds=10)
def test_check_use_and_model_pieces_share_the_shortcut_verdict(tmp_path, capsys):
    """torch.softmax as attention.softmax in the notebook: check() shows the teaching box (not a
    green one), use() hands out the engine's softmax and passing() says why, one verdict."""
    from andrea_course import pieces
    from andrea_course.grading.passing import passing
    from andrea_course.notebook.checks import check, use
    folder = _folder(tmp_path, "attention.softmax", WRITTEN_AS_THE_LIBRARY[0][1])
    check("attention.softmax", impl=folder)
    shown = capsys.readouterr().out
    assert "torch.softmax is this exercise" in shown and "the library's, not yours" in shown.lower(), shown
    assert "write attention.softmax from exp and a sum over the last axis" in shown
    chosen = use("attention", "softmax", impl=folder)
    assert getattr(chosen, "__wrapped__", chosen) is pieces.get("attention", "softmax")
    said = passing(folder, ["attention.softmax", "attention.attention_scores"])
    assert said["attention.softmax"].startswith("engine: yours calls torch.softmax (line "), said
    assert said["attention.attention_scores"] == "yours"
