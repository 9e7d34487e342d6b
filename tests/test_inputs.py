"""Bad input to ANDREA raises an error that says what was wrong and what was expected:
no silent broadcasting, clipping or truncation."""
import re

import pytest
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course.weights import WeightsError, load_weights, save_weights

CFG = ModelConfig(vocab_size=50, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
V, T = CFG.vocab_size, CFG.context_length


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ANDREA(CFG).eval()


def ids(B=2, T_=4):
    return torch.arange(B * T_).reshape(B, T_) % V


@pytest.mark.parametrize("bad", [-1, V, V + 1000])
def test_token_id_outside_vocabulary(model, bad):
    x = ids()
    x[1, 2] = bad
    with pytest.raises(ValueError, match=rf"token id {bad} is outside the vocabulary \[0, {V}\)"):
        model(x)


def test_sequence_longer_than_context(model):
    with pytest.raises(ValueError, match=rf"sequence too long: {T + 1} positions but the context length T is {T}; "
                                         rf"crop to the last {T} tokens"):
        model(ids(1, T + 1))


def test_sequence_longer_than_context_through_the_cache(model):
    caches = model.new_caches(1)
    model(ids(1, T - 1), caches=caches)                   # T - 1 positions cached
    with pytest.raises(ValueError, match=rf"sequence too long: {T + 1} positions \({T - 1} cached \+ 2 new\) "
                                         rf"but the context length T is {T}"):
        model(ids(1, 2), caches=caches)
    assert caches[0].pos == T - 1                          # nothing was written


def test_cache_shorter_than_input_is_full(model):
    caches = model.new_caches(1, max_len=3)
    with pytest.raises(ValueError, match=r"KV cache full: 0 cached \+ 4 new > 3 positions"):
        model(ids(1, 4), caches=caches)


def test_cache_of_another_batch_is_not_broadcast(model):
    caches = model.new_caches(2)
    with pytest.raises(ValueError, match=r"KV cache made for B=2 sequences, G=2 key/value heads of width K=8; "
                                         r"got k of shape \(1, 2, 3, 8\)"):
        model(ids(1, 3), caches=caches)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.uint8])
def test_ids_of_wrong_dtype(model, dtype):
    with pytest.raises(TypeError, match=rf"ids must be integer token ids \(torch.long\), got dtype {dtype}"):
        model(ids().to(dtype))


def test_int32_ids_are_accepted(model):
    torch.testing.assert_close(model(ids().int()), model(ids()), rtol=0, atol=0)


def test_ids_not_a_tensor(model):
    with pytest.raises(TypeError, match=r"ids must be a torch.Tensor of token ids with shape \(B, T\), got list"):
        model([[1, 2, 3]])


def test_one_dimensional_ids(model):
    with pytest.raises(ValueError, match=r"ids must have shape \(B, T\), got a 1-D tensor of shape \(4,\); "
                                         r"for a single sequence use ids\[None\]"):
        model(ids(1, 4)[0])


def test_three_dimensional_ids(model):
    with pytest.raises(ValueError, match=r"ids must have shape \(B, T\), got a 3-D tensor of shape \(2, 4, 1\)"):
        model(ids()[..., None])


@pytest.mark.parametrize("shape", [(2, 0), (0, 4)])
def test_empty_ids(model, shape):
    with pytest.raises(ValueError, match=re.escape(f"ids is empty (shape {shape}): need at least one")):
        model(torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("shape", [(2, 3), (4, 2), (8,), (2, 4, 1)])
def test_targets_of_another_shape(model, shape):
    targets = torch.zeros(shape, dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape(f"targets must have the same shape as ids (2, 4), got {shape}")):
        model(ids(), targets)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_targets_of_wrong_dtype(model, dtype):
    with pytest.raises(TypeError, match=rf"targets must be integer token ids \(torch.long\), got dtype {dtype}"):
        model(ids(), ids().to(dtype))


@pytest.mark.parametrize("bad", [-1, V, -101])
def test_target_outside_vocabulary(model, bad):
    targets = ids()
    targets[0, 0] = bad
    with pytest.raises(ValueError, match=rf"target id {bad} is outside the vocabulary \[0, {V}\) "
                                         r"\(use -100 for positions to ignore\)"):
        model(ids(), targets)


def test_ignored_targets_are_accepted(model):
    targets = ids()
    targets[:, :2] = -100
    _, loss = model(ids(), targets)
    assert torch.isfinite(loss)


@pytest.mark.parametrize("kw, message", [
    (dict(temperature=-1.0), r"temperature must be >= 0, got -1.0"),
    (dict(top_k=0), r"top_k must be a positive number of tokens or None, got 0"),
])
def test_generate_refuses_bad_sampling_settings(model, kw, message):
    with pytest.raises(ValueError, match=message):
        model.generate(ids(1, 2), 3, **kw)


def test_generate_refuses_negative_length(model):
    with pytest.raises(ValueError, match=r"max_new_tokens must be >= 0, got -1"):
        model.generate(ids(1, 2), -1)


def test_weights_of_another_config(model, tmp_path):
    path = save_weights(model, tmp_path / "other.safetensors")
    wider = ANDREA(CFG.replace(vocab_size=60, n_heads=4))
    with pytest.raises(WeightsError, match=r"other\.safetensors was saved from a different config than the model's; "
                                           r"differences: vocab_size: file 50, model 60; n_heads: file 2, model 4"):
        load_weights(path, model=wider)


def test_state_dict_of_another_config(model):
    """Plain torch loading also refuses, naming the tensor (no silent partial load)."""
    wider = ANDREA(CFG.replace(d_model=32))
    with pytest.raises(RuntimeError, match=r"size mismatch for embed\.token_table"):
        wider.load_state_dict(model.state_dict())
