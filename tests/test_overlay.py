"""A learner's pieces plugged into the engine by name (andrea_course/overlay.py): whose code is
chosen, isolated pieces for grading, a model built from the pieces that pass their graded tests
(and never from one that fails), and what model.pieces says."""
import ast
import re
from pathlib import Path

import pytest
import torch

import andrea_course
from andrea_course import ANDREA, ModelConfig, backends, ops
from andrea_course.paths import ROOT, STUB_MARK
from andrea_course.overlay import SLOTS, ImplementationError, Overlay, impl_from_env, resolve

EXERCISES = ROOT / "exercises"
CFG = ModelConfig(vocab_size=17, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)


def _exercise_with(activity: str, written: dict[str, str]) -> str:
    """exercises/<activity>.py with the stub of each piece in `written` replaced by the given line."""
    text = (EXERCISES / f"{activity}.py").read_text(encoding="utf-8")
    for piece, line in written.items():
        stub = re.compile(rf"^( *)raise NotImplementedError\('{activity}\.{piece}(\.\w+)?: .*$", re.M)
        assert stub.search(text), f"no stub for {activity}.{piece}"
        text = stub.sub(lambda m: m.group(1) + line, text, count=1)
    return text


def _submission(folder, files: dict[str, str]):
    folder.mkdir(exist_ok=True)
    for activity, text in files.items():
        (folder / f"{activity}.py").write_text(text, encoding="utf-8")
    return folder


def _ids(cfg, B=2, T=5):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))


# ----- whose code -----
def test_andrea_impl_is_read_in_one_function_and_never_written(monkeypatch):
    monkeypatch.delenv("ANDREA_IMPL", raising=False)
    assert impl_from_env() is None and impl_from_env("exercises") == "exercises"
    monkeypatch.setenv("ANDREA_IMPL", "solutions")
    assert impl_from_env("exercises") == "solutions"
    readers = []
    for path in Path(andrea_course.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "ANDREA_IMPL":
                readers.append(path.name)
    assert readers == ["overlay.py"], f"ANDREA_IMPL named in code outside overlay.impl_from_env: {readers}"


def test_resolve_names_the_course_folders_and_refuses_others(tmp_path):
    assert resolve("exercises") == EXERCISES and resolve(tmp_path) == tmp_path.resolve()
    with pytest.raises(ImplementationError, match="nowhere"):
        resolve(tmp_path / "nowhere")


def test_the_engine_alone_needs_no_learner_folder():
    model = ANDREA(CFG)
    assert model.pieces == {} and model.impl is None


# ----- isolated pieces: what a graded test grades -----
SOFTMAX = "return torch.softmax(scores, dim=-1)  # the learner's own"


def test_isolated_gives_the_piece_as_written_with_the_engine_around_it(tmp_path):
    """The learner's attention runs with the ENGINE's softmax even though theirs is broken:
    one mistake is graded in one place."""
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {
        "softmax": "return scores.exp()  # forgot to normalise",
        "attention": "return weighted_sum(softmax(apply_causal_mask(scale_scores(attention_scores(q, k), q.shape[-1]))), v)"})})
    overlay = Overlay(folder)
    attention = overlay.isolated("attention", "attention")
    assert attention.__code__.co_filename == str(folder / "attention.py")
    q, k, v = (torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    torch.testing.assert_close(attention(q, k, v), ops.attention(q, k, v))
    softmax = overlay.isolated("attention", "softmax")
    assert not torch.allclose(softmax(torch.zeros(2, 3)), torch.full((2, 3), 1 / 3))
    with pytest.raises(NotImplementedError, match=f"attention.weighted_sum: {STUB_MARK}"):
        overlay.isolated("attention", "weighted_sum")(torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(ImplementationError, match="no 'no_such_piece'"):
        overlay.isolated("attention", "no_such_piece")


def test_a_file_that_does_not_load_or_is_missing_is_never_graded_as_theirs(tmp_path):
    folder = _submission(tmp_path / "sub", {"block": "def layer_norm(x, weight, bias, eps=1e-5:\n    return x\n",
                                            "mlp": "raise SystemExit('the learner exits')\n"})
    overlay = Overlay(folder)
    with pytest.raises(ImplementationError, match=r"block\.py could not be loaded: SyntaxError"):
        overlay.isolated("block", "layer_norm")
    with pytest.raises(ImplementationError, match=r"mlp\.py could not be loaded: SystemExit"):
        overlay.isolated("mlp", "gelu_tanh")
    with pytest.raises(ImplementationError, match=r"embeddings\.py does not exist"):
        overlay.isolated("embeddings", "Embeddings")


# ----- the model: pieces by name, once their tests pass -----
def test_untouched_exercises_build_the_engine_and_say_so():
    model = ANDREA(CFG, impl="exercises")
    assert set(model.pieces) == set(SLOTS)
    assert set(model.pieces.values()) == {"engine: not written yet"}
    engine = ANDREA(CFG)
    engine.load_state_dict(model.state_dict())
    torch.testing.assert_close(model(_ids(CFG)), engine(_ids(CFG)))


def test_a_learners_passing_pieces_are_used_by_name(tmp_path):
    """GELU and the MLP written: the model runs the learner's GELU in the op slot and the
    learner's MLP class, the engine elsewhere, and computes what the engine computes."""
    folder = _submission(tmp_path / "sub", {"mlp": _exercise_with("mlp", {
        "gelu_tanh": "return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))",
        "MLP": "return self.proj(self.gelu(self.fc(x)))"})})
    model = ANDREA(CFG, impl=folder)
    assert model.pieces["mlp.gelu_tanh"] == model.pieces["mlp.MLP"] == "yours"
    assert model.pieces["attention.attention"] == "engine: no file"
    mlp = model.blocks[0].mlp
    assert type(mlp).__module__.startswith("_andrea_learner_") and type(mlp).__name__ == "MLP"
    assert mlp.gelu.__code__.co_filename == str(folder / "mlp.py")
    assert model.blocks[0].attn.attention is ops.attention
    engine = ANDREA(CFG)
    engine.load_state_dict(model.state_dict())
    torch.testing.assert_close(model(_ids(CFG)), engine(_ids(CFG)), rtol=1e-5, atol=1e-6)
    model.use_kernels("torch")                               # a back-end switch keeps the learner's op
    assert model.blocks[0].mlp.gelu.__code__.co_filename == str(folder / "mlp.py")


def test_a_written_but_failing_piece_is_reported_and_never_used(tmp_path):
    """Notebook 07's crash: a SwiGLU that is written but wrong (w_up on the wrong side) must not
    be built into the model; the model runs with the engine's and says why."""
    folder = _submission(tmp_path / "sub", {"modern": _exercise_with("modern", {
        "SwiGLU": "return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)).transpose(-1, -2))"})})
    cfg = ModelConfig.preset("andrea-tiny-modern", n_layers=1)
    model = ANDREA(cfg, impl=folder)
    assert re.fullmatch(r"engine: \d+ of its \d+ graded tests fail", model.pieces["modern.SwiGLU"])
    assert type(model.blocks[0].mlp) is andrea_course.model.SwiGLU
    assert model(_ids(cfg)).shape == (2, 5, cfg.vocab_size)


def test_the_answer_key_is_graded_like_any_learner():
    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ (a student release)")
    model = ANDREA(CFG, impl="solutions")
    assert set(model.pieces.values()) == {"yours"}
    assert model.blocks[0].attn.attention.__code__.co_filename.endswith("solutions/attention.py")


def test_every_slot_names_an_engine_class_or_function_or_an_op_slot():
    for exercise, target in SLOTS.items():
        activity, piece = exercise.split(".")
        assert piece in andrea_course.pieces.names(activity), exercise
        assert target in backends.TABLE if isinstance(target, str) else target.__module__ == "andrea_course.model"


def test_the_pieces_match_the_answer_keys_regions():
    """pieces/<activity>.py lists exactly the pieces the learner writes (the solution regions)."""
    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ (a student release)")
    from andrea_course.exercises import exercise_pieces
    for activity in andrea_course.pieces.ACTIVITIES:
        assert set(andrea_course.pieces.names(activity)) == exercise_pieces(ROOT / "solutions" / f"{activity}.py"), activity


def test_the_model_builds_the_learners_kv_cache_once_it_passes():
    """model.KVCache fills ANDREA.kv_cache: new_caches, and so generate, use the learner's cache."""
    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ (a student release)")
    model = ANDREA(CFG, impl="solutions").eval()
    assert model.pieces["model.KVCache"] == "yours"
    assert type(model.new_caches(1)[0]).__module__.startswith("_andrea_learner_")
    assert ANDREA(CFG, impl="exercises").kv_cache is andrea_course.model.KVCache
    ids = _ids(CFG)[:, :2]
    torch.testing.assert_close(model.generate(ids, 3, temperature=0), model.generate(ids, 3, temperature=0, use_cache=False))


def test_generate_draws_with_the_learners_sample_next_once_it_passes():
    """model.sample_next fills model.sampler: generate draws every token with the learner's
    function, and with the same generator state the tokens are the engine's."""
    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ (a student release)")
    model = ANDREA(CFG, impl="solutions").eval()
    assert model.pieces["model.sample_next"] == "yours"
    assert model.sampler.__module__.startswith("_andrea_learner_")
    assert ANDREA(CFG, impl="exercises").sampler is andrea_course.model.sample_next
    calls = []
    mine = model.sampler
    model.sampler = lambda *args: calls.append(args[1:3]) or mine(*args)
    ids = _ids(CFG)[:, :2]
    got = model.generate(ids, 4, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(3))
    assert calls == [(0.8, 5)] * 4
    engine = ANDREA(CFG).eval()
    engine.load_state_dict(model.state_dict())
    assert torch.equal(got, engine.generate(ids, 4, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(3)))
