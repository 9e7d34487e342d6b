"""Judging a learner's output: clear failures that name the shape, the largest error and the first
values that differ, and a typical mistake only when the learner's code could be making it.

A typical mistake is named when its output equals the learner's on the test's input AND on a
second input (`second=`, a Second), where that mistake gives a wrong answer too: one input alone
cannot tell two mistakes apart that happen to agree on it (counting each word of {(7, 7, 7): 2}
once, and skipping overlapping pairs, both give {(7, 7): 2}). The second input is run only when
the first fails. Otherwise a generic relation seen on both inputs is said (a factor such as
√d_head, swapped axes, a shift by one, an inverted mask: relations.py), or the failure says that
no typical mistake the test knows matches; either way it shows where the values differ:

    second = Second(lambda: softmax(scores2), torch.softmax(scores2, -1), mistakes_on(scores2))
    expect_close(softmax(scores), torch.softmax(scores, -1), "softmax(scores)",
                 mistakes=mistakes_on(scores), second=second)

expect_cases(case, case, ...) checks several inputs at once, each failure confirmed on the next.
"""
from __future__ import annotations

import ast
import inspect
import math
import textwrap
from typing import Any, Callable, NamedTuple

import torch

from .explain import explain, frames_of, keys, where
from .relations import CALL, MISTAKES, inputs_of, relate
from .student import call_giving

# Tolerances by dtype, never by machine.
TOLERANCES = {torch.float64: (1e-10, 1e-8), torch.float32: (1e-5, 1e-4),
              torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}
NO_KNOWN_MISTAKE = "none of the typical mistakes this test knows gives your output"
SHOWN = 3                     # differing entries listed


class Second(NamedTuple):
    """The piece on a second input, which confirms or rules out a typical mistake.

    got: runs the learner's code on that input (called only when the first input fails; an error
    there names nothing); want: the right output there; mistakes: {description: that mistake's
    output there} (for expect_runs: {description: a function that raises that mistake's error})."""
    got: Callable[[], Any]
    want: Any
    mistakes: dict


class Case(NamedTuple):
    """One input of expect_cases: what it is, the learner's output on it (a function: the call),
    the right output, and {description: each typical mistake's output on it}."""
    what: str
    got: Callable[[], Any]
    want: Any
    mistakes: dict = {}


class Mismatch(AssertionError):
    """A graded check failed. Fields feed the notebook's check box and the grader's report.

    differences: where the values differ (positions, the learner's value, the expected one);
    mistake: the typical mistake the output matches (on two inputs); unmatched: the test knows
    typical mistakes and none gives this output; relation: how the output relates to the expected
    one, seen on two inputs, when no listed mistake does (relations.py); meaning: what an error the
    learner's code raised means (explain.py)."""

    def __init__(self, what: str, problem: str, hint: str = "", *, shape_found=None,
                 shape_expected=None, max_error: float | None = None, mistake: str | None = None,
                 differences: str | None = None, unmatched: bool = False, meaning: str | None = None,
                 relation=None):
        if relation is not None and not mistake:
            hint = relation.fix or hint
        self.relation = relation.text if relation is not None and not mistake else None
        self.what, self.problem, self.hint, self.mistake = what, problem, hint, mistake
        self.shape_found, self.shape_expected, self.max_error = shape_found, shape_expected, max_error
        self.differences, self.meaning = differences, meaning
        self.unmatched = bool(unmatched and not mistake and not self.relation)
        super().__init__(rows_text(self.rows(None)))

    def rows(self, folder, base=None) -> list:
        """[(label, text)] for check()'s box and the grader's text (records.describe), the learner's
        files named relative to `base` (default: the course)."""
        cause = self.__cause__                       # expect_runs: the error the learner's code raised
        rows = [("problem", f"{self.what}: {self.problem}"),
                ("where", where(frames_of(cause), folder, base) if getattr(cause, "__traceback__", None) else None),
                ("what it means", self.meaning),
                ("largest error", f"{self.max_error:.3g}" if self.max_error is not None else None),
                ("shape", f"found {_shape(self.shape_found)}, expected {_shape(self.shape_expected)}"
                 if self.shape_found is not None or self.shape_expected is not None else None),
                ("where they differ", self.differences),
                ("how it relates", self.relation),
                ("typical mistake", self.mistake or (NO_KNOWN_MISTAKE if self.unmatched else None)),
                ("hint", self.hint)]
        return [(label, value) for label, value in rows if value]


# how rows_text() labels a row ("" for none; any other label is capitalised)
TEXT_LABELS = {"problem": "", "how it relates": "How it relates to the expected output",
               "typical mistake": "Looks like a typical mistake"}


def rows_text(rows) -> str:
    """A failure's [(label, text)] rows as "Label: text" lines, the problem's line first: the one
    wording of a failure, for the exception's message and the grader's text (gradescope.text)."""
    lines = []
    for label, value in rows:
        if label == "typical mistake" and value == NO_KNOWN_MISTAKE:
            lines.append(f"Typical mistakes: {value}.")
            continue
        shown = TEXT_LABELS.get(label, label[:1].upper() + label[1:])
        lines.append(f"{shown}: {value}" if shown else str(value))
    return "\n".join(lines)


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if isinstance(shape, (tuple, list)) else str(shape)


# ----------------------------------------------------------------------------- close
def expect_close(got, want, what: str, *, mistakes: dict | None = None, second=None,
                 hint: str = "", atol: float | None = None, rtol: float | None = None, inputs: dict | None = None) -> None:
    """Pass when `got` is a tensor of want's shape, close to it within the dtype's tolerance.

    mistakes: {"description of a typical mistake and its fix": the output that mistake gives on
    this input}; second: the same piece on another input (a Second, or a list of them). A failure names a mistake only
    when its output matches `got` here and the learner's output on the second input there, and
    differs from the right answer on both (a mistake that gives the right answer is no mistake).
    When none does, a generic relation (a factor, swapped axes, ...: relations.py) seen on both
    inputs is said instead; inputs: the values this call was given, by name, which a relation may
    name (expect_cases passes them; a Second's are read from its call).
    """
    if not isinstance(want, torch.Tensor):
        want = torch.as_tensor(want)
    if got is None:
        raise Mismatch(what, "returned None: a function (or a module's forward) that ends without `return` gives "
                             "None", "end it with `return` and the result", shape_expected=tuple(want.shape))
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, f"expected a torch.Tensor, got {type_name(got)}",
                       hint or "return a tensor (did you forget a `return`?)", shape_expected=tuple(want.shape))
    same = _loose(atol, rtol)
    runs = _Runs(second)
    given = atol, rtol                                  # the test's own, for the second inputs' dtypes
    name = lambda: _name(got, want, mistakes, second, same, runs, given)
    atol, rtol = _tol(want, atol, rtol)
    related = lambda mistake: None if mistake else relate(got, want, _with(inputs, mistakes, call_giving(got)),
                                                          runs.wrong(*given))
    listed = bool(mistakes)
    if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(want).all() \
            and got.shape == want.shape:
        mistake = name()
        raise Mismatch(what, f"{_count(~torch.isfinite(got))} of the output are NaN or infinite where the "
                             f"reference is an ordinary number", hint or
                       "look for a division by zero, exp of a large number, or -inf that reached a sum",
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape), mistake=mistake,
                       differences=_first_differences(got, want, atol, rtol), unmatched=listed,
                       relation=related(mistake))
    if got.shape != want.shape:
        mistake = name()
        raise Mismatch(what, f"shape {tuple(got.shape)}, expected {tuple(want.shape)}", hint,
                       shape_found=tuple(got.shape), shape_expected=tuple(want.shape), mistake=mistake,
                       unmatched=listed, relation=related(mistake))
    if _close(got, want, atol, rtol):
        return
    problem, err = _difference(got, want)
    mistake = name()
    raise Mismatch(what, f"{problem}, tolerance {atol:g} + {rtol:g}·|expected|)", hint,
                   shape_found=tuple(got.shape), shape_expected=tuple(want.shape), max_error=err,
                   mistake=mistake, differences=_first_differences(got, want, atol, rtol), unmatched=listed,
                   relation=related(mistake))


class _Runs:
    """The learner's code on each second input, run once, when first asked for."""

    def __init__(self, second):
        self.seconds = [] if not second else [second] if isinstance(second, Second) else list(second)
        self.outputs: dict[int, tuple[bool, Any]] = {}
        self.calls: dict[int, Any] = {}                # the one call of a function piece each made

    def __call__(self, i: int) -> tuple[bool, Any]:
        if i not in self.outputs:
            try:
                self.outputs[i] = (True, self.seconds[i].got())
                self.calls[i] = call_giving(self.outputs[i][1])
            except Exception:                           # noqa: BLE001 - an error there confirms nothing
                self.outputs[i] = (False, None)
        return self.outputs[i]

    def wrong(self, atol=None, rtol=None, exact: bool = False):
        """(ran, output, want, inputs) on each second input where the learner's output is wrong, in order."""
        for i, s in enumerate(self.seconds):
            ran, out = self(i)
            if not ran:
                continue
            if exact:
                right = _same(out, s.want)
            else:
                right = isinstance(out, torch.Tensor) and isinstance(s.want, torch.Tensor) and \
                    _close(out, s.want, *_tol(s.want, atol, rtol))
            if not right:
                yield ran, out, s.want, _with(inputs_of(s.got), s.mistakes, self.calls.get(i))


def _with(inputs: dict | None, mistakes: dict | None, call=None) -> dict:
    """The inputs a relation may name, with the listed mistakes' outputs (the terms the test knows)
    and the call of a learner's function piece that gave the output (student.call_giving)."""
    return {**(inputs or {}), MISTAKES: dict(mistakes or {}), **({CALL: call} if call is not None else {})}


def expect_cases(*cases: Case, hint: str = "", atol: float | None = None, rtol: float | None = None,
                 exact: bool = False) -> None:
    """Each case must pass (expect_close, or expect_equal when exact). A failing case names a
    typical mistake only when the learner's output on another case matches it as well (the first
    of the following cases, in a circle, that lists that mistake)."""
    if len(cases) < 2:
        raise ValueError("expect_cases needs at least two cases: a mistake is confirmed on a second input")
    for i, case in enumerate(cases):
        others = [cases[(i + j) % len(cases)] for j in range(1, len(cases))]
        seconds = [Second(other.got, other.want, dict(other.mistakes)) for other in others]
        got = case.got()
        inputs = inputs_of(case.got)
        if exact:
            expect_equal(got, case.want, case.what, hint, mistakes=dict(case.mistakes), second=seconds,
                         inputs=inputs)
        else:
            expect_close(got, case.want, case.what, mistakes=dict(case.mistakes), second=seconds, hint=hint,
                         atol=atol, rtol=rtol, inputs=inputs)


def expect_fresh_calls(*cases: Case, exact: bool = False, hint: str = "") -> None:
    """The cases called in turn, in one process, each judged on its own arguments: a piece that hands
    back an answer kept from an earlier call (a cache keyed on fewer arguments than the answer
    depends on: a default-argument dict, a global, functools.cache) fails a later case, and its box
    names the earlier call whose answer came back."""
    earlier: list[tuple[str, Any]] = []
    for case in cases:
        got = case.got()
        if exact:
            right = _same(got, case.want)
        else:
            right = isinstance(got, torch.Tensor) and _close(got, case.want, *_tol(case.want, None, None))
        if not right:
            kept = next((what for what, out in earlier if _same(got, out)), None)
            if kept is not None:
                raise Mismatch(case.what, f"returned exactly what the earlier call {kept} returned", hint or
                               "compute the answer from this call's arguments", mistake=(
                                   f"an answer kept from an earlier call: {kept} and {case.what} need different "
                                   f"answers, and the second got the first's back, so something (a default-argument "
                                   f"dict, a global, functools.cache) keeps answers under a key made of fewer "
                                   f"arguments than the answer depends on: key it on all of them, or keep nothing"))
            if exact:
                expect_equal(got, case.want, case.what, hint)
            expect_close(got, case.want, case.what, hint=hint)
        earlier.append((case.what, got))


def _tol(t: torch.Tensor, atol, rtol):
    a, r = TOLERANCES.get(t.dtype, (1e-5, 1e-4))
    return (a if atol is None else atol), (r if rtol is None else rtol)


def _close(got: torch.Tensor, want: torch.Tensor, atol, rtol) -> bool:
    if got.shape != want.shape:
        return False
    if got.dtype == torch.bool or want.dtype == torch.bool:
        return bool((got == want).all())
    return bool(torch.allclose(got.detach().to(want.dtype), want, atol=atol, rtol=rtol, equal_nan=True))


def _loose(atol=None, rtol=None):
    """How closely the learner's output must match a mistake's (and a mistake's differ from the
    truth) to count: looser than the pass test, so that a mistake computed in another order
    still matches. The tolerance is that of the dtype of the right answer on that input, loosened
    (or the test's own atol/rtol, as given: a test that sets them knows the scale of its values)."""
    def same(a, b, want=None) -> bool:
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            ref = want if isinstance(want, torch.Tensor) else b
            at, rt = _tol(ref, atol, rtol)
            if atol is None and rtol is None:              # the dtype's tolerance, loosened
                at, rt = max(at, 1e-6), max(rt, 1e-5)
            return a.shape == b.shape and _close(a, b, at, rt)
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            return False
        return _same(a, b)
    return same


def _name(got, want, mistakes, second, same, runs=None, given=(None, None)) -> str | None:
    """The one typical mistake whose output matches the learner's on this input and on a second,
    and is wrong on both; None when none (or more than one) does.

    second: a Second, or several (expect_cases): each mistake is confirmed on the first where it
    gives a wrong answer and the learner's code ran (an error there tells nothing either way). same(a, b) or, for a second input of another dtype, same(a, b, want)
    compares outputs. runs: the learner's outputs there (_Runs), shared with the relations."""
    here = [n for n, wrong in (mistakes or {}).items()
            if wrong is not None and _match(same, got, wrong, want) and not _match(same, wrong, want, want)
            and _nearer(got, wrong, want, given)]
    if not here or not second:
        return None
    runs = runs or _Runs(second)
    seconds = runs.seconds
    confirmed = []
    for n in here:
        shows = [i for i, s in enumerate(seconds) if s.mistakes.get(n) is not None
                 and not _match(same, s.mistakes[n], s.want, s.want)]
        ran, i = next(((True, i) for i in shows if runs(i)[0]), (False, None))   # where the learner's code ran
        if ran and _match(same, runs(i)[1], seconds[i].mistakes[n], seconds[i].want) and \
                _nearer(runs(i)[1], seconds[i].mistakes[n], seconds[i].want, given):
            confirmed.append(n)
    return confirmed[0] if len(confirmed) == 1 else None


def _nearer(got, wrong, want, given=(None, None), ratio: float = 0.01) -> bool:
    """got lies far nearer the mistake's output than the mistake lies from the right one (or within
    the test's own atol and rtol, where it sets them: it knows the scale of its values, such as a
    frequency's sampling noise): two mistakes that both barely move the output (a step of almost
    nothing) are not told apart by the loose margin alone."""
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (got, wrong, want)) or \
            not got.shape == wrong.shape == want.shape or want.numel() == 0:
        return True
    g, w, r = (t.detach().double() for t in (got, wrong, want))
    own = (given[0] or 0.0) + (given[1] or 0.0) * float(r.abs().nan_to_num(0.0).max())
    return _gap(g, w) <= max(ratio * _gap(w, r), own)


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference between a and b, NaN against a number counting as infinite."""
    odd = torch.isnan(a) ^ torch.isnan(b)
    return float(torch.where(odd, math.inf, (a - b).abs().nan_to_num(0.0, posinf=math.inf)).max())


def _match(same, a, b, want) -> bool:
    """same(a, b), with the tolerance of want's dtype when the comparison takes one."""
    try:
        return same(a, b, want)
    except TypeError:
        return same(a, b)


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


def _first_differences(got: torch.Tensor, want: torch.Tensor, atol: float = 0.0, rtol: float = 0.0) -> str | None:
    """'7 of 60 entries differ; the first: [0, 1, 2] yours 0.5312, expected 0.6121; ...' (None when
    the shapes differ or nothing does)."""
    if got.shape != want.shape:
        return None
    exact = not (got.is_floating_point() or want.is_floating_point()) or (atol == 0 and rtol == 0)
    g, w = got.detach(), want.detach()
    if exact:
        bad = g != w.to(g.dtype) if g.dtype == w.dtype or not g.is_floating_point() else g.double() != w.double()
    else:
        g, w = g.double(), w.double()
        bad = ~torch.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
    if not bad.any():
        return None
    where = bad.nonzero()[:SHOWN]
    shown = []
    for index in where.tolist():
        at = f"[{', '.join(map(str, index))}] " if index else ""
        shown.append(f"{at}yours {_number(g[tuple(index)])}, expected {_number(w[tuple(index)])}")
    n, total = int(bad.sum()), bad.numel()
    head = f"{n} of {total} entries differ; the first: " if total > 1 else ""
    return head + "; ".join(shown)


def _number(v: torch.Tensor) -> str:
    x = v.item()
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.6g}"


# ----------------------------------------------------------------------------- equal
def expect_equal(got, want, what: str, hint: str = "", mistakes: dict | None = None, second=None,
                 inputs: dict | None = None) -> None:
    """Exact equality for ints, strings, lists, dicts of them, or integer/bool tensors; a mistake is
    named under expect_close's rule (on this input and on `second`), else a relation seen on both."""
    if _same(got, want):
        return
    runs = _Runs(second)
    mistake = _name(got, want, mistakes, second, _same, runs)
    relation = None if mistake else relate(got, want, _with(inputs, mistakes, call_giving(got)), runs.wrong(exact=True))
    problem, differences = _describe_unequal(got, want)
    shapes = {}
    if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor):
        shapes = dict(shape_found=tuple(got.shape), shape_expected=tuple(want.shape))
    raise Mismatch(what, problem, hint, mistake=mistake, differences=differences, unmatched=bool(mistakes),
                   relation=relation, **shapes)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and bool((a == b).all()))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:                                   # noqa: BLE001 - a learner object's odd __eq__
        return False


def type_name(value) -> str:
    """The type of a value as the learner wrote it: for a learner's object kept in the worker (a
    proxy), its own type there."""
    from ..worker.client import Proxy
    from ..worker.wire import kind_of
    return object.__getattribute__(value, "_kind") if isinstance(value, Proxy) else kind_of(value)


def _shown(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _describe_unequal(got, want) -> tuple[str, str | None]:
    """(the problem in words, where the values differ) for expect_equal."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            kind = type_name(got)
            pair = (" (a pair, values and indices: take .values or .indices)" if "return_types" in kind else "")
            return f"expected a tensor of shape {tuple(want.shape)}, got {kind}{pair}", None
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}", None
        differences = _first_differences(got, want)
        if want.numel() <= 16:
            return f"got {got.tolist()}, expected {want.tolist()}", differences
        n = int((got != want.to(got.dtype) if got.dtype == want.dtype else got.double() != want.double()).sum())
        return f"{n} of {want.numel()} entries differ", differences
    if isinstance(want, dict) and isinstance(got, dict):
        return _dict_difference(got, want), None
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return _sequence_difference(got, want), None
    if isinstance(want, (dict, list, tuple)) and not isinstance(got, type(want)):
        return f"expected a {type(want).__name__}, got {type_name(got)}: {_shown(got)}", None
    return f"got {_shown(got)}, expected {_shown(want)}", None


def _dict_difference(got: dict, want: dict) -> str:
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    changed = [k for k in want if k in got and not _same(got[k], want[k])]
    parts = []
    if missing:
        parts.append(f"missing {keys([str(k) for k in missing])}")
    if extra:
        parts.append(f"not expected: {keys([str(k) for k in extra])}")
    for k in changed[:SHOWN]:
        parts.append(f"at {k!r} yours {_shown(got[k], 80)}, expected {_shown(want[k], 80)}")
    if len(changed) > SHOWN:
        parts.append(f"{len(changed) - SHOWN} more values differ")
    if len(want) <= 4 and len(got) <= 4:
        return f"got {_shown(got)}, expected {_shown(want)}" + (f" ({'; '.join(parts)})" if parts else "")
    return "the dict differs: " + "; ".join(parts)


def _sequence_difference(got, want) -> str:
    if len(got) <= 8 and len(want) <= 8:
        return f"got {_shown(got)}, expected {_shown(want)}"
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if not _same(a, b)), None)
    lengths = f"{len(got)} items, expected {len(want)}"
    if first is None:
        return f"{lengths}: the first {min(len(got), len(want))} agree"
    return (f"{lengths}; the first difference at index {first}: yours {_shown(got[first], 80)}, "
            f"expected {_shown(want[first], 80)}")


# ----------------------------------------------------------------------------- errors and properties
def expect_runs(call, what: str, *, mistakes: dict | None = None, second: Second | None = None, hint: str = ""):
    """Run `call()` (the learner's code on the test's input) and return what it returns.

    mistakes: {"description of a typical mistake and its fix": a function that makes that mistake
    on the same input}; second: the learner's code and the same mistakes on another input (its
    `want` is not used). When the learner's code raises, a mistake is named when its function
    raises the same error (same type, same message: a shape error says which sizes clashed where)
    on this input AND on the second one; the Mismatch then says what the error means. Any other
    error propagates as it is (both runners explain it: explain.py)."""
    try:
        return call()
    except Exception as exc:                        # noqa: BLE001 - judged below, else re-raised
        name = _raising_mistake(exc, mistakes, second)
        if name is None:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise Mismatch(what, f"your code raised {type(exc).__name__}: {first}", hint, mistake=name,
                       meaning=explain(exc)) from exc


def _raises_like(exc: BaseException, wrong) -> bool:
    """Whether `wrong()` raises what the learner's code raised: the same type, and a message the
    learner's begins with (a runner may add a note after it)."""
    try:
        wrong()
    except Exception as theirs:                     # noqa: BLE001
        said, mine = str(theirs), str(exc)
        return type(theirs) is type(exc) and (mine == said or bool(said) and mine.startswith(said))
    return False


def _raising_mistake(exc, mistakes, second) -> str | None:
    here = [n for n, wrong in (mistakes or {}).items() if _raises_like(exc, wrong)]
    if not here or second is None:
        return None
    try:
        second.got()
    except Exception as again:                      # noqa: BLE001
        there = [n for n in here if n in second.mistakes and _raises_like(again, second.mistakes[n])]
        return there[0] if len(there) == 1 else None
    return None


def expect_true(condition: bool, what: str, problem: str, hint: str = "", mistake: str | None = None) -> None:
    """A property check (rows sum to one, causality, ...). `mistake` names what the failed property
    itself shows (every row has the same mask, say), never a guess."""
    if not condition:
        raise Mismatch(what, problem, hint, mistake=mistake)


def expect_unchanged(before: dict, after: dict, what: str) -> None:
    """The learner's code left its inputs as they were: {name: a copy taken before the call} against
    {name: the same tensor after it}. A change is named: the piece changed its input in place."""
    changed = [name for name, old in before.items()
               if isinstance(old, torch.Tensor) and isinstance(after.get(name), torch.Tensor)
               and not (old.shape == after[name].shape and bool(torch.equal(old, after[name])))]
    if changed:
        names = ", ".join(changed)
        raise Mismatch(what, f"after the call, {names} no longer holds what it was given",
                       "compute a new tensor (y = x * mask) rather than changing the input (x *= mask, x.mul_(...), "
                       "x[...] = ...): the caller still needs its x",
                       mistake=f"changed its input in place: your code wrote into {names}, which belongs to the caller")


def load_weights(module, state: dict, what: str) -> None:
    """module.load_state_dict(state), where a failure is said in one line: which parameter names
    or shapes differ from the reference's."""
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise Mismatch(what, "the reference's weights do not fit your module",
                       "keep the exercise's attribute names and layer sizes",
                       meaning=explain(exc)) from None


def advice_in(fn) -> tuple[list[str], list[str]]:
    """(hints, typical mistakes) written in a graded test's expect_*() calls, read from its source
    (records.describe shows them when the learner's code raises before the test can judge it)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return [], []
    glob = getattr(fn, "__globals__", {})

    def text_of(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return glob[node.id] if isinstance(node, ast.Name) and isinstance(glob.get(node.id), str) else None

    hints, mistakes = [], []
    for call in ast.walk(tree):
        name = isinstance(call, ast.Call) and (getattr(call.func, "id", None) or getattr(call.func, "attr", None))
        if name not in ("expect_close", "expect_equal", "expect_true", "expect_runs"):
            continue
        kws = {k.arg: k.value for k in call.keywords if k.arg}
        hint = kws.get("hint") or (call.args[3] if name in ("expect_equal", "expect_true") and len(call.args) > 3
                                   else None)
        if hint is not None and text_of(hint):
            hints.append(text_of(hint))
        if isinstance(kws.get("mistakes"), ast.Dict):
            mistakes += [t for t in map(text_of, kws["mistakes"].keys) if t]
        if kws.get("mistake") is not None and text_of(kws["mistake"]):
            mistakes.append(text_of(kws["mistake"]))
    return list(dict.fromkeys(h for h in hints if h)), list(dict.fromkeys(mistakes))
