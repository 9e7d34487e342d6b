"""The judge (andrea_course/grading/expect.py): when a failure names a typical mistake, and how it
says that values are infinite or NaN. A named mistake the learner did not make is a lie."""
from __future__ import annotations

import pytest
import torch

from andrea_course.grading.expect import Mismatch, expect_close, expect_equal


def _x(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _fail(fn, *args, **kwargs) -> Mismatch:
    with pytest.raises(Mismatch) as info:
        fn(*args, **kwargs)
    return info.value


def test_a_mistake_that_matches_is_named():
    x, gamma = _x(4, 6), _x(6, seed=1)
    want = x * gamma
    exc = _fail(expect_close, x, want, "rms_norm(x, gamma)", mistakes={"forgot gamma": x})
    assert exc.mistake == "forgot gamma" and "forgot gamma" in str(exc)


def test_a_mistake_that_gives_the_right_answer_on_this_input_is_never_named():
    """gamma = 1: "forgot gamma" gives the right output, so it cannot explain a wrong one (here a
    float64 answer 1e-8 off, outside the float64 tolerance but inside the mistake's looser match)."""
    x = _x(4, 6)
    want = x * torch.ones(6, dtype=torch.float64)
    exc = _fail(expect_close, x + 1e-8, want, "rms_norm(x, ones)", mistakes={"forgot gamma": x.clone()})
    assert exc.mistake is None and "forgot gamma" not in str(exc)
    assert exc.max_error == pytest.approx(1e-8)


def test_the_second_mistake_is_named_when_the_first_equals_the_truth():
    x = _x(3, 5)
    exc = _fail(expect_close, -x, x, "f(x)", mistakes={"no-op here": x.clone(), "sign flipped": -x})
    assert exc.mistake == "sign flipped"


def test_a_mistake_is_not_named_when_the_output_matches_neither():
    x = _x(3, 5)
    exc = _fail(expect_close, x + 1, x, "f(x)", mistakes={"sign flipped": -x})
    assert exc.mistake is None and exc.max_error == pytest.approx(1.0)
    assert "values differ from the reference (largest error 1" in exc.problem


def test_expect_equal_follows_the_same_rule():
    want = torch.ones(4, 4, dtype=torch.bool).tril()
    sym = torch.ones(4, 4, dtype=torch.bool)
    exc = _fail(expect_equal, sym, want, "mask", mistakes={"transposed": want.T, "all True": sym})
    assert exc.mistake == "all True"
    eye = torch.eye(3, dtype=torch.bool)              # symmetric: transposing it changes nothing
    exc = _fail(expect_equal, ~eye, eye, "mask", mistakes={"transposed": eye.T})
    assert exc.mistake is None
    assert _fail(expect_equal, 3, 4, "n", mistakes={"off by one": 3}).mistake == "off by one"


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


def test_nan_in_the_output_is_counted():
    want = _x(2, 5)
    got = want.clone()
    got[0, 1] = float("nan")
    exc = _fail(expect_close, got, want, "softmax(x)")
    assert "1 of 10 entries of the output are NaN or infinite where the reference is an ordinary number" in exc.problem


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
