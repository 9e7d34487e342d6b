"""andrea_course.engine.weights: save and load ANDREA with its config inside a safetensors file."""
import json

import pytest
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course.engine.weights import WeightsError, load_weights, read_config, read_metadata, save_weights

SMALL = dict(vocab_size=97, context_length=16, d_model=32, n_layers=2, n_heads=4, d_ff=64)


def small(**kw):
    torch.manual_seed(0)
    return ANDREA(ModelConfig(**{**SMALL, **kw})).eval()


def ids(cfg, B=2, T=8, seed=1):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kw", [{}, dict(norm="rmsnorm", mlp="swiglu", tie_embeddings=True, n_kv_heads=2, bias=False)],
                         ids=["classic", "modern"])
def test_round_trip_rebuilds_model_from_file(tmp_path, kw):
    model = small(**kw)
    path = save_weights(model, tmp_path / "m.safetensors", metadata={"step": "7"})
    assert read_config(path) == model.cfg
    assert read_metadata(path)["step"] == "7"
    loaded = load_weights(path)
    assert loaded is not model and loaded.cfg == model.cfg and not loaded.training
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2), n1
    x = ids(model.cfg)
    torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)


def test_tied_table_is_stored_once(tmp_path):
    model = small(tie_embeddings=True)
    path = save_weights(model, tmp_path / "tied.safetensors")
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    assert "embed.token_table" in shapes and not any(k.startswith("head") for k in shapes)
    assert sum(torch.Size(s).numel() for s in shapes.values()) == sum(p.numel() for p in model.parameters())
    loaded = load_weights(path)
    assert loaded.output_weight() is loaded.embed.token_table


def test_shared_tensor_under_two_names_is_saved_once_and_restored(tmp_path):
    """A model that ties by assignment (head.weight = token_table) has both names in its state_dict."""
    model = small()
    model.head.weight = model.embed.token_table
    path = save_weights(model, tmp_path / "alias.safetensors")
    meta = read_metadata(path)
    assert json.loads(meta["andrea_tied"]) == {"head.weight": "embed.token_table"}
    other = small()
    other.head.weight = other.embed.token_table
    with torch.no_grad():
        other.embed.token_table.zero_()
    load_weights(path, model=other)
    assert torch.equal(other.head.weight, model.embed.token_table)


def test_load_into_existing_model(tmp_path):
    model = small()
    path = save_weights(model, tmp_path / "m.safetensors")
    target = small()
    with torch.no_grad():
        for p in target.parameters():
            p.add_(1.0)
    target.train()
    out = load_weights(path, model=target)
    assert out is target and target.training          # the mode of an existing model is left alone
    target.eval()
    x = ids(model.cfg)
    torch.testing.assert_close(target(x), model(x), rtol=0, atol=0)


def test_wrapped_model_is_saved_and_filled_without_the_wrapper_prefix(tmp_path):
    """torch.compile keeps the model in ._orig_mod, DistributedDataParallel in .module."""
    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.module = inner

    model = small()
    path = save_weights(Wrapper(model), tmp_path / "w.safetensors")
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        assert "embed.token_table" in set(f.keys())
    target = small(bias=True)
    with torch.no_grad():
        target.embed.token_table.zero_()
    load_weights(path, model=Wrapper(target))
    assert torch.equal(target.embed.token_table, model.embed.token_table)
    with pytest.raises(WeightsError, match=r"Linear has no \.cfg ModelConfig"):
        save_weights(torch.nn.Linear(2, 2), tmp_path / "x.safetensors")


def test_load_into_model_of_other_config_names_the_fields(tmp_path):
    path = save_weights(small(), tmp_path / "m.safetensors")
    with pytest.raises(WeightsError, match=r"d_model: file 32, model 64") as e:
        load_weights(path, model=small(d_model=64, n_heads=4))
    assert "m.safetensors" in str(e.value)
    with pytest.raises(WeightsError, match=r"n_layers: file 2, model 3"):
        load_weights(path, model=small(n_layers=3))


def test_how_a_model_runs_is_chosen_when_loading(tmp_path):
    path = save_weights(small(), tmp_path / "m.safetensors")
    model = load_weights(path, dropout=0.1)
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.1}
    with pytest.raises(WeightsError, match=r"only how the model runs .*d_model"):
        load_weights(path, d_model=64)
    with pytest.raises(WeightsError, match=r"fills an existing model"):
        load_weights(path, model=small(), dropout=0.1)


def test_shape_mismatch_names_tensor(tmp_path):
    """A model whose tensors differ from the file although the config claims the same sizes."""
    model = small()
    path = save_weights(model, tmp_path / "m.safetensors")
    target = small()
    target.blocks[1].mlp.fc = torch.nn.Linear(32, 65)
    with pytest.raises(WeightsError, match=r"blocks\.1\.mlp\.fc\.weight: file \(64, 32\), model \(65, 32\)"):
        load_weights(path, model=target)
    target = small(bias=True)
    target.blocks[0].mlp.fc.bias = None
    with pytest.raises(WeightsError, match=r"in the file but not in the model: blocks\.0\.mlp\.fc\.bias"):
        load_weights(path, model=target)


def test_truncated_file_is_named(tmp_path):
    path = save_weights(small(), tmp_path / "cut.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError, match=r"cut\.safetensors.*(truncated or corrupt)"):
        load_weights(path)


def test_corrupt_file_is_named(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x07" * 64)
    with pytest.raises(WeightsError, match=r"junk\.safetensors is not a readable safetensors file"):
        load_weights(path)


def test_foreign_safetensors_file_is_refused(tmp_path):
    from safetensors.torch import save_file
    path = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(path))
    with pytest.raises(WeightsError, match=r"foreign\.safetensors holds no ANDREA config"):
        load_weights(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere\.safetensors"):
        load_weights(tmp_path / "nowhere.safetensors")


def test_save_leaves_no_temporary_file(tmp_path):
    save_weights(small(), tmp_path / "sub" / "m.safetensors")
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["m.safetensors"]
