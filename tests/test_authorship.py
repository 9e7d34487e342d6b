"""A graded piece must be the learner's own: the engine's pieces ship with the package (the
grader needs them), and handing one in is refused with a message saying why (authorship.py)."""
import pytest
import torch

from andrea_course.grading.student import InProcessStudent
from andrea_course.paths import ROOT
from andrea_course.overlay import ImplementationError, Overlay

EXERCISES = ROOT / "exercises"

CHEATS = {
    "imports the engine's piece": "from andrea_course.pieces.attention import softmax\n",
    "reaches the engine's piece through the package": "import andrea_course.pieces as p\nsoftmax = p.get('attention', 'softmax')\n",
    "names it through an engine module": "import andrea_course.model as m\nsoftmax = m.MultiHeadAttention\n",
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
    (folder / "mlp.py").write_text("from andrea_course.model import make_mlp as _mk\n_Engine = type(_mk.__globals__['MLP'])\n" + text)
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
    imported = _model_submission(tmp_path, "from andrea_course.model import KVCache as _K\n" + exercise
                                 + "\nKVCache = _K\n")
    with pytest.raises(ImplementationError, match="not yours to hand in"):
        imported.isolated("model", "KVCache")
    without_update = exercise[:exercise.index("    def update(")]          # update ends the file
    inherited = _model_submission(tmp_path, without_update.replace("class KVCache:", "class KVCache(_Engine):")
                                  .replace("import torch\n", "import torch\nfrom andrea_course.model import given_model_methods as _g\n"
                                           "_Engine = _g()[4]\n", 1))
    with pytest.raises(ImplementationError, match="does not define its own methods"):
        inherited.isolated("model", "KVCache")
