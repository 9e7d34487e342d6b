"""A graded function piece leaves its arguments as it found them.

Every function piece of the course returns its result: `tok += pos` inside add_positions, a
`masked_fill_` on the scores, `m.mul_(beta1)` inside adamw_step or `ids.pop()` inside merge_pair
write into the caller's tensor or list, which a test comparing only the returned value never
sees, and which corrupts the caller's copy (the embedding table, the optimizer's state) later.
Overlay.isolated hands the graded tests each function piece wrapped by keeps_inputs: it copies
the tensors and plain containers passed in, calls the piece, and raises InPlaceError naming the
argument the piece changed and, when the piece's source shows one, the line that changes it; a
module class's own forward is wrapped the same way for its tensor arguments. Triton kernels (which
write their output through a pointer by design) are not wrapped.

Training goes through the pieces too: where an argument requires grad, a piece whose output is cut
off from autograd raises CutOffError, and one whose gradient is not the slope of its own values
(part of it hidden from autograd: a detached statistic, padding_idx) raises GradientError; a module
whose output on the graph never reaches one of its own parameters (.data on a table) raises
CutOffError too; each names the first line of the piece that can do that.
"""
from __future__ import annotations

import ast
import copy
import functools
import inspect
import linecache
import math

import torch


class InPlaceError(Exception):
    """A piece changed an argument in place; the message names the piece, the argument and the line."""


class CutOffError(Exception):
    """A piece's output does not require grad although an input it was computed from does: the
    output was cut off from autograd (.detach(), .data, torch.no_grad(), a trip through NumPy)."""


class GradientError(Exception):
    """Autograd's gradient of a piece's output is not the slope of its values: part of it is hidden
    from autograd (.detach() on a statistic, padding_idx), so training would follow another gradient."""


MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "sort",
            "reverse", "popitem", "discard", "add"}


def _copyable(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, dict, set, bytearray)):
        return True
    return isinstance(value, tuple) and any(_copyable(v) for v in value)


def _same(old, new) -> bool:
    if isinstance(old, torch.Tensor):
        if not (isinstance(new, torch.Tensor) and old.shape == new.shape and old.dtype == new.dtype
                and old.requires_grad == new.requires_grad):
            return False
        new = new.detach()
        equal = old == new
        if old.is_floating_point() or old.is_complex():
            equal |= old.isnan() & new.isnan()
        return bool(equal.all())
    if isinstance(old, (list, tuple)):
        return type(old) is type(new) and len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new))
    if isinstance(old, dict):
        return (isinstance(new, dict) and old.keys() == new.keys()
                and all(_same(old[k], new[k]) for k in old))
    return old == new


def _snapshot(value):
    with torch.no_grad():
        if isinstance(value, torch.Tensor):
            return value.detach().clone().requires_grad_(value.requires_grad)   # the flag is the caller's too
        return copy.deepcopy(value)


def _root(node) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _writes(node, arg: str) -> bool:
    """Whether a statement or call writes into `arg` itself (not into a new value bound to its name)."""
    if isinstance(node, ast.AugAssign):
        return _root(node.target) == arg
    if isinstance(node, ast.Assign):
        return any(isinstance(t, (ast.Subscript, ast.Attribute)) and _root(t) == arg for t in node.targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        inplace = (method.endswith("_") and not method.startswith("_")) or method in MUTATING
        return inplace and _root(node.func.value) == arg
    return False


def _check_graph(fn, tracked: list, out, name: str) -> None:
    """CutOffError when arguments required grad (`tracked`, before the call) and the floating-point
    output (or every floating-point tensor of a tuple or list it returns) does not."""
    outs = _float_tensors(out)
    if tracked and torch.is_grad_enabled() and outs and not any(t.requires_grad for t in outs):
        line = cutting_line(fn)
        raise CutOffError(f"your {name}'s output is cut off from autograd although {tracked[0]!r} requires grad: "
                          f"no gradient can flow back through it ("
                          + (f"the first line that can do that: {line}" if line else
                             "a .detach(), .data, torch.no_grad() or a trip through NumPy on the way") + ")")


def _check_parameters(fn, bound: dict, out, name: str) -> None:
    """CutOffError when a module's forward gives an output on autograd's graph that one of the
    module's own trainable parameters never reaches, and the forward's source has a line that can
    cut it off (.data or .detach() on it): it would never learn. A parameter the forward never uses
    changes its values, which the tests compare."""
    module = next(iter(bound.values()), None)
    outs = [t for t in _float_tensors(out) if t.requires_grad]
    if not isinstance(module, torch.nn.Module) or not outs or not torch.is_grad_enabled():
        return
    reached = _leaves_reached(outs)
    cut = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in reached]
    line = cutting_line(fn) if cut else None
    if line:
        raise CutOffError(f"your {name}'s output does not reach its parameter {cut[0]!r} through autograd: no "
                          f"gradient flows back to it, so it never learns (the first line that can do that: {line})")


def _leaves_reached(outs: list) -> set[int]:
    """ids of the leaf tensors (parameters) autograd's graph of outs accumulates gradients into."""
    found, seen = {id(t) for t in outs if t.is_leaf}, set()
    stack = [t.grad_fn for t in outs if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            found.add(id(node.variable))
        stack.extend(n for n, _ in node.next_functions)
    return found


def _float_tensors(out) -> list:
    return [t for t in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _check_gradient(fn, bound: dict, tracked: list, out, name: str, rng) -> None:
    """GradientError when the gradient autograd gives for the piece's output is not the slope of
    the piece's own values, along one random direction of the tracked arguments (float64 only)."""
    if not _float_tensors(out) or any(bound[arg].dtype != torch.float64 for arg in tracked):
        return
    slopes = _slopes(fn, bound, tracked, out, rng)
    if slopes is None:
        return
    autograd, numeric, noise = slopes
    if _close(autograd, numeric, noise):
        return
    line = cutting_line(fn)
    raise GradientError(f"your {name} gives values whose gradient autograd gets wrong (with respect to "
                        f"{' or '.join(map(repr, tracked))}): part of the computation is hidden from autograd or "
                        f"its gradient is changed ("
                        + (f"the first line that can do that: {line}" if line else
                           "a .detach() or .data on part of it, padding_idx, a custom backward")
                        + "), so training would follow another gradient than the slope of your values")


def _slopes(fn, bound: dict, tracked: list, out, rng) -> tuple[float, float, float] | None:
    """(autograd's slope, the slope by central differences of the piece itself, the latter's rounding noise) of a
    random weighting of the output's finite entries along a random direction u of the tracked
    arguments. The differences are taken at two steps and extrapolated (Richardson); None where the
    piece cannot run again, is not finite there, or the two steps disagree (a slope too curved to
    resolve: a wrong value's curvature is no wrong gradient). Every call draws the
    random numbers the first drew (torch's generator set back to `rng`, the state before it)."""
    g = torch.Generator().manual_seed(0)
    keep = [t.detach().isfinite() for t in _float_tensors(out)]
    weights = [torch.randn(k.shape, generator=g, dtype=torch.float64).where(k, 0.0) for k in keep]
    u = [torch.randn(bound[arg].shape, generator=g, dtype=torch.float64) for arg in tracked]

    def weighted(got) -> torch.Tensor:
        return sum((t.double().where(k, 0.0) * w).sum() for t, k, w in zip(_float_tensors(got), keep, weights))

    def again(step: float) -> torch.Tensor:
        torch.random.set_rng_state(rng)
        moved = {arg: bound[arg].detach() + step * d for arg, d in zip(tracked, u)}
        return weighted(fn(**{**bound, **moved}))
    grads = torch.autograd.grad(weighted(out), [bound[arg] for arg in tracked], allow_unused=True, retain_graph=True)
    pairs = [(gr.double(), d) for gr, d in zip(grads, u) if gr is not None]
    after, eps = torch.random.get_rng_state(), 1e-3        # wide enough for a piece that computes in float32
    try:
        with torch.no_grad():
            wide, narrow = (float((again(h) - again(-h)) / (2 * h)) for h in (eps, eps / 4))
    except Exception:                                    # noqa: BLE001 - a piece that cannot run again says nothing
        return None
    finally:
        torch.random.set_rng_state(after)
    size = float(sum((t.detach().double().where(k, 0.0) * w).abs().sum() for t, k, w in zip(_float_tensors(out), keep, weights)))
    noise = 1e-7 * size / (eps / 4)                      # float32's rounding over the step: a float32 piece's noise
    if not (math.isfinite(wide) and math.isfinite(narrow)) or not _close(wide, narrow, noise):
        return None                                      # the slope not resolved at these steps: nothing to judge
    autograd = float(sum((gr * d).sum() for gr, d in pairs)) if pairs else 0.0
    return autograd, narrow + (narrow - wide) / 15, noise   # Richardson: the steps' error, O(h²), taken out


def _close(a: float, b: float, noise: float) -> bool:
    return abs(a - b) <= 1e-2 * (abs(a) + abs(b)) + noise


def keeps_forward_inputs(cls, name: str):
    """The module class `cls`, its own forward wrapped by keeps_inputs on tensor arguments."""
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and "forward" in vars(cls):
        cls.forward = keeps_inputs(vars(cls)["forward"], f"{name}.forward", tensors_only=True)
    return cls


def writing_line(fn, arg: str) -> str | None:
    """'file.py, line N: code' of the first line in fn's source that writes into `arg`, if any."""
    return _first_line(fn, lambda node: _writes(node, arg))


# What cuts a value off from autograd, or changes its gradient, as a piece's source shows it.
_CUTTING_ATTRIBUTES = {"data", "detach", "detach_", "numpy", "item", "tolist"}
_CUTTING_CALLS = {"no_grad", "inference_mode", "set_grad_enabled"}
_CUTTING_KEYWORDS = {"padding_idx", "max_norm"}
_OUTSIDE_AUTOGRAD = {"np", "numpy", "math"}


def _cuts(node) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in _CUTTING_ATTRIBUTES or (node.attr in _CUTTING_CALLS and _root(node) == "torch") \
            or (isinstance(node.value, ast.Name) and node.value.id in _OUTSIDE_AUTOGRAD)
    return isinstance(node, ast.keyword) and node.arg in _CUTTING_KEYWORDS


def cutting_line(fn) -> str | None:
    """'file.py, line N: code' of the first line in fn's source that cuts a value off from autograd
    or changes its gradient (.detach(), .data, .numpy(), .item(), torch.no_grad(), np.* or math.*,
    padding_idx), if any."""
    return _first_line(fn, _cuts)


def _first_line(fn, found) -> str | None:
    """'file.py, line N: code' of the first node of fn's own source for which found(node) holds."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    text = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == code.co_firstlineno:
            hits = sorted((sub.lineno, sub.col_offset) for sub in ast.walk(node) if found(sub) and hasattr(sub, "lineno"))
            if hits:
                line = linecache.getline(code.co_filename, hits[0][0]).strip()
                return f"{code.co_filename.rsplit('/', 1)[-1]}, line {hits[0][0]}: {line}"
    return None


def keeps_inputs(fn, name: str, tensors_only: bool = False):
    """fn, raising InPlaceError when a call changes a tensor or container argument in place (with
    tensors_only, tensor arguments alone: a module's forward may be handed a cache to grow),
    CutOffError when an argument required grad and the floating-point output does not, and
    GradientError when autograd's gradient of the output is not the slope of the piece's own values
    (judged on float64 arguments; a piece that draws random numbers from torch's global generator
    draws the same ones at every call of the check)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return fn(*args, **kwargs)              # the piece's own call raises the clear error
        copied = (lambda v: isinstance(v, torch.Tensor)) if tensors_only else _copyable
        before = {arg: _snapshot(value) for arg, value in bound.items() if copied(value)}
        tracked = [arg for arg, v in bound.items() if isinstance(v, torch.Tensor) and v.requires_grad]
        rng = torch.random.get_rng_state() if tracked else None
        out = fn(*args, **kwargs)
        for arg, old in before.items():
            if not _same(old, bound[arg]):
                line = writing_line(fn, arg)
                raise InPlaceError(f"your {name} changed its argument {arg!r} in place"
                                   + (f" ({line})" if line else "")
                                   + ": it must leave its inputs as they were and return a new value")
        _check_graph(fn, tracked, out, name)
        _check_parameters(fn, bound, out, name)
        if rng is not None and torch.is_grad_enabled() and not any(isinstance(v, torch.Generator) for v in bound.values()):
            _check_gradient(fn, bound, tracked, out, name, rng)
        return out
    return checked
