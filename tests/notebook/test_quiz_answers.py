"""Quiz answers that the code can compute are checked against the code: the sealed answer of each
question below must be what the package (the engine's pieces, count_parameters, the trainer's
optimiser) computes. A change in the model that makes an answer false fails here, not in a
learner's head. Conceptual questions (why pre-norm, why W_O) are held to the rules of
tests/notebook/test_quiz.py only.
"""
from __future__ import annotations

import ast
import json
import math

import pytest
import torch

from andrea_course import ANDREA, ModelConfig, count_parameters, pieces
from andrea_course.notebook.quizzes import as_question
from andrea_course.paths import ROOT

CFG = ModelConfig.preset("andrea-120m")
COUNT = count_parameters(CFG)


def _question(notebook: str, start: str):
    """The opened question of `notebook` whose text starts with `start` (exactly one)."""
    found = []
    for cell in json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and "quiz(" in src:
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "quiz":
                    found += [as_question(q) for q in ast.literal_eval(node.args[0])
                              if q["question"].startswith(start)]
    assert len(found) == 1, f"{notebook}: {len(found)} questions start with {start!r}"
    return found[0]


def _rows_changed_by_one_training_step() -> tuple[int, int, int]:
    """(rows of the token table with a gradient, rows changed, V) after one step of andrea-train's
    optimiser (AdamW over the trainer's parameter groups, its default weight decay) on a small
    untied ANDREA and a batch that reads a few ids."""
    from andrea_course.train.settings import TrainConfig
    from andrea_course.train.trainer import param_groups
    torch.manual_seed(0)
    cfg = ModelConfig.preset("andrea-tiny", n_layers=1, context_length=16)
    model = ANDREA(cfg)
    assert model.head is not None, "the question is about an untied model, like ANDREA-120M"
    tc = TrainConfig()
    opt = torch.optim.AdamW(param_groups(model, tc.weight_decay), lr=1e-3, betas=(tc.beta1, tc.beta2))
    ids = torch.randint(0, 50, (2, 8))
    before = model.embed.token_table.detach().clone()
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    with_grad = int((model.embed.token_table.grad.abs().sum(-1) > 0).sum())
    opt.step()
    changed = int(((model.embed.token_table.detach() - before).abs().sum(-1) > 0).sum())
    return with_grad, changed, cfg.vocab_size


def test_01_one_adamw_step_changes_every_row_of_the_token_table():
    with_grad, changed, V = _rows_changed_by_one_training_step()
    assert with_grad <= 50 < V and changed == V, (with_grad, changed, V)
    q = _question("01_embeddings.ipynb", "ANDREA trains with AdamW")
    assert q.answer.startswith("Every row") and "decay" in q.answer


def test_01_token_table_share_and_what_tying_saves():
    share = _question("01_embeddings.ipynb", "What share of ANDREA-120M's parameters is the token table")
    assert f"{100 * COUNT['token_table'] / COUNT['total']:.1f} %" in share.answer
    assert f"{COUNT['total']:,}" in share.answer
    tied = count_parameters(CFG.replace(tie_embeddings=True))["total"]
    saved = _question("01_embeddings.ipynb", "What does tying the output head")
    assert f"{COUNT['total'] - tied:,}" in saved.answer


def test_01_lookup_shape_and_a_stretched_cosine():
    table = torch.randn(CFG.vocab_size, CFG.d_model)
    shape = tuple(pieces.get("embeddings", "embed_lookup")(table, torch.randint(0, CFG.vocab_size, (4, 16))).shape)
    assert _question("01_embeddings.ipynb", "The token table has shape").answer == shape
    cos = pieces.get("embeddings", "cosine_similarity")
    u, v = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    factor = float(cos(3 * u, v) / cos(u, v))
    assert math.isclose(_question("01_embeddings.ipynb", "The row of").answer, factor, rel_tol=1e-9)


def test_02_sqrt_k_and_the_number_of_scores():
    assert _question("02_attention.ipynb", "What is √K").answer == f"{math.sqrt(CFG.d_head):g}"
    assert _question("02_attention.ipynb", "How many attention scores").answer == CFG.context_length ** 2


def test_03_head_width_sublayer_parameters_and_more_heads():
    assert _question("03_multihead.ipynb", "How wide is each").answer == str(CFG.d_head)
    assert _question("03_multihead.ipynb", "How many parameters does one attention").answer == f"{COUNT['attention']:,}"
    more_heads = count_parameters(CFG.replace(n_heads=24))["attention"]
    assert more_heads == COUNT["attention"]
    assert _question("03_multihead.ipynb", "Would 24 heads").answer.startswith("No, the same")


def test_03_split_shape_and_the_entropy_of_an_even_head():
    q = torch.randn(2, 16, CFG.d_model)
    shape = tuple(pieces.get("multihead", "split_heads")(q, CFG.n_heads).shape)
    assert _question("03_multihead.ipynb", "q of shape").answer == shape
    even = torch.full((1, 1, 1, 4), 0.25)
    entropy = float(pieces.get("multihead", "head_entropy")(even)[0])
    q = _question("03_multihead.ipynb", "At query position 3")
    assert math.isclose(q.answer, entropy, rel_tol=q.tolerance)


def test_04_mlp_share_weights_slope_and_the_swiglu_budget():
    mlps = CFG.n_layers * COUNT["mlp"]
    assert f"About {100 * mlps / COUNT['total']:.0f} %" in _question("04_mlp.ipynb", "What share").answer
    assert _question("04_mlp.ipynb", "ANDREA-120M has D = 768").answer == 2 * CFG.d_model * CFG.d_ff
    slope = float(pieces.get("mlp", "gelu_grad")(torch.zeros(1))[0])
    q = _question("04_mlp.ipynb", "What is the slope")
    assert math.isclose(q.answer, slope, rel_tol=q.tolerance)
    F = pieces.get("modern", "swiglu_hidden_dim")(CFG.d_model)
    assert 3 * CFG.d_model * F == 2 * CFG.d_model * CFG.d_ff
    assert "8D/3" in _question("04_mlp.ipynb", "SwiGLU has three matrices").answer


def test_05_layernorms_and_a_dropout_survivor():
    with torch.device("meta"):
        model = ANDREA(CFG)
    norms = sum(isinstance(m, type(model.ln_f)) for m in model.modules())
    assert _question("05_block.ipynb", "How many LayerNorms").answer == norms
    x = torch.full((4096,), 2.0)
    out = pieces.get("block", "dropout")(x, 0.2, True, torch.Generator().manual_seed(0))
    survivor = float(out[out != 0][0])
    q = _question("05_block.ipynb", "Dropout with p = 0.2")
    assert math.isclose(q.answer, survivor, rel_tol=max(q.tolerance, 1e-6))


def test_06_trunk_share_training_memory_and_the_count():
    trunk = _question("06_model.ipynb", "What share of ANDREA-120M is the trunk")
    assert f"About {100 * COUNT['blocks'] / COUNT['total']:.0f} %" == trunk.answer
    memory = _question("06_model.ipynb", "How much memory")
    assert memory.answer == f"{16 * COUNT['total'] / 1e9:.2f} GB"                # weight, grad, m, v in fp32
    assert _question("06_model.ipynb", "How many parameters does ANDREA-120M really").answer == COUNT["total"]


def test_07_grouped_heads_shrink_the_cache_and_swiglu_width():
    kv_bytes = pieces.get("modern", "kv_cache_bytes")
    modern = ModelConfig.preset("andrea-120m-modern")
    ratio = kv_bytes(modern.replace(n_kv_heads=modern.n_heads)) / kv_bytes(modern)
    assert _question("07_modern.ipynb", "ANDREA-120M-modern has H = 12").answer.startswith(f"{ratio:g} times smaller")
    assert _question("07_modern.ipynb", "SwiGLU keeps").answer == pieces.get("modern", "swiglu_hidden_dim")(768)


def test_08_masked_lanes_and_the_softmax_block():
    n, block = 3001, 1024
    programs = -(-n // block)
    ragged = [p for p in range(programs) if (p + 1) * block > n]
    assert ragged == [programs - 1] == [2]
    assert _question("08_kernels.ipynb", "Your GELU kernel runs").answer.startswith("only the third")
    assert _question("08_kernels.ipynb", "With BLOCK = 1,024").answer == programs * block - n
    assert _question("08_kernels.ipynb", "One program per row").answer == 1 << (CFG.vocab_size - 1).bit_length()
    T, tile = 256, 64                # a query block visits the key tiles up to the one holding its last query
    tiles = sum(min(T, (m + 1) * tile) // tile for m in range(T // tile))
    assert _question("08_kernels.ipynb", "Causal attention with T = S = 256").answer == tiles == 10


def test_09_the_vocabulary():
    from andrea_course.train import load_tokenizer
    assert _question("09_capstone.ipynb", "The course's byte-level BPE").answer == CFG.vocab_size
    assert load_tokenizer().vocab_size == CFG.vocab_size


def test_10_the_induction_head_attends_to_the_token_after_the_earlier_copy():
    """A B C D A B C: an induction score of 1 goes with all the weight of query t on key t - period + 1."""
    tokens, period = "ABCDABC", 4
    t = len(tokens) - 1                                              # the second C
    weights = torch.zeros(1, 1, 1, len(tokens), len(tokens))
    weights[..., torch.arange(period, len(tokens)), torch.arange(1, len(tokens) - period + 1)] = 1.0
    assert pieces.get("inside", "induction_scores")(weights, period).item() == 1.0
    key = t - period + 1
    assert _question("10_inside.ipynb", "In the tokens A B C D").answer.startswith(f"On {tokens[key]}:")
    model = ANDREA(ModelConfig(vocab_size=11, context_length=10, d_model=8, n_layers=4, n_heads=4, d_ff=16))
    shape = pieces.get("inside", "attention_patterns")(model, torch.zeros(2, 10, dtype=torch.long)).shape
    assert _question("10_inside.ipynb", "A model has L = 4 blocks").answer == tuple(shape)


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_every_notebook_has_an_answer_checked_here(notebook):
    """Each notebook's quiz has at least one answer this file computes."""
    source = (ROOT / "tests" / "notebook" / "test_quiz_answers.py").read_text(encoding="utf-8")
    assert f'"{notebook}"' in source, f"no quiz answer of {notebook} is checked against the code"
