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
    A failure names a mistake only when `got` matches that mistake's output AND that output
    differs from `want` on this input (a mistake that gives the right answer here is no mistake).
    """
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, f"expected a torch.Tensor, got {type(got).__name__}",
                       "return a tensor (did you forget a `return`?)", shape_expected=tuple(want.shape))
    atol, rtol = _tol(want, atol, rtol)
    mistake = lambda: _which_mistake(got, want, mistakes, atol, rtol)
    if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(want).all():
        raise Mismatch(what, f"{_count(~torch.isfinite(got))} of the output are NaN or infinite where the "
                             f"reference is an ordinary number", hint or
                       "look for a division by zero, exp of a large number, or -inf that reached a sum",
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape), mistake=mistake())
    if got.shape != want.shape:
        raise Mismatch(what, f"shape {tuple(got.shape)}, expected {tuple(want.shape)}", hint,
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape), mistake=mistake())
    if _close(got, want, atol, rtol):
        return
    problem, err = _difference(got, want)
    raise Mismatch(what, f"{problem}, tolerance {atol:g} + {rtol:g}·|expected|)", hint,
                   shape_found=tuple(got.shape), shape_expected=tuple(want.shape), max_error=err,
                   mistake=mistake())


def _count(mask: torch.Tensor) -> str:
    n, total = int(mask.sum()), mask.numel()
    return f"{n} of {total} entries" if n != 1 else f"1 of {total} entries"


OVERFLOW = 1e30     # an error beyond this is not "a number a bit off": something blew up


def _difference(got: torch.Tensor, want: torch.Tensor) -> tuple[str, float | None]:
    """How got differs from want, in words a learner reads, and the largest error when that
    is an ordinary number (None when infinities or NaN are involved: 1.8e+308 says nothing)."""
    g, w = got.detach().double(), want.detach().double()
    g_fin, w_fin = torch.isfinite(g), torch.isfinite(w)
    same_special = (~g_fin & ~w_fin) & ((g == w) | (g.isnan() & w.isnan()))
    both = g_fin & w_fin
    parts = []
    if (~g_fin & w_fin).any():
        parts.append(f"{_count(~g_fin & w_fin)} are {_specials(g[~g_fin & w_fin])} where the reference "
                     f"is an ordinary number")
    if (g_fin & ~w_fin).any():
        parts.append(f"{_count(g_fin & ~w_fin)} are ordinary numbers where the reference is "
                     f"{_specials(w[g_fin & ~w_fin])}")
    if (~g_fin & ~w_fin & ~same_special).any():
        parts.append(f"{_count(~g_fin & ~w_fin & ~same_special)} are {_specials(g[~g_fin & ~w_fin & ~same_special])} "
                     f"where the reference is {_specials(w[~g_fin & ~w_fin & ~same_special])}")
    err = float((g - w)[both].abs().max()) if both.any() else None
    if err is not None and err > OVERFLOW:
        parts.append(f"some values are astronomically far from the reference (largest error {err:.1e}): "
                     f"something overflowed or grew without bound")
        err = None
    if not parts:
        return f"values differ from the reference (largest error {err:.3g}", err
    if err is not None and err > 0:
        parts.append(f"elsewhere the largest error is {err:.3g}")
    return "values differ from the reference (" + "; ".join(parts), err


def _specials(values: torch.Tensor) -> str:
    kinds = [name for name, hit in (("-inf", (values == float("-inf")).any()), ("+inf", (values == float("inf")).any()),
                                    ("NaN", values.isnan().any())) if hit]
    return " or ".join(kinds) or "special values"


def _which_mistake(got, want, mistakes, atol, rtol):
    """The first mistake whose output `got` matches and that differs from `want` on this input.
    The match is looser than the pass test (a mistake computed in another order still matches),
    so "differs from want" uses the same looser tolerance."""
    atol, rtol = max(atol, 1e-6), max(rtol, 1e-5)
    for name, wrong in (mistakes or {}).items():
        if (isinstance(wrong, torch.Tensor) and _close(got, wrong, atol, rtol)
                and not _close(wrong, want, atol, rtol)):
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
    mistake = next((n for n, w in (mistakes or {}).items() if _same(got, w) and not _same(w, want)), None)
    shown = lambda v: f"tensor of shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)
    raise Mismatch(what, f"got {shown(got)}, expected {shown(want)}", hint, mistake=mistake)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and bool((a == b).all()))
    return a == b


def expect_runs(call, what: str, *, mistakes: dict | None = None, hint: str = ""):
    """Run `call()` (the learner's code on the test's input) and return what it returns.

    mistakes: {"description of a typical mistake and its fix": a function that makes that mistake
    on the same input}. When the learner's code raises and a mistake's function raises the same
    error (same type, same message: a shape error says which sizes clashed where), a Mismatch
    names that mistake; any other error propagates as it is (the check box then shows the
    learner's own line and the test's hints)."""
    try:
        return call()
    except Exception as exc:                        # noqa: BLE001 - judged below, else re-raised
        for name, wrong in (mistakes or {}).items():
            try:
                wrong()
            except Exception as theirs:             # noqa: BLE001
                if type(theirs) is type(exc) and str(theirs) == str(exc):
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise Mismatch(what, f"your code raised {type(exc).__name__}: {first}", hint,
                                   mistake=name) from exc
        raise


def expect_true(condition: bool, what: str, problem: str, hint: str = "", mistake: str | None = None) -> None:
    """A property check (rows sum to one, causality, ...)."""
    if not condition:
        raise Mismatch(what, problem, hint, mistake=mistake)
