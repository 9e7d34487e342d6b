"""Graded tests, activity 11 · Inside your model: hooks, the residual stream, attention patterns,
the logit lens and induction scores.

The probes take a model: each test builds the engine's ANDREA where the learner's code runs (the
exercise file's given ANDREA), gives it the reference's random weights, and compares the probe
with the engine's (pieces/inside.py) computed on the reference."""
import torch

from andrea_course import ANDREA, ModelConfig
from andrea_course import pieces
from andrea_course.activity_tests import expect_trainable, layer_mixups
from andrea_course.grading import Case, expect_cases, expect_runs, expect_true, graded, load_weights

CFG = ModelConfig(vocab_size=19, context_length=12, d_model=12, n_layers=2, n_heads=3, d_ff=24)
CFG2 = ModelConfig(vocab_size=23, context_length=12, d_model=8, n_layers=3, n_heads=2, d_ff=16, bias=False,
                   tie_embeddings=True)
ENGINE = pieces.module("inside")


def _reference(cfg, seed=0):
    """The engine's ANDREA in float64, every parameter random (norm gains and shifts included)."""
    torch.manual_seed(seed)
    ref = ANDREA(cfg).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g) * 0.5)
    return ref.eval()


def _theirs(student, ref):
    """The same model, built where the learner's code runs."""
    m = student.piece("inside", "ANDREA")(ref.cfg)
    m.double()
    load_weights(m, ref.state_dict(), "ANDREA(cfg)")
    m.eval()
    return m


def _ids(cfg, B, T, seed):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


def _hooks(model) -> int:
    """How many forward hooks and pre-hooks the model's modules hold."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _leaves_no_hook(student, name):
    """The probe, called once as it should be and once on ids past the vocabulary (the model's
    forward raises), leaves no hook behind."""
    probe = student.piece("inside", name)
    ref = _reference(CFG, seed=5)
    m = _theirs(student, ref)
    expect_runs(lambda: probe(m, _ids(CFG, 1, 4, seed=1)), f"{name}(model, ids)")
    left = _hooks(m)
    expect_true(left == 0, f"{name}(model, ids)", f"{left} hook(s) still on the model after the call",
                "keep each handle register_forward_hook (or _pre_hook) returns, and call handle.remove()",
                mistake=f"{left} hook(s) left on the model, so every later forward pass runs them again: remove "
                        f"every handle register_forward_hook returned, calling handle.remove() with its "
                        f"parentheses (keep them all in a list; one variable reassigned in a loop remembers only "
                        f"the last)")
    try:
        probe(m, torch.full((1, 4), CFG.vocab_size))
    except Exception:                                  # noqa: BLE001 - the model refuses the ids: expected
        pass
    left = _hooks(m)
    expect_true(left == 0, f"{name}(model, ids past the vocabulary), whose forward raises",
                f"{left} hook(s) still on the model after the forward pass raised",
                "remove the hooks in a `finally:` block, which runs whether or not the forward pass raised",
                mistake="hooks removed only when the forward pass succeeds")


# ----- the residual stream: forward hooks -----

def _stream_case(fn, student, cfg, B, T, seed):
    ref = _reference(cfg, seed)
    m = _theirs(student, ref)
    ids = _ids(cfg, B, T, seed)
    want = ENGINE.residual_stream(ref, ids)                          # (L + 1, B, T, D)
    return Case(f"residual_stream(a {cfg.n_layers}-block model, ids of shape {(B, T)})", lambda: fn(m, ids), want,
                {"the embeddings' output left out: entry 0 is what model.embed returns, then one entry per block":
                     want[1:],
                 "each block's input recorded instead of its output (a pre-hook, or the hook's inputs): the "
                 "last block's output is missing": want[:-1],
                 "the stream after ln_f: record what the blocks return, before any normalisation":
                     ref.ln_f(want).detach(),
                 "the outputs joined with torch.cat, which lays them end to end along their batch axis, "
                 "((L + 1)·B, T, D): torch.stack puts them on a new first axis, (L + 1, B, T, D)": want.flatten(0, 1)})


@graded("inside.residual_stream", points=2)
def test_residual_stream(student):
    fn = student.piece("inside", "residual_stream")
    expect_cases(_stream_case(fn, student, CFG, 2, 5, seed=1), _stream_case(fn, student, CFG2, 1, 7, seed=2),
                 hint="one forward hook on model.embed and one on every block, in order; stack the outputs: "
                      "(L + 1, B, T, D)")
    m = _theirs(student, _reference(CFG, seed=1))
    out = fn(m, _ids(CFG, 2, 5, seed=1))
    expect_true(not (isinstance(out, torch.Tensor) and out.requires_grad), "residual_stream(model, ids).requires_grad",
                "the stream returned requires grad: it carries the autograd graph of the whole forward pass, and "
                "keeps every activation of it in memory",
                "run the model once under torch.no_grad(), as the docstring asks",
                mistake="the model run with gradients on (no torch.no_grad()): every output the hooks record keeps "
                        "the autograd graph; wrap model(ids) in `with torch.no_grad():`")


@graded("inside.residual_stream", points=1)
def test_residual_stream_removes_its_hooks(student):
    _leaves_no_hook(student, "residual_stream")


# ----- attention patterns: a pre-hook and the module's own projection -----

def _patterns_mistakes(ref, ids):
    """{description: output} of attention_patterns' typical mistakes."""
    H = ref.cfg.n_heads
    x, found = ref.embed(ids), {}
    T = ids.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    weights = lambda s, hide=future, dim=-1: torch.softmax(s.masked_fill(hide, float("-inf")), dim=dim)   # noqa: E731
    for block in ref.blocks:
        parts = dict(zip("qkv", block.attn.qkv(block.ln1(x)).chunk(3, dim=-1)))          # (B, T, D) each
        heads = lambda t: t.unflatten(-1, (H, -1)).transpose(1, 2)                          # noqa: E731
        q, k = heads(parts["q"]), heads(parts["k"])
        K = q.shape[-1]
        scores = q @ k.transpose(-2, -1)
        B_ = x.shape[0]
        mixed = lambda t: t.reshape(B_, H, T, -1)                                           # noqa: E731
        here = {
            "the block's input (the residual stream) used instead of what attention sees, ln1 of it: hook "
            "block.attn with a forward pre-hook": ENGINE._weights(block.attn, x, H),
            "the scores not divided by sqrt(K)": weights(scores),
            "the recorded input normalised again with ln1: the pre-hook on block.attn already sees ln1(x), so "
            "ln1 is applied twice; project the recorded input as it is, block.attn.qkv(x)":
                ENGINE._weights(block.attn, block.ln1(block.ln1(x)), H),
            "the scores divided by sqrt(D), the model's width H·K, instead of sqrt(K), one head's width":
                weights(scores / (H * K) ** 0.5),
            "no causal mask: a query must not see the keys after it": torch.softmax(scores / K ** 0.5, dim=-1),
            "softmax over the queries (dim=-2) instead of the keys (dim=-1)": weights(scores / K ** 0.5, dim=-2),
            "the diagonal masked too (triu() instead of triu(1)): a query sees its own key; with it hidden, the "
            "first query sees nothing and its row is NaN":
                weights(scores / K ** 0.5, future.logical_or(torch.eye(T, dtype=torch.bool))),
            "heads split with a reshape straight to (B, H, T, K), which mixes positions and heads: unflatten to "
            "(B, T, H, K), then transpose(1, 2)":
                weights(mixed(parts["q"]) @ mixed(parts["k"]).transpose(-2, -1) / K ** 0.5),
            **layer_mixups(parts, {"q": "q", "k": "k"},
                           lambda a, b: weights(heads(a) @ heads(b).transpose(-2, -1) / K ** 0.5),
                           source=lambda part: f"the {'first second third'.split()['qkv'.index(part)]} chunk of qkv",
                           fix="qkv(ln1(x)) gives q first, then k, then v: q, k, v = ....chunk(3, dim=-1)",
                           why_unused="")}
        for name, w in here.items():
            found.setdefault(name, []).append(w)
        x = block(x)
    return {name: torch.stack(ws).detach() for name, ws in found.items()}


def _patterns_case(fn, student, cfg, B, T, seed):
    ref = _reference(cfg, seed)
    m = _theirs(student, ref)
    ids = _ids(cfg, B, T, seed)
    with torch.no_grad():
        mistakes = _patterns_mistakes(ref, ids)
    return Case(f"attention_patterns(a {cfg.n_layers}-block model with H = {cfg.n_heads}, ids of shape {(B, T)})",
                lambda: fn(m, ids), ENGINE.attention_patterns(ref, ids), mistakes)


@graded("inside.attention_patterns", points=3)
def test_attention_patterns(student):
    fn = student.piece("inside", "attention_patterns")
    expect_cases(_patterns_case(fn, student, CFG, 2, 6, seed=3), _patterns_case(fn, student, CFG2, 2, 5, seed=4),
                 hint="pre-hooks on each block.attn record its input x; q, k from block.attn.qkv(x), split into "
                      "heads; softmax of the causally masked q·kᵀ/√K over the keys: (L, B, H, T, T)")


@graded("inside.attention_patterns", points=1)
def test_attention_patterns_removes_its_hooks(student):
    _leaves_no_hook(student, "attention_patterns")


# ----- the logit lens -----

def _lens_case(fn, student, cfg, seed, dtype=torch.float64):
    ref = _reference(cfg, seed).to(dtype)
    m = _theirs(student, ref).to(dtype)
    g = torch.Generator().manual_seed(seed)
    stream = (torch.randn(cfg.n_layers + 1, 2, 3, cfg.d_model, dtype=torch.float64, generator=g) * 2 + 1).to(dtype)
    with torch.no_grad():
        want = ENGINE.logit_lens(ref, stream)                           # (L + 1, B, T, V)
        mistakes = {"without the final norm: read each stream through model.ln_f first, as the model reads "
                    "its last": stream @ ref.output_weight().T,
                    "the final norm applied to the last entry of the stream only, the earlier layers' entries read "
                    "without it: the lens reads every entry as the model reads its last, through model.ln_f, "
                    "model.ln_f(stream) @ model.output_weight().T":
                        torch.cat([stream[:-1] @ ref.output_weight().T, want[-1:]]),
                    "only the last entry of the stream read out (stream[-1]), (B, T, V): read every entry, one "
                    "readout per layer, model.ln_f(stream) @ model.output_weight().T, (L + 1, B, T, V)": want[-1],
                    "softmax probabilities returned instead of the logits: the logit lens returns the logits "
                    "themselves, model.ln_f(stream) @ model.output_weight().T, with no softmax":
                        torch.softmax(want, dim=-1)}
        if not cfg.tie_embeddings:
            mistakes["the token table used as the output matrix: this model's head is untied, so ask "
                     "model.output_weight()"] = ref.ln_f(stream) @ ref.embed.token_table.T
    return Case(f"logit_lens(a {str(dtype)[6:]} model with {'a tied' if cfg.tie_embeddings else 'an untied'} head, "
                f"a stream of shape {tuple(stream.shape)})", lambda: fn(m, stream), want, mistakes)


@graded("inside.logit_lens", points=2)
def test_logit_lens(student):
    fn = student.piece("inside", "logit_lens")
    expect_cases(_lens_case(fn, student, CFG, seed=6), _lens_case(fn, student, CFG2, seed=7),
                 _lens_case(fn, student, CFG, seed=8, dtype=torch.float32),
                 hint="model.ln_f(stream) @ model.output_weight().T: (L + 1, B, T, V)")


# ----- induction scores -----

def _random_patterns(L, B, H, T, seed, dtype=torch.float64):
    """Causal softmax weights (L, B, H, T, T) of random scores."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(L, B, H, T, T, dtype=torch.float64, generator=g) * 2
    return torch.softmax(scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), dim=-1).to(dtype)


def _induction_mistakes(w, period):
    """{description: output} of induction_scores' typical mistakes on the weights w (L, B, H, T, T)."""
    L, _, H, T, _ = w.shape
    t = torch.arange(period, T)
    every = torch.arange(T)                 # every query: for t < period - 1 the key index wraps round, as Python's does
    t0 = torch.arange(period - 1, T)
    return {"key t - period (the earlier copy of the same token) instead of the token after it, t - period + 1":
                w[..., t, t - period].mean(dim=(1, 3)),
            "averaged over every query, the first copy's too: only queries t >= period have an earlier copy":
                w[..., every, every - period + 1].mean(dim=(1, 3)),
            "summed over the queries instead of averaged": w[..., t, t - period + 1].mean(dim=1).sum(dim=-1),
            "queries and keys indexed in two steps, w[..., t, :][..., t - period + 1], which pairs every query with "
            "every key (a grid, one axis too many) instead of query t with key t - period + 1: index both in one "
            "step, w[..., t, t - period + 1]": w[..., t, :][..., t - period + 1].mean(dim=(1, 3)),
            "queries and keys indexed in two steps, w[..., t, :][..., t - period + 1], which pairs every query with "
            "every key, and the whole grid averaged: the score mixes query t's weight on the keys of other queries; "
            "index both in one step, w[..., t, t - period + 1], one key per query":
                w[..., t, :][..., t - period + 1].mean(dim=(1, 3, 4)),
            "averaged over the batch and the HEADS (dim=(1, 2)) instead of the batch and the queries (dim=(1, 3)): "
            "one score per (layer, head) is the point": w[..., t, t - period + 1].mean(dim=(1, 2)),
            "query and key indices swapped, w[..., t - period + 1, t]: that reads an earlier query's weight on a later "
            "key, above the diagonal, where a causal model puts nothing; the query comes first, w[..., t, t - period + 1]":
                w[..., t - period + 1, t].mean(dim=(1, 3)),
            "averaged over the heads too: keep one score per (layer, head)":
                w[..., t, t - period + 1].mean(dim=(1, 2, 3))[:, None].expand(L, H),
            "the weight on key t - period - 1, the token before the earlier copy: an induction head attends to the "
            "token after it, w[..., t, t - period + 1]": w[..., t, t - period - 1].mean(dim=(1, 3)),
            "the last query, T - 1, left out (a loop over range(period, T - 1)): average over t = period .. T - 1, "
            "torch.arange(period, T)": w[..., t[:-1], t[:-1] - period + 1].mean(dim=(1, 3)) if len(t) > 1 else None,
            "the queries started at period - 1, one too early (as the diagonal at offset 1 - period does): query "
            "period - 1 lies in the first copy, whose tokens have no earlier copy; average over t = period .. T - 1, "
            "torch.arange(period, T)": w[..., t0, t0 - period + 1].mean(dim=(1, 3)),
            "the queries started at period + 1, so the first query of the repeat, t = period, is left out: average "
            "over t = period .. T - 1, torch.arange(period, T)":
                w[..., t[1:], t[1:] - period + 1].mean(dim=(1, 3))}


def _telling_apart(mistakes: dict) -> dict:
    """The mistakes whose output no other mistake gives on these weights (on a head that puts all its weight on
    one key, several mistakes read the same zeros: none of them can be told from the others there)."""
    same = lambda a, b: a.shape == b.shape and torch.allclose(a, b)                     # noqa: E731
    return {n: w for n, w in mistakes.items() if not any(same(w, o) for m, o in mistakes.items() if m != n)}


def _induction_case(fn, L, B, H, T, period, seed, dtype=torch.float64):
    w = _random_patterns(L, B, H, T, seed, dtype)
    return Case(f"induction_scores({str(dtype)[6:]} weights of shape {(L, B, H, T, T)}, period={period})",
                lambda: fn(w, period),
                ENGINE.induction_scores(w, period), _induction_mistakes(w, period))


@graded("inside.induction_scores", points=2)
def test_induction_scores(student):
    fn = student.piece("inside", "induction_scores")
    expect_cases(_induction_case(fn, 2, 3, 4, 10, 5, seed=9), _induction_case(fn, 3, 2, 2, 7, 3, seed=10),
                 _induction_case(fn, 1, 2, 3, 8, 4, seed=11, dtype=torch.float32),
                 hint="for queries t = period .. T - 1 the weight on key t - period + 1, averaged over the batch "
                      "and those queries: (L, H)")
    expect_trainable(fn, (_random_patterns(2, 3, 4, 10, 9, torch.float64), 5),
                     "induction_scores(weights of shape (2, 3, 4, 10, 10), period=5)")


@graded("inside.induction_scores", points=1)
def test_induction_scores_of_an_induction_and_a_previous_token_head(student):
    """Three heads on a sequence repeated with period 4 (T = 8): head 0 attends from every query of the
    repeat to the key after the earlier copy (score 1), head 1 to the previous token (score 0), head 2
    to the earlier copy itself (score 0; a head that tells key t - period from t - period + 1)."""
    fn = student.piece("inside", "induction_scores")
    cases = []
    for T_, period in ((8, 4), (9, 3)):
        w = torch.zeros(1, 1, 3, T_, T_, dtype=torch.float64)
        w[0, 0, :, 0, 0] = 1.0
        for i in range(1, T_):
            w[0, 0, 0, i, i - period + 1 if i >= period else 0] = 1.0
            w[0, 0, 1, i, i - 1] = 1.0
            w[0, 0, 2, i, i - period if i >= period else 0] = 1.0
        cases.append(Case(f"induction_scores of [an induction head, a previous-token head, an earlier-copy head], "
                          f"T = {T_}, period = {period}", lambda w=w, period=period: fn(w, period),
                          torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64),
                          _telling_apart(_induction_mistakes(w, period))))
    expect_cases(*cases, hint="an induction head scores 1 (all its weight on key t - period + 1), a previous-token "
                              "head and a head on the earlier copy itself 0")
