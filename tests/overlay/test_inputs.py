"""inputs.keeps_inputs: a graded function piece that writes into its arguments fails, naming the
argument and the line; one that only rebinds a name, or leaves NaNs where they were, passes."""
import pytest
import torch

from andrea_course.grading.explain import explain
from andrea_course.inputs import CutOffError, GradientError, InPlaceError, keeps_forward_inputs, keeps_inputs, writing_line


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


def flags_its_input(x):
    x.requires_grad_(True)
    return x * 2


def detaches(table, ids):
    return table[ids].detach()


def looks_up(table, ids):
    return table[ids]


def test_requires_grad_set_on_an_input_is_a_change_in_place():
    with pytest.raises(InPlaceError, match=r"changed its argument 'x' in place \(test_inputs\.py, line \d+: "
                                           r"x\.requires_grad_\(True\)\)"):
        keeps_inputs(flags_its_input, "flags_its_input")(torch.ones(3))


def test_an_output_cut_off_from_autograd_is_refused_only_when_an_input_required_grad():
    table, ids = torch.randn(5, 3), torch.tensor([1, 4])
    with pytest.raises(CutOffError, match=r"your detaches's output is cut off from autograd although 'table' requires grad"):
        keeps_inputs(detaches, "detaches")(table.clone().requires_grad_(), ids)
    assert keeps_inputs(looks_up, "looks_up")(table.clone().requires_grad_(), ids).requires_grad
    assert torch.equal(keeps_inputs(detaches, "detaches")(table, ids), table[ids])    # nothing to cut off
    with torch.no_grad():                                                             # the caller's choice
        keeps_inputs(detaches, "detaches")(table.clone().requires_grad_(), ids)


def divides_by_the_variance(x):
    """A wrong LayerNorm (no square root) whose gradient autograd gets right: a steep, curved slope."""
    xc = x - x.mean(dim=-1, keepdim=True)
    return xc / (xc.pow(2).mean(dim=-1, keepdim=True) + 1e-5)


def half_gradient(x):
    """Right values, half autograd's gradient: x's slope halved behind a detached copy."""
    return 0.5 * x.tanh() + 0.5 * x.tanh().detach()


def test_a_wrong_gradient_is_refused_and_a_steep_slope_is_not_mistaken_for_one():
    x = 0.05 * torch.randn(2, 3, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    keeps_inputs(divides_by_the_variance, "layer_norm")(x.clone().requires_grad_())      # curved, not wrong
    with pytest.raises(GradientError, match="your half_gradient gives values whose gradient autograd gets wrong"):
        keeps_inputs(half_gradient, "half_gradient")(torch.randn(3, 4, dtype=torch.float64).requires_grad_())


class AddsInPlace(torch.nn.Module):
    def forward(self, x, cache=None):
        x += 1
        return x


class GrowsItsCache(torch.nn.Module):
    def forward(self, x, cache):
        cache.append(x)               # a cache is handed over to be grown: not an argument to keep
        return x + 1


def test_a_module_forward_that_writes_into_its_tensor_argument_fails_and_a_grown_cache_passes():
    with pytest.raises(InPlaceError, match=r"your AddsInPlace\.forward changed its argument 'x' in place"):
        keeps_forward_inputs(type("Copy", (AddsInPlace,), dict(vars(AddsInPlace))), "AddsInPlace")()(torch.zeros(2))
    cache = []
    out = keeps_forward_inputs(type("Copy", (GrowsItsCache,), dict(vars(GrowsItsCache))), "GrowsItsCache")()(
        torch.zeros(2), cache)
    assert len(cache) == 1 and torch.equal(out, torch.ones(2))


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


class TwoTables(torch.nn.Module):
    def __init__(self, detach_second: bool):
        super().__init__()
        self.first, self.second = torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(8, 3))
        self.detach_second = detach_second

    def forward(self, ids):
        second = self.second.data if self.detach_second else self.second
        return self.first[ids] + second[:ids.shape[-1]]


def test_a_module_whose_output_never_reaches_one_of_its_parameters_is_refused():
    wrapped = lambda detach: keeps_forward_inputs(type("Copy", (TwoTables,), dict(vars(TwoTables))), "TwoTables")(detach)
    ids = torch.tensor([[1, 4, 2]])
    assert wrapped(False)(ids).requires_grad
    with pytest.raises(CutOffError, match=r"does not reach its parameter 'second' through autograd.*"
                                          r"test_inputs\.py, line \d+: second = self\.second\.data"):
        wrapped(True)(ids)
    with torch.no_grad():                                                             # the caller's choice
        wrapped(True)(ids)
    frozen = wrapped(True)
    frozen.second.requires_grad_(False)                                               # not trained: not asked
    frozen(ids)
