"""The similarity report (grading/similarity.py): a renamed or respaced copy of a piece scores
near 1, an independent correct version low; the code the exercise gives never counts; close
pairs are listed, the engine's, the answer key's and classmates'."""
import ast
import shutil
import textwrap
from pathlib import Path

import pytest

from andrea_course import pieces
from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.grading import similarity as S

# Pieces whose engine version is long enough to judge, each with a correct version written
# independently of it (another way to compute the same thing).
INDEPENDENT = {
    "attention.attention": '''
def attention(q, k, v, causal=True):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        T, S = scores.shape[-2:]
        hidden = torch.ones(T, S, dtype=torch.bool).triu(S - T + 1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
''',
    "bpe.encode": '''
def encode(text, merges):
    ranks = dict((tuple(pair), i) for i, pair in enumerate(merges))
    out = []
    for word in words_in_order(text):
        word = list(word)
        while len(word) > 1:
            best = None
            for i in range(len(word) - 1):
                r = ranks.get((word[i], word[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            r, _ = best
            word = list(merge_pair(tuple(word), tuple(merges[r]), 256 + r))
        out += word
    return out
''',
    "optim.adamw_step": '''
def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    b1, b2 = betas
    param = param * (1 - lr * weight_decay)
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad * grad
    m_hat = m / (1 - b1 ** step)
    v_hat = v / (1 - b2 ** step)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v
''',
}
KEEP = {"self", "torch", "F", "nn", "math", "ops", "tl", "triton", "super", "range", "len", "min", "max", "tuple",
        "zip", "dict", "list", "enumerate", "Counter", "float", "int", "words_in_order", "merge_pair",
        "TrainConfig", "None", "True", "False"}


class _Rename(ast.NodeTransformer):
    """Every local name and argument renamed (v0, v1, ...), the rest left as written."""

    def __init__(self):
        self.names = {}

    def _new(self, name):
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node):
        if node.id not in KEEP:
            node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        if node.arg != "self":
            node.arg = self._new(node.arg)
        return node


def renamed(source: str) -> str:
    tree = ast.parse(textwrap.dedent(source))
    name = tree.body[0].name
    _Rename().visit(tree)
    tree.body[0].name = name                       # the exercise's name stays
    return ast.unparse(tree)


def respaced(source: str) -> str:
    """Other spacing, blank lines and comments; the same tokens."""
    out = []
    for i, line in enumerate(textwrap.dedent(source).splitlines()):
        out += [line.replace(", ", " ,  ").replace(" = ", "=").rstrip() + ("    # mine" if i % 2 else ""), ""]
    return "\n".join(out)


def _engine(exercise):
    return S.engine_sources()[exercise]


@pytest.mark.parametrize("exercise", sorted(INDEPENDENT))
def test_a_renamed_or_respaced_copy_scores_near_1_an_independent_version_low(exercise):
    engine = S.fingerprints(_engine(exercise))
    assert len(engine) >= S.MIN_FINGERPRINTS
    copy = S.similarity(engine, S.fingerprints(renamed(_engine(exercise))))
    spaced = S.similarity(engine, S.fingerprints(respaced(_engine(exercise))))
    mine = S.similarity(engine, S.fingerprints(INDEPENDENT[exercise]))
    assert copy >= 0.9 and spaced >= 0.95, (copy, spaced)
    assert mine <= 0.3, mine


def test_tokens_drop_comments_docstrings_and_names_but_keep_the_api():
    a = S.tokens('def f(x, y=2):\n    """doc"""\n    # a comment\n    return torch.softmax(x, dim=-1) + 1\n')
    b = S.tokens("def g(scores,   eps = 7):\n\n    return torch.softmax(scores,\n        dim=-1) + 3\n")
    assert a == b
    assert "softmax" in a and "dim=" in a and "doc" not in " ".join(a)
    assert S.tokens("x.sum(dim=0)") != S.tokens("x.mean(dim=0)")
    assert S.tokens("def f(x:\n") == []                                       # does not tokenize


def _class(tmp_path, students: dict) -> dict:
    """{name: folder} of submissions: the untouched exercises with some pieces replaced."""
    out = {}
    for name, pieces_written in students.items():
        folder = tmp_path / name
        shutil.copytree(EXERCISES, folder)
        for exercise, source in pieces_written.items():
            activity = exercise.split(".")[0]
            path = folder / f"{activity}.py"
            path.write_text(path.read_text() + "\n\n" + textwrap.dedent(source))   # a later def wins
        out[name] = folder
    return out


def test_the_class_report_lists_copies_of_the_engine_and_between_classmates(tmp_path):
    copied = renamed(_engine("attention.attention"))
    students = _class(tmp_path, {
        "ana": {"attention.attention": copied},                          # the engine's, renamed
        "bea": {"bpe.encode": INDEPENDENT["bpe.encode"]},                # her own
        "cal": {"bpe.encode": renamed(INDEPENDENT["bpe.encode"])},       # bea's, renamed
        "dan": {},                                                       # the exercises, untouched
    })
    report = S.compare(students, answer_key=None)
    pairs = {(p.exercise, p.student, p.other) for p in report.pairs}
    assert ("attention.attention", "ana", S.ENGINE) in pairs
    assert ("bpe.encode", "bea", "cal") in pairs
    assert not report.for_student("dan"), report.for_student("dan")          # the given code never counts
    assert all(0.0 <= s <= 1.0 for ex in report.scores.values() for row in ex.values() for s in row.values())
    assert "attention.attention ~ engine" in report.note("ana")
    assert report.pairs == sorted(report.pairs, key=lambda p: (-p.score, p.exercise, p.student, p.other))


@pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="a student release has no answer key")
def test_what_the_engine_and_the_answer_key_share_is_the_obvious_way_not_a_copy(tmp_path):
    """The answer key graded as a student matches itself (a leaked key), never the engine: the
    fingerprints the two share are removed before judging."""
    students = {"key": SOLUTIONS, "dan": EXERCISES}
    report = S.compare(students)
    assert {p.other for p in report.for_student("key")} == {S.ANSWER_KEY}
    assert len(report.for_student("key")) >= 10
    assert not report.for_student("dan")


def test_a_submitted_file_is_read_safely(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "attention.py").symlink_to(SOLUTIONS / "attention.py" if SOLUTIONS.is_dir() else EXERCISES / "attention.py")
    (folder / "mlp.py").write_bytes(b"\xff\xfe not utf-8")
    (folder / "block.py").write_text("x = 1\n" * (S.MAX_FILE // 6 + 10))
    assert S.folder_sources(folder) == {}                 # a link, not UTF-8, too large: none is read
    found = {e for e in S.folder_sources(EXERCISES) if e.startswith("attention.")}
    assert found == {f"attention.{name}" for name in pieces.names("attention")}
