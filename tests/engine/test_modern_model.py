"""The modern variant assembled: a tied head that stays ONE tensor through training, grouped
key/value heads (G from 1 to H) that compute plain multi-head attention with the key/value
weights repeated, and the KV cache's memory for every G.

The model is built from $ANDREA_IMPL's pieces (the reference where a piece is unwritten), so
a learner's submission can run these too; tests/engine/test_andrea_model.py checks the reference alone.
"""
import pytest
import torch

from andrea_course import ANDREA, ModelConfig, count_parameters, pieces
from andrea_course.engine.model import KVCache
from andrea_course.grading import expect_equal, graded



def tiny_modern(**changes):
    return ModelConfig.preset("andrea-tiny-modern", context_length=16, n_layers=2, **changes)


def rand_ids(cfg, B, T, seed=0):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- weight tying
def test_tied_head_is_one_tensor_after_optimizer_steps():
    torch.manual_seed(0)
    cfg = tiny_modern()
    model = ANDREA(cfg)
    table = model.embed.token_table
    assert model.output_weight().data_ptr() == table.data_ptr()
    # Counted once: the tied model has V·D parameters fewer than its untied twin.
    untied = count_parameters(cfg.replace(tie_embeddings=False))["total"]
    assert sum(p.numel() for p in model.parameters()) == untied - cfg.vocab_size * cfg.d_model
    before = table.detach().clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(2):
        opt.zero_grad()
        model(rand_ids(cfg, 2, 8, seed=step), rand_ids(cfg, 2, 8, seed=10 + step))[1].backward()
        opt.step()
    assert not torch.equal(table, before)                                   # it did train
    assert model.output_weight().data_ptr() == model.embed.token_table.data_ptr() == table.data_ptr()
    assert torch.equal(model.output_weight(), model.embed.token_table)


def test_tied_table_gets_the_gradient_of_both_roles():
    """One tensor, two uses: its gradient is the input lookup's plus the output head's. An untied
    twin holding the same numbers in two tensors gets exactly those two parts separately."""
    torch.manual_seed(0)
    cfg = tiny_modern()
    tied = ANDREA(cfg)
    twin = ANDREA(cfg.replace(tie_embeddings=False))
    state = dict(tied.state_dict(), **{"head.weight": tied.embed.token_table.detach().clone()})
    twin.load_state_dict(state)
    ids, targets = rand_ids(cfg, 2, 8), rand_ids(cfg, 2, 8, seed=1)
    tied(ids, targets)[1].backward()
    twin(ids, targets)[1].backward()
    torch.testing.assert_close(tied.embed.token_table.grad,
                               twin.embed.token_table.grad + twin.head.weight.grad, rtol=1e-5, atol=1e-7)
    assert twin.embed.token_table.grad.abs().sum() > 0 and twin.head.weight.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- grouped key/value heads
H, K, D = 6, 4, 24


@pytest.mark.parametrize("G", [1, 2, 3, 6], ids=lambda G: f"G={G}")
def test_grouped_kv_heads_equal_multi_head_with_repeated_kv_weights(G):
    torch.manual_seed(G)
    MHA = pieces.get("multihead", "MultiHeadAttention")
    cfg = ModelConfig(vocab_size=11, context_length=8, d_model=D, n_layers=1, n_heads=H, n_kv_heads=G, d_ff=48)
    gqa = MHA(cfg)
    assert gqa.qkv.weight.shape == ((H + 2 * G) * K, D)           # H query heads, G key and G value heads
    x = torch.randn(3, 8, D)
    y = gqa(x)
    assert y.shape == (3, 8, D)
    # Plain multi-head attention (G = H) whose head h has key/value head h // (H/G)'s weights.
    full = MHA(cfg.replace(n_kv_heads=None))
    rep = lambda t: t.reshape(G, K, -1).repeat_interleave(H // G, dim=0).reshape(H * K, *t.shape[1:])
    with torch.no_grad():
        wq, wk, wv = gqa.qkv.weight.split([H * K, G * K, G * K])
        bq, bk, bv = gqa.qkv.bias.split([H * K, G * K, G * K])
        full.qkv.weight.copy_(torch.cat([wq, rep(wk), rep(wv)]))
        full.qkv.bias.copy_(torch.cat([bq, rep(bk), rep(bv)]))
        full.proj.load_state_dict(gqa.proj.state_dict())
        torch.testing.assert_close(full(x), y, rtol=1e-5, atol=1e-6)
    # The cache stores only the G key/value heads.
    cache = KVCache(3, G, 8, K, torch.float32, "cpu")
    with torch.no_grad():
        torch.testing.assert_close(gqa(x[:, :5], cache), y[:, :5], rtol=1e-5, atol=1e-6)
    assert cache.k.shape == cache.v.shape == (3, G, 8, K) and cache.pos == 5
