"""inputs.keeps_inputs: a graded function piece that writes into its arguments fails, naming the
argument and the line; one that only rebinds a name, or leaves NaNs where they were, passes."""
import pytest
import torch

from andrea_course.grading.explain import explain
from andrea_course.inputs import InPlaceError, keeps_inputs, writing_line


def add_in_place(tok, pos):
    tok += pos
    return tok


def mask_in_place(scores, mask):
    return scores.masked_fill_(~mask, float("-inf"))


def pop_ids(ids, pair):
    ids.pop()
    return list(ids)


def update_counts(counts, key):
    counts.update({key: 1})
    return dict(counts)


def rebinds(m, g):
    m = 0.9 * m + 0.1 * g
    m += g                      # a new tensor: the caller's m is untouched
    return m


def keeps_nan(x):
    return torch.nan_to_num(x)


@pytest.mark.parametrize("fn, args, arg", [
    (add_in_place, (torch.zeros(2, 3), torch.ones(2, 3)), "tok"),
    (mask_in_place, (torch.zeros(3, 3), torch.ones(3, 3, dtype=torch.bool).tril()), "scores"),
    (pop_ids, ([1, 2, 3], (1, 2)), "ids"),
    (update_counts, ({(1, 2): 3}, (4, 5)), "counts"),
])
def test_a_piece_that_writes_into_an_argument_is_named_with_its_line(fn, args, arg):
    with pytest.raises(InPlaceError, match=rf"your {fn.__name__} changed its argument '{arg}' in place "
                                           rf"\(test_inputs\.py, line \d+: "):
        keeps_inputs(fn, fn.__name__)(*args)


def test_rebinding_a_name_and_nans_left_alone_pass():
    m, g = torch.ones(3), torch.full((3,), 2.0)
    out = keeps_inputs(rebinds, "rebinds")(m, g)
    assert torch.equal(m, torch.ones(3)) and torch.allclose(out, torch.full((3,), 3.1))
    x = torch.tensor([float("nan"), 1.0])
    assert torch.equal(keeps_inputs(keeps_nan, "keeps_nan")(x), torch.tensor([0.0, 1.0]))


def test_the_wrapper_keeps_the_signature_and_passes_bad_calls_through():
    import inspect
    wrapped = keeps_inputs(add_in_place, "add_in_place")
    assert list(inspect.signature(wrapped).parameters) == ["tok", "pos"]
    with pytest.raises(TypeError):
        wrapped(torch.zeros(1))


def test_writing_line_is_none_when_the_source_shows_no_write():
    assert writing_line(keeps_nan, "x") is None
    assert writing_line(add_in_place, "tok").endswith("tok += pos")


def test_the_box_says_what_an_in_place_write_does_and_how_to_avoid_it():
    try:
        keeps_inputs(add_in_place, "add_positions")(torch.zeros(2), torch.ones(2))
    except InPlaceError as exc:
        meaning = explain(exc)
    assert "writes into the very tok the caller passed" in meaning
    assert "`tok = tok + ...` makes a new one" in meaning


@pytest.mark.slow(seconds=6)
def test_the_graded_tests_catch_a_learner_add_positions_that_adds_in_place(tmp_path):
    """Through check()'s own path: the box names the argument and the line."""
    import shutil

    from andrea_course.grading.local import run_graded
    folder = tmp_path / "mine"
    shutil.copytree("solutions", folder)
    path = folder / "embeddings.py"
    right = "    return tok + position_table[start:start + T]"
    wrong = "    tok += position_table[start:start + T]\n    return tok"
    text = path.read_text()
    assert text.count(right) == 1
    path.write_text(text.replace(right, wrong))
    result = run_graded("embeddings.add_positions", impl=str(folder))
    assert not result.passed
    rows = " | ".join(v for o in result.outcomes for _, v in o.rows)
    assert "your add_positions changed its argument 'tok' in place (embeddings.py, line" in rows, rows
    assert "LearnerCodeError" not in rows
