"""What a built model says ran is what ran (overlay.build's probe): model.slots and model.pieces
against calls counted here by another means (sys.setprofile, every Python frame entered) during a
forward pass with targets, its backward and one generated token, in every model option and both
back-ends; a learner's class that bypasses its slot, a piece that computes a step itself, a block
that skips a norm and a piece that raises in the model, each reported as such; the probe leaves no
trace (random draws, gradients, hooks, wrappers); and a learner's model starts from the engine's
weights for the same seed whatever `kernels` says."""
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

import andrea_course.engine.model as engine
from andrea_course import ANDREA, ModelConfig
from andrea_course.grading.passing import learner_model
from andrea_course.overlay import TRITON_KERNELS, build, model_pieces
from andrea_course.paths import ROOT
from andrea_course.presets import PRESETS
from model_options import option_values

SOLUTIONS = ROOT / "solutions"
needs_answer_key = pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="no solutions/ (a student release)")

CLASSIC = ModelConfig(vocab_size=17, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
MODERN = ModelConfig.preset("andrea-tiny-modern", n_layers=1, context_length=8, d_model=16, n_heads=2,
                            n_kv_heads=1, d_ff=32, vocab_size=17)
OPTIONS = {
    "classic": CLASSIC,
    "tied": CLASSIC.replace(tie_embeddings=True),
    "GQA": CLASSIC.replace(n_kv_heads=1),
    "no bias": CLASSIC.replace(bias=False),
    "modern": MODERN,
    "RoPE": MODERN.replace(position="rope"),
}


def test_the_options_hold_every_value_of_every_model_option():
    """A model of each value of each str and bool field of ModelConfig is in OPTIONS: the slots of
    a new option are counted only once a model with it is there."""
    have = {(name, getattr(cfg, name)) for cfg in OPTIONS.values() for name in option_values()}
    missing = [f"{name}={value!r}" for name, values in option_values().items() for value in values
               if (name, value) not in have]
    assert not missing, f"no model in OPTIONS has {', '.join(missing)}: add one"


def _counted_run(model) -> Counter:
    """{code object: calls} of every Python function entered during what the probe runs."""
    counts: Counter = Counter()

    def profile(frame, event, arg):
        if event == "call":
            counts[frame.f_code] += 1

    ids = torch.randint(0, model.cfg.vocab_size, (1, 2), generator=torch.Generator().manual_seed(1))
    with torch.random.fork_rng(devices=[]):
        sys.setprofile(profile)
        try:
            _, loss = model(ids, ids.roll(-1, dims=1))
            loss.backward()
            model.generate(ids[:, :1], 1, temperature=0)
        finally:
            sys.setprofile(None)
    model.zero_grad(set_to_none=True)
    return counts


def _code(fn):
    fn = getattr(fn, "func", fn)                       # a launcher with the learner's kernel= in it
    return getattr(fn, "__code__", None)


def _slot_calls(model, counts: Counter) -> dict[str, int]:
    """{slot: calls of the code in it}; an empty slot (the engine's rope_attention): its module's forward."""
    out = {}
    for slot in model.slots:
        holders = [m for m in model.modules() if slot in vars(m)]
        fns = {id(getattr(m, slot)): getattr(m, slot) for m in holders}
        assert len(fns) == 1, f"the {slot} slot holds {len(fns)} functions"
        (fn,) = fns.values()
        out[slot] = counts[_code(fn)] if fn is not None else sum(counts[type(m).forward.__code__] for m in holders)
    return out


def _learner_calls(folder: Path, counts: Counter) -> Counter:
    """{piece: calls} of the code of the learner's files: a function by its name, a class by its
    forward (a cache class by its construction)."""
    out: Counter = Counter()
    for code, n in counts.items():
        path = Path(code.co_filename)
        if path.parent == folder:
            head, _, method = code.co_qualname.partition(".")
            if method in ("", "forward") or (head == "KVCache" and method == "__init__"):
                out[f"{path.stem}.{head}"] += n
    return out


def _agrees(model, folder: Path | None) -> None:
    """model.slots, model.pieces and model.calls say what the counted run saw."""
    counts = _counted_run(model)
    for slot, n in _slot_calls(model, counts).items():
        said = model.slots[slot]
        assert (n > 0) == (not said.startswith("not run")), (slot, n, said)
        assert model.calls["slots"][slot] == n, (slot, n, model.calls["slots"])
    if folder is None:
        return
    mine = _learner_calls(folder, counts)
    for piece, said in model.pieces.items():
        if said == "yours" or said.startswith("not run"):
            assert (mine[piece] > 0) == (said == "yours"), (piece, mine[piece], said)


@pytest.mark.parametrize("kernels", ["torch", "triton"])
@pytest.mark.parametrize("option", OPTIONS)
def test_the_engines_slots_are_what_ran(option, kernels):
    model = build(OPTIONS[option], kernels=kernels)
    assert not any(s.startswith("not run") for s in model.slots.values()), model.slots
    assert model.slots == ANDREA(OPTIONS[option], kernels=kernels).slots     # the engine's classes call every slot
    _agrees(model, None)


@needs_answer_key
@pytest.mark.parametrize("kernels", ["torch", "triton"])
@pytest.mark.parametrize("option", OPTIONS)
def test_a_learners_slots_and_pieces_are_what_ran(option, kernels, tmp_path):
    """Every piece of the answer key, as a learner's folder: each slot and each piece says what ran."""
    folder = shutil.copytree(SOLUTIONS, tmp_path / "mine")
    cfg = OPTIONS[option]
    model = build(cfg, folder, accept=set(model_pieces(cfg, kernels)), kernels=kernels)
    assert not any(s.startswith("not run") for s in model.slots.values()), model.slots
    _agrees(model, folder)


@needs_answer_key
@pytest.mark.parametrize("preset", [p for p in PRESETS if "tiny" in p])
def test_in_every_small_preset_the_slots_and_pieces_are_what_ran(preset, tmp_path):
    """The presets themselves (the 120M ones have the same options as these, at sizes that take
    seconds to build): the engine, then every piece of the answer key as a learner's."""
    _agrees(build(preset), None)
    folder = shutil.copytree(SOLUTIONS, tmp_path / "mine")
    model = build(preset, folder, accept=set(model_pieces(preset)))
    assert {who for who in model.pieces.values()} <= {"yours", "engine: position='rope' needs the engine's; "
                                                                "yours computes position='learned'"}, model.pieces
    _agrees(model, folder)


def _changed(tmp_path, activity: str, *edits: tuple[str, str]) -> Path:
    """A copy of the answer key with `edits` (old, new) made in <activity>.py."""
    folder = shutil.copytree(SOLUTIONS, tmp_path / "mine")
    path = folder / f"{activity}.py"
    text = path.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text, encoding="utf-8")
    return folder


F_GELU = (("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as F\n"),
          ("return self.proj(self.gelu(self.fc(x)))   #", "return self.proj(F.gelu(self.fc(x), approximate='tanh'))   #"))
BYPASSED = ("not run: your MLP calls F.gelu itself, not self.gelu: the gelu slot, and any Triton kernel in it, "
            "never runs")


@needs_answer_key
@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_an_mlp_that_calls_f_gelu_itself_is_reported(kernels, tmp_path):
    """The MLP computes what the engine's does, so it passes grading; its gelu slot never runs,
    and nor do the learner's gelu_tanh and gelu_kernel in it."""
    folder = _changed(tmp_path, "mlp", *F_GELU)
    model = build(CLASSIC, folder, accept=set(model_pieces(CLASSIC, kernels)), kernels=kernels)
    assert model.slots["gelu"] == BYPASSED
    assert model.pieces["mlp.MLP"] == "yours"
    assert model.pieces["mlp.gelu_tanh"] == BYPASSED
    if kernels == "triton":
        assert model.pieces["kernels.gelu_kernel"] == BYPASSED
        assert model.slots["layer_norm"] == "yours in Triton"
    _agrees(model, folder)


@needs_answer_key
def test_the_bypass_is_reported_by_the_model_the_graded_tests_let_in(tmp_path, capsys):
    """Through grading: an MLP that reads self.gelu and then calls F.gelu passes its graded tests
    (their slot test reads the source, and the slot is read), the model says the slot never runs,
    and notebook 06's build_model prints it. (Without the read, grading refuses it:
    test_mlp_calls_its_gelu_slot.)"""
    from andrea_course.notebook.model_lab import build_model
    imports, call = F_GELU
    folder = _changed(tmp_path, "mlp", imports, (call[0], call[1].replace("))   #", ")) if self.gelu else x   #")))
    for other in folder.glob("*.py"):
        if other.name != "mlp.py":
            other.unlink()
    model = learner_model(CLASSIC, folder)
    assert model.pieces["mlp.MLP"] == "yours" and model.slots["gelu"] == BYPASSED
    build_model(CLASSIC, folder)
    assert f"mlp.gelu_tanh: {BYPASSED}\n" in capsys.readouterr().out


@needs_answer_key
def test_a_models_forward_that_computes_its_loss_itself_is_reported(tmp_path):
    folder = _changed(tmp_path, "model", ("return logits, self.cross_entropy(logits, targets)",
                                          "return logits, torch.nn.functional.cross_entropy(logits.flatten(0, 1), "
                                          "targets.flatten())"))
    model = build(CLASSIC, folder, accept=set(model_pieces(CLASSIC)), kernels="triton")
    assert model.slots["cross_entropy"] == (
        "not run: your ANDREA's forward calls torch.nn.functional.cross_entropy itself, not self.cross_entropy: "
        "the cross_entropy slot, and any Triton kernel in it, never runs")
    _agrees(model, folder)


@needs_answer_key
def test_an_attention_that_calls_torch_softmax_itself_is_reported(tmp_path):
    folder = _changed(tmp_path, "attention", ("    return weighted_sum(softmax(scores), v)",
                                              "    return weighted_sum(torch.softmax(scores, dim=-1), v)"))
    accept = set(model_pieces(CLASSIC, "triton")) - {"kernels.flash_attention_kernel"}   # or it does attention
    model = build(CLASSIC, folder, accept=accept, kernels="triton")
    assert model.slots["attention"] == "yours in Triton"
    why = "your attention.attention never calls softmax (torch.softmax does its job)"
    assert model.pieces["attention.softmax"] == f"not run: {why}: your attention.softmax never runs"
    assert model.pieces["kernels.softmax_kernel"] == f"not run: {why}: your kernels.softmax_kernel never runs"
    _agrees(model, folder)


@needs_answer_key
def test_a_block_that_skips_a_norm_is_reported(tmp_path):
    folder = _changed(tmp_path, "block", ("        x = x + self.drop(self.mlp(self.ln2(x)))\n        return x\n        ### END",
                                          "        x = x + self.drop(self.mlp(x))\n        return x\n        ### END"))
    model = build(CLASSIC, folder, accept=set(model_pieces(CLASSIC)))
    assert model.slots["layer_norm"] == ("yours in 2 of its 3 LayerNorms: your Block never calls its ln2: "
                                         "the layer_norm slot in it never runs")
    _agrees(model, folder)


@needs_answer_key
def test_a_block_that_never_calls_its_mlp_is_reported(tmp_path):
    """The block runs the MLP's layers itself: the learner's MLP class, and its gelu slot, never run."""
    folder = _changed(tmp_path, "block", (
        "        x = x + self.drop(self.mlp(self.ln2(x)))\n        return x\n        ### END",
        "        x = x + self.drop(self.mlp.proj(torch.nn.functional.gelu(self.mlp.fc(self.ln2(x)), approximate='tanh')))"
        "\n        return x\n        ### END"))
    model = build(CLASSIC, folder, accept=set(model_pieces(CLASSIC)))
    assert model.pieces["mlp.MLP"] == "not run: your Block never calls its mlp: your mlp.MLP never runs"
    assert model.slots["gelu"] == ("not run: your Block never calls its mlp (it calls torch.nn.functional.gelu "
                                   "itself): the gelu slot in it never runs")
    _agrees(model, folder)


@needs_answer_key
def test_a_piece_that_raises_in_the_model_is_reported_and_the_engines_runs(tmp_path):
    """Built from the same draws again without it: the engine's weights, the engine's random stream after."""
    folder = _changed(tmp_path, "mlp", ("return self.proj(self.gelu(self.fc(x)))   #",
                                        "raise ValueError('boom')   #"))
    line = next(i for i, text in enumerate((folder / "mlp.py").read_text().splitlines(), 1) if "boom" in text)
    torch.manual_seed(3)
    want, after_engine = ANDREA(CLASSIC).state_dict(), torch.rand(3)
    torch.manual_seed(3)
    model, after = build(CLASSIC, folder, accept=set(model_pieces(CLASSIC))), torch.rand(3)
    assert model.pieces["mlp.MLP"] == f"engine: yours raised ValueError in this model (mlp.py, line {line}: boom)"
    assert type(model.blocks[0].mlp) is engine.MLP and model.slots["gelu"] == "yours"
    assert all(torch.equal(p, want[n]) for n, p in model.state_dict().items())
    assert torch.equal(after, after_engine)


@needs_answer_key
def test_the_probe_leaves_no_trace(tmp_path):
    """No gradient, no hook, no wrapper in a slot, the caller's random stream as the engine leaves it."""
    folder = shutil.copytree(SOLUTIONS, tmp_path / "mine")
    torch.manual_seed(4)
    ANDREA(MODERN)
    after_engine = torch.rand(3)
    torch.manual_seed(4)
    model = build(MODERN, folder, accept=set(model_pieces(MODERN)), dropout=0.5)
    assert torch.equal(torch.rand(3), after_engine)
    assert all(p.grad is None for p in model.parameters())
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())
    swiglu = model.blocks[0].mlp.swiglu
    assert swiglu.__code__.co_filename == str(folder / "modern.py") and swiglu.__name__ == "swiglu"
    assert "kv_cache" not in vars(model) or vars(model)["kv_cache"].__name__ == "KVCache"


@needs_answer_key
@pytest.mark.slow(seconds=5)
def test_the_same_seed_gives_the_engines_weights_whatever_the_kernels(tmp_path, monkeypatch):
    """learner_model(..., kernels="triton") grades the learner's kernels first, warming Triton's
    interpreter in this process: that must not draw from the caller's random stream."""
    from andrea_course.grading import pipeline
    monkeypatch.setattr(pipeline, "_warmed", set())          # as in a fresh process
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(SOLUTIONS / "kernels.py", folder / "kernels.py")
    cfg = CLASSIC.replace(n_layers=2)
    torch.manual_seed(1)
    want, after_engine = ANDREA(cfg).state_dict(), torch.rand(3)
    for kernels in ("torch", "triton"):
        torch.manual_seed(1)
        model, after = learner_model(cfg, folder, kernels=kernels), torch.rand(3)
        assert all(torch.equal(p, want[n]) for n, p in model.state_dict().items()), kernels
        assert torch.equal(after, after_engine), kernels
    assert {model.pieces[k] for k in TRITON_KERNELS.values() if k != "kernels.softmax_kernel"} == {"yours"}
    assert model.pieces["kernels.softmax_kernel"].endswith("never runs")      # flash_attention_kernel does attention
