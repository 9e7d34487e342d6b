"""A learner's pieces put into the engine (andrea_course/overlay.py, grading/passing.py): whose
code is chosen, isolated pieces for grading, a model built from the pieces that pass their graded
tests (and never from one that fails), each piece replacing exactly what it teaches at every
level, and what model.pieces and model.slots say."""
import ast
import inspect
import re
from pathlib import Path

import pytest
import torch

import andrea_course
from andrea_course import ANDREA, ModelConfig, pieces
from andrea_course.engine import backends, ops
from andrea_course.grading.passing import learner_model, passing
from andrea_course.engine.model import MODULE_SLOTS
from andrea_course.overlay import (SLOTS, STEPS, TRITON_KERNELS, ImplementationError, Overlay, build, impl_from_env,
                                   model_pieces, resolve)
from andrea_course.paths import ROOT, STUB_MARK

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


def test_the_engine_alone_knows_no_learner():
    model = ANDREA(CFG)
    assert not hasattr(model, "pieces") and not hasattr(model, "impl")
    assert {"attention", "layer_norm", "gelu", "cross_entropy"} <= set(model.slots)
    assert set(model.slots.values()) == {"engine"}
    alone = build(CFG)
    assert set(alone.pieces) == set(model_pieces(CFG))
    assert set(alone.pieces.values()) == {"engine: no learner's folder given"}


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
    assert inspect.unwrap(attention).__code__.co_filename == str(folder / "attention.py")   # inside its in-place guard
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
needs_answer_key = pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a student release)")
ROPE = ModelConfig.preset("andrea-tiny-modern", position="rope", n_layers=1, context_length=8, d_model=16, n_heads=2,
                          n_kv_heads=1, d_ff=32, vocab_size=17)


def _same_weights(model, cfg=None):
    engine = ANDREA(cfg or model.cfg)
    engine.load_state_dict(model.state_dict())
    return engine


def test_untouched_exercises_build_the_engine_and_say_so():
    model = learner_model(CFG, "exercises")
    assert tuple(model.pieces) == model_pieces(CFG)
    assert set(model.pieces.values()) == {"engine: not written yet"}
    assert set(model.slots.values()) == {"engine"}
    torch.testing.assert_close(model(_ids(CFG)), _same_weights(model)(_ids(CFG)))


def test_a_model_lists_the_pieces_it_is_built_from():
    """Read off the model: its classes and slots, the steps they call, RoPE's pieces in a RoPE
    model, the Triton kernels with kernels="triton"."""
    classic, modern = model_pieces(CFG), model_pieces("andrea-tiny-modern")
    assert {"mlp.MLP", "mlp.gelu_tanh", "block.layer_norm", "attention.softmax", "attention.causal_mask",
            "model.KVCache", "model.sample_next"} <= set(classic)
    assert not {"modern.rms_norm", "modern.SwiGLU", "modern.apply_rope"} & set(classic)
    assert {"modern.rms_norm", "modern.swiglu", "modern.SwiGLU"} <= set(modern) and "mlp.MLP" not in modern
    assert {"modern.rope_frequencies", "modern.apply_rope", "modern.rope_attention"} <= set(model_pieces(ROPE))
    assert classic.index("attention.softmax") < classic.index("attention.attention")      # steps first
    assert set(model_pieces(CFG, "triton")) - set(classic) == set(TRITON_KERNELS.values())
    assert set(model_pieces("andrea-tiny-modern", "triton")) - set(modern) == {"kernels.softmax_kernel",
                                                                              "kernels.flash_attention_kernel"}


def test_build_takes_the_verdict_and_never_runs_a_test(tmp_path, monkeypatch):
    """The overlay uses what the grading layer hands down: a piece is used when accepted and
    written; a stub never, even if accepted; nothing is used without a verdict."""
    import andrea_course.grading.local as local
    monkeypatch.setattr(local, "run_graded_many", lambda *a, **k: pytest.fail("build ran graded tests"))
    folder = _submission(tmp_path / "sub", {"mlp": _exercise_with("mlp", {
        "gelu_tanh": "return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))"})})
    model = build(CFG, folder, accept={"mlp.gelu_tanh", "mlp.MLP"})
    assert model.pieces["mlp.gelu_tanh"] == "yours" and model.slots["gelu"] == "yours"
    assert model.pieces["mlp.MLP"] == "engine: not written yet"             # accepted, but a stub
    assert model.pieces["attention.softmax"] == "engine: no file"
    (folder / "mlp.py").write_text(_exercise_with("mlp", {"gelu_tanh": "return x  # any body: no verdict",
                                                          "MLP": "return self.proj(self.gelu(self.fc(x)))"}))
    model = build(CFG, folder, accept={"mlp.gelu_tanh"})
    assert model.pieces["mlp.MLP"] == "engine: not checked"                 # written, but no verdict
    model = build(CFG, folder, accept={"mlp.gelu_tanh": "engine: 1 of its 4 graded tests fail"})
    assert model.pieces["mlp.gelu_tanh"] == "engine: 1 of its 4 graded tests fail" and model.slots["gelu"] == "engine"
    with pytest.raises(ValueError, match="needs accept="):
        build(CFG, folder)


def test_a_learners_passing_pieces_are_used_by_name(tmp_path):
    """GELU and the MLP written: the model runs the learner's GELU in the slot and the learner's
    MLP class, the engine elsewhere, and computes what the engine computes."""
    folder = _submission(tmp_path / "sub", {"mlp": _exercise_with("mlp", {
        "gelu_tanh": "return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))",
        "MLP": "return self.proj(self.gelu(self.fc(x)))"})})
    assert passing(folder, ["mlp.gelu_tanh", "mlp.MLP", "attention.attention"]) == {
        "mlp.gelu_tanh": "yours", "mlp.MLP": "yours", "attention.attention": "engine: no file"}
    model = learner_model(CFG, folder)
    assert model.pieces["mlp.gelu_tanh"] == model.pieces["mlp.MLP"] == "yours"
    assert model.pieces["attention.attention"] == "engine: no file"
    assert model.slots["gelu"] == "yours" and {w for s, w in model.slots.items() if s != "gelu"} == {"engine"}
    mlp = model.blocks[0].mlp
    assert type(mlp).__module__.startswith("_andrea_learner_") and type(mlp).__name__ == "MLP"
    assert mlp.gelu.__code__.co_filename == str(folder / "mlp.py")
    assert model.blocks[0].attn.attention is ops.attention
    torch.testing.assert_close(model(_ids(CFG)), _same_weights(model)(_ids(CFG)), rtol=1e-5, atol=1e-6)


def test_a_written_but_failing_piece_is_reported_and_never_used(tmp_path):
    """Notebook 07's crash: a SwiGLU that is written but wrong (w_up on the wrong side) must not
    be built into the model; the model runs with the engine's and says why."""
    folder = _submission(tmp_path / "sub", {"modern": _exercise_with("modern", {
        "SwiGLU": "return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)).transpose(-1, -2))"})})
    cfg = ModelConfig.preset("andrea-tiny-modern", n_layers=1)
    model = learner_model(cfg, folder)
    assert re.fullmatch(r"engine: \d+ of its \d+ graded tests fail", model.pieces["modern.SwiGLU"])
    assert type(model.blocks[0].mlp) is andrea_course.engine.model.SwiGLU
    assert model(_ids(cfg)).shape == (2, 5, cfg.vocab_size)


SOFTMAX_DOUBLED = "return torch.softmax(2 * scores, dim=-1)  # slipped through grading"


def _attention_with(softmax):
    """The attention formula, step by step, with this softmax (the engine's other steps)."""
    return lambda q, k, v: pieces.get("attention", "weighted_sum")(softmax(
        pieces.get("attention", "apply_causal_mask")(q @ k.mT / q.shape[-1] ** 0.5)), v)


def test_the_learners_softmax_runs_inside_the_engines_attention(tmp_path):
    """Softmax accepted, attention not written: the attention slot computes the formula step by
    step with the learner's softmax (a subtly wrong one shows it runs)."""
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {"softmax": SOFTMAX_DOUBLED})})
    model = build(CFG, folder, accept={"attention.softmax"})
    assert model.pieces["attention.softmax"] == "yours" and model.pieces["attention.attention"] == "engine: not written yet"
    assert model.slots["attention"] == "yours"
    q, k, v = (torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    want = _attention_with(lambda s: torch.softmax(2 * s, dim=-1))(q, k, v)
    torch.testing.assert_close(model.blocks[0].attn.attention(q, k, v), want)
    assert not torch.allclose(model(_ids(CFG)), _same_weights(model)(_ids(CFG)), atol=1e-3)


def test_the_learners_softmax_runs_inside_the_learners_attention(tmp_path):
    """Both accepted: the learner's attention calls the learner's softmax; with only the
    attention accepted, the learner's attention calls the engine's softmax."""
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {
        "softmax": SOFTMAX_DOUBLED,
        "attention": "return weighted_sum(softmax(apply_causal_mask(scale_scores(attention_scores(q, k), q.shape[-1]))), v)"})})
    q, k, v = (torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    both = build(CFG, folder, accept={"attention.softmax", "attention.attention"})
    torch.testing.assert_close(both.blocks[0].attn.attention(q, k, v), _attention_with(lambda s: torch.softmax(2 * s, -1))(q, k, v))
    alone = build(CFG, folder, accept={"attention.attention"})
    assert alone.pieces["attention.softmax"] == "engine: not checked"
    torch.testing.assert_close(alone.blocks[0].attn.attention(q, k, v), ops.attention(q, k, v))


@needs_answer_key
def test_the_answer_key_is_graded_like_any_learner():
    model = learner_model(CFG, "solutions")
    assert set(model.pieces.values()) == {"yours"}
    assert set(model.slots.values()) == {"yours", "engine"} and model.slots["cross_entropy"] == "engine"
    assert model.blocks[0].attn.attention.__code__.co_filename.endswith("solutions/attention.py")


@needs_answer_key
def test_the_learners_rope_pieces_run_in_the_engines_rotary_attention():
    """With RoPE the learner's Embeddings and MultiHeadAttention (learned positions) yield to the
    engine's and say why; the learner's rope_frequencies, apply_rope and rope_attention run inside
    the engine's rotary attention, and the model computes what the engine computes, cached or not."""
    model = learner_model(ROPE, "solutions").eval()
    for exercise in ("embeddings.Embeddings", "multihead.MultiHeadAttention"):
        assert model.pieces[exercise] == "engine: position='rope' needs the engine's; yours computes position='learned'"
    assert all(model.pieces[e] == "yours" for e in ("modern.rope_frequencies", "modern.apply_rope", "modern.rope_attention"))
    rotary = model.blocks[0].attn.rotary
    for slot in ("rope_frequencies", "apply_rope", "rope_attention"):
        assert getattr(rotary, slot).__code__.co_filename.endswith("solutions/modern.py"), slot
        assert model.slots[slot] == "yours"
    engine = _same_weights(model)
    ids = _ids(ROPE, T=7)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), engine(ids.clone()), rtol=1e-5, atol=1e-5)
    prompt = ids[:, :3]
    torch.testing.assert_close(model.generate(prompt, 9, temperature=0), engine.generate(prompt, 9, temperature=0))
    torch.testing.assert_close(model.generate(prompt, 9, temperature=0), model.generate(prompt, 9, temperature=0, use_cache=False))


def test_the_learners_apply_rope_runs_when_their_rope_attention_does_not(tmp_path):
    """apply_rope accepted, rope_attention not: the engine's steps turn q and k with the learner's."""
    folder = _submission(tmp_path / "sub", {"modern": _exercise_with("modern", {
        "apply_rope": "return x  # no turn at all: slipped through grading"})})
    model = build(ROPE, folder, accept={"modern.apply_rope"}).eval()
    assert model.slots["apply_rope"] == "yours" and model.slots["rope_attention"] == "engine"
    ids = _ids(ROPE, T=6)
    engine = _same_weights(model)
    for block in engine.blocks:                          # the engine with no turn gives the same logits
        block.attn.rotary.apply_rope = lambda x, cos, sin, start=0: x
    with torch.no_grad():
        torch.testing.assert_close(model(ids), engine(ids))


def test_a_slot_no_module_carries_is_refused():
    model = ANDREA(CFG)
    with pytest.raises(ValueError, match="no module of this ANDREA carries the slot 'rms_norm'"):
        backends.apply(model, "torch", MODULE_SLOTS, {"rms_norm": (ops.rms_norm, "yours")})
    with pytest.raises(ValueError, match="kernels must be one of"):
        build(CFG, kernels="cuda")


def test_every_slot_names_an_engine_class_or_function_or_a_slot():
    module_slots = {s for slots in MODULE_SLOTS.values() for s in slots}
    for exercise, target in SLOTS.items():
        activity, piece = exercise.split(".")
        assert piece in andrea_course.pieces.names(activity), exercise
        assert target in module_slots if isinstance(target, str) else target.__module__ == "andrea_course.engine.model"
    for exercise in {s for steps in STEPS.values() for s in steps} | set(TRITON_KERNELS) | set(TRITON_KERNELS.values()):
        activity, piece = exercise.split(".")
        assert piece in andrea_course.pieces.names(activity), exercise


@needs_answer_key
def test_the_model_builds_the_learners_kv_cache_once_it_passes():
    """model.KVCache fills ANDREA.kv_cache: new_caches, and so generate, use the learner's cache."""
    model = learner_model(CFG, "solutions").eval()
    assert model.pieces["model.KVCache"] == "yours"
    assert type(model.new_caches(1)[0]).__module__.startswith("_andrea_learner_")
    assert learner_model(CFG, "exercises").kv_cache is andrea_course.engine.model.KVCache
    ids = _ids(CFG)[:, :2]
    torch.testing.assert_close(model.generate(ids, 3, temperature=0), model.generate(ids, 3, temperature=0, use_cache=False))


@needs_answer_key
def test_generate_draws_with_the_learners_sample_next_once_it_passes():
    """model.sample_next fills model.sampler: generate draws every token with the learner's
    function, and with the same generator state the tokens are the engine's."""
    model = learner_model(CFG, "solutions").eval()
    assert model.pieces["model.sample_next"] == "yours"
    assert model.sampler.__module__.startswith("_andrea_learner_")
    assert learner_model(CFG, "exercises").sampler is andrea_course.engine.model.sample_next
    calls = []
    mine = model.sampler
    model.sampler = lambda *args: calls.append(args[1:3]) or mine(*args)
    ids = _ids(CFG)[:, :2]
    got = model.generate(ids, 4, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(3))
    assert calls == [(0.8, 5)] * 4
    engine = _same_weights(model).eval()
    assert torch.equal(got, engine.generate(ids, 4, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(3)))


# ----- kernels="triton": the learner's kernels in the package's launchers -----
@needs_answer_key
def test_a_learners_triton_kernels_run_in_a_training_step(tmp_path):
    """A learner's folder (a copy of the answer key) with kernels="triton": model.pieces lists the
    learner's three kernels as theirs, each slot says who runs it, the learner's PyTorch pieces
    those kernels stand in for say so, and one training step in Triton's interpreter gives the
    torch path's loss and gradients."""
    import shutil
    folder = shutil.copytree(ROOT / "solutions", tmp_path / "mine")
    cfg = CFG.replace(n_heads=2, d_model=16, context_length=8)
    model = learner_model(cfg, folder, kernels="triton")
    assert {model.pieces[k] for k in TRITON_KERNELS.values() if k != "kernels.softmax_kernel"} == {"yours"}
    assert model.pieces["kernels.softmax_kernel"].endswith("never runs")      # flash_attention_kernel does attention
    assert {s: model.slots[s] for s in ("attention", "layer_norm", "gelu", "cross_entropy")} == {
        "attention": "yours in Triton", "layer_norm": "yours in Triton", "gelu": "yours in Triton",
        "cross_entropy": "Triton kernel"}
    for piece, kernel in TRITON_KERNELS.items():
        if piece != "attention.softmax":                  # inside the attention the flash kernel does
            assert model.pieces[piece] == f"not run: kernels='triton' computes it with your {kernel}"
    assert model.pieces["attention.softmax"].endswith("never runs")
    assert model.blocks[0].attn.attention.keywords["kernel"].fn.__code__.co_filename == str(folder / "kernels.py")
    gelu = model.blocks[0].mlp.gelu
    assert gelu.keywords["kernel"].fn.__code__.co_filename == str(folder / "kernels.py")
    torch_path = learner_model(cfg, folder)
    torch_path.load_state_dict(model.state_dict())
    ids, targets = _ids(cfg, T=6), _ids(cfg, T=6).roll(1, dims=1)
    losses = []
    for m in (torch_path, model):
        _, loss = m(ids, targets)
        loss.backward()
        losses.append(loss.item())
    assert abs(losses[0] - losses[1]) < 1e-4
    for (name, p), q in zip(torch_path.named_parameters(), model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4, msg=name)


def test_without_a_learners_kernel_the_packages_run(tmp_path):
    """kernels="triton" with no kernel written: the package's Triton kernels in every slot, flash
    attention included (no learner's step of attention passes)."""
    folder = _submission(tmp_path / "sub", {"mlp": _exercise_with("mlp", {
        "gelu_tanh": "return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))"})})
    model = build(CFG, folder, accept={"mlp.gelu_tanh"}, kernels="triton")
    assert {model.slots[s] for s in ("attention", "layer_norm", "gelu", "cross_entropy")} == {"Triton kernel"}
    assert model.pieces["mlp.gelu_tanh"] == "engine: kernels='triton' computes it with the package's Triton kernel"
    assert model.pieces["kernels.gelu_kernel"] == "engine: no file"
    from andrea_course.engine.kernels.attention import attention
    assert model.blocks[0].attn.attention is attention


@needs_answer_key
def test_use_hands_back_a_learners_passing_triton_kernel(tmp_path, capsys):
    """A @triton.jit kernel has no __code__: the authorship check reads the function it wraps
    (.fn), so notebook 08's use("kernels", "gelu_kernel") gives the learner's own kernel once it
    passes, and the package's kernel handed in under the learner's name is still refused."""
    import shutil

    from andrea_course import authorship
    from andrea_course.engine.kernels.gelu import gelu_kernel as package_kernel
    from andrea_course.notebook import use
    folder = shutil.copytree(ROOT / "solutions", tmp_path / "mine")
    chosen = use("kernels", "gelu_kernel", impl=folder)
    assert "using yours" in capsys.readouterr().out
    assert chosen.fn.__code__.co_filename == str(folder / "kernels.py")
    x = torch.linspace(-4, 4, 301)
    launcher = Overlay(folder).module("kernels").gelu
    torch.testing.assert_close(launcher(x, kernel=chosen), torch.nn.functional.gelu(x, approximate="tanh"),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(authorship.NotYours, match="comes from elsewhere"):
        authorship.check_object(package_kernel, "gelu_kernel", folder / "kernels.py")


def test_build_refuses_a_verdict_on_no_piece(tmp_path):
    with pytest.raises(ValueError, match="accept names 'attention.softmx', which is no piece of the course"):
        build(CFG, "exercises", accept={"attention.softmx"})
    model = build(CFG, "exercises", accept={"optim.lr_at": "yours"})    # a piece the model is not built from
    assert "optim.lr_at" not in model.pieces


@needs_answer_key
def test_passing_reports_any_piece_of_the_course(tmp_path):
    """The trainer asks for pieces the model is not built from (optim's, bpe's): passing() runs
    their graded tests like any other's."""
    folder = _submission(tmp_path / "sub", {"optim": (ROOT / "solutions" / "optim.py").read_text(encoding="utf-8")})
    assert passing(folder, ["optim.lr_at", "optim.adamw_step", "bpe.encode"]) == {
        "optim.lr_at": "yours", "optim.adamw_step": "yours", "bpe.encode": "engine: no file"}
    with pytest.raises(KeyError, match="no piece 'optim.lr'"):
        passing(folder, ["optim.lr"])


@needs_answer_key
def test_the_learners_model_starts_from_the_engines_weights_and_random_stream():
    """Built after the same seed, a learner's model holds exactly the engine's initial weights, and
    the random stream after it is the engine's (so dropout and data draws match too): the
    learner's classes draw weights of their own, which are replaced, inside a forked stream."""
    from andrea_course.grading.passing import learner_model
    cfg = ModelConfig.preset("andrea-tiny", n_layers=2)
    torch.manual_seed(5)
    engine, after_engine = ANDREA(cfg), torch.rand(3)
    torch.manual_seed(5)
    mine, after_mine = learner_model(cfg, "solutions"), torch.rand(3)
    assert {s for s in mine.pieces.values()} == {"yours"}, mine.pieces
    theirs = engine.state_dict()
    assert all(torch.equal(p, theirs[n]) for n, p in mine.state_dict().items())   # a copy: exact
    assert torch.equal(after_mine, after_engine)
