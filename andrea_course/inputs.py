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
"""
from __future__ import annotations

import ast
import copy
import functools
import inspect
import linecache

import torch


class InPlaceError(Exception):
    """A piece changed an argument in place; the message names the piece, the argument and the line."""


class CutOffError(Exception):
    """A piece's output does not require grad although an input it was computed from does: the
    output was cut off from autograd (.detach(), .data, torch.no_grad(), a trip through NumPy)."""


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


def _check_graph(tracked: list, out, name: str) -> None:
    """CutOffError when arguments required grad (`tracked`, before the call) and the floating-point
    output does not."""
    if (tracked and torch.is_grad_enabled() and isinstance(out, torch.Tensor) and out.is_floating_point()
            and not out.requires_grad):
        raise CutOffError(f"your {name}'s output is cut off from autograd although {tracked[0]!r} requires grad: "
                          f"no gradient can flow back through it (a .detach(), .data, torch.no_grad() or a trip "
                          f"through NumPy on the way)")


def keeps_forward_inputs(cls, name: str):
    """The module class `cls`, its own forward wrapped by keeps_inputs on tensor arguments."""
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and "forward" in vars(cls):
        cls.forward = keeps_inputs(vars(cls)["forward"], f"{name}.forward", tensors_only=True)
    return cls


def writing_line(fn, arg: str) -> str | None:
    """'file.py, line N: code' of the first line in fn's source that writes into `arg`, if any."""
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
            for sub in ast.walk(node):
                if _writes(sub, arg):
                    line = linecache.getline(code.co_filename, sub.lineno).strip()
                    return f"{code.co_filename.rsplit('/', 1)[-1]}, line {sub.lineno}: {line}"
    return None


def keeps_inputs(fn, name: str, tensors_only: bool = False):
    """fn, raising InPlaceError when a call changes a tensor or container argument in place (with
    tensors_only, tensor arguments alone: a module's forward may be handed a cache to grow), and
    CutOffError when an argument required grad and the floating-point output does not."""
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
        out = fn(*args, **kwargs)
        for arg, old in before.items():
            if not _same(old, bound[arg]):
                line = writing_line(fn, arg)
                raise InPlaceError(f"your {name} changed its argument {arg!r} in place"
                                   + (f" ({line})" if line else "")
                                   + ": it must leave its inputs as they were and return a new value")
        _check_graph(tracked, out, name)
        return out
    return checked
