"""Generic relations between a learner's output and the expected one, for a failure no listed
typical mistake explains.

    relate(got, want, inputs, second) -> Relation | None

Each check in RELATIONS looks at one input's (got, want) and returns what it sees (a Seen: the
set of `keys` that describe it, and the sentence to say). A relation is named only when the same
check sees it again, with a key in common, on the second input, where the learner's output is
wrong too: one input alone can make two different mistakes look alike. Where no other input is
wrong, only an exact observation is said (every value of a float64 output is a float32 number).
The sentence is computed from the case (the factor, the axes, the names of the test's own inputs).

`inputs` are the values a test's call closes over ({"d_head": 16, "x": tensor, ...}): the numbers
a factor may be made of, and the tensors a missing or extra term may be; and, under CALL, the
learner's call that gave the output, which the checks of reruns.py run again with the engine's
version of the piece.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Callable

import torch

from .reruns import (function_swapped, input_in_another_place, intermediate_returned, step_redone,
                     weights_in_another_place)
from .seen import CALL, FLOAT_TOL, MAX_NUMEL, Relation, Seen  # noqa: F401  (CALL: expect.py's key, here for it)
from .seen import floats as _floats
from .seen import near as _near
from .seen import tensors as _tensors

NARROWER = {torch.float64: (torch.float32, torch.bfloat16, torch.float16), torch.float32: (torch.bfloat16, torch.float16)}
SMALL = {"-1": -1.0, "2": 2.0, "1/2": 0.5, "-2": -2.0, "-1/2": -0.5, "3": 3.0, "1/3": 1 / 3, "4": 4.0, "1/4": 0.25,
         "√2": math.sqrt(2), "1/√2": 1 / math.sqrt(2), "ln 2": math.log(2), "1/ln 2": 1 / math.log(2),
         "π": math.pi, "1/π": 1 / math.pi, "√π": math.sqrt(math.pi), "1/√π": 1 / math.sqrt(math.pi),
         "π√π": math.pi ** 1.5, "1/(π√π)": math.pi ** -1.5, "√(2π)": math.sqrt(2 * math.pi),
         "1/√(2π)": 1 / math.sqrt(2 * math.pi), "2π": 2 * math.pi, "1/(2π)": 1 / (2 * math.pi)}


# ----------------------------------------------------------------------------- helpers
def _axis(a: int, ndim: int) -> str:
    return f"axis {a - ndim if a >= 0 else a}"


def _scalars(inputs: dict) -> dict[str, float]:
    return {n: float(v) for n, v in inputs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and v not in (0, 1)}


# ----------------------------------------------------------------------------- the checks
def dtype_narrowing(got, want, inputs):
    """Every value of got is exactly a number of a narrower float type, where want's are not."""
    if not _floats(got, want) or want.dtype not in NARROWER:
        return None
    g, w = got.detach(), want.detach()
    if g.dtype != w.dtype and g.dtype in NARROWER[w.dtype] and _near(g.to(w.dtype), w, g, 4.0):
        narrow = g.dtype
        how = f"your output is {str(narrow)[6:]} where {str(w.dtype)[6:]} is expected"
    else:
        narrow = next((d for d in NARROWER[w.dtype] if _representable(g, d) and not _representable(w, d)), None)
        if narrow is None or not _near(g, w, torch.empty(0, dtype=narrow), 4.0):
            return None
        how = (f"every value of your output is exactly a {str(narrow)[6:]} number although it is "
               f"{str(g.dtype)[6:]}: your code computes in {str(narrow)[6:]} and casts back")
    wide, name = str(w.dtype)[6:], str(narrow)[6:]
    fix = (f"keep the input's own precision: widen with torch.promote_types(x.dtype, torch.float32), which "
           f"leaves {wide} as it is (x.float() would make it {name})")
    return Seen(frozenset({f"narrow {name}"}),
                lambda k: f"{how}. The values agree to {name}'s precision, so the formula is right; the "
                          f"precision is lost (x.float(), .to(torch.{name}), or a tensor made without dtype=).", fix,
                exact=True)


def _representable(t: torch.Tensor, dtype) -> bool:
    t = t.detach()
    finite = t[torch.isfinite(t)]
    if finite.numel() < 4 or bool((finite == finite.round()).all()):    # small integers fit any float type
        return False
    return bool((finite.to(dtype).to(t.dtype) == finite).all())


def extra_or_missing_axis(got, want, inputs):
    """The right values with an axis of size 1 too many or too few."""
    if not _tensors(got, want) or got.shape == want.shape or got.numel() != want.numel():
        return None
    if not _near(got.reshape(want.shape).to(want.dtype), want, want):
        return None
    squeeze = lambda s: tuple(n for n in s if n != 1)
    if squeeze(got.shape) == squeeze(want.shape):
        more = got.dim() > want.dim()
        text = ("an extra axis of size 1 (keepdim=True where the axis should go, or an unsqueeze too many)" if more
                else "an axis of size 1 missing (a reduction without keepdim=True, or a squeeze too many)")
        return Seen(frozenset({"extra axis" if more else "missing axis"}),
                    lambda k: f"your output holds the right values with {text}: shape {tuple(got.shape)} where "
                              f"{tuple(want.shape)} is expected.")
    merged = _merged_axes(got.shape, want.shape)
    return Seen(frozenset({"reshaped"}),
                lambda k: f"your output holds the right values in the right order, in shape {tuple(got.shape)} "
                          f"where {tuple(want.shape)} is expected: {merged or 'reshape (or view) to the expected shape.'}")


def _merged_axes(got: torch.Size, want: torch.Size) -> str | None:
    """got is want with its last axes merged into one: a flatten that starts one axis too early."""
    k = len(got) - 1
    if k < 1 or len(want) <= len(got) or tuple(got[:k]) != tuple(want[:k]):
        return None
    return (f"its last {len(want) - k} axes, {tuple(want[k:])}, are merged into one of {got[-1]}: flatten(start_dim) "
            f"merges every axis from start_dim on, so start it at the first axis to merge (flatten(-2) merges only "
            f"the last two), or reshape to the expected shape.")


def diagonal_only(got, want, inputs):
    """got is the diagonal of want's last two axes: row i met row i only, not every row."""
    if not _tensors(got, want) or want.dim() < 2 or got.dim() != want.dim() - 1:
        return None
    diagonal = want.diagonal(dim1=-2, dim2=-1)
    if got.shape != diagonal.shape or not _near(got.to(want.dtype), diagonal, want):
        return None
    return Seen(frozenset({"diagonal"}), lambda k: (
        f"your output is only the diagonal of the expected {tuple(want.shape)} over its last two axes: entry "
        f"[..., i] is the expected [..., i, i], so index i met only index i of the other axis, where every pair "
        f"was expected."), exact=True)


def one_slice(got, want, inputs):
    """got is one entry of want along one axis (want[0], want[:, 2], ...): that axis never computed."""
    if not _tensors(got, want) or got.dim() != want.dim() - 1:
        return None
    n = want.dim()
    for a in (a for a in range(n) if want.shape[a] > 1):
        for i in range(want.shape[a]):
            part = want.select(a, i)
            if part.shape == got.shape and _near(got.to(want.dtype), part, want):
                return Seen(frozenset({f"slice dim {a} {i}", f"slice {a - n} {i}"}), lambda k, a=a, i=i: (
                    f"your output is only entry {i} of the expected one along {_axis(a, n)} (shape "
                    f"{tuple(got.shape)} where {tuple(want.shape)} is expected): the other {want.shape[a] - 1} are "
                    f"never computed (an index such as [{i}] left in, or a loop that stops after one pass?)."))
    return None


def kept_other_axes(got, want, inputs):
    """got has the shape of an input with other axes taken away than want: a reduction (or selection)
    over the wrong axes. Said from the shapes alone, where exactly one set of the input's axes gives
    each of the two shapes."""
    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor) or got.shape == want.shape:
        return None
    shown = lambda t: tuple(s for s in t.shape if s != 1)       # a reduced axis kept with keepdim=True
    for name, x in inputs.items():
        if not isinstance(x, torch.Tensor) or x.dim() <= max(len(shown(got)), len(shown(want))) or x.dim() > 6 \
                or shown(got) == shown(want):
            continue
        mine, theirs = _kept(x.shape, shown(got)), _kept(x.shape, shown(want))
        if len(mine) == 1 and len(theirs) == 1:
            kept, expected = mine[0], theirs[0]
            gone = [a for a in expected if a not in kept]
            return Seen(frozenset({"kept axes"}), lambda k, name=name, x=x, kept=kept, expected=expected, gone=gone: (
                f"your output has the shape of {name} {tuple(x.shape)} with only its axes {_listed(kept)} kept "
                f"(sizes {_listed([x.shape[a] for a in kept])}), where the expected one keeps its axes "
                f"{_listed(expected)} (sizes {_listed([x.shape[a] for a in expected])}): axis {_listed(gone)} is "
                f"reduced (or selected) away where it should stay, so the mean or sum runs over the wrong axes."),
                exact=True)
    return None


def _kept(shape, target) -> list[tuple]:
    """The sets of shape's axes that, kept in order, give target."""
    return [axes for axes in itertools.combinations(range(len(shape)), len(target))
            if tuple(shape[a] for a in axes) == tuple(target)]


def _listed(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def row_factor(got, want, inputs):
    """Each row of got (along the last axis) is want's row times a factor of its own: the division by
    each row's sum (or norm) missing, or made by another number."""
    if not _floats(got, want) or got.shape != want.shape or want.shape[-1] < 2 or want.numel() < 4:
        return None
    g, w = got.detach().double().reshape(-1, want.shape[-1]), want.detach().double().reshape(-1, want.shape[-1])
    if not (torch.isfinite(g).all() and torch.isfinite(w).all()) or bool((w.abs().sum(-1) == 0).any()):
        return None
    c = (g * w).sum(-1) / w.pow(2).sum(-1)
    if not _near(g, c[:, None] * w, want) or float(c.max() - c.min()) < 1e-3 * max(float(c.abs().max()), 1e-9):
        return None
    if not bool((((c - 1).abs() > 1e-6) & (c.abs() > 1e-6)).any()):     # rows right or zero: a part never written
        return None
    sums = g.sum(-1)
    unit = bool(torch.allclose(w.sum(-1), torch.ones_like(sums), atol=1e-6))
    told = (f"your rows sum to {float(sums.min()):.3g} .. {float(sums.max()):.3g} where each should sum to 1: "
            if unit else "")
    return Seen(frozenset({"row factor"}), lambda k: (
        f"{told}each row of your output (along the last axis) is the expected row times a factor of its own "
        f"({float(c.min()):.3g} .. {float(c.max()):.3g}), so the shape of every row is right and its scale is not: "
        f"the division by each row's own sum (or norm) is missing, or divides by another number."))


def elementwise_product(got, want, inputs):
    """got is the product of two of the test's inputs entry by entry, where want sums over an axis."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    tensors = [(n, x) for n, x in inputs.items() if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for (a, x), (b, y) in itertools.combinations(tensors, 2):
        try:
            product = x.detach().double() * y.detach().double()
        except RuntimeError:
            continue
        if product.shape == want.shape and _near(got.double(), product, want):
            return Seen(frozenset({"elementwise"}), lambda k, a=a, b=b: (
                f"your output is {a} * {b} entry by entry: nothing is summed. A matrix product (@) pairs each row "
                f"of the one with each column of the other and sums the products."), exact=True)
    return None


def joined_on_a_new_axis(got, want, inputs):
    """got has one axis more than want and holds its values once two neighbouring axes are merged in
    another order: parts stacked on a new axis where they should be joined along an existing one."""
    if not _tensors(got, want) or got.dim() != want.dim() + 1 or got.numel() != want.numel() or got.dim() > 5:
        return None
    n = got.dim()
    for a in range(n - 1):
        moved = got.transpose(a, a + 1)
        merged = tuple(moved.shape[:a]) + (moved.shape[a] * moved.shape[a + 1],) + tuple(moved.shape[a + 2:])
        if merged == tuple(want.shape) and _near(moved.reshape(want.shape).to(want.dtype), want, want):
            return Seen(frozenset({"stacked"}), lambda k, a=a: (
                f"your output holds the expected values on one axis too many: shape {tuple(got.shape)} where "
                f"{tuple(want.shape)} is expected. Its parts were stacked on a new {_axis(a + 1, n)} (torch.stack) "
                f"where they should be joined along an existing axis (torch.cat(..., dim=...))."), exact=True)
    return None


def swapped_axes(got, want, inputs):
    """got is want with its axes permuted (two swapped, or every axis reversed, as .T does)."""
    if not _tensors(got, want) or got.dim() != want.dim() or got.dim() < 2 or got.dim() > 5:
        return None
    n = want.dim()
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)) or tuple(want.shape[p] for p in perm) != tuple(got.shape):
            continue
        moved = want.permute(perm)
        if _near(got.to(want.dtype), moved, want):     # an axis of size 1 moved is a reshape too: said only
            return _said_permutation(perm, got, want)   # where the other input confirms the swap
    return None


def sizes_reordered(got, want, inputs):
    """got has the expected sizes in another order (its values not a permutation of want's, which
    swapped_axes says): sizes unpacked or passed in another order."""
    if not _tensors(got, want) or got.dim() != want.dim() or got.shape == want.shape:
        return None
    if sorted(got.shape) != sorted(want.shape):
        return None
    off = [i for i in range(got.dim()) if got.shape[i] != want.shape[i]]
    where = " and ".join(_axis(i, got.dim()) for i in off)
    return Seen(frozenset({f"sizes reordered at {tuple(off)}"}),
                lambda k: f"your output has the expected sizes in another order: shape {tuple(got.shape)} where "
                          f"{tuple(want.shape)} is expected ({where}). The sizes were given in another order: a "
                          f"shape unpacked into the wrong names (T, B, ... = x.shape for B, T, ...), or the sizes of a "
                          f"view, reshape or new tensor written in another order.")


def reshaped_across_axes(got, want, inputs):
    """got is want with two axes swapped, then reshaped back to want's shape: a reshape (or view)
    where a transpose belongs, which reads the memory in order and mixes the two axes."""
    if not _floats(got, want) or got.shape != want.shape or got.dim() < 2:
        return None
    n = want.dim()
    for i, j in itertools.combinations(range(n), 2):
        if want.shape[i] != want.shape[j] and _near(got.to(want.dtype), want.transpose(i, j).reshape(want.shape), want):
            return Seen(frozenset({f"reshaped {i - n} {j - n}"}), lambda k, i=i, j=j: (
                f"your output holds the expected values with {_axis(i, n)} and {_axis(j, n)} swapped, then "
                f"reshaped back to the expected shape {tuple(want.shape)}: a reshape or view where a transpose "
                f"belongs (a reshape never moves an axis: it reads the memory in order, so it mixes the two)."))
    return None


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def only_some_entries_unset(got, want, inputs):
    """got is right wherever it is a number, and NaN at a few entries where want is not: those were
    never written (a buffer made with torch.empty, or a launcher's NaN-filled output, shows through)."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    unset = torch.isnan(got) & torch.isfinite(want)
    rest = ~unset
    if not bool(unset.any()) or int(unset.sum()) * 4 > got.numel() or not _near(
            got[rest].to(want.dtype), want[rest], want):
        return None
    flat = [int(i) for i in unset.flatten().nonzero().flatten()[:4]]
    ends = {0: "the first", got.numel() - 1: "the last"}
    said = ", ".join(f"{i}" + (f" ({ends[i]})" if i in ends else "") for i in flat)
    return Seen(frozenset({"unset"}), lambda k: (
        f"your output is right everywhere but at {_entries(int(unset.sum()))} left NaN, at flat positions {said}"
        f"{', ...' if int(unset.sum()) > 4 else ''}: those were never written, so the empty output buffer shows "
        f"through (an offset, a range or a mask that misses them)."), exact=True)


def part_of_an_axis(got, want, inputs):
    """got is want with entries missing at the start or the end of one axis (every other size equal)."""
    if not _tensors(got, want) or got.dim() != want.dim() or got.shape == want.shape:
        return None
    off = [a for a in range(got.dim()) if got.shape[a] != want.shape[a]]
    if len(off) != 1 or got.shape[off[0]] >= want.shape[off[0]] or got.numel() < 4:
        return None
    a, n, size = off[0], got.shape[off[0]], want.shape[off[0]]
    first, last = want.narrow(a, 0, n), want.narrow(a, size - n, n)
    same = (lambda t: bool(torch.equal(got, t))) if not want.is_floating_point() else \
        (lambda t: got.is_floating_point() and _near(got.to(want.dtype), t, want))
    where = f"{_axis(a, got.dim())} (shape {tuple(got.shape)} where {tuple(want.shape)} is expected)"
    if same(first) and not same(last):
        return Seen(frozenset({f"first part {a - got.dim()}"}), lambda k: (
            f"your output is the expected one's first {n} of {size} entries along {where}: the last {size - n} "
            f"{'is' if size - n == 1 else 'are'} missing (that axis sized from another length, T where S is meant?, "
            f"or a range or slice that stops short, range(T - 1) or [:-1]?)."),
            exact=True)
    if same(last) and not same(first):
        return Seen(frozenset({f"last part {a - got.dim()}"}), lambda k: (
            f"your output is the expected one's last {n} of {size} entries along {where}: the first {size - n} "
            f"{'is' if size - n == 1 else 'are'} missing (that axis sized from another length, T where S is meant?, "
            f"or a range or slice that starts late)."), exact=True)
    return None


def right_except_along(got, want, inputs):
    """got equals want at some indices of one axis and not at the others, where either the others are
    all zeros (never written) or only index 0 is right (the first entry's value serving every one)."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    n = got.dim()
    for a in range(n):
        size = got.shape[a]
        if size < 2:
            continue
        right = [_near(got.select(a, i).to(want.dtype), want.select(a, i), want) for i in range(size)]
        if all(right) or not any(right):
            continue
        wrong = [i for i in range(size) if not right[i]]
        where = _axis(a, n)
        if all(bool((got.select(a, i) == 0).all()) for i in wrong):
            end = ("first" if wrong == list(range(len(wrong)))
                   else "last" if wrong == list(range(size - len(wrong), size)) else None)
            if end is not None:
                return Seen(frozenset({f"zero {end}"}), lambda k, w=wrong, e=end: (
                    f"your output is right except at index {_indices(w)} along {where}, the {e} "
                    f"{'one' if len(w) == 1 else len(w)}, which {'is' if len(w) == 1 else 'are'} all zeros: never "
                    f"written (a loop, range or mask over that axis that {'starts late' if e == 'first' else 'stops short'}, "
                    f"range({'1, T' if e == 'first' else 'T - 1'}) or {'offs >= 1' if e == 'first' else 'offs < n - 1'}?)."),
                    exact=True)
        if right == [True] + [False] * (size - 1) and not _constant(want.select(a, 0)):
            first = got.select(a, 0)
            if all(bool((got.select(a, i) == first).all()) for i in wrong):
                return Seen(frozenset({"copies of the first"}), lambda k: (
                    f"your output is right at index 0 along {where}, and every other index holds a copy of index 0: "
                    f"the first entry's value (x[0], a row written once, or a view that shares one row) serves "
                    f"them all."))
            if a < n - 2:        # a leading axis (batch, heads): on the last two, index 0 is often right by structure
                return Seen(frozenset({"only first"}), lambda k: (
                    f"your output is right at index 0 along {where} and wrong at every other index: something taken "
                    f"from the first entry alone (x[0], or a value computed once before a loop over that axis) "
                    f"serves them all?"))
    return None


def _constant(t: torch.Tensor) -> bool:
    """Every entry alike (cos at position 0 is 1 whatever the frequency): right there by chance."""
    return t.numel() > 1 and bool((t == t.flatten()[0]).all())


def _indices(idx: list[int]) -> str:
    return str(idx[0]) if len(idx) == 1 else f"{idx[0]} .. {idx[-1]}"


def _said_permutation(perm, got, want):
    n = len(perm)
    off = [i for i in range(n) if perm[i] != i]
    if perm == tuple(reversed(range(n))) and n > 2:
        key, what = "reversed", (f"every axis in reverse order (shape {tuple(got.shape)}): what .T does to a tensor "
                                 f"of more than two axes; .mT or .transpose(-2, -1) turns only the last two")
    elif len(off) == 2:
        a, b = (_axis(i, n) for i in off)
        key, what = f"swap {off[0] - n} {off[1] - n}", (f"{a} and {b} swapped: a transpose too many or too few, "
                                                        f"a torch.stack (or cat) along another axis, or a product "
                                                        f"with its factors the other way round")
    else:
        key, what = f"perm {tuple(p - n for p in perm)}", (f"its axes in another order (permute{tuple(perm)} of the "
                                                          f"expected): check the order of each permute or transpose")
    return Seen(frozenset({key}), lambda k: f"your output is the expected one with {what}.")


def inverted_mask(got, want, inputs):
    """What got hides (False, -inf, or exact zeros) is what want keeps, and the other way round."""
    if not _tensors(got, want) or got.shape != want.shape:
        return None
    if want.dtype == torch.bool and got.dtype == torch.bool:
        hidden_g, hidden_w = ~got, ~want
    elif want.is_floating_point() and got.is_floating_point():
        special = (lambda t: t == float("-inf")) if bool((want == float("-inf")).any()) else (lambda t: t == 0)
        hidden_g, hidden_w = special(got), special(want)
    else:
        return None
    both_kept = ~hidden_g & ~hidden_w
    if not hidden_g.any() or not hidden_w.any() or bool((hidden_g & hidden_w).any()) \
            or int(both_kept.sum()) > want.numel() // max(want.shape[-1], 1):
        return None
    diagonal = " (the diagonal aside)" if both_kept.any() else ""
    return Seen(frozenset({"inverted"}),
                lambda k: f"your output hides exactly the entries the expected one keeps, and keeps the ones it "
                          f"hides{diagonal}: the mask is inverted (a comparison the wrong way round, j < i for "
                          f"j > i, triu for tril, ~ on the wrong mask, or torch.where's two values swapped: "
                          f"torch.where(cond, a, b) takes a where cond is True).")


def normalised_over_axis(got, want, inputs):
    """got sums to 1, or has one mean and spread per feature, over an axis other than want's."""
    if not _floats(got, want) or got.shape != want.shape or got.dim() < 2:
        return None
    n = got.dim()
    wsum = [a for a in range(n) if want.shape[a] > 1 and _unit_sum(want, a)]
    for a in range(n - 1):
        if got.shape[a] < 2:
            continue
        if wsum and a not in wsum and _unit_sum(got, a):
            return Seen(frozenset({f"sum axis {a - n}", f"sum dim {a}"}),
                        lambda k, a=a, d=wsum[0]: f"your output sums to 1 along dim={a} ({_axis(a, n)}, size {got.shape[a]}) "
                        f"where the expected one sums to 1 along {_axis(d, n)}: the softmax (or the division by the "
                        f"sum) runs over the wrong axis.")
        if not wsum and _per_feature_stats(got, a, inputs) and not _per_feature_stats(want, a, inputs):
            return Seen(frozenset({f"norm axis {a - n}", f"norm dim {a}"}),
                        lambda k, a=a: f"along dim={a} ({_axis(a, n)}, size {got.shape[a]}) every slice of your output has the "
                        f"same mean and spread, feature by feature: your code normalises over {_axis(a, n)}"
                        f"{' (the batch)' if a == 0 and n >= 3 else ''} instead of the last axis, the features.")
    g = got.detach().double()
    if wsum and torch.isfinite(g).all() and abs(float(g.sum()) - 1) < 1e-4 and not _unit_sum(got, wsum[0]):
        return Seen(frozenset({"sum all"}),
                    lambda k, d=wsum[0]: f"your whole output sums to 1, all {got.numel()} entries together, where the "
                    f"expected one sums to 1 along {_axis(d, n)}, slice by slice: the division is by the sum of "
                    f"everything (.sum() without dim); divide each slice by its own sum, .sum(dim={d - n}, "
                    f"keepdim=True).")
    return None


def _unit_sum(t: torch.Tensor, a: int) -> bool:
    s = t.detach().double().sum(dim=a)
    return bool(torch.isfinite(s).all()) and bool(torch.allclose(s, torch.ones_like(s), atol=1e-4, rtol=0))


def _per_feature_stats(t: torch.Tensor, a: int, inputs: dict) -> bool:
    """The mean and spread (or the root mean square) of t over axis a depend on the last index only
    (with a single slice: they are a bias and a gain the test passes in, (D,) each)."""
    t = t.detach().double()
    if t.shape[a] < 2:
        return False
    if t.numel() // (t.shape[a] * t.shape[-1]) < 2:
        return t.shape[a] >= 3 and _stats_are_inputs(t, a, inputs)
    flat = lambda s: s.reshape(-1, s.shape[-1])
    constant = lambda s, r: bool(torch.allclose(flat(s), flat(s)[:1].expand_as(flat(s)), atol=r * 1e-2, rtol=r))
    spread = t.std(dim=a, correction=0)                 # eps makes the spread of few values vary a little
    return bool((spread > 1e-6).any()) and ((constant(t.mean(dim=a), 1e-6) and constant(spread, 1e-2))
                                            or constant(t.pow(2).mean(dim=a).sqrt(), 1e-2))


def _stats_are_inputs(t: torch.Tensor, a: int, inputs: dict) -> bool:
    """t's mean over axis a is one (D,) input (or 0) and its spread the absolute value of another."""
    D = t.shape[-1]
    vectors = [x.detach().double() for x in inputs.values() if isinstance(x, torch.Tensor) and x.shape == (D,)
               and x.is_floating_point()]
    mean, spread = t.mean(dim=a).reshape(-1), t.std(dim=a, correction=0).reshape(-1)
    near = lambda u, v: bool(torch.allclose(u, v, atol=1e-3, rtol=1e-2))
    centred = near(mean, torch.zeros_like(mean)) or any(near(mean, v) for v in vectors)
    return D > 1 and centred and any(near(spread, v.abs()) for v in vectors if float(v.abs().min()) > 1e-3)


def shifted_by_one(got, want, inputs):
    """Along one axis, got's entry t holds want's entry t - 1 (or t + 1)."""
    if not _tensors(got, want) or got.shape != want.shape:
        return None
    n = got.dim()
    for a in range(n):
        size = got.shape[a]
        if size < 3:
            continue
        for step, word in ((1, "t - 1"), (-1, "t + 1")):
            mine = got.narrow(a, max(step, 0), size - 1)
            theirs = want.narrow(a, max(-step, 0), size - 1)
            if _near(mine.to(want.dtype), theirs, want) and not _near(mine.to(want.dtype), want.narrow(a, max(step, 0), size - 1), want):
                return Seen(frozenset({f"shift {a - n} {step}", f"shift dim {a} {step}"}),
                            lambda k, a=a, word=word: f"along {_axis(a, n)} your output is the expected one shifted "
                            f"by one: your entry t holds the expected entry {word} (positions counted from 1, or a "
                            f"slice [1:] / [:-1] on the wrong side).")
    return None


def constant_factor(got, want, inputs):
    """got = c · want for one number c, said as √d_head, K, T, 2, -1 ... where it is one."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach().double(), want.detach().double()
    if not (torch.isfinite(g).all() and torch.isfinite(w).all()) or float(w.pow(2).sum()) == 0:
        return None
    c = float((g * w).sum() / w.pow(2).sum())
    if abs(c - 1) < 1e-9 or abs(c) < 1e-9 or not _near(g, c * w, want):
        return None
    names = {**_scalars(inputs), **_input_sizes(inputs), **{f"the size of {_axis(a, want.dim())}": float(s)
                                                            for a, s in enumerate(want.shape) if s > 1}}
    keys = {k for k, v in SMALL.items() if math.isclose(c, v, rel_tol=1e-6)}
    for name, value in names.items():
        for power, label in ((1, name), (0.5, f"√{name}"), (-1, f"1/{name}"), (-0.5, f"1/√{name}")):
            if value > 0 and math.isclose(c, value ** power, rel_tol=1e-6):
                keys.add(label)
    if not keys and abs(c - 1) < 0.01:                  # within 1 % of 1 and no number of the test's: not a scale
        return None
    keys = keys or {f"{c:.4g}"}                        # 4 digits: a float32 input rounds the 7th
    return Seen(frozenset(keys), lambda k: _say_factor(c, k, names))


def _input_sizes(inputs: dict) -> dict[str, float]:
    """{"q.shape[-1]": 4.0, ...}: the sizes of the test's input tensors, counted from the end."""
    return {f"{n}.shape[{a - x.dim()}]": float(s) for n, x in inputs.items() if isinstance(x, torch.Tensor)
            for a, s in enumerate(x.shape) if s > 1}


def _say_factor(c: float, key: str, names: dict) -> str:
    base = key.lstrip("1/").lstrip("√")
    value = f" = {c:.6g}" if key != f"{c:.4g}" else ""
    with_value = f" ({base} = {names[base]:g})" if base in names else ""
    said = f"your output is exactly the expected one times {key}{value}{with_value}"
    if key == "-1":
        return said + ": a sign flipped (a difference taken the wrong way round, or a minus missing or extra)."
    if base in names:
        root = "√" if "√" in key else ""
        return said + (f": a division by {root}{base} made twice or never (or a multiplication in its place).")
    if "ln 2" in key:
        return said + ": a logarithm in the wrong base (log2 or log10 where the natural log is meant, or the other way)."
    if key in SMALL:
        return said + ": a factor of this size too many or too few (a 1/2 dropped, a sum counted twice?)."
    return said.replace(f"times {key}", f"times {c:.6g}") + ": a scale applied twice, never, or the wrong one."


ELEMENTWISE = {"the logarithm": torch.log, "the exponential": torch.exp, "the square": torch.square,
               "the square root": torch.sqrt, "the reciprocal (one over)": torch.reciprocal}


def elementwise_function(got, want, inputs):
    """got = f(want) for a function such as log or exp: one step applied too many or too few."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach().double(), want.detach().double()
    for name, f in ELEMENTWISE.items():
        with torch.no_grad():
            fw = f(w)
        finite = torch.isfinite(fw)
        if float(finite.double().mean()) < 0.9 or _near(fw, w, want):
            continue
        if _near(g[finite], fw[finite], want) and bool((~torch.isfinite(g[~finite])).all()):
            return Seen(frozenset({name}), lambda k, name=name: f"your output is exactly {name} of the expected one"
                        f"{' (a log-softmax, say, where the softmax itself is asked)' if name == 'the logarithm' else ''}"
                        f": one step applied too many, or one left out.")
    return None


def constant_offset(got, want, inputs):
    """got = want + c for one number c."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    d = (got.detach().double() - want.detach().double())
    if not torch.isfinite(d).all():
        return None
    c = float(d.mean())
    if c == 0 or not _near(got.detach().double(), want.detach().double() + c, want):
        return None
    keys = {n for n, v in _scalars(inputs).items() if math.isclose(c, v, rel_tol=1e-6)}
    keys = keys or {f"{c:.4g}"}
    return Seen(frozenset(keys), lambda k: f"your output is exactly the expected one plus {c:.6g}"
                f"{f' (= {k})' if k != f'{c:.4g}' else ''}, everywhere: a constant added that should not be "
                f"(or not subtracted).")


def input_term(got, want, inputs):
    """got - want = c · X, or got = want · X or want / X, for a tensor X the test passes in."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach().double(), want.detach().double()
    d = g - w
    for name, x in inputs.items():
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            continue
        try:
            x = torch.broadcast_to(x.detach().double(), w.shape)
        except RuntimeError:
            continue
        if float(x.pow(2).sum()) == 0:
            continue
        c = float((d * x).sum() / x.pow(2).sum())
        if abs(c) > 1e-9 and _near(g, w + c * x, want):
            how = "added once too often" if c > 0 else "left out"
            return Seen(frozenset({f"{c:.4g}·{name}"}),
                        lambda k, c=c, name=name, how=how: f"your output minus the expected one is exactly "
                        f"{c:.6g}·{name} ({name} being the test's input): a term in {name} {how}.")
        for op, say in ((lambda: w * x, "times"), (lambda: w / x, "divided by")):
            if bool((x != 0).all()) and _near(g, op(), want) and not _near(op(), w, want):
                return Seen(frozenset({f"{say} {name}"}),
                            lambda k, name=name, say=say: f"your output is exactly the expected one {say} the input "
                            f"{name}: a factor {name} {'too many' if say == 'times' else 'missing'}.")
    return None


MISTAKES = "(mistakes)"      # the key under which `inputs` carries the test's listed mistakes' outputs


def listed_exactly(got, want, inputs):
    """got is, to the dtype's own precision, the output of exactly one of the test's listed mistakes,
    which differs from want by more than that: a mistake the judge does not name because on this
    input it moves the values less than the looser margin it allows a mistake computed in another
    order (eps where it weighs little, a second-order term)."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach(), want.detach()
    found = [desc for desc, m in (inputs.get(MISTAKES) or {}).items()
             if isinstance(m, torch.Tensor) and m.shape == want.shape and m.is_floating_point()
             and _near(g.double(), m.detach().double(), want) and not _near(m.detach().double(), w.double(), want)]
    if len(found) != 1:                                 # two mistakes alike here: neither is told
        return None
    desc = found[0]
    return Seen(frozenset({desc}), lambda k: f"your output is, to the last digits, what this typical mistake gives "
                                             f"(on this input it changes the values only slightly): {desc}")


def listed_term(got, want, inputs):
    """A term the test knows, scaled or missing a factor: with m a listed mistake's output and
    t = want - m the part that mistake gets wrong, got = m + t / X (or t · X, or c · t) for an
    input X of the test or a number c."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach().double(), want.detach().double()
    tensors = {n: x for n, x in inputs.items() if isinstance(x, torch.Tensor) and x.is_floating_point()}
    for desc, m in (inputs.get(MISTAKES) or {}).items():
        if not isinstance(m, torch.Tensor) or m.shape != want.shape or not m.is_floating_point():
            continue
        m = m.detach().double()
        t = w - m
        if not torch.isfinite(t).all() or float(t.abs().max()) < 1e-9:
            continue
        short = desc.split(":")[0].strip()
        if float(m.abs().max()) > 1e-9 and _near(g, w - m, want):
            return Seen(frozenset({f"{short}|minus"}), lambda k, short=short:
                        f"your output is the expected one minus exactly what the mistake «{short}» computes: "
                        f"that part of the formula is missing from yours.")
        found = _term_change(g, m, t, tensors, want)
        if found:
            short = desc.split(":")[0].strip()
            return Seen(frozenset({f"{short}|{found[0]}"}), lambda k, short=short, how=found[1], verdict=found[2]:
                        f"your output is what the mistake «{short}» gives, plus the part that mistake leaves "
                        f"out {how}: that term is there, {verdict}.")
    return None


def _term_change(g, m, t, tensors, want):
    """(key, how, what it means) for g = m + t changed by one factor, else None."""
    for name, x in tensors.items():
        try:
            x = torch.broadcast_to(x.detach().double(), t.shape)
        except RuntimeError:
            continue
        ok = x.abs() > 1e-6 * float(x.abs().max())      # where t / x means something
        if float(ok.double().mean()) < 0.9 or _near(x, torch.ones_like(x), want):
            continue
        if _near(g[ok], (m + t / x)[ok], want):
            return f"/{name}", f"divided by {name}", f"without its factor {name}"
        if _near(g, m + t * x, want):
            return f"*{name}", f"times {name}", f"with a factor {name} too many"
    c = float(((g - m) * t).sum() / t.pow(2).sum())
    name = next((name for name, v in SMALL.items() if math.isclose(c, v, rel_tol=1e-6)), None)
    if name is not None and _near(g, m + c * t, want):     # another scale is a coincidence, not a reading
        return f"c{c:.4g}", f"times {name} = {c:.6g}", f"scaled by {name} = {c:.6g}"
    return None


def row_against_column(got, want, inputs):
    """On square last axes, the error at [i, j] is u[i] - u[j] (or u[i] / u[j]) wherever the
    expected entry is not zero, and both are zero elsewhere: a per-row value taken without
    keepdim=True lines up with the columns."""
    if not _floats(got, want) or got.shape != want.shape or got.dim() < 2:
        return None
    n = got.shape[-1]
    if n < 3 or got.shape[-2] != n:
        return None
    g, w = got.detach().double(), want.detach().double()
    zero = w == 0
    if not torch.equal(g == 0, zero) or bool(zero.all()):
        return None
    for d in (g - w, _log_ratio(g, w)):
        if d is None or not torch.isfinite(d[~zero]).all() or float(d[~zero].abs().max()) < 1e-9:
            continue
        for c in (0, n - 1):                                # a column with every row's entry
            if bool(zero[..., :, c].any()):
                continue
            u = d[..., :, c:c + 1]                          # (..., n, 1): d[i, c] = u_i - u_c
            if _near(torch.where(zero, 0.0, d), torch.where(zero, 0.0, u - u.transpose(-2, -1)), want):
                return Seen(frozenset({"keepdim"}), _say_keepdim)
    return None


def _say_keepdim(key: str) -> str:
    return ("the error of your output at [i, j] is a value of row i against the same value of row j: a statistic "
            "of each row taken without keepdim=True lines up with the columns (the last axis) instead of its own "
            "row; keepdim=True keeps it as (..., 1).")


def _log_ratio(g, w):
    """log(g / w) where w is not zero (both are zero elsewhere); None where a ratio is not positive."""
    nz = w != 0
    if bool(((g[nz] / w[nz]) <= 0).any()):
        return None
    return torch.where(nz, torch.log(torch.where(nz, g, 1.0) / torch.where(nz, w, 1.0)), 0.0)


def slightly_off(got, want, inputs):
    """got agrees with want to a fraction of a percent everywhere, but not to the tolerance. Said
    as float32 on the way only where every entry (but a few, where terms cancel) is within a few
    float32 roundings of its own size; as a constant slightly off only where the output is off by
    about the same fraction on both inputs, as one mistyped constant makes it (a term that depends
    on the test's numbers, such as lr·weight_decay, is off by a different fraction on each)."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    g, w = got.detach().double(), want.detach().double()
    if not (torch.isfinite(g).all() and torch.isfinite(w).all()):
        return None
    scale = max(float(w.abs().max()), 1e-12)
    worst = float((g - w).abs().max()) / scale
    if not 0 < worst <= 1e-4:
        return None
    if want.dtype == torch.float64 and worst <= 6e-7 and _float32_roundings(g, w):
        return Seen(frozenset({"float32 inside"}),
                    lambda k: f"your output agrees with the expected one everywhere to {worst:.2g} of its largest value, "
                              f"and each entry to a few float32 roundings of its own size: float32's precision, not "
                              f"float64's. Some value on the way is float32 (x.float(), torch.float32 written out, or a "
                              f"tensor made without dtype=); keep the input's dtype, or widen with "
                              f"torch.promote_types(x.dtype, torch.float32).",
                    "compute in torch.promote_types(x.dtype, torch.float32), which keeps float64 as it is")
    e = math.floor(math.log2(worst))        # fractions within a factor of 4 always share a key, 8 apart never
    return Seen(frozenset(f"close 2^{e + d}" for d in (-1, 0, 1)),
                lambda k: f"your output agrees with the expected one everywhere to {worst:.2g} of its largest value, "
                          f"but not to the tolerance, and is off by about that fraction on another input too: the "
                          f"formula is all but the expected one, and a constant in it is slightly off (typed with too "
                          f"few digits, say 0.0447 for 0.044715?).")


FLOAT32_ROUNDING = 2.0 ** -24          # float32's relative rounding error, at most


def _float32_roundings(g: torch.Tensor, w: torch.Tensor) -> bool:
    """Nine entries in ten (or more) of g are within 8 float32 roundings of w, relative to their own
    size: what a float32 value on the way leaves. A term changed in the formula leaves larger
    relative errors on the entries it weighs most on, however small the largest error is."""
    size = torch.maximum(g.abs(), w.abs())
    beyond = (g - w).abs() > 8 * FLOAT32_ROUNDING * size
    return float(beyond.double().mean()) <= 0.1


def large_input_rounding(got, want, inputs):
    """got differs from want by no more than float32's rounding of numbers as large as the largest
    input, far more than float32's rounding of the output itself: digits lost in a difference of large
    numbers (exp(x - lse) with x near 10,000, where exp(x - max) / sum keeps them)."""
    if not _floats(got, want) or got.shape != want.shape or got.dtype != torch.float32:
        return None
    g, w = got.detach().double(), want.detach().double()
    if not (torch.isfinite(g).all() and torch.isfinite(w).all()):
        return None
    size = max((float(x.detach().abs().max()) for x in inputs.values() if isinstance(x, torch.Tensor)
                and x.is_floating_point() and x.numel() and bool(torch.isfinite(x).all())), default=0.0)
    scale, worst = max(float(w.abs().max()), 1e-30), float((g - w).abs().max())
    step = size * FLOAT32_ROUNDING                      # float32's rounding at the inputs' size
    if not (size > 256 * scale and worst <= 64 * step and worst > 64 * FLOAT32_ROUNDING * scale):
        return None
    return Seen(frozenset({"large inputs"}), lambda k: (
        f"your output is off by at most {worst:.2g}, about float32's rounding of numbers as large as the inputs "
        f"(up to {size:.3g}, where float32 keeps steps of {2 * step:.1g}), far more than the rounding of the output's "
        f"own values: digits lost in a difference of large numbers (x - lse, or a sum of large values taken "
        f"before subtracting); subtract each row's max first, as the stable softmax does."), exact=True)


HALF_ROUNDING = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}   # relative rounding error, at most


def half_precision(got, want, inputs):
    """got agrees with want as closely as float16 (or bfloat16) numbers can, and no more: nine entries
    in ten within a few of that type's roundings of their own size, the worst within a few dozen."""
    if not _floats(got, want) or got.shape != want.shape or want.dtype not in (torch.float32, torch.float64):
        return None
    g, w = got.detach().double(), want.detach().double()
    if not (torch.isfinite(g).all() and torch.isfinite(w).all()):
        return None
    scale = max(float(w.abs().max()), 1e-12)
    worst = float((g - w).abs().max()) / scale
    size, d = torch.maximum(g.abs(), w.abs()), g - w
    moved = int((d != 0).sum())
    if moved < 8 or not 0.1 <= float((d > 0).sum()) / moved <= 0.9:   # rounding goes both ways; a changed formula one
        return None
    relative = (d.abs() / size.clamp(min=1e-300)).median()
    given = max((float(x.detach().abs().max()) for x in inputs.values() if isinstance(x, torch.Tensor)
                 and x.is_floating_point() and x.numel() and bool(torch.isfinite(x).all())), default=0.0)
    if worst <= 64 * FLOAT32_ROUNDING * given / scale:    # float32's own rounding at the inputs' size explains it
        return None
    for name, eps in HALF_ROUNDING.items():
        if eps / 16 < worst <= 64 * eps and float(relative) <= eps and \
                float((d.abs() > 16 * eps * size).double().mean()) <= 0.1:
            return Seen(frozenset({name}), lambda k, name=name, eps=eps: (
                f"your output agrees with the expected one to about {name}'s precision and no better (the worst entry "
                f"off by {worst:.2g} of the largest value; {name} rounds to {eps:.2g} of a number's size): some value "
                f"on the way is {name} (.half(), .to(torch.{name}), a buffer made as {name}, autocast), where the "
                f"input's {str(want.dtype).removeprefix('torch.')} belongs."))
    return None


def returned_input(got, want, inputs):
    """got is, bit for bit, one of the test's input tensors, where want differs from it."""
    if not _tensors(got, want):
        return None
    same = [n for n, x in inputs.items() if isinstance(x, torch.Tensor) and x.shape == got.shape
            and x.dtype == got.dtype and bool((x == got).all()) and not _near(x.double(), want.double(), want)]
    if not same:
        return None
    return Seen(frozenset(same), lambda k: f"your output is the input {k} itself, unchanged: the work on it never "
                                           f"happened here (an early `return`, or a branch that skips it?).", exact=True)


def values_for_indices(got, want, inputs):
    """got holds the entries of an input at the expected indices (or an input dict's value for the
    expected key): the values where their positions are asked for, max's values for argmax."""
    given = [*inputs.items()] + ([(f"argument {i + 1}", a) for i, a in enumerate(inputs[CALL].args)]
                                 if inputs.get(CALL) is not None else [])
    for name, x in given:
        if isinstance(x, dict) and _key_like(want) and want in x and _equal_value(x[want], got):
            return Seen(frozenset({"key"}), lambda k: "your output is the value the input dict holds for the expected key "
                        "(its count), where the key itself is asked for: max(d, key=d.get) gives the key, "
                        "max(d.values()) its value.", exact=True)
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)) or want.is_floating_point() \
            or not got.is_floating_point() or got.shape != want.shape or want.numel() == 0:
        return None
    for name, x in given:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() == want.dim() \
                and x.shape[:-1] == want.shape[:-1] and 0 <= int(want.min()) and int(want.max()) < x.shape[-1] \
                and _near(got, x.gather(-1, want.long()).to(got.dtype), got):
            return Seen(frozenset({"indices"}), lambda k: "your output holds the entries of the input at the expected "
                        "indices: the values themselves where their positions are asked for (max(...).values or "
                        "topk(...).values where argmax or topk(...).indices belong).", exact=True)
    return None


def _key_like(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return not isinstance(value, (torch.Tensor, float))


def _equal_value(a, b) -> bool:
    return type(a) in (int, float) and type(b) in (int, float) and a == b


def wrong_beyond_a_threshold(got, want, inputs):
    """An elementwise output right for every entry whose input x (of the output's shape) lies below a
    bound and wrong for most of those beyond it (some may happen to be right there): a special case,
    a cut-off or a clamp on x."""
    if not _floats(got, want) or got.shape != want.shape:
        return None
    at, rt = FLOAT_TOL.get(want.dtype, (1e-6, 1e-5))
    wrong = ~torch.isclose(got.detach().double(), want.detach().double(), rtol=rt, atol=at)
    n = wrong.numel()
    if not bool(wrong.any()) or bool(wrong.all()):
        return None
    best = None
    for name, x in inputs.items():
        if not isinstance(x, torch.Tensor) or x.shape != got.shape or not x.is_floating_point():
            continue
        for side, v in (("|x| ≥ ", x.abs()), ("x ≥ ", x), ("x ≤ ", -x)):
            v = v.detach().double()
            bound = float(v[wrong].min())
            beyond = v >= bound
            share = float(wrong[beyond].double().mean())
            if share >= 0.6 and int((~beyond).sum()) >= 0.2 * n and (best is None or share > best[0]):
                best = (share, side.replace("x", name), -bound if side == "x ≤ " else bound, name)
    if best is None:
        return None
    share, key, bound, name = best
    return Seen(frozenset({key}), lambda k: (
        f"your output is right for every entry short of {key}{bound:.3g} and wrong for {share:.0%} of those with "
        f"{key}{bound:.3g}: a special case, a cut-off or a clamp on {name} from there on?"))


def items_offset(got, want, inputs):
    """Integers (a list, a tuple or an integer tensor) whose every item is the expected one plus the
    same c: ids counted from 1, or an offset added or forgotten."""
    got, want = (x.flatten().tolist() if isinstance(x, torch.Tensor) and not x.is_floating_point() else x
                 for x in (got, want))
    if not (isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)) and len(got) == len(want) > 1
            and all(type(v) is int for v in (*got, *want))):
        return None
    gaps = {g - w for g, w in zip(got, want)}
    if len(gaps) != 1 or 0 in gaps:
        return None
    c = gaps.pop()
    why = "ids counted from 1 where they count from 0, or a + 1 too many" if c == 1 else f"an offset of {c} added"
    return Seen(frozenset({f"{c:+d}"}), lambda k: f"every item of yours is the expected one {c:+d}: {why}?",
                exact=True)


def all_zero(got, want, inputs):
    """Every entry of got is 0 where want has other values."""
    if not _floats(got, want) or got.shape != want.shape or bool((want == 0).all()) or bool((got != 0).any()):
        return None
    return Seen(frozenset({"zeros"}), lambda k: "every entry of your output is 0, where the expected one has values: "
                "nothing reached it (a buffer read where nothing was written, or written somewhere else; a product "
                "with zeros).", exact=True)


def _text_decoded_per_token(got, want, inputs):
    """A text with U+FFFD where the expected one has characters beyond ASCII."""
    if not (isinstance(got, str) and isinstance(want, str)) or "\ufffd" not in got or "\ufffd" in want \
            or all(ord(ch) < 128 for ch in want):
        return None
    return Seen(frozenset({"per token"}),
                lambda k: "your text has � (U+FFFD) where the expected one has a character beyond ASCII: the bytes "
                          "were decoded one token at a time, so a character whose UTF-8 bytes span two tokens is "
                          "cut; join all the bytes first and decode once.")


def _sequence_edge(got, want, inputs):
    """A list that is the expected one reversed, or without its first or last item, or with one more."""
    if not (isinstance(got, (list, tuple)) and isinstance(want, (list, tuple))) or len(want) < 2:
        return None
    got, want = list(got), list(want)
    stops = 0 < len(got) < len(want) - 1 and got == want[:len(got)]
    for key, ok in (("reversed", got == want[::-1] and want != want[::-1]), ("first dropped", got == want[1:]),
                    ("last dropped", got == want[:-1]), ("one more", got[:-1] == want or got[1:] == want),
                    ("stops", stops)):
        if ok:
            return Seen(frozenset({key}), lambda k: {
                "reversed": "your list is the expected one in reverse order.",
                "first dropped": "your list is the expected one without its first item (a range or slice starting one late).",
                "last dropped": "your list is the expected one without its last item (a range or slice ending one early).",
                "one more": "your list is the expected one with one item too many (a range or slice one too long).",
                "stops": f"your list is the expected one's first {len(got)} items, then stops: the loop ended early (a "
                         f"return or break inside the loop, indented one level too deep?)."}[k])
    return None


def integer_gap(got, want, inputs):
    """Two whole numbers (a count, a size in bytes) apart by a product of the sizes a config the test
    passes holds (n_layers × d_ff), or one a whole multiple of the other by such a size (× n_heads).
    The keys sort the simplest account first: a ratio, then the fewest sizes (the fewest different ones:
    d_model × d_model before d_ff × d_head) with the smallest factor."""
    if type(got) is not int or type(want) is not int or got == want or want == 0:
        return None
    sizes = _config_sizes(inputs)
    found = {}
    pairs = {(a, b): sizes[a] // sizes[b] for a, b in itertools.permutations(sizes, 2)
             if sizes[a] > sizes[b] and sizes[a] % sizes[b] == 0}
    for name, v in sizes.items():
        if got == want * v or got * v == want:
            also = [pair for pair, r in pairs.items() if r == v]
            names = " = ".join([n for n, u in sizes.items() if u == v] + [f"{a} / {b}" for a, b in also[:2]])
            guess = f": {also[0][0]} where {also[0][1]} belongs?" if also else ""
            found[f"0 {'×' if got > want else '÷'} {name}"] = (
                f"yours is {v:,} times the expected {want:,} ({v:,} = {names}{guess})." if got > want else
                f"yours is the expected {want:,} divided by {v:,} ({v:,} = {names}{guess}).")
    for (a, b), r in pairs.items():
        if got == want * r and not any(v == r for v in sizes.values()):
            found[f"1 × {a} / {b}"] = f"yours is {a} / {b} = {r} times the expected {want:,}: {a} where {b} belongs?"
    gap, more = abs(got - want), "more" if got > want else "fewer"
    for k, c in itertools.product((1, 2, 3), (1, 2, 3, 4)):     # n_layers × d_model × d_model: a layer's matrix
        for names in itertools.combinations_with_replacement(sorted(sizes), k):
            if c * math.prod(sizes[n] for n in names) == gap:
                said = " × ".join(([str(c)] if c > 1 else []) + list(names))
                numbers = " × ".join(([str(c)] if c > 1 else []) + [f"{sizes[n]:,}" for n in names])
                found[f"{k + 1}{len(set(names))}{c} {said}"] = f"yours is {gap:,} {more} than expected: {said} ({numbers})."
    return Seen(frozenset(found), lambda k: found[k]) if found else None


def _config_sizes(inputs: dict) -> dict[str, int]:
    """The whole-number sizes (over 1) of every config (a dataclass) among the test's inputs, by
    field or property name: {"n_layers": 12, "d_ff": 3072, "d_head": 64, ...}."""
    out = {}
    for value in inputs.values():
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            continue
        names = [f.name for f in dataclasses.fields(value)]
        names += [n for n in dir(type(value)) if isinstance(getattr(type(value), n, None), property)]
        for name in names:
            v = getattr(value, name, None)
            if type(v) is int and v > 1:
                out.setdefault(name, v)
    return out


# From the most particular to the most general: the first that sees something is the one said.
RELATIONS = (all_zero, returned_input, values_for_indices, dtype_narrowing, listed_exactly, input_in_another_place,
             weights_in_another_place, function_swapped,
             extra_or_missing_axis, diagonal_only, one_slice,
             joined_on_a_new_axis, elementwise_product, swapped_axes, reshaped_across_axes, sizes_reordered,
             only_some_entries_unset, kept_other_axes,
             part_of_an_axis, inverted_mask, normalised_over_axis,
             shifted_by_one, constant_factor, row_factor, elementwise_function, constant_offset, input_term, listed_term,
             intermediate_returned, step_redone, row_against_column, right_except_along, wrong_beyond_a_threshold,
             large_input_rounding, half_precision, slightly_off,
             integer_gap, items_offset, _text_decoded_per_token, _sequence_edge)


def seen(got, want, inputs: dict | None = None) -> list[tuple[Callable, Seen]]:
    """Every relation the checks see on one input, most particular first. Where got is within the
    dtype's own tolerance of want (a test held tighter than that), no factor or term can be told
    apart from rounding: only the closeness is said."""
    out = []
    close = _floats(got, want) and got.shape == want.shape and _near(got, want, want)
    for check in ((dtype_narrowing, slightly_off) if close else RELATIONS):
        try:
            found = check(got, want, inputs or {})
        except Exception:                               # noqa: BLE001 - an odd output describes nothing
            found = None
        if found is not None:
            out.append((check, found))
            if check is all_zero:                       # zeros fit many relations: say only what is seen
                break
    return out


def _apart_from(got, inputs: dict | None) -> dict:
    """inputs without the tensors that share memory with got (the test's own output buffer, which
    a kernel fills): they are what the learner's code wrote, not what it read."""
    if not isinstance(got, torch.Tensor) or not inputs:
        return inputs or {}
    mine = got.untyped_storage().data_ptr()
    return {n: x for n, x in inputs.items()
            if not (isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == mine)}


def relate(got, want, inputs: dict | None, seconds) -> Relation | None:
    """The relation seen on this input and again on the second, with a key in common.

    seconds: [(ran, learner's output there, want there, inputs there)] for the other inputs where
    the learner's output is wrong, in order; the first of them decides."""
    inputs = _apart_from(got, inputs)
    seconds = ((ran, g2, w2, _apart_from(g2, i2)) for ran, g2, w2, i2 in seconds)   # lazy: each runs learner code
    here = seen(got, want, inputs)
    if not here:
        return None
    if here[0][1].exact:                                # an exact observation needs no second input
        return Relation(here[0][1].say(min(here[0][1].keys, key=_rank)), here[0][1].fix)
    for ran, got2, want2, inputs2 in seconds:
        if not ran:
            continue
        there = dict((check, found) for check, found in seen(got2, want2, inputs2))
        for check, found in here:
            common = found.keys & there[check].keys if check in there else frozenset()
            if common:
                return Relation(found.say(min(common, key=_rank)), found.fix)
        return None
    exact = next((found for _, found in here if found.exact), None)     # no other input is wrong: only the exact
    return Relation(exact.say(sorted(exact.keys)[0]), exact.fix) if exact is not None else None


def _rank(key: str) -> tuple:
    """Which of several keys to say: a number the test names, then a size of its inputs, then a
    plain constant, then a size of the output (which small constants often equal by chance)."""
    return ("the size of" in key, key in SMALL, ".shape[" in key, key)


def inputs_of(call) -> dict[str, Any]:
    """The numbers, tensors and configs (dataclasses) a test's call closes over, by name ({"d_head": 16,
    "x": tensor, "cfg": ModelConfig(...)}); a tuple's items as name[i]."""
    out: dict[str, Any] = {}
    code, cells = getattr(call, "__code__", None), getattr(call, "__closure__", None) or ()
    if code is None:
        return out
    values = []
    for name, cell in zip(code.co_freevars, cells):
        try:
            values.append((name, cell.cell_contents))
        except ValueError:                              # a cell not filled yet
            continue
    defaults = getattr(call, "__defaults__", None) or ()          # lambda x=x: ... binds by default
    params = code.co_varnames[:code.co_argcount]
    values += list(zip(params[len(params) - len(defaults):], defaults))
    for name, value in values:
        items = [(f"{name}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, tuple) else [(name, value)]
        for n, v in items:
            if isinstance(v, torch.Tensor) or (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
                    dataclasses.is_dataclass(v) and not isinstance(v, type)):
                out[n] = v
    return out
