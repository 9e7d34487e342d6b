"""The implementation switch (andrea_course/impl.py): ANDREA_IMPL picks solutions/, exercises/
or a submission folder; own() hands out the learner's pieces, module() fills the unwritten ones
from the reference; broken and missing files fall back; ANDREA(...).pieces says whose code runs."""
import re

import pytest
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course.impl import (EXERCISES, SOLUTIONS, STUB_MARK, Impl, ImplementationError, get_impl,
                                reference_of, resolve)

REF = get_impl("solutions")
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


# ----- the switch -----

def test_andrea_impl_chooses_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("ANDREA_IMPL", raising=False)
    assert resolve() == SOLUTIONS and get_impl().is_reference
    monkeypatch.setenv("ANDREA_IMPL", "exercises")
    assert resolve() == EXERCISES and get_impl().folder == EXERCISES and not get_impl().is_reference
    monkeypatch.setenv("ANDREA_IMPL", str(tmp_path))
    assert resolve() == tmp_path.resolve()
    assert resolve("solutions") == SOLUTIONS          # an explicit argument wins over the variable
    monkeypatch.setenv("ANDREA_IMPL", str(tmp_path / "nowhere"))
    with pytest.raises(ImplementationError, match="nowhere"):
        resolve()


def test_the_exercises_own_stubs_and_run_on_the_reference():
    impl = get_impl("exercises")
    stub = impl.own("attention", "softmax")
    with pytest.raises(NotImplementedError, match=f"attention.softmax: {STUB_MARK}"):
        stub(torch.zeros(2, 2))
    assert reference_of(impl.module("attention").softmax) is REF.module("attention").softmax


# ----- a submission folder -----

SOFTMAX = "return torch.softmax(scores, dim=-1)  # the learner's own"


def test_own_gives_the_learners_piece_and_module_fills_the_rest(tmp_path):
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {"softmax": SOFTMAX})})
    impl = Impl(folder)
    mod, ref = impl.module("attention"), REF.module("attention")
    mine = impl.own("attention", "softmax")
    assert mod.softmax is mine and mine is not ref.softmax
    assert mine.__code__.co_filename == str(folder / "attention.py")
    assert reference_of(mod.attention_scores) is ref.attention_scores
    assert reference_of(mod.AttentionHead) is ref.AttentionHead
    with pytest.raises(NotImplementedError, match=STUB_MARK):     # own() is the stub, as written
        impl.own("attention", "attention_scores")(torch.zeros(1, 2, 2), torch.zeros(1, 2, 2))
    with pytest.raises(ImplementationError, match="no 'no_such_piece'"):
        impl.own("attention", "no_such_piece")
    report = impl.report(["attention"])["attention"]
    assert report["softmax"] == "yours"
    assert {n for n, who in report.items() if who == "reference"} == set(report) - {"softmax"}


def test_a_file_that_does_not_load_falls_back_and_own_says_why(tmp_path):
    folder = _submission(tmp_path / "sub", {"block": "def layer_norm(x, weight, bias, eps=1e-5:\n    return x\n"})
    impl = Impl(folder)
    assert reference_of(impl.module("block").Block) is REF.module("block").Block   # the reference stands in
    with pytest.raises(ImplementationError, match=r"block\.py could not be loaded: SyntaxError"):
        impl.own("block", "layer_norm")
    assert set(impl.report(["block"])["block"].values()) == {"reference (file failed to load)"}


def test_a_file_that_crashes_at_import_falls_back(tmp_path):
    folder = _submission(tmp_path / "sub", {"mlp": "raise SystemExit('the learner exits')\n"})
    impl = Impl(folder)
    assert reference_of(impl.module("mlp").MLP) is REF.module("mlp").MLP   # the reference stands in
    with pytest.raises(ImplementationError, match="SystemExit"):
        impl.own("mlp", "gelu_tanh")


def test_a_missing_file_falls_back_but_earns_nothing(tmp_path):
    impl = Impl(_submission(tmp_path / "sub", {}))
    assert reference_of(impl.module("mlp").MLP) is REF.module("mlp").MLP   # the reference stands in
    with pytest.raises(ImplementationError, match=r"mlp\.py"):
        impl.own("mlp", "gelu_tanh")                  # graded tests must not grade the reference
    assert set(impl.report(["mlp"])["mlp"].values()) == {"reference (no file)"}


def test_relative_imports_see_the_learners_piece_or_the_reference(tmp_path):
    multihead = (EXERCISES / "multihead.py").read_text(encoding="utf-8")
    written = _submission(tmp_path / "written", {
        "attention": _exercise_with("attention", {"attention": "return torch.softmax(q @ k.transpose(-2, -1), -1) @ v"}),
        "multihead": multihead})
    unwritten = _submission(tmp_path / "unwritten", {"attention": _exercise_with("attention", {"softmax": SOFTMAX}),
                                                     "multihead": multihead})
    impl = Impl(written)
    assert impl.module("multihead").attention is impl.own("attention", "attention")
    assert reference_of(Impl(unwritten).module("multihead").attention) is REF.module("attention").attention


def test_andrea_reports_whose_pieces_it_runs(tmp_path):
    folder = _submission(tmp_path / "sub", {
        "mlp": _exercise_with("mlp", {"gelu_tanh": "return torch.nn.functional.gelu(x, approximate='tanh')"}),
        "block": "this is not python\n"})
    model = ANDREA(CFG, impl=Impl(folder))
    pieces = model.pieces
    assert pieces["mlp"]["gelu_tanh"] == "yours" and pieces["mlp"]["MLP"] == "reference"
    assert set(pieces["block"].values()) == {"reference (file failed to load)"}
    assert set(pieces["embeddings"].values()) == {"reference (no file)"}
    assert set(pieces) >= {"embeddings", "attention", "multihead", "mlp", "block", "model"}
    reference = ANDREA(CFG, impl="solutions")
    assert set(reference.pieces["model"].values()) == {"reference"}
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(0, CFG.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model(ids), reference(ids))


def test_fresh_rereads_the_learners_files(tmp_path):
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {"softmax": SOFTMAX})})
    first = get_impl(folder)
    assert get_impl(folder) is first
    _submission(folder, {"attention": (EXERCISES / "attention.py").read_text(encoding="utf-8")})
    again = get_impl(folder, fresh=True)
    assert again is not first and again.report(["attention"])["attention"]["softmax"] == "reference"


def test_reference_stand_ins_call_the_learners_pieces(tmp_path):
    """What the learner has written is used: their softmax runs inside the reference attention
    that stands in for their unwritten one, and the model is then not swapped for fused SDPA."""
    counting = ("global CALLS\n    CALLS = globals().get('CALLS', 0) + 1\n"
                "    return torch.softmax(scores, dim=-1)")
    folder = _submission(tmp_path / "sub", {"attention": _exercise_with("attention", {"softmax": counting})})
    impl = Impl(folder)
    model = ANDREA(ModelConfig.preset("andrea-tiny", n_layers=2), impl=impl)
    assert model.pieces["attention"]["softmax"] == "yours"
    assert model.pieces["attention"]["attention"] == "reference"
    model(torch.randint(0, 100, (1, 8)))
    assert impl.module("attention").CALLS == 2                  # once per block
    untouched = ANDREA(ModelConfig.preset("andrea-tiny", n_layers=2), impl="exercises")
    from andrea_course import ops
    assert untouched.blocks[0].attn.attend is ops.attention     # all reference: fused
