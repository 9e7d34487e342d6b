"""Judging a learner's output: clear failures that name the shape, the largest error and,
when the output matches a known typical mistake, that mistake and its fix."""
from __future__ import annotations

import torch

# Tolerances by dtype, never by machine.
TOLERANCES = {torch.float64: (1e-10, 1e-8), torch.float32: (1e-5, 1e-4),
              torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}


class Mismatch(AssertionError):
    """A graded check failed. Fields feed the notebook's check box and the grader's report."""

    def __init__(self, what: str, problem: str, hint: str = "", *, shape_found=None,
                 shape_expected=None, max_error: float | None = None, mistake: str | None = None):
        self.what, self.problem, self.hint, self.mistake = what, problem, hint, mistake
        self.shape_found, self.shape_expected, self.max_error = shape_found, shape_expected, max_error
        parts = [f"{what}: {problem}"]
        if mistake:
            parts.append(f"Looks like a typical mistake: {mistake}")
        if hint:
            parts.append(f"Hint: {hint}")
        super().__init__("\n".join(parts))


def _tol(t: torch.Tensor, atol, rtol):
    a, r = TOLERANCES.get(t.dtype, (1e-5, 1e-4))
    return (a if atol is None else atol), (r if rtol is None else rtol)


def _close(got: torch.Tensor, want: torch.Tensor, atol, rtol) -> bool:
    if got.shape != want.shape:
        return False
    return bool(torch.allclose(got.to(want.dtype), want, atol=atol, rtol=rtol, equal_nan=True))


def expect_close(got, want: torch.Tensor, what: str, *, mistakes: dict | None = None,
                 hint: str = "", atol: float | None = None, rtol: float | None = None) -> None:
    """Pass when `got` is a tensor of want's shape, close to it within the dtype's tolerance.

    mistakes: {"description of a typical mistake and its fix": the output that mistake gives}.
    If `got` matches one of them (and not `want`), the failure names it.
    """
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, f"expected a torch.Tensor, got {type(got).__name__}",
                       "return a tensor (did you forget a `return`?)", shape_expected=tuple(want.shape))
    atol, rtol = _tol(want, atol, rtol)
    if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(want).all():
        raise Mismatch(what, "the output contains NaN or inf where the reference is finite", hint or
                       "look for a division by zero, exp of a large number, or -inf that reached a sum",
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape),
                       mistake=_which_mistake(got, mistakes, atol, rtol))
    if got.shape != want.shape:
        raise Mismatch(what, f"shape {tuple(got.shape)}, expected {tuple(want.shape)}", hint,
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape),
                       mistake=_which_mistake(got, mistakes, atol, rtol))
    if _close(got, want, atol, rtol):
        return
    err = float((got.detach().double() - want.detach().double()).abs().nan_to_num(float("inf")).max())
    raise Mismatch(what, f"values differ from the reference (largest error {err:.3g}, "
                         f"tolerance {atol:g} + {rtol:g}·|expected|)", hint,
                   shape_found=tuple(got.shape), shape_expected=tuple(want.shape), max_error=err,
                   mistake=_which_mistake(got, mistakes, atol, rtol))


def _which_mistake(got, mistakes, atol, rtol):
    for name, wrong in (mistakes or {}).items():
        if isinstance(wrong, torch.Tensor) and _close(got, wrong, max(atol, 1e-6), max(rtol, 1e-5)):
            return name
    return None


def expect_equal(got, want, what: str, hint: str = "", mistakes: dict | None = None) -> None:
    """Exact equality for ints, strings, dicts of them, or integer/bool tensors."""
    if isinstance(want, torch.Tensor):
        ok = isinstance(got, torch.Tensor) and got.shape == want.shape and bool((got == want).all())
    else:
        ok = got == want
    if ok:
        return
    mistake = next((n for n, w in (mistakes or {}).items() if _same(got, w)), None)
    shown = lambda v: f"tensor of shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)
    raise Mismatch(what, f"got {shown(got)}, expected {shown(want)}", hint, mistake=mistake)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool((a == b).all())
    return a == b


def expect_true(condition: bool, what: str, problem: str, hint: str = "", mistake: str | None = None) -> None:
    """A property check (rows sum to one, causality, ...)."""
    if not condition:
        raise Mismatch(what, problem, hint, mistake=mistake)
