"""Relations between a learner's output and the expected one (grading/relations.py): each named
only when it holds on a second input too, with a sentence computed from the case; and the
mistakes no list holds that the course promises to name, named by the graded tests themselves."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from andrea_course.grading import Case, Mismatch, Second, expect_cases, expect_close, expect_equal
from andrea_course.grading.explain import explain
from andrea_course.grading.relations import inputs_of, relate, seen
from andrea_course import pieces
from andrea_course.grading.student import InProcessStudent
from mutant_checks import _module


def _randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _fails(check, *args, **kw) -> Mismatch:
    with pytest.raises(Mismatch) as failure:
        check(*args, **kw)
    return failure.value


def _two_cases(fn, ref, shapes, mistakes=lambda x: {}, **extra):
    cases = []
    for i, shape in enumerate(shapes):
        x = _randn(*shape, seed=i + 1)
        cases.append(Case(f"f(x of shape {shape})", lambda x=x: fn(x, **extra), ref(x, **extra), mistakes(x)))
    return cases


# ----------------------------------------------------------------------------- each relation on two inputs
RELATED = [  # (the learner's function, the reference, words the relation must say)
    (lambda x, d_head: x / d_head, lambda x, d_head: x / math.sqrt(d_head), "times 1/√d_head"),
    (lambda x, d_head: -x, lambda x, d_head: x, "times -1"),
    (lambda x, d_head: x.transpose(-2, -1), lambda x, d_head: x, "axis -2 and axis -1 swapped"),
    (lambda x, d_head: x + 0.25, lambda x, d_head: x, "plus 0.25"),
    (lambda x, d_head: torch.softmax(x, dim=0), lambda x, d_head: torch.softmax(x, dim=-1), "sums to 1 along dim=0"),
    (lambda x, d_head: torch.cat([x[..., :1, :], x[..., :-1, :]], dim=-2), lambda x, d_head: x, "shifted by one"),
    (lambda x, d_head: x - x.mean(-1)[..., None, :], lambda x, d_head: x - x.mean(-1, keepdim=True), "keepdim=True"),
    (lambda x, d_head: x.float().double() * 2, lambda x, d_head: x * 2, "exactly a float32 number"),
    (lambda x, d_head: x + 1e-5 * x * x, lambda x, d_head: x, "slightly off"),
    (lambda x, d_head: x.float() * x.cos(), lambda x, d_head: x * x.cos(), "float32's precision, not float64's"),
    (lambda x, d_head: torch.log_softmax(x, -1), lambda x, d_head: torch.softmax(x, -1), "the logarithm of"),
    (lambda x, d_head: x.exp(), lambda x, d_head: torch.softmax(x, -1), "times a factor of its own"),
    (lambda x, d_head: x[0], lambda x, d_head: x, "only entry 0 of the expected one along axis -3"),
    (lambda x, d_head: x.transpose(0, 1).reshape(x.shape), lambda x, d_head: x, "a reshape or view where a transpose"),
    (lambda x, d_head: x.flatten().index_fill(0, torch.tensor([0]), math.nan).view(x.shape), lambda x, d_head: x,
     "1 entry left NaN, at flat positions 0 (the first)"),
]


@pytest.mark.parametrize("fn, ref, says", RELATED, ids=[r[2] for r in RELATED])
def test_a_relation_seen_on_two_inputs_is_named(fn, ref, says):
    exc = _fails(expect_cases, *[Case(f"f(x of shape {s}, d_head={d})", lambda x=x, d_head=d: fn(x, d_head), ref(x, d))
                                 for s, d, x in (((2, 5, 5), 16, _randn(2, 5, 5, seed=1)),
                                                 ((3, 4, 4), 9, _randn(3, 4, 4, seed=2)))])
    assert exc.relation and says in exc.relation, exc.relation
    assert f"How it relates to the expected output: {exc.relation}" in str(exc)
    assert not exc.unmatched and "none of the typical mistakes" not in str(exc)


def test_a_relation_that_holds_on_one_input_only_is_not_named():
    """Times 2 on the first input, times 3 on the second: no one factor explains both."""
    x1, x2 = _randn(4, 5, seed=1), _randn(4, 5, seed=2)
    exc = _fails(expect_cases, Case("f(x1)", lambda: 2 * x1, x1), Case("f(x2)", lambda: 3 * x2, x2))
    assert exc.relation is None and "How it relates" not in str(exc)


def test_a_right_output_and_an_unrelated_one_show_no_relation():
    x = _randn(3, 6, 6, seed=3)
    assert seen(x, x.clone()) == []
    noise = x + 0.3 * _randn(3, 6, 6, seed=4)
    assert seen(noise, x) == []


def test_a_listed_mistake_comes_first():
    x1, x2 = _randn(4, 5, seed=1), _randn(4, 5, seed=2)
    exc = _fails(expect_cases, Case("f(x1)", lambda: 2 * x1, x1, {"doubled: drop the 2": 2 * x1}),
                 Case("f(x2)", lambda: 2 * x2, x2, {"doubled: drop the 2": 2 * x2}))
    assert exc.mistake == "doubled: drop the 2" and exc.relation is None


def test_a_factor_is_said_by_the_name_of_the_tests_own_number():
    """d_head is what the test's call closes over: the factor is said as √d_head, with its value."""
    scores = [_randn(2, 4, 4, seed=s) for s in (1, 2)]
    cases = [Case(f"scale(scores, {d})", lambda s=s, d_head=d: s, s / math.sqrt(d))
             for s, d in zip(scores, (16, 25))]
    assert set(inputs_of(cases[0].got)) == {"s", "d_head"}
    exc = _fails(expect_cases, *cases)
    assert "times √d_head = 4 (d_head = 16)" in exc.relation


def test_expect_close_confirms_on_its_second_input():
    x1, x2 = _randn(3, 4, seed=1), _randn(5, 4, seed=2)
    exc = _fails(expect_close, x1.flip(-2), x1, "f(x1)", second=Second(lambda: x2.flip(-2), x2, {}))
    assert exc.relation is None or "reverse" not in exc.relation        # a flip is no relation this knows
    exc = _fails(expect_close, -x1, x1, "f(x1)", second=Second(lambda: -x2, x2, {}))
    assert "a sign flipped" in exc.relation


def test_a_list_and_a_text_relation():
    exc = _fails(expect_equal, [2, 3, 4], [1, 2, 3, 4], "ids", second=Second(lambda: [6, 7], [5, 6, 7], {}))
    assert "without its first item" in exc.relation
    exc = _fails(expect_equal, "caf\ufffd\ufffd", "café", "decode", second=Second(lambda: "\ufffd\ufffd!", "é!", {}))
    assert "decoded one token at a time" in exc.relation


def test_relate_needs_the_second_input_wrong_the_same_way():
    x, y = _randn(4, 4, seed=1), _randn(4, 4, seed=2)
    assert relate(2 * x, x, {}, iter([(True, 2 * y, y, {})])).text.startswith("your output is exactly the expected one times 2")
    assert relate(2 * x, x, {}, iter([(True, y + 1, y, {})])) is None
    assert relate(2 * x, x, {}, iter([])) is None                   # nothing to confirm it on


# ----------------------------------------------------------------------------- the graded tests name them
def _first_failure(file, piece, override):
    activity, name = piece.split(".")
    student = InProcessStudent("solutions", overrides={(activity, name): override})
    module = _module(file)
    for test, fn in vars(module).items():
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "exercise"]
        if test.startswith("test_") and marks and marks[0].args[0] == piece:
            try:
                fn(student)
            except Mismatch as exc:
                return test, exc
    return None, None


def _layer_norm_over_batch(x, weight, bias, eps=1e-5):
    m, v = x.mean(dim=0, keepdim=True), x.var(dim=0, keepdim=True, unbiased=False)
    return (x - m) / torch.sqrt(v + eps) * weight + (0 if bias is None else bias)


def _gelu_grad_without_x(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2))) + torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _apply_mask_inverted(scores):
    T, S = scores.shape[-2:]
    keep = torch.arange(S)[None, :] <= torch.arange(T)[:, None] + (S - T)
    return scores.masked_fill(keep, float("-inf"))


def _rms_norm_via_float(x, weight, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _gelu_constant_typed_short(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.0447 * x ** 3)))


def _rope_turning_float32_x(x, cos, sin, start=0):
    """x narrowed to float32, the float64 tables not: every product is float64, each x a float32 number."""
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _causal_weights_without_keepdim(T):
    w = torch.ones(T, T).tril()
    return w / w.sum(dim=-1)


def _average_past_one_short(x):
    """average_past with its loop over range(T - 1): the last position never averaged."""
    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(x.shape[-2] - 1)], dim=-2)


def _scores_by_each_leading_row(q, k):
    """attention_scores as q[b] @ k[b].T over the first axis: a 2-D q gives each query against its own key."""
    return torch.stack([q[b] @ k[b].T for b in range(q.shape[0])])


def _rope_stacked(x, cos, sin, start=0):
    """apply_rope joining the two turned halves with torch.stack: (..., T, K/2, 2)."""
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    wide = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _stream_stacked_batch_first(model, ids):
    """residual_stream with the recorded streams stacked on axis 1: (B, L + 1, T, D)."""
    return pieces.module("inside").residual_stream(model, ids).transpose(0, 1)


def _mask_of_T_keys(T, S=None, device=None):
    """causal_mask with its key positions arange(T), not arange(S): (T, T)."""
    S = T if S is None else S
    return torch.arange(T, device=device)[None, :] <= torch.arange(T, device=device)[:, None] + (S - T)


def _patterns_stacked_on_axis_1(model, ids):
    """attention_patterns with the layers stacked on axis 1: (B, L, H, T, T)."""
    return pieces.get("inside", "attention_patterns")(model, ids).transpose(0, 1)


class _mlp_without_the_last_position(pieces.module("mlp").MLP):
    """An MLP whose loop over the positions stops one short: the last position's output stays 0."""
    def forward(self, x):
        out = torch.zeros_like(x)
        for t in range(x.shape[-2] - 1):
            out[..., t, :] = self.proj(self.gelu(self.fc(x[..., t, :])))
        return out


class _swiglu_gated_by_the_first_sequence(pieces.module("modern").SwiGLU):
    """SwiGLU whose gate is computed once from the first sequence and serves the whole batch."""
    def forward(self, x):
        gate = self.w_gate(x[0])
        return torch.stack([self.w_down(self.swiglu(gate, self.w_up(x[b]))) for b in range(x.shape[0])])


def _softmax_unnormalised(x):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e[..., :1]


def _gelu_without_its_half_x(x):
    return 1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))


def _scores_of_keys_with_keys(q, k):
    return k @ k.transpose(-2, -1)


def _swiglu_with_hardswish(gate, up):
    return torch.nn.functional.hardswish(gate) * up


def _weighted_sum_in_float16(weights, v):
    return (weights.half() @ v.half()).to(v.dtype)


def _mask_skipped_with_a_cache(scores):
    T, S = scores.shape[-2:]
    return scores if S > T else __import__("andrea_course").pieces.get("attention", "apply_causal_mask")(scores)


def _gelu_grad_saturated(x):
    grad = __import__("andrea_course").pieces.get("mlp", "gelu_grad")(x)
    return torch.where(x > 3, torch.ones_like(x), torch.where(x < -3, torch.zeros_like(x), grad))


def _nearest_counted_from_1(table, query, k):
    return __import__("andrea_course").pieces.get("embeddings", "nearest_tokens")(table, query, k) + 1


def _rope_one_position_late(x, cos, sin, start=0):
    return __import__("andrea_course").pieces.get("modern", "apply_rope")(x, cos, sin, start + 1)


def _scores_of_features(q, k):
    return q.transpose(-2, -1) @ k


def _greedy_down_the_batch(logits, temperature=1.0, top_k=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=0, keepdim=True)
    return __import__("andrea_course").pieces.get("model", "sample_next")(logits, temperature, top_k, generator)


def _cosine_of_centred_vectors(u, v, eps=1e-8):
    u, v = u - u.mean(dim=-1, keepdim=True), v - v.mean(dim=-1, keepdim=True)
    return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)


def _causal_mask_ignoring_S(T, S=None, device=None):
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def _lookup_of_the_first_sequence(table, ids):
    return table[ids[0]]


def _count_with_gelu_biases_of_swiglu(cfg):
    from andrea_course.engine.params import count_parameters
    counts = dict(count_parameters(cfg))
    extra = cfg.n_layers * cfg.d_ff if cfg.bias and cfg.mlp == "gelu" else 0
    return {k: v + (extra if k in ("total", "blocks") else extra // cfg.n_layers if k in ("block", "mlp") else 0)
            for k, v in counts.items()}


_ENGINE = __import__("andrea_course").pieces.get


class _BlockNormsSwapped(_ENGINE("block", "Block")):
    """A pre-norm block whose attention reads ln2's normalisation and whose MLP reads ln1's."""

    def forward(self, x, cache=None):
        x = x + self.drop(self.attn(self.ln2(x), cache))
        return x + self.drop(self.mlp(self.ln1(x)))


class _SwiGLUWithoutUpBias(_ENGINE("modern", "SwiGLU")):
    """SwiGLU whose up projection is x @ W.T by hand: its bias is left out."""

    def forward(self, x):
        return self.w_down(self.swiglu(self.w_gate(x), x @ self.w_up.weight.T))


class _BlockResidualTwice(_ENGINE("block", "Block")):
    """A pre-norm block that adds the attention's output to the stream twice, before the MLP reads it."""

    def forward(self, x, cache=None):
        x = x + self.drop(self.attn(self.ln1(x), cache)) + self.drop(self.attn(self.ln1(x), cache))
        return x + self.drop(self.mlp(self.ln2(x)))


class _MHAProjectionTransposed(_ENGINE("multihead", "MultiHeadAttention")):
    """Multi-head attention whose W_O is applied as x @ W, nn.Linear's (out, in) weight read as (in, out)."""

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = (t.view(B, T, -1, K).transpose(1, 2) for t in (q, k, v))
        k, v = self.cache_and_share(k, v, cache)
        y = self.attention(q, k, v).transpose(1, 2).reshape(B, T, H * K)
        return y @ self.proj.weight + (0 if self.proj.bias is None else self.proj.bias)


class _EmbeddingsFromOne(_ENGINE("embeddings", "Embeddings")):
    """Embeddings that give every token the next position's vector, positions counted from 1."""

    def forward(self, ids, start=0):
        return super().forward(ids, start + 1)


def _softmax_base_10(scores):
    e = 10 ** (scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def _rope_exponents_from_1(d_head, T, theta=10000.0, device=None):
    inv_freq = theta ** (-torch.arange(1, d_head, 2, dtype=torch.float32) / d_head)
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def _softmax_shifted_by_column_maxima(scores):
    e = (scores - scores.amax(dim=0, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _sample_next_max_values(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.max(dim=-1, keepdim=True).values
    return _ENGINE("model", "sample_next")(logits, temperature, top_k, generator)


UNLISTED = [  # (graded file, piece, the learner's version, words the failure must say)
    ("test_attention.py", "attention.softmax", _softmax_unnormalised, "times a factor of its own"),
    ("test_mlp.py", "mlp.gelu_tanh", _gelu_without_its_half_x, "the result of its `add` step, before mul"),
    ("test_attention.py", "attention.attention_scores", _scores_of_keys_with_keys, "k passed as q too"),
    ("test_attention.py", "attention.causal_mask", _causal_mask_ignoring_S, "S left at its default: the S it is given"),
    ("test_modern.py", "modern.swiglu", _swiglu_with_hardswish, "hardswish in the place of silu"),
    ("test_attention.py", "attention.weighted_sum", _weighted_sum_in_float16, "float16's precision and no better"),
    ("test_attention.py", "attention.apply_causal_mask", _mask_skipped_with_a_cache, "the input scores itself, unchanged"),
    ("test_mlp.py", "mlp.gelu_grad", _gelu_grad_saturated, "short of |x| ≥ 3"),
    ("test_embeddings.py", "embeddings.nearest_tokens", _nearest_counted_from_1, "the expected one +1"),
    ("test_modern.py", "modern.apply_rope", _rope_one_position_late, "start one more than it is given"),
    ("test_attention.py", "attention.attention_scores", _scores_of_features, "q and k transposed"),
    ("test_model.py", "model.sample_next", _greedy_down_the_batch, "with only its axes 1 kept"),
    ("test_embeddings.py", "embeddings.cosine_similarity", _cosine_of_centred_vectors, "u and v centred"),
    ("test_embeddings.py", "embeddings.embed_lookup", _lookup_of_the_first_sequence, "only entry 0"),
    ("test_model.py", "model.count_parameters", _count_with_gelu_biases_of_swiglu, "d_ff × n_layers"),
    ("test_attention.py", "attention.average_past", _average_past_one_short, "the last 1 is missing"),
    ("test_attention.py", "attention.causal_mask", _mask_of_T_keys, "entries along axis -1 (shape (3, 3) where (3, 6)"),
    ("test_attention.py", "attention.causal_average_weights", _causal_weights_without_keepdim, "keepdim=True"),
    ("test_mlp.py", "mlp.gelu_tanh", _gelu_constant_typed_short, "slightly off"),
    ("test_block.py", "block.layer_norm", _layer_norm_over_batch, "its `var_mean` taken over axis 0"),
    ("test_mlp.py", "mlp.gelu_grad", _gelu_grad_without_x, "without its factor x"),
    ("test_attention.py", "attention.apply_causal_mask", _apply_mask_inverted, "the mask is inverted"),
    ("test_modern.py", "modern.rms_norm", _rms_norm_via_float, "computes in float32 and casts back"),
    ("test_modern.py", "modern.apply_rope", _rope_turning_float32_x, "float32's precision, not float64's"),
    ("test_inside.py", "inside.attention_patterns", _patterns_stacked_on_axis_1, "axis -5 and axis -4 swapped"),
    ("test_mlp.py", "mlp.MLP", _mlp_without_the_last_position, "the last one, which is all zeros: never written"),
    ("test_attention.py", "attention.attention_scores", _scores_by_each_leading_row, "only the diagonal of the expected"),
    ("test_attention.py", "attention.weighted_sum", lambda weights, v: weights * v, "entry by entry: nothing is summed"),
    ("test_modern.py", "modern.apply_rope", _rope_stacked, "stacked on a new axis -1 (torch.stack)"),
    ("test_inside.py", "inside.residual_stream", _stream_stacked_batch_first, "a torch.stack (or cat) along another axis"),
    ("test_multihead.py", "multihead.merge_heads", lambda y: y.transpose(1, 2).flatten(1),
     "its last 2 axes, (5, 12), are merged into one of 60: flatten(start_dim)"),
    ("test_block.py", "block.Block", _BlockNormsSwapped, "the weights of ln1 and ln2 swapped"),
    ("test_modern.py", "modern.SwiGLU", _SwiGLUWithoutUpBias, "the bias of w_up left out"),
    ("test_block.py", "block.Block", _BlockResidualTwice, "step done twice"),
    ("test_multihead.py", "multihead.MultiHeadAttention", _MHAProjectionTransposed, "the weight of proj transposed"),
    ("test_embeddings.py", "embeddings.Embeddings", _EmbeddingsFromOne, "start one more than it is given"),
    ("test_attention.py", "attention.softmax", _softmax_base_10, "multiplied by ln 10"),
    ("test_model.py", "model.sample_next", _sample_next_max_values, "the values themselves where their positions"),
    ("test_attention.py", "attention.softmax", _softmax_shifted_by_column_maxima, "its `amax` taken over axis 0"),
    ("test_modern.py", "modern.rope_frequencies", _rope_exponents_from_1, "its `arange` counting from 1"),
]


@pytest.mark.parametrize("file, piece, fn, says", UNLISTED, ids=[u[1] for u in UNLISTED])
def test_a_mistake_no_list_holds_is_named_by_its_graded_test(file, piece, fn, says):
    test, exc = _first_failure(file, piece, fn)
    assert exc is not None, f"{piece}: the mistake passes every graded test"
    assert exc.relation and says in exc.relation, (test, str(exc))


class _MHAScaledTwice(__import__("andrea_course").pieces.get("multihead", "MultiHeadAttention")):
    """Multi-head attention whose queries are scaled by 1/sqrt(K) before attention scales them again."""

    def forward(self, x, cache=None):
        attention = self.attention
        self.attention = lambda q, k, v, *args, **kwargs: attention(q / self.d_head ** 0.5, k, v, *args, **kwargs)
        try:
            return super().forward(x, cache)
        finally:
            self.attention = attention


def test_index_0_right_by_structure_is_not_blamed_on_the_first_entry():
    """A causal piece's first position sees only itself, so a mistake in the scale leaves it right:
    no box says that the first entry serves them all unless the others are copies of it or the axis
    is a leading one (batch, heads)."""
    test, exc = _first_failure("test_multihead.py", "multihead.MultiHeadAttention", _MHAScaledTwice)
    assert exc is not None and "first entry" not in str(exc), (test, str(exc))
    assert "first sequence" not in str(exc)


def test_upcasting_with_float_is_not_blamed_on_eps():
    """x.float() narrows float64: the box says so, and no longer hints at eps inside the square root."""
    test, exc = _first_failure("test_modern.py", "modern.rms_norm", _rms_norm_via_float)
    assert test == "test_rmsnorm_eps_inside_the_sqrt"
    assert "eps inside the square root" not in str(exc) and "torch.promote_types(x.dtype, torch.float32)" in exc.hint


def test_dot_T_on_four_axes_is_explained_as_reversing_every_axis():
    q, k = _randn(2, 3, 5, 4, seed=1), _randn(2, 3, 7, 4, seed=2)
    with warnings.catch_warnings(), pytest.raises(RuntimeError) as failure:    # torch warns of .T once a process
        warnings.simplefilter("ignore")
        q @ k.T
    said = explain(failure.value, "return q @ k.T")
    assert "`k.T` reverses every axis" in said and "k.transpose(-2, -1)" in said and "keepdim" not in said
    assert "keepdim" in explain(failure.value, "return x / x.sum(dim=-1)")      # the other cause, on its line


def test_a_wrong_width_after_merge_heads_says_what_merge_heads_read():
    proj, y = torch.nn.Linear(12, 12).double(), _randn(2, 5, 3, 4, seed=3)  # (B, T, H, K): heads on axis 2
    with pytest.raises(RuntimeError) as failure:
        proj(y.transpose(1, 2).reshape(2, 3, 20))
    said = explain(failure.value, "return self.proj(merge_heads(y))")
    assert "merge_heads gave rows of 20 features where the layer takes 12" in said and "(B, H, T, K)" in said
    assert "merge_heads" not in explain(failure.value, "return self.proj(y)")


def test_calling_none_names_what_the_line_calls_not_a_missing_return():
    head = None
    with pytest.raises(TypeError) as failure:
        head(_randn(2))
    said = explain(failure.value, "return model.head(model.ln_f(stream))")
    assert "`model.head`, `model.ln_f`" in said and "tied embeddings" in said and "without `return`" not in said
    said = explain(failure.value, "y = self.gelu(h)")
    assert "`self.gelu`" in said and "tied" not in said


def test_a_listed_mistake_is_not_blamed_for_an_odd_scale():
    """got = m + c·(want - m) for a c that is no simple number says nothing about the mistake m."""
    from andrea_course.grading.relations import MISTAKES
    x, y = torch.linspace(1, 2, 12).double(), torch.linspace(-2, 3, 12).double()
    want, m, want2, m2 = x.exp(), x, y.exp(), y
    odd, half = m + 9.88884 * (want - m), m + 0.5 * (want - m)
    second = [(True, m2 + 9.88884 * (want2 - m2), want2, {MISTAKES: {"the mistake": m2}})]
    found = relate(odd, want, {MISTAKES: {"the mistake": m}}, iter(second))
    assert found is None or "the mistake" not in found.text
    second = [(True, m2 + 0.5 * (want2 - m2), want2, {MISTAKES: {"the mistake": m2}})]
    assert "scaled by 1/2" in relate(half, want, {MISTAKES: {"the mistake": m}}, iter(second)).text


def test_the_output_buffer_is_not_read_as_an_input():
    """A kernel's test closes over the tensor the kernel wrote: it is the output, never a factor."""
    want, want2 = torch.ones(10, dtype=torch.float64), torch.ones(7, dtype=torch.float64)
    got, got2 = torch.linspace(1, 2, 10).double() ** 3, torch.linspace(-3, 2, 7).double() ** 3
    found = relate(got, want, {"got": got}, iter([(True, got2, want2, {"got": got2})]))
    assert found is None or "input got" not in found.text


def test_relate_runs_no_second_input_past_the_one_that_decides():
    """Each second input runs the learner's code: relate reads them one at a time, as it needs them."""
    x, y = torch.linspace(1, 2, 10).double(), torch.linspace(2, 3, 10).double()

    def seconds():
        yield True, 2 * y, y, {}
        raise AssertionError("a second input was run after the first one decided")
    assert relate(2 * x, x, {}, seconds()).text.startswith("your output is exactly the expected one times 2")


def test_sizes_in_another_order_are_named():
    """split_heads with x.shape unpacked as (T, B, ...): the sizes of B and T trade places, and the values
    are no permutation of the expected ones."""
    def ref(x, H=2):
        B, T, D = x.shape
        return x.view(B, T, H, D // H).transpose(1, 2)

    def fn(x, H=2):
        T, B, D = x.shape
        return x.view(B, T, H, D // H).transpose(1, 2)
    exc = _fails(expect_cases, *[Case(f"split_heads(x of shape {tuple(x.shape)})", lambda x=x: fn(x), ref(x))
                                 for x in (_randn(2, 5, 8, seed=1), _randn(3, 4, 6, seed=2))])
    assert exc.relation and "the expected sizes in another order" in exc.relation, exc.relation


# ----------------------------------------------------------------------------- closeness that is no rounding
def _adamw_eps_hat(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """eps added to sqrt(v) before the bias correction: float64 throughout, nothing float32."""
    b1, b2 = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
    param = param * (1 - lr * weight_decay)
    return param - lr * math.sqrt(1 - b2 ** step) / (1 - b1 ** step) * m / (v.sqrt() + eps), m, v


def test_a_small_error_that_is_no_float32_rounding_is_not_blamed_on_float32():
    """A float64 output whose largest error is float32-sized, but whose small entries are off far beyond
    float32's rounding of their own size (a changed term, eps moved), is not said to hold float32 values."""
    x1 = torch.tensor([1e-3, -0.5, 2.0, -40.0, 0.02, 7.0], dtype=torch.float64)
    x2 = torch.tensor([3.0, -0.02, 15.0, 1e-3, -0.3], dtype=torch.float64)
    shifted = lambda x: x - 2e-6 * x.sign()                                   # noqa: E731
    exc = _fails(expect_cases, Case("f(x1)", lambda: shifted(x1), x1), Case("f(x2)", lambda: shifted(x2), x2))
    assert exc.relation is None or "float32" not in exc.relation, exc.relation
    module = _module("test_optim.py")
    student = InProcessStudent("solutions", overrides={("optim", "adamw_step"): _adamw_eps_hat})
    with pytest.raises(Mismatch) as failure:
        module.test_adamw_weight_decay_is_decoupled(student)
    said = str(failure.value)
    assert "float32" not in said and "epsilon hat" in said, said


def test_a_small_term_off_by_another_fraction_on_each_input_is_no_mistyped_constant():
    """One constant typed short puts the output off by about the same fraction on every input; a small
    term that grows with the test's own numbers (lr²·weight_decay, say) does not."""
    x1, x2 = _randn(3, 6, seed=1), _randn(4, 5, seed=2)
    exc = _fails(expect_cases, Case("f(x1)", lambda: x1 + 1e-7 * x1 * x1, x1), Case("f(x2)", lambda: x2 + 3e-5 * x2 * x2, x2))
    assert exc.relation is None or "slightly off" not in exc.relation, exc.relation
    exc = _fails(expect_cases, Case("f(x1)", lambda: x1 + 1e-5 * x1 * x1, x1), Case("f(x2)", lambda: x2 + 1e-5 * x2 * x2, x2))
    assert "slightly off" in exc.relation


def test_a_listed_mistake_that_changes_the_values_only_slightly_is_said_when_it_is_exact():
    """The judge allows a mistake a loose margin, and never names one that stays inside it; a learner's
    output that is that mistake to the last digits, on both inputs, is said as a relation instead."""
    x1, x2 = _randn(3, 6, seed=1), _randn(4, 5, seed=2)
    nudged = lambda x: x * (1 + 1e-6)                                         # noqa: E731
    name = "the nudge: leave x as it is"
    exc = _fails(expect_cases, Case("f(x1)", lambda: nudged(x1), x1, {name: nudged(x1)}),
                 Case("f(x2)", lambda: nudged(x2), x2, {name: nudged(x2)}))
    assert exc.mistake is None and "to the last digits, what this typical mistake gives" in exc.relation
    assert name in exc.relation
    twins = {name: nudged(x1), "another name for it": nudged(x1)}                # two alike: neither is told
    exc = _fails(expect_cases, Case("f(x1)", lambda: nudged(x1), x1, twins),
                 Case("f(x2)", lambda: nudged(x2), x2, {name: nudged(x2), "another name for it": nudged(x2)}))
    assert exc.relation is None or name not in exc.relation


def _said(call, code):
    with pytest.raises(Exception) as failure:
        call()
    return explain(failure.value, code)


def test_errors_read_from_the_signature_and_the_line():
    assert "math.sqrt (or ** 0.5)" in _said(lambda: torch.sqrt(16), "return scores / torch.sqrt(d_head)")
    assert "math.cos;" in _said(lambda: torch.cos(0.5), "return 1 + torch.cos(math.pi * progress)")
    said = _said(lambda: F.dropout(torch.ones(3), 0.1, torch.Generator()), "return F.dropout(x, p, generator)")
    assert "position 3 is `train`, which takes a bool; your call puts a Generator there" in said
    assert "`//`" in _said(lambda: torch.ones(8)[:8 / 2], "x1 = x[..., :half]")
    x = torch.ones(2, 5, 3)
    said = _said(lambda: x.cumsum(-2) / torch.arange(1, 5)[:, None], "return x.cumsum(-2) / torch.arange(1, T)[:, None]")
    assert "`torch.arange(1, T)` stops before its end" in said
    assert "arange" not in _said(lambda: x.cumsum(-2) / torch.ones(3)[:, None], "return x / n[:, None]")
    past, new = torch.ones(2, 2, 0, 4), torch.ones(2, 2, 5, 4)
    assert "without dim= joins along axis 0" in _said(lambda: torch.cat([past, new]), "k = torch.cat([past_k, k])")
    assert "without dim" not in _said(lambda: torch.cat([past, new], 0), "k = torch.cat([past_k, k], 0)")


def test_a_first_row_right_by_chance_is_not_taken_for_a_value_serving_every_row():
    """cos of every frequency is 1 at position 0: a table wrong at every later position says nothing of row 0."""
    t = torch.arange(6, dtype=torch.float64)[:, None]
    want, got = (torch.outer(t[:, 0], 10000.0 ** -torch.linspace(0, 1, 4, dtype=torch.float64) * step).cos()
                 for step in (0.5, 1.0))
    assert not any(check.__name__ == "right_except_along" for check, _ in seen(got, want, {}))


def test_gather_taken_for_a_row_lookup_is_read_from_the_line():
    table, ids = torch.randn(11, 6), torch.tensor([3, 1])
    said = _said(lambda: torch.gather(table, 0, ids), "return torch.gather(table, 0, ids)")
    assert "is not a lookup of rows" in said and "table[ids]" in said


def test_a_factor_within_a_percent_of_one_that_no_number_of_the_test_makes_is_no_scale():
    want = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert not any(check.__name__ == "constant_factor" for check, _ in seen(want * 0.999875, want, {}))
    assert any(check.__name__ == "constant_factor" for check, _ in seen(want * 0.5, want, {}))


def test_a_reduction_over_other_axes_is_said_from_the_shapes():
    w = _randn(2, 3, 4, 10, seed=1)
    exc = _fails(expect_close, w.mean(dim=(0, 3)), w.mean(dim=(1, 3)), "f(w)", inputs={"w": w})
    assert "keeps its axes 0 and 2" in exc.relation and "axis 0 is reduced" in exc.relation, exc.relation


def test_a_count_off_by_a_product_of_the_configs_sizes_is_said_by_their_names():
    from andrea_course.engine.config import ModelConfig
    cfg, cfg2 = ModelConfig.preset("andrea-tiny"), ModelConfig.preset("andrea-tiny", n_layers=3)
    count = lambda c: 1000 + c.n_layers * c.d_ff                          # noqa: E731 (F too many per block)
    exc = _fails(expect_equal, count(cfg), 1000, "count(cfg)", inputs={"cfg": cfg},
                 second=Second(lambda: count(cfg2), 1000, {}))
    assert "d_ff × n_layers" in exc.relation, exc.relation
    ratio = _fails(expect_equal, 7 * cfg.n_heads, 7, "bytes(cfg)", inputs={"cfg": cfg},
                   second=Second(lambda: 5 * cfg2.n_heads, 5, {}))
    assert "n_heads" in ratio.relation, ratio.relation
    no_w_o = lambda c: 1000 - c.n_layers * c.d_model * c.d_model          # noqa: E731 (a layer's D × D matrix left out)
    exc = _fails(expect_equal, no_w_o(cfg), 1000, "count(cfg)", inputs={"cfg": cfg},
                 second=Second(lambda: no_w_o(cfg2), 1000, {}))
    assert "d_model × d_model × n_layers" in exc.relation, exc.relation


def test_recording_leaves_the_engines_own_classes_unchanged():
    """A variant test passes the engine's class itself as the learner's: recording its calls would
    change every model of the process (the engine's forward copying its inputs at each call)."""
    cls = _ENGINE("block", "Block")
    forward, init = cls.forward, cls.__init__
    InProcessStudent("solutions", overrides={("block", "Block"): cls}).piece("block", "Block")
    assert (cls.forward, cls.__init__) == (forward, init) and "_andrea_recorded" not in vars(cls)
