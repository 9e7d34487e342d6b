"""Feedback that never lies, part 1: every graded test passes correct variants of its piece,
not only the answer key's way of writing it:

- the engine's version, written with PyTorch's own ops (pieces/<activity>.py: F.layer_norm,
  torch.softmax, SDPA, ...), and
- the same computed in float64 and rounded back to the input's dtype (the "upcast" variant a
  careful learner writes),

so a tolerance is per dtype and never tuned to one implementation's rounding. (Part 2, a
mistake named only when the output really is that mistake's, is the judge's: test_expect.py.)
"""
import functools
import importlib.util
import types

import pytest
import torch
import torch.nn.functional as F

from andrea_course import pieces
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.grading.student import InProcessStudent

FILES = ["test_embeddings.py", "test_attention.py", "test_multihead.py", "test_mlp.py", "test_block.py",
         "test_model.py", "test_modern.py", "test_optim.py"]


def _load(file):
    spec = importlib.util.spec_from_file_location(f"_variants_{file[:-3]}", ACTIVITY_TESTS / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _graded(files=FILES):
    out = []
    for file in files:
        module = _load(file)
        for name, fn in vars(module).items():
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "exercise"]
            if name.startswith("test_") and marks:
                out.append(pytest.param(fn, marks[0].args[0], id=f"{file[5:-3]}::{name}"))
    return out


def upcast(fn):
    """fn computed in float64 on float64 copies of its floating-point tensor arguments, the
    result rounded back to the dtype of the first of them."""
    @functools.wraps(fn)
    def wide(*args, **kwargs):
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        widen = lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        out = fn(*map(widen, args), **{k: widen(v) for k, v in kwargs.items()})
        return out.to(dtype) if isinstance(out, torch.Tensor) and dtype is not None and out.is_floating_point() else out
    return wide


GRADED_TESTS = _graded()


@pytest.mark.parametrize("test, exercise", GRADED_TESTS)
def test_the_engines_pytorch_version_passes(test, exercise):
    activity, piece = exercise.split(".")
    test(InProcessStudent("solutions", overrides={(activity, piece): pieces.get(activity, piece)}))


@pytest.mark.parametrize("test, exercise", [p for p in GRADED_TESTS
                                            if not isinstance(pieces.get(*p.values[1].split(".")), type)])
def test_the_float64_upcast_version_passes(test, exercise):
    activity, piece = exercise.split(".")
    variant = pieces.get(activity, piece)
    if isinstance(variant, types.FunctionType) or callable(variant):
        variant = upcast(variant)
    test(InProcessStudent("solutions", overrides={(activity, piece): variant}))


# ----- more correct variants, written as learners write them (issue 15 item 6's analysis pieces) -----

def _nearest_by_unit_rows(table, query, k):
    """Rows and query scaled to length 1 by hand, then a full descending sort."""
    unit = table / table.norm(dim=-1, keepdim=True)                          # (V, D)
    return (unit @ (query / query.norm())).argsort(descending=True)[:k]       # (k,)


def _nearest_by_normalize(table, query, k):
    return torch.sort(F.normalize(table, dim=-1) @ F.normalize(query, dim=0), descending=True).indices[:k]


def _gelu_grad_by_ndtr(x):
    """Phi from torch.special.ndtr, phi from torch.distributions' log-density."""
    return torch.special.ndtr(x) + x * torch.distributions.Normal(0.0, 1.0).log_prob(x).exp()


def _head_entropy_by_xlogy(w):
    return -torch.xlogy(w, w).sum(dim=-1).mean(dim=(0, 2))


def _head_entropy_by_categorical(w):
    return torch.distributions.Categorical(probs=w).entropy().mean(dim=(0, 2))


_head_entropy_in_float64_by_where = upcast(lambda w: torch.where(w > 0, -w * w.log(), 0.0).sum(dim=-1).mean(dim=(0, 2)))
_head_entropy_in_float64_by_where.__name__ = "_head_entropy_in_float64_by_where"


def _gelu_grad_by_torch_func(x):
    """PyTorch's own derivative of F.gelu, one scalar at a time (torch.func.grad under vmap)."""
    return torch.func.vmap(torch.func.grad(F.gelu))(x.reshape(-1)).reshape(x.shape)


def _dropout_bernoulli(x, p, training, generator=None):
    """keep ~ Bernoulli(1 - p), drawn by torch.bernoulli."""
    if not training or p == 0:
        return x
    keep = torch.bernoulli(torch.full_like(x, 1 - p), generator=generator)
    return x * keep / (1 - p) if p < 1 else x * keep


def _dropout_masked_fill(x, p, training, generator=None):
    """drop where a uniform number is below p, then scale what is left; a copy even when nothing changes."""
    if not training:
        return x.clone()
    drop = torch.rand(x.shape, generator=generator, dtype=torch.float64) < p
    return x.masked_fill(drop, 0.0) * (1 / (1 - p) if p < 1 else 0.0)


MORE_VARIANTS = [("test_embeddings.py", "embeddings.nearest_tokens", _nearest_by_unit_rows),
                 ("test_multihead.py", "multihead.head_entropy", _head_entropy_by_xlogy),
                 ("test_multihead.py", "multihead.head_entropy", _head_entropy_by_categorical),
                 ("test_multihead.py", "multihead.head_entropy", _head_entropy_in_float64_by_where),
                 ("test_embeddings.py", "embeddings.nearest_tokens", _nearest_by_normalize),
                 ("test_mlp.py", "mlp.gelu_grad", _gelu_grad_by_ndtr),
                 ("test_mlp.py", "mlp.gelu_grad", _gelu_grad_by_torch_func),
                 ("test_block.py", "block.dropout", _dropout_bernoulli),
                 ("test_block.py", "block.dropout", _dropout_masked_fill)]


@pytest.mark.parametrize("file, exercise, variant", MORE_VARIANTS, ids=[v.__name__[1:] for *_, v in MORE_VARIANTS])
def test_a_learners_correct_variant_passes(file, exercise, variant):
    student = InProcessStudent("solutions", overrides={tuple(exercise.split(".")): variant})
    tests = [fn for name, fn in vars(_load(file)).items() if name.startswith("test_")
             and any(m.name == "exercise" and m.args[0] == exercise for m in getattr(fn, "pytestmark", []))]
    assert tests
    for test in tests:
        test(student)


def _softmax_kernel_variant(name):
    """The exercise's softmax(x) launching another correct kernel: the engine's, or one of
    tests/softmax_kernels.py (exp written as exp2, the sum's reciprocal multiplied in)."""
    import softmax_kernels                     # tests/softmax_kernels.py: it needs Triton
    if name == "engine":
        kernel = pieces.get("kernels", "softmax_kernel")
        return lambda x: softmax_kernels.launcher()(x, kernel=kernel)
    return softmax_kernels.softmax_with(**{name: True})


@pytest.mark.parametrize("variant", ["engine", "EXP2", "RECIPROCAL"])
def test_other_correct_softmax_kernels_pass(variant):
    pytest.importorskip("triton")
    tests = [fn for fn, exercise in (p.values for p in _graded(["test_kernels.py"])) if exercise == "kernels.softmax_kernel"]
    assert len(tests) >= 4
    for test in tests:
        test(InProcessStudent("solutions", overrides={("kernels", "softmax"): _softmax_kernel_variant(variant),
                                                      ("kernels", "softmax_kernel"): _softmax_kernel_itself(variant)}))


class _SwitchedKernel:
    """softmax_kernels.softmax_kernel_with, switched, as a kernel a test launches: kernel[grid](...);
    its source (.fn) is the switched kernel's."""

    def __init__(self, **switches):
        import softmax_kernels
        self.switched, self.fn = softmax_kernels._Switched(**switches), softmax_kernels.softmax_kernel_with.fn

    def __getitem__(self, grid):
        return self.switched[grid]


def _softmax_kernel_itself(name):
    """The kernel _softmax_kernel_variant launches, for a test that launches it directly."""
    return pieces.get("kernels", "softmax_kernel") if name == "engine" else _SwitchedKernel(**{name: True})


def _kernel_variant(name):
    """{(kernels, piece): ...} serving another correct kernel to every graded test of it: the kernel
    itself and its given launcher bound to it (the engine's kernel, or one of tests/learner_kernels.py)."""
    import learner_kernels                     # tests/learner_kernels.py: it needs Triton
    piece = name.split("_kernel")[0] + "_kernel"
    kernel = pieces.get("kernels", piece) if name == piece else getattr(learner_kernels, name)
    launch = InProcessStudent("solutions").piece("kernels", piece[:-len("_kernel")])
    return {("kernels", piece): kernel, ("kernels", piece[:-len("_kernel")]): functools.partial(launch, kernel=kernel)}


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("variant", ["gelu_kernel", "gelu_kernel_by_where", "layer_norm_kernel",
                                     "layer_norm_kernel_by_pointers"])
def test_other_correct_gelu_and_layer_norm_kernels_pass(variant):
    pytest.importorskip("triton")
    overrides = _kernel_variant(variant)
    piece = next(iter(overrides))[1]
    tests = [fn for fn, exercise in (p.values for p in _graded(["test_kernels.py"])) if exercise == f"kernels.{piece}"]
    assert len(tests) >= 4
    for test in tests:
        test(InProcessStudent("solutions", overrides=overrides))
