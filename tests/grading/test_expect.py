"""The judge (andrea_course/grading/expect.py) and the explainer of errors (explain.py): when a
failure names a typical mistake, what it shows when it names none, and how it says that values are
infinite or NaN. A named mistake the learner did not make is a lie."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from andrea_course.grading.expect import (NO_KNOWN_MISTAKE, Case, Mismatch, Second, expect_cases, expect_close,
                                           expect_fresh_calls,
                                          expect_equal, expect_runs, expect_unchanged, load_weights)
from andrea_course.grading.explain import explain


def _x(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _fail(fn, *args, **kwargs) -> Mismatch:
    with pytest.raises(Mismatch) as info:
        fn(*args, **kwargs)
    return info.value


def _raised(fn) -> BaseException:
    try:
        fn()
    except Exception as exc:               # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


# ----------------------------------------------------------------------------- the two-input rule
def _second(fn, x2, want2, mistakes2):
    return Second(lambda: fn(x2), want2, mistakes2)


def test_a_mistake_is_named_when_it_matches_on_both_inputs():
    x, gamma, x2, gamma2 = _x(4, 6), _x(6, seed=1), _x(3, 6, seed=2), _x(6, seed=3)
    learner = lambda t: t                                       # forgot gamma
    exc = _fail(expect_close, learner(x), x * gamma, "rms_norm(x, gamma)", mistakes={"forgot gamma": x},
                second=_second(learner, x2, x2 * gamma2, {"forgot gamma": x2}))
    assert exc.mistake == "forgot gamma" and "forgot gamma" in str(exc) and not exc.unmatched


def test_a_mistake_that_matches_on_one_input_only_is_not_named():
    """bpe's case: counting each word once and skipping overlapping pairs agree on {(7, 7, 7): 2};
    on {(7, 7, 7, 7): 3} they differ, and the learner's output there rules the listed mistake out."""
    def each_word_once(words):                                  # what the learner wrote
        out = {}
        for word in words:
            for pair in zip(word, word[1:]):
                out[pair] = out.get(pair, 0) + 1
        return out
    overlapping_skipped = {(7, 7): 2}                           # the listed mistake, on {(7, 7, 7): 2}
    exc = _fail(expect_equal, each_word_once({(7, 7, 7): 2}), {(7, 7): 4}, "pair_counts({(7, 7, 7): 2})",
                mistakes={"overlapping pairs skipped": overlapping_skipped},
                second=Second(lambda: each_word_once({(7, 7, 7, 7): 3}), {(7, 7): 9},
                              {"overlapping pairs skipped": {(7, 7): 6}}))
    assert exc.mistake is None and exc.unmatched
    assert "overlapping" not in str(exc) and NO_KNOWN_MISTAKE in str(exc)


def test_without_a_second_input_no_mistake_is_named():
    x = _x(3, 5)
    exc = _fail(expect_close, -x, x, "f(x)", mistakes={"sign flipped": -x})
    assert exc.mistake is None and exc.unmatched


def test_an_error_on_the_second_input_names_nothing():
    x = _x(3, 5)
    exc = _fail(expect_close, -x, x, "f(x)", mistakes={"sign flipped": -x},
                second=Second(lambda: 1 / 0, x, {"sign flipped": -x}))
    assert exc.mistake is None


def test_a_mistake_right_on_the_second_input_is_not_confirmed_there():
    """gamma = 1 on the second input: "forgot gamma" gives the right answer there, so it cannot
    confirm anything."""
    x, gamma, x2 = _x(4, 6), _x(6, seed=1), _x(3, 6, seed=2)
    exc = _fail(expect_close, x, x * gamma, "rms_norm(x, gamma)", mistakes={"forgot gamma": x},
                second=Second(lambda: x2, x2, {"forgot gamma": x2}))
    assert exc.mistake is None


def test_a_mistake_that_gives_the_right_answer_on_this_input_is_never_named():
    """gamma = 1: "forgot gamma" gives the right output, so it cannot explain a wrong one (here a
    float64 answer 1e-8 off, outside the float64 tolerance but inside the mistake's looser match)."""
    x = _x(4, 6)
    want = x * torch.ones(6, dtype=torch.float64)
    exc = _fail(expect_close, x + 1e-8, want, "rms_norm(x, ones)", mistakes={"forgot gamma": x.clone()},
                second=Second(lambda: x + 1e-8, want, {"forgot gamma": x.clone()}))
    assert exc.mistake is None and "forgot gamma" not in str(exc)
    assert exc.max_error == pytest.approx(1e-8)


def test_two_mistakes_that_agree_on_both_inputs_name_neither():
    x, x2 = _x(3, 5), _x(2, 4, seed=1)
    exc = _fail(expect_close, -x, x, "f(x)", mistakes={"sign flipped": -x, "negated": -x},
                second=Second(lambda: -x2, x2, {"sign flipped": -x2, "negated": -x2}))
    assert exc.mistake is None


def test_the_second_mistake_is_named_when_the_first_equals_the_truth():
    x, x2 = _x(3, 5), _x(2, 4, seed=1)
    exc = _fail(expect_close, -x, x, "f(x)", mistakes={"no-op here": x.clone(), "sign flipped": -x},
                second=Second(lambda: -x2, x2, {"no-op here": x2.clone(), "sign flipped": -x2}))
    assert exc.mistake == "sign flipped"


def test_expect_cases_confirms_each_failure_on_the_next_case():
    xs = [_x(3, 4), _x(5, 2, seed=1)]
    learner = lambda t: t.flip(-2)
    cases = [Case(f"f(x{i})", lambda t=t: learner(t), t.cumsum(-2), {"reversed": t.flip(-2), "doubled": 2 * t})
             for i, t in enumerate(xs)]
    exc = _fail(expect_cases, *cases)
    assert exc.mistake == "reversed" and exc.what == "f(x0)"
    with pytest.raises(ValueError):
        expect_cases(cases[0])


def test_expect_equal_follows_the_same_rule():
    want = torch.ones(4, 4, dtype=torch.bool).tril()
    want2 = torch.ones(3, 3, dtype=torch.bool).tril()
    sym, sym2 = torch.ones(4, 4, dtype=torch.bool), torch.ones(3, 3, dtype=torch.bool)
    exc = _fail(expect_equal, sym, want, "mask", mistakes={"transposed": want.T, "all True": sym},
                second=Second(lambda: sym2, want2, {"transposed": want2.T, "all True": sym2}))
    assert exc.mistake == "all True"
    eye = torch.eye(3, dtype=torch.bool)              # symmetric: transposing it changes nothing
    exc = _fail(expect_equal, ~eye, eye, "mask", mistakes={"transposed": eye.T}, second=Second(lambda: ~eye, eye, {}))
    assert exc.mistake is None
    assert _fail(expect_equal, 3, 4, "n", mistakes={"off by one": 3},
                 second=Second(lambda: 6, 7, {"off by one": 6})).mistake == "off by one"


# ----------------------------------------------------------------------------- what a failure shows
def test_a_failure_shows_the_first_differing_values_and_their_positions():
    want = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    got = want.clone()
    got[1, 2], got[2, 0] = 99.0, -5.0
    exc = _fail(expect_close, got, want, "add_positions(tok, pos)")
    assert exc.differences == "2 of 12 entries differ; the first: [1, 2] yours 99, expected 6; [2, 0] yours -5, expected 8"
    assert "Where they differ: 2 of 12 entries differ" in str(exc)
    assert not exc.unmatched and NO_KNOWN_MISTAKE not in str(exc)      # no mistakes listed: nothing to say


def test_draws_compared_show_the_tokens_not_only_the_shapes():
    want = torch.arange(64).reshape(64, 1) % 7
    got = want.clone()
    got[3, 0] = 6
    exc = _fail(expect_equal, got, want, "the tokens drawn by sample_next(...)")
    assert "shape (64, 1)" not in exc.problem and exc.problem == "1 of 64 entries differ"
    assert exc.differences == "1 of 64 entries differ; the first: [3, 0] yours 6, expected 3"
    small = _fail(expect_equal, torch.tensor([[1], [2]]), torch.tensor([[1], [3]]), "draws")
    assert small.problem == "got [[1], [2]], expected [[1], [3]]"


def test_a_dict_of_many_keys_is_summed_up_in_one_line():
    """A model whose blocks sit in a plain list: one line naming what is missing, never two
    listings of every key."""
    want = {f"blocks.{i}.{p}": (16,) for i in range(2) for p in ("ln1.weight", "ln1.bias", "attn.qkv.weight",
                                                                  "mlp.fc.weight")}
    want.update({"embed.token_table": (19, 16), "ln_f.weight": (16,)})
    got = {k: v for k, v in want.items() if not k.startswith("blocks.")}
    exc = _fail(expect_equal, got, want, "ANDREA(cfg).state_dict(): names and shapes")
    assert exc.problem == ("the dict differs: missing 8 entries under blocks. (blocks.0.ln1.weight, "
                           "blocks.0.ln1.bias, blocks.0.attn.qkv.weight, …)")
    assert "embed.token_table" not in str(exc)
    exc = _fail(expect_equal, dict(want, **{"ln_f.weight": (8,)}), want, "shapes")
    assert "at 'ln_f.weight' yours (8,), expected (16,)" in exc.problem


def test_a_long_list_shows_its_first_difference():
    want = list(range(20))
    got = want[:5] + [99] + want[6:]
    exc = _fail(expect_equal, got, want, "encode(text, merges)")
    assert exc.problem == "20 items, expected 20; the first difference at index 5: yours 99, expected 5"


def test_infinities_are_described_in_words_not_as_1e308():
    """A wrong triangle of -inf: the judge counts the entries and names -inf; it never prints the
    1.8e+308 that nan_to_num makes of an infinite error."""
    scores = _x(4, 4)
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    want = scores.masked_fill(future, float("-inf"))
    got = scores.masked_fill(future.T, float("-inf"))          # the wrong triangle
    exc = _fail(expect_close, got, want, "apply_causal_mask(scores)")
    text = str(exc)
    assert "e+308" not in text and "inf" in exc.problem
    assert "6 of 16 entries are -inf where the reference is an ordinary number" in exc.problem
    assert "6 of 16 entries are ordinary numbers where the reference is -inf" in exc.problem
    assert exc.max_error is None or exc.max_error < 1e30
    assert "[0, 1] yours" in exc.differences and "expected -inf" in exc.differences


def test_nan_in_the_output_is_counted():
    want = _x(2, 5)
    got = want.clone()
    got[0, 1] = float("nan")
    exc = _fail(expect_close, got, want, "softmax(x)")
    assert "1 of 10 entries of the output are NaN or infinite where the reference is an ordinary number" in exc.problem
    assert exc.differences.startswith("1 of 10 entries differ; the first: [0, 1] yours nan, expected")


def test_an_overflow_is_said_in_words():
    want = _x(2, 3)
    got = want.clone()
    got[1, 2] = 1e300
    exc = _fail(expect_close, got, want, "gelu(x)")
    assert "overflowed or grew without bound" in exc.problem and exc.max_error is None


def test_the_right_answer_passes_and_names_nothing():
    x = _x(3, 3)
    expect_close(x.clone(), x, "f(x)", mistakes={"equal to the truth": x.clone()})
    expect_close(x.float(), x.float(), "f(x) in float32")
    expect_equal({"a": [1, 2]}, {"a": [1, 2]}, "d")


# ----------------------------------------------------------------------------- errors the learner's code raises
def test_a_raised_error_is_named_only_when_the_mistake_raises_it_on_both_inputs():
    x, x2 = torch.ones(2, 3, 4), torch.ones(5, 2, 3)
    named = {"keepdim forgotten": lambda: x / x.sum(-1)}
    named2 = {"keepdim forgotten": lambda: x2 / x2.sum(-1)}
    with pytest.raises(Mismatch) as caught:
        expect_runs(lambda: x / x.sum(-1), "f(x)", mistakes=named, second=Second(lambda: x2 / x2.sum(-1), None, named2))
    assert caught.value.mistake == "keepdim forgotten" and "your code raised RuntimeError" in str(caught.value)
    assert "do not broadcast" in caught.value.meaning
    assert isinstance(caught.value.__cause__, RuntimeError)             # the box shows the learner's line from it
    with pytest.raises(RuntimeError, match="size of tensor"):            # no second input: not named
        expect_runs(lambda: x / x.sum(-1), "f(x)", mistakes=named)
    with pytest.raises(RuntimeError, match="size of tensor"):            # runs on the second input: not named
        expect_runs(lambda: x / x.sum(-1), "f(x)", mistakes=named, second=Second(lambda: x2, None, named2))
    with pytest.raises(RuntimeError, match="size of tensor"):            # another shape error: not named
        expect_runs(lambda: x / x.sum(1), "f(x)", mistakes=named, second=Second(lambda: x2 / x2.sum(1), None, named2))
    with pytest.raises(ZeroDivisionError):
        expect_runs(lambda: 1 / 0, "f(x)", mistakes=named)
    assert expect_runs(lambda: 7, "f(x)", mistakes=named) == 7


def _merge_with_view(y):
    B, H, T, K = y.shape
    return y.transpose(1, 2).view(B, T, H * K)


def _sample_without_keepdim(logits):
    kth = torch.topk(logits, 3, dim=-1).values[:, -1]
    return logits.masked_fill(logits < kth, float("-inf"))


def _softmax_without_keepdim(s):
    return s.exp() / s.exp().sum(dim=-1)


class _Blocks(nn.Module):
    def __init__(self, n, plain=False):
        super().__init__()
        layers = [nn.Linear(2, 2) for _ in range(n)]
        self.blocks = layers if plain else nn.ModuleList(layers)


def _blocks(n):
    return _Blocks(n)


def _heads_viewed_first():
    q = torch.randn(2, 5, 36)[..., :12]                  # the queries' third of a fused projection
    B, T, H, K = 2, 5, 3, 4
    return q.view(B, H, T, K)


def _slice_viewed():
    x = torch.randn(2, 5, 12)[..., :6]
    return x.view(2, 30)


def _python_max_of_norms():
    norms = torch.rand(3) + 1
    return max(norms, 1e-8)


def _words_changed_while_iterating():
    words = {(1, 2): 3, (2, 3): 1}
    for word in words:
        words[word + (0,)] = words.pop(word)


def _bytes_of_two_ids():
    a, b = 97, 300
    return bytes([a, b])


def _pairs_of_a_dict():
    counts = {(1, 2, 3): 2}
    return [word for word, n in counts]


EXPLAINED = [  # (what raises, words its explanation must hold)
    (lambda: _merge_with_view(torch.randn(2, 3, 5, 4)), "non-contiguous"),
    (lambda: _softmax_without_keepdim(torch.randn(2, 3, 5)), "`.sum(dim=-1)` has no keepdim=True"),
    (lambda: _sample_without_keepdim(torch.randn(4, 7)), "keepdim=True"),
    (lambda: torch.randn(3, 4) @ torch.randn(4, 5).double(), "float32 meets float64"),
    (lambda: torch.randn(3, 4) @ torch.randn(3, 4), "(3×4) @ (3×4) would need 4 = 3"),
    (lambda: torch.randn(4)[7], "indices run from 0 to 3"),
    (lambda: F.embedding(torch.tensor([11]), torch.randn(11, 3)), "0 .. V - 1"),
    (lambda: torch.randn(4, 5).topk(9), "min(k, x.shape[-1])"),
    (lambda: torch.randn(3, 4).sum(dim=2), "only 2 axes"),
    (lambda: torch.multinomial(torch.tensor([[float("nan"), 1.0]]), 1), "not a probability distribution"),
    (lambda: bool(torch.randn(3) > 0), "torch.where"),
    (lambda: nn.Sequential(nn.Linear(2, 2)).load_state_dict({"1.weight": torch.randn(2, 2)}), "lacks 1.weight"),
    (lambda: _blocks(1).load_state_dict(_blocks(2).state_dict()), "holds 1 where the reference holds 2"),
    (lambda: _Blocks(2, plain=True).load_state_dict(_blocks(2).state_dict()), "plain Python list"),
    (lambda: torch.mm(torch.randn(2, 3, 4), torch.randn(4, 5)), "torch.mm multiplies two 2-D matrices only"),
    (lambda: torch.dot(torch.randn(2, 3), torch.randn(2, 3)), "(u * v).sum(dim=-1)"),
    (lambda: math.erf(torch.randn(3)), "torch.erf"),
    (_pairs_of_a_dict, "Use .items()"),
    (_bytes_of_two_ids, "`bytes([a, b])` makes ONE byte of each number"),
    (_heads_viewed_first, "view as (B, T, H, K) first, then .transpose(1, 2)"),
    (_python_max_of_norms, "Python's built-in max(...) compares tensors"),
    (lambda: __import__("numpy").exp(torch.randn(3, requires_grad=True)), "Use the torch function instead: torch.exp"),
    (lambda: torch.index_select(torch.randn(5, 3), 0, torch.tensor([[1, 2]])), "table[ids]"),
    (lambda: torch.einsum("ts,sk->tk", torch.randn(2, 3, 3), torch.randn(2, 3, 4)), "'...ts,...sk->...tk'"),
    (_words_changed_while_iterating, "Build the new entries in a new dict"),
    (_slice_viewed, "a slice of a wider one"),
    (lambda: torch.zeros(6, 3).narrow(0, 2, 5), "start 2 + length 5 = 7, and the axis has 6 entries"),
    (lambda: [1, 2, 3][3], "an index counted from 1 (1-based positions"),
]


@pytest.mark.parametrize("raises, words", EXPLAINED, ids=[w for _, w in EXPLAINED])
def test_errors_are_explained(raises, words):
    assert words in (explain(_raised(raises)) or "")


def test_an_error_from_the_grading_worker_is_explained_from_its_text():
    from andrea_course.worker.client import LearnerCodeError
    crossed = LearnerCodeError("RuntimeError: view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). Use .reshape(...) "
                               "instead. (multihead.py, line 40, in merge_heads)")
    assert "non-contiguous" in explain(crossed)
    assert explain(ValueError("something else entirely")) is None


def test_a_model_whose_blocks_sit_in_a_plain_list_is_told_about_nn_modulelist():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [nn.Linear(2, 2) for _ in range(3)]
            self.head = nn.Linear(2, 2)

    class Listed(Plain):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(self.blocks)

    with pytest.raises(Mismatch) as caught:
        load_weights(Plain(), Listed().state_dict(), "ANDREA(cfg)")
    text = str(caught.value)
    assert "nn.ModuleList" in caught.value.meaning and "6 parameters under blocks." in text
    assert text.count("blocks.") < 6                                   # one line, not a listing


def test_an_input_changed_in_place_is_named():
    x = torch.ones(3, 4)
    before = {"x": x.clone()}
    x.mul_(2)
    exc = _fail(expect_unchanged, before, {"x": x}, "dropout(x, p=0.5, training=True)")
    assert "changed its input in place" in exc.mistake
    expect_unchanged({"x": x.clone()}, {"x": x}, "f(x)")


def test_an_error_from_the_worker_is_read_from_its_text_not_from_the_graders_lines():
    """In the sandboxed grader the learner's error is raised again in the grader's process: the
    line this process sees is the test's (here: no .shape on it), the learner's is in the text."""
    def graders_line():
        raise ValueError("not enough values to unpack (expected 2, got 1) (embeddings.py, line 104, in embed_lookup)")
    said = explain(_raised(graders_line))
    assert said and "Unpacking a tensor's shape" in said


# ----------------------------------------------------------------------------- a list that outlives the call
_KEPT = []                                   # a learner's module-level list, never emptied


def _record_into_the_module_list(x):
    seen = _KEPT
    seen.append(x)
    return torch.stack(seen)


def _record_into_a_default(x, seen=[]):      # noqa: B006 - the learner's mutable default
    seen.append(x)
    return torch.stack(seen)


class _Recorder:
    def __init__(self):
        self.seen = []

    def record(self, x):
        self.seen.append(x)
        return torch.stack(self.seen)


def _record_fresh(xs):
    seen = []
    for x in xs:
        seen.append(x)
    return torch.stack(seen)


def _second_call_raises(record):
    """The piece called twice, on inputs of two shapes: the second call stacks the first one's tensor too."""
    record(torch.zeros(2, 5, 12))
    return _raised(lambda: record(torch.zeros(1, 7, 8)))


@pytest.mark.parametrize("record, origin, fix", [
    (_record_into_the_module_list, "`_KEPT` is made at module level (`_KEPT = []`)", "create the list inside the function"),
    (_record_into_a_default, "the default argument `seen=[]`", "`if seen is None: seen = []`"),
    (_Recorder().record, "made once, in __init__, and kept on the object", "(`self.seen = []`)"),
], ids=["module level, under another name", "default argument", "on self"])
def test_a_list_made_outside_the_call_is_named_when_stacking_fails(record, origin, fix):
    """Stacked tensors of two calls: the learner's source shows the list is not created in the function."""
    _KEPT.clear()
    said = explain(_second_call_raises(record))
    assert origin in said and "outlives each call" in said and fix in said, said
    assert "sliced by the loop" not in said


def test_a_list_the_function_creates_is_not_blamed_for_unequal_shapes():
    said = explain(_raised(lambda: _record_fresh([torch.zeros(2, 5, 12), torch.zeros(1, 7, 8)])))
    assert "outlives" not in said and "differ in more than one size" in said, said
    said = explain(_raised(lambda: _record_fresh([torch.zeros(2, 3), torch.zeros(2, 4)])))
    assert "outlives" not in said and "sliced by the loop" in said, said


def test_a_list_that_outlives_the_call_is_read_from_the_workers_frames(tmp_path):
    """An error from the grading worker carries the learner's frames: the learner's file is read there."""
    path = tmp_path / "inside.py"
    path.write_text("import torch\n\n_SEEN = []\n\n\ndef residual_stream(model, ids):\n    seen = _SEEN\n"
                    "    seen.append(ids)\n    return torch.stack(seen)\n", encoding="utf-8")
    crossed = RuntimeError("stack expects each tensor to be equal size, but got [2, 5, 12] at entry 0 and "
                           "[1, 7, 8] at entry 3")
    crossed.frames = [(str(path), 9, "residual_stream", "return torch.stack(seen)")]
    said = explain(crossed)
    assert "`_SEEN` is made at module level" in said and "created inside residual_stream" in said, said
    path.write_text(path.read_text().replace("    seen = _SEEN\n", "    seen = []\n"), encoding="utf-8")
    assert "outlives" not in explain(crossed)


def test_fresh_calls_name_an_answer_kept_and_judge_any_other_wrong_answer_plainly():
    """A second call that returns the first call's answer is named as kept; any other wrong answer
    gets the ordinary box (tensor or exact), never an error of the test's own."""
    kept, calls = {}, [torch.arange(3.0), torch.arange(4.0)]
    cases = lambda fn: [Case(f"f({n})", lambda n=n: fn(n), calls[n - 3]) for n in (3, 4)]
    with pytest.raises(Mismatch, match="an answer kept from an earlier call"):
        expect_fresh_calls(*cases(lambda n: kept.setdefault("x", torch.arange(float(n)))))
    with pytest.raises(Mismatch, match="values differ"):
        expect_fresh_calls(*cases(lambda n: torch.arange(float(n)) * (n - 2)))
    with pytest.raises(Mismatch) as raised:
        expect_fresh_calls(Case("g(1)", lambda: [1], [1]), Case("g(2)", lambda: [3], [2]), exact=True)
    assert "kept" not in str(raised.value)

